"""Live views of a run: a widget view for Jupyter, a text view for terminal IPython.

Both take the driver's events through `feed(event)`, called on ipyagent's
background loop. The widget view sends the front end what changed (text
appended, tool-call fragments, status), coalesced: at most one message every
`FRAME_INTERVAL` seconds whatever the token rate, each as large as what changed
since the last one, never the whole answer (live_widget.py has the protocol).
`feed` itself only appends to lists, so reading the stream never waits on it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from IPython.display import display

from ...agent import artifact_summary, background_loop
from ...core import (
    RESULT_CHARS,
    ArtifactStored,
    BlockDelta,
    CitationDelta,
    Event,
    EventHandler,
    HistoryTrimmed,
    ModelCompleted,
    ModelFailed,
    ReasoningDelta,
    SamplingCompleted,
    ServerToolDelta,
    StreamRedactor,
    TextDelta,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallNote,
    ToolCallProgress,
    redact_data,
)
from ..render.memory_html import stored_event_html
from .asks import Asks, CardQuestions
from .live_widget import close_widgets, end_message, live_widget
from .run_state import FRAME_INTERVAL, RunState, Segment
from .text_view import TextView


class WidgetView(CardQuestions, EventHandler):
    """The live view in Jupyter: a `live_widget` whose front end draws with the transcript
    renderer, Approve / Deny buttons of tool calls included.

    `feed` turns each event into small changes ("ops") and appends them; a frame
    sends what is pending, at most one frame every `FRAME_INTERVAL` seconds.
    Nothing is sent before a front end has said hello (then it gets a snapshot),
    so a cell run headless costs no messages.
    """

    def __init__(self, provider: str, *, link: Any = None) -> None:
        """`link`: a run inside a larger widget (a %%compare cell's, compare_view.py) sends its
        messages through `link` (``send(content)``), whose owner answers hellos and passes
        Approve / Deny clicks on (`_on_msg`); `widget` is then None."""
        self.state = RunState(provider)
        if link is not None:
            self.live, self.widget = link, None
        else:
            self.live = live_widget()
            self.live.on_msg(self._on_msg)
            self.widget = self.live
        self.frames = 0
        self.bytes_sent = 0
        self._seq = 0
        self._ops: list[list[Any]] = []
        self._synced = False
        self._status: dict[str, Any] | None = None
        self._last_frame = 0.0
        self._pending: asyncio.TimerHandle | None = None
        self._ended = False
        # Every frame passes the one redactor; streamed text per segment, a word held back
        # until it ends, so a secret split across deltas is still caught.
        self._redactors: dict[int, StreamRedactor] = {}
        self._final = False
        self._complete: set[int] = set()
        # Questions waiting for the user in a call's card: Approve / Deny, a sampling request, an elicitation
        self.asks = Asks(self)

    def _ipython_display_(self) -> None:
        display(self.widget)

    # -- events -> ops (on the background loop) ------------------------------------------

    def feed(self, event: Event) -> None:
        if not self.state.add(event):
            return
        if self._synced:
            self._record(event)
        if self.state.finished:
            self.finish()
            return
        self._schedule()

    def _record(self, event: Event) -> None:
        self._record_created()
        self.handle(event)

    def _record_created(self) -> None:
        for segment in self.state.created:
            self._ops.append(["seg", segment.sid, segment.kind, {"id": segment.call_id, "name": segment.name}])
            if segment.kind == "artifact":
                self._ops.append(["artifact", segment.sid, _artifact_json(segment.data)])
        self.state.created.clear()

    def _delta_text(self, text: str) -> None:
        touched, ops = self.state.touched, self._ops
        if touched is None:
            return
        last = ops[-1] if ops else None
        if last is not None and last[0] == "text" and last[1] == touched.sid:
            last[2].append(text)  # joined when sent
        else:
            ops.append(["text", touched.sid, [text]])

    def on_text_delta(self, event: TextDelta) -> None:
        self._delta_text(event.text)

    def on_reasoning_delta(self, event: ReasoningDelta) -> None:
        self._delta_text(event.text)

    def on_tool_call_delta(self, event: ToolCallDelta) -> None:
        touched = self.state.touched
        if touched is not None and (event.name or event.call_id):
            self._ops.append(["tool", touched.sid, {"id": touched.call_id, "name": touched.name}])
        self._delta_text(event.arguments)

    def on_server_tool_delta(self, event: ServerToolDelta) -> None:
        touched = self.state.touched
        if touched is not None and (event.call_id or event.tool or event.name or event.status):
            self._ops.append(["server", touched.sid, dict(touched.card or {})])
        self._delta_text(event.arguments)

    def on_block_delta(self, event: BlockDelta) -> None:
        touched = self.state.touched
        if touched is not None and touched.kind == "server":
            self._release(touched.sid)  # its input is whole
            self._ops.append(["server", touched.sid, dict(touched.card or {})])

    def on_citation_delta(self, event: CitationDelta) -> None:
        segment = self.state.segments.get((self.state.turn, event.index))
        if segment is not None and segment.citations:
            self._ops.append(["cite", segment.sid, segment.citations[-1]])

    def on_tool_call_completed(self, event: ToolCallCompleted) -> None:
        touched = self.state.touched
        if touched is not None:
            self._release(touched.sid)  # the call's arguments are complete
            self._ops.append(["tool", touched.sid, _call_json(touched, event)])

    def on_tool_call_progress(self, event: ToolCallProgress) -> None:
        touched = self.state.touched
        if touched is not None and touched.progress is not None and touched.result is None:
            self._ops.append(["tool", touched.sid, {"progress": dict(touched.progress)}])

    def on_sampling_completed(self, event: SamplingCompleted) -> None:
        if event.action is not None:
            segment = self.state.tool_segment(event.action)
            self._ops.append(["tool", segment.sid, {"notes": list(segment.notes)}])

    def on_tool_call_note(self, event: ToolCallNote) -> None:
        segment = self.state.tool_segment(event.action)
        self._ops.append(["tool", segment.sid, {"notes": list(segment.notes)}])

    def on_model_completed(self, event: ModelCompleted) -> None:  # the turn's text is complete
        for sid in list(self._redactors):
            self._release(sid)

    def on_history_trimmed(self, event: HistoryTrimmed) -> None:
        self._ops.append(["notice", self.state.notices[-1]])

    def on_model_failed(self, event: ModelFailed) -> None:
        self._ops.append(["error", event.error.message])

    def _snapshot(self) -> list[list[Any]]:
        """Everything shown so far, as ops (a front end that said hello starts from these)."""
        s = self.state
        ops: list[list[Any]] = [["notice", n] for n in s.notices]
        for segment in s.segments.values():
            ops.append(["seg", segment.sid, segment.kind, {"id": segment.call_id, "name": segment.name}])
            if segment.kind == "artifact":
                ops.append(["artifact", segment.sid, _artifact_json(segment.data)])
                continue
            redactor = self._redactors[segment.sid] = StreamRedactor()
            text = redactor.feed("".join(segment.parts))
            if s.finished or self._final or segment.sid in self._complete:
                text += redactor.flush()
            ops.append(["text", segment.sid, text])
            ops += [["cite", segment.sid, c] for c in segment.citations]
            if segment.card is not None:
                ops.append(["server", segment.sid, dict(segment.card)])
            if segment.kind == "tool" and segment.result is not None:
                ops.append(["tool", segment.sid, _call_json(segment, None)])
            elif segment.approval is not None or segment.progress is not None or segment.notes:
                ops.append(["tool", segment.sid, _running_json(segment)])
        ops += self.asks.ops()
        if s.error is not None:
            ops.append(["error", s.error.message])
        if s.interrupted:
            ops.append(["interrupted"])
        ops.append(["status", s.live_status()])
        s.created.clear()
        return [op if op[0] == "text" else redact_data(op) for op in ops]

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from a front end (on the kernel's thread), handled on the loop:
        ``{"type": "hello"}`` (answered with a snapshot), or the answer to a question in a card
        (`asks.Asks.answered`): ``{"type": "approve", "request": id, "verdict": true | false}``
        (Approve / Deny, with ``text`` for an edited sampling request) or ``{"type": "elicit", ...}``."""
        if not isinstance(content, dict):
            return

        if content.get("type") == "hello":
            background_loop().call_soon_threadsafe(self._hello)
        elif content.get("type") in ("approve", "elicit"):
            pending = self.asks.pending.get(str(content.get("request")))
            if pending is not None:  # answered on the loop that waits for it
                pending.answer.get_loop().call_soon_threadsafe(self.asks.answered, dict(content))

    def _hello(self) -> None:
        if self._ended:
            return
        self._synced = True
        self.asks.shown.set()
        self._ops.clear()
        self._seq += 1
        self._send({"type": "snapshot", "seq": self._seq, "doc": {"ops": self._snapshot()}})

    # -- frames ------------------------------------------------------------------------

    def _schedule(self) -> None:
        if self._pending is not None or not self._synced:
            return
        wait = self._last_frame + FRAME_INTERVAL - time.monotonic()
        if wait <= 0:
            self._frame()
        else:
            self._pending = asyncio.get_running_loop().call_later(wait, self._frame)

    def _frame(self) -> None:
        self._pending = None
        self._last_frame = time.monotonic()
        status = self.state.live_status()
        if self._status is None or (status["figures"], status["ticking"]) != (
            self._status["figures"],
            self._status["ticking"],
        ):
            self._ops.append(["status", status])
        ops = [self._text_op(op) if op[0] == "text" else redact_data(op) for op in self._ops]
        self._ops = []
        ops = [op for op in ops if op[0] != "text" or op[2]]  # a release with nothing held back
        if not ops:
            return
        self._status = status
        self._seq += 1
        self.frames += 1
        self._send({"type": "ops", "seq": self._seq, "ops": ops})

    def _release(self, sid: int) -> None:
        """Segment `sid` is complete: its next frame releases the word held back."""
        self._complete.add(sid)
        if not any(op[0] == "text" and op[1] == sid for op in self._ops):
            self._ops.append(["text", sid, []])

    def _text_op(self, op: list[Any]) -> list[Any]:
        """A text op of pending pieces, joined and redacted; a complete segment (or the run's end)
        releases the word held back."""
        redactor = self._redactors.setdefault(op[1], StreamRedactor())
        text = redactor.feed("".join(op[2]))
        if self._final or op[1] in self._complete:
            text += redactor.flush()
        return ["text", op[1], text]

    def _send(self, content: dict[str, Any]) -> None:
        self.bytes_sent += len(json.dumps(content, ensure_ascii=False))
        self.live.send(content)

    def mark_interrupted(self) -> None:
        self.state.interrupted = True
        if self._synced:
            self._ops.append(["interrupted"])
        self.finish()

    def _tool_op(self, segment: Segment, change: dict[str, Any]) -> None:
        if self._synced:
            self._ops.append(["tool", segment.sid, change])
            self._schedule()

    def finish(self) -> None:
        """The last frame of changes (the exact figures; held-back words released)."""
        if self._pending is not None:
            self._pending.cancel()
        if self._synced:
            self._final = True  # text ops release their held-back words
            pending = {op[1] for op in self._ops if op[0] == "text"}
            self._ops += [["text", sid, []] for sid in self._redactors if sid not in pending]
            self._frame()

    def end(self, transcript: dict[str, Any], output: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """The run is over: send the whole transcript once, with `output`, the (data, metadata)
        the cell's display was just updated with (live_widget.end_message: a page reopened
        mid-run has no display id for that update, so its front end puts `output` in place itself)."""
        if self._ended:
            return
        self.finish()
        self._ended = True

        self._send(end_message(transcript, output, self.widget))

    def close(self) -> None:
        """Close the widgets, so no widget state is left in the notebook for a finished run."""
        self._ended = True
        if self._pending is not None:
            self._pending.cancel()

        close_widgets(self.widget)


def _call_json(segment: Segment, event: ToolCallCompleted | None) -> dict[str, Any]:
    """A finished tool call's card, as the transcript has it (transcript.ToolCallPart)."""

    result = segment.result or ""
    if len(result) > RESULT_CHARS:
        result = f"{result[:RESULT_CHARS]}\n… ({len(result) - RESULT_CHARS:,} more characters not shown)"
    arguments = event.action.input if event is not None else None
    if arguments is None:
        try:
            arguments = json.loads("".join(segment.parts) or "{}")
        except ValueError:
            arguments = None
    call = {
        "id": segment.call_id,
        "name": segment.name or "tool call",
        "status": "error" if segment.is_error else "ok",
        "result": result,
        "duration_s": segment.duration,
    }
    if segment.approval is not None:
        call["approval"] = segment.approval
    if segment.stopped is not None:
        call["stopped"] = segment.stopped
    if segment.media:
        call["media"] = [m.model_dump(mode="json", exclude_none=True) for m in segment.media]
    if segment.notes:
        call["notes"] = list(segment.notes)
    if isinstance(arguments, dict):
        call["arguments"] = arguments
    return call


def _running_json(segment: Segment) -> dict[str, Any]:
    """What a call's card shows before its result: approval, the last progress, notes."""
    call: dict[str, Any] = {}
    if segment.approval is not None:
        call["approval"] = segment.approval
    if segment.progress is not None:
        call["progress"] = dict(segment.progress)
    if segment.notes:
        call["notes"] = list(segment.notes)
    return call


def _artifact_json(event: ArtifactStored) -> dict[str, Any]:
    """An off-prompt artifact as the transcript has it, drawn as ``%agent memory`` draws it."""

    summary = artifact_summary(event)
    summary.html = stored_event_html(event)
    return summary.model_dump(mode="json")


def make_view(provider: str, *, widgets: bool, masked: dict[str, int] | None = None) -> Any:
    """The live view of a run: the widget in a notebook, else the terminal's; `masked`: values the
    redactor masked in the run's context, by block (its footer says so, as the saved transcript's)."""
    view = WidgetView(provider) if widgets else TextView(provider)
    view.state.masked = dict(masked or {})
    return view
