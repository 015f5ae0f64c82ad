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
import shutil
import sys
import time
from typing import Any, TextIO

from IPython.display import display

from ...agent import artifact_summary, background_loop
from ...core import (
    RESULT_CHARS,
    STOPPED_WORDS,
    ArtifactStored,
    BlockDelta,
    Citation,
    CitationDelta,
    Event,
    EventHandler,
    HistoryTrimmed,
    ModelCompleted,
    ModelFailed,
    ModelSettings,
    ModelStarted,
    ProviderError,
    ReasoningDelta,
    RetryScheduled,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    StreamRedactor,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    card_result,
    masked_figure,
    redact_data,
)
from ...drivers import total_cost
from ...memory import describe_size
from ..render.citations import TOOL_TITLES, source_key, sources_text
from ..render.memory_html import stored_event_html, trimmed_text
from .live_widget import close_widgets, end_message, live_widget
from .server_cards import citation_json, new_card, progress, with_call, with_result
from .terminal import TerminalOutput

#: Seconds between two frames sent to the front end: at most 33 in any second.
FRAME_INTERVAL = 1 / 32



class Segment:
    """One block of the transcript: text, reasoning, a tool call (with its result once run), a
    provider-side tool call (``server``: its `card`, a `ServerToolPart` as JSON)."""

    __slots__ = (
        "sid",
        "kind",
        "parts",
        "call_id",
        "name",
        "result",
        "is_error",
        "duration",
        "data",
        "approval",
        "stopped",
        "media",
        "card",
        "citations",
    )

    def __init__(self, kind: str, sid: int = 0) -> None:
        self.sid = sid  # position in the run (the live front end's key)
        self.kind = kind
        self.parts: list[str] = []
        self.call_id = self.name = ""
        self.result: str | None = None
        self.is_error = False
        self.duration: float | None = None
        self.data: Any = None  # an "artifact" segment's ArtifactStored event
        self.approval: str | None = None  # "approved" / "denied" by the user, None: not asked
        self.stopped: str | None = None  # "interrupted" / "timeout": the run ended while the call ran
        self.media: list[Any] = []  # a tool call's images, audio and files (transcript.MediaPart)
        self.card: dict[str, Any] | None = None  # a "server" segment's card (a ServerToolPart as JSON)
        self.citations: list[dict[str, Any]] = []  # a text segment's sources, as they arrive


class RunState(EventHandler):
    """What a view shows, built from events: the run's segments in order, and the footer figures.

    A run may take several model turns (tool calls in between); segments are
    keyed by (turn, content index) so each turn's blocks stay in place.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.segments: dict[tuple[int, int], Segment] = {}
        self.turn = 0
        self.done: ModelCompleted | None = None
        self.input_tokens = self.output_tokens = 0
        self.error: ProviderError | None = None
        self.interrupted = False
        self.started = time.monotonic()
        self.first_token: float | None = None
        self.notices: list[str] = []  # thread history trimmed, shown above the transcript
        self.costs: list[dict[str, Any] | None] = []  # each model turn's price (None: unknown)
        self.settings: dict[str, Any] = {}  # the generation settings the run used (ModelSettings.as_dict)
        self.created: list[Segment] = []  # segments made since a view last took them (WidgetView)
        self.touched: Segment | None = None  # the segment the last event went to
        self.retry: str | None = None  # a retry notice, shown until the turn's first token
        self.asking = 0  # tool calls waiting for the user's Approve / Deny
        self.masked: dict[str, int] = {}  # values masked in the run's context, by block (`Transcript.masked`)

    def _new(self, key: tuple[int, int], kind: str) -> Segment:
        segment = self.segments[key] = Segment(kind, len(self.segments))
        self.created.append(segment)
        return segment

    def _segment(self, index: int, kind: str) -> Segment:
        segment = self.segments.get((self.turn, index))
        if segment is None:
            segment = self._new((self.turn, index), kind)
        self.touched = segment
        return segment

    def tool_segment(self, action: ToolAction) -> Segment:
        """The card of `action`; calls that never streamed (ReAct) get one now."""
        for (turn, _), segment in self.segments.items():
            # Results come right after the turn that made the calls; ids may repeat across turns.
            if turn == self.turn and segment.kind == "tool" and segment.call_id == action.tag:
                self.touched = segment
                return segment
        segment = self.touched = self._new((self.turn, 10_000 + len(self.segments)), "tool")
        segment.call_id, segment.name = action.tag, action.native_name if action.name else "tool call"
        segment.parts.append(json.dumps(action.input))
        return segment

    @property
    def text(self) -> str:
        return "".join(p for s in self.segments.values() if s.kind == "text" for p in s.parts)

    def add(self, event: Event) -> bool:
        """Take one event; True when it changes what is shown."""
        return bool(self.handle(event))

    def _streamed(self) -> bool:
        self.retry = None  # a delta arrived
        if self.first_token is None:
            self.first_token = time.monotonic() - self.started
        return True

    def on_text_delta(self, event: TextDelta) -> bool:
        self._segment(event.index, "text").parts.append(event.text)
        return self._streamed()

    def on_reasoning_delta(self, event: ReasoningDelta) -> bool:
        self._segment(event.index, "reasoning").parts.append(event.text)
        return self._streamed()

    def on_tool_call_delta(self, event: ToolCallDelta) -> bool:
        call = self._segment(event.index, "tool")
        call.call_id = event.call_id or call.call_id
        call.name = event.name or call.name
        call.parts.append(event.arguments)
        return self._streamed()

    def on_server_tool_delta(self, event: ServerToolDelta) -> bool:
        segment = self._server_segment(event.index)
        progress(segment.card, event)  # type: ignore[arg-type]
        segment.parts.append(event.arguments)
        return self._streamed()

    def on_block_delta(self, event: BlockDelta) -> bool:
        """A provider-side tool's whole call or result: onto its card."""
        block = event.block
        if isinstance(block, ServerToolCallBlock):
            with_call(self._server_segment(event.index).card, block)  # type: ignore[arg-type]
        elif isinstance(block, ServerToolResultBlock):
            found = [s for (turn, _), s in self.segments.items()
                     if turn == self.turn and s.kind == "server" and s.card and s.card.get("id") == block.call_id]
            segment = self.touched = found[-1] if found else self._server_segment(event.index)
            with_result(segment.card, block)  # type: ignore[arg-type]
        else:
            return False
        return self._streamed()

    def on_citation_delta(self, event: CitationDelta) -> bool:
        segment = self._segment(event.index, "text")
        segment.citations.append(citation_json(event.citation, sum(map(len, segment.parts))))
        return True

    def _server_segment(self, index: int) -> Segment:
        segment = self._segment(index, "server")
        if segment.card is None:
            segment.card = new_card()
        return segment

    def on_tool_call_completed(self, event: ToolCallCompleted) -> bool:
        segment = self.tool_segment(event.action)
        segment.result, segment.media = card_result(event.result)
        segment.is_error, segment.duration = event.is_error, event.duration_s
        segment.approval = event.approval or segment.approval
        segment.stopped = event.stopped
        return True

    def on_model_completed(self, event: ModelCompleted) -> bool:
        self.settings = event.metadata.get("settings") or self.settings
        self.input_tokens += event.usage.input_tokens
        self.output_tokens += event.usage.output_tokens
        if "cost" in event.metadata:  # set by every driver (BasePromptDriver.stream)
            self.costs.append(event.metadata["cost"])
        if self.turn == 1 and event.metadata.get("ttft_s") is not None:
            self.first_token = event.metadata["ttft_s"]  # the driver's figure, from the request sent
        # The run goes on after tool calls and after an output that failed validation;
        # an accepted structured output ends it even when it came as a (final_result) call.
        if not event.more_turns:
            self.done = event
        return True

    def on_model_failed(self, event: ModelFailed) -> bool:
        self.error = event.error
        self.settings = (event.metadata or {}).get("settings") or self.settings
        if "cost" in event.metadata and event.partial.usage is not None:  # a driver's turn billed before it failed
            self.input_tokens += event.partial.usage.input_tokens
            self.output_tokens += event.partial.usage.output_tokens
            self.costs.append(event.metadata["cost"])
        return True

    def on_artifact_stored(self, event: ArtifactStored) -> bool:  # an off-prompt output, shown as a collapsed entry
        segment = self.touched = self._new((self.turn, 20_000 + len(self.segments)), "artifact")
        segment.data = event
        return True

    def on_history_trimmed(self, event: HistoryTrimmed) -> bool:
        self.notices.append(trimmed_text(event))
        return True

    def on_retry_scheduled(self, event: RetryScheduled) -> bool:
        self.retry = event.text
        return True

    def on_model_started(self, event: ModelStarted) -> bool:
        self.turn += 1
        self.retry = None
        if self.turn == 1:
            self.started = time.monotonic()
        return False

    @property
    def finished(self) -> bool:
        return self.done is not None or self.error is not None or self.interrupted

    def live_status(self) -> dict[str, Any]:
        """The live footer: the fixed figures, and what the front end's clock shows
        (``waiting`` before the first token, ``approval`` while a tool call waits for the user,
        ``streaming`` otherwise, None once finished) from `elapsed` seconds on."""
        if self.finished:
            return {"figures": self.footer_figures(), "ticking": None, "elapsed": 0}
        figures = [self.provider]
        if self.input_tokens or self.output_tokens:
            figures.append(f"{self.input_tokens} in / {self.output_tokens} out tokens")
        if self.first_token is not None:
            figures.append(f"first token {self.first_token:.2f} s")
        if self.costs:
            cost = total_cost(self.costs)
            figures.append(str(cost) if cost is not None else "unknown price")
        if self.retry:
            figures.append(self.retry)
        ticking = "approval" if self.asking else "waiting" if self.first_token is None else "streaming"
        return {"figures": figures, "ticking": ticking, "elapsed": round(time.monotonic() - self.started, 2)}

    def footer_figures(self) -> list[str]:
        """The footer when the run ends (the terminal's last line; the widget's until the saved
        transcript replaces it): `core.footer_figures`' figures, words and order, from the events."""
        figures = [self.provider]
        if self.input_tokens or self.output_tokens or self.done is not None:
            figures.append(f"{self.input_tokens} in / {self.output_tokens} out tokens")
        if self.first_token is not None:
            figures.append(f"first token {self.first_token:.2f} s")
        elapsed = time.monotonic() - self.started
        if self.done is not None:
            meta = self.done.metadata
            figures.append(f"total {meta.get('latency_s', elapsed) if self.turn == 1 else elapsed:.2f} s")
            if self.turn > 1:
                figures.append(f"{self.turn} model turns")
            if self.done.stop_reason.kind.value != "end_turn":
                figures.append(f"stop: {self.done.stop_reason}")
            if meta.get("attempts", 1) > 1:
                figures.append(f"{meta['attempts'] - 1} retries")
            if meta.get("replayed"):
                figures.append("replayed from cassette")
        else:  # a run that ended is timed as the transcript's footer times it: "total"
            figures.append(f"total {elapsed:.2f} s" if self.finished else f"{elapsed:.2f} s")
        if self.costs:
            cost = total_cost(self.costs)
            figures.append(str(cost) if cost is not None else "unknown price")
        if masked_figure(self.masked):
            figures.append(masked_figure(self.masked))
        if self.done is None:
            state = "interrupted" if self.interrupted else "failed" if self.error is not None else "streaming…"
            figures.append(state)
        if self.settings:
            figures.append(ModelSettings(**self.settings).describe())
        return figures


class WidgetView(EventHandler):
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
        # Approvals waiting for a click: request id -> (the answer, the call's segment, the ask op's data)
        self._asks: dict[str, tuple[asyncio.Future[bool], Segment, dict[str, Any]]] = {}

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
            elif segment.approval is not None:
                ops.append(["tool", segment.sid, {"approval": segment.approval}])
        ops += [["ask", segment.sid, ask] for _, segment, ask in self._asks.values()]
        if s.error is not None:
            ops.append(["error", s.error.message])
        if s.interrupted:
            ops.append(["interrupted"])
        ops.append(["status", s.live_status()])
        s.created.clear()
        return [op if op[0] == "text" else redact_data(op) for op in ops]

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from a front end (on the kernel's thread), handled on the loop:
        ``{"type": "hello"}`` (answered with a snapshot) or ``{"type": "approve", "request":
        id, "verdict": true | false}`` (a click on Approve / Deny)."""
        if not isinstance(content, dict):
            return

        if content.get("type") == "hello":
            background_loop().call_soon_threadsafe(self._hello)
        elif content.get("type") == "approve" and isinstance(content.get("verdict"), bool):
            request = str(content.get("request"))
            pending = self._asks.get(request)
            if pending is not None:  # answered on the loop that waits for it
                pending[0].get_loop().call_soon_threadsafe(self._decide, request, content["verdict"])

    def _hello(self) -> None:
        if self._ended:
            return
        self._synced = True
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

    async def request_approval(self, action: ToolAction) -> bool:
        """Ask with Approve / Deny buttons in the call's card (an `Agent.approve` callback):
        True when approved. A front end answers with an ``approve`` message (`_on_msg`)."""
        segment = self.state.tool_segment(action)
        request = f"{segment.sid}-{len(self._asks)}-{id(action):x}"
        ask = redact_data({"request": request, "name": segment.name or action.native_name, "arguments": action.input})
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asks[request] = (answer, segment, ask)
        self.state.asking += 1  # the footer says so
        if self._synced:
            self._record_created()
            self._ops.append(["ask", segment.sid, ask])
            self._schedule()
        try:
            verdict = await answer
        finally:
            self._asks.pop(request, None)
            self.state.asking -= 1
        segment.approval = "approved" if verdict else "denied"
        if self._synced:
            self._ops += [["ask", segment.sid, None], ["tool", segment.sid, {"approval": segment.approval}]]
            self._schedule()
        return verdict

    def _decide(self, request: str, verdict: bool) -> None:
        pending = self._asks.get(request)
        if pending is not None and not pending[0].done():
            pending[0].set_result(verdict)

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
    if isinstance(arguments, dict):
        call["arguments"] = arguments
    return call


def _artifact_json(event: ArtifactStored) -> dict[str, Any]:
    """An off-prompt artifact as the transcript has it, drawn as ``%agent memory`` draws it."""

    summary = artifact_summary(event)
    summary.html = stored_event_html(event)
    return summary.model_dump(mode="json")


class _WaitLine:
    """On a TTY, until the run's first token: one line rewritten in place every `TICK`
    seconds, ``waiting for the first token · 2.1 s``, after the latest retry notice;
    erased before anything else is written."""

    TICK = 0.5

    def __init__(self, inner: TextIO, state: RunState) -> None:
        self.inner, self.state = inner, state
        self.shown = False
        self._timer: asyncio.TimerHandle | None = None

    def text(self) -> str:
        """The line, cut with ``…`` to the screen's width less one: a line that wrapped could not
        be rewritten in place."""
        waiting = f"waiting for the first token · {time.monotonic() - self.state.started:.1f} s"
        line = f"{self.state.retry} · {waiting}" if self.state.retry else waiting
        room = max(shutil.get_terminal_size().columns - 1, 10)
        return line if len(line) <= room else line[: room - 1] + "…"

    def show(self) -> None:
        """Draw the line now, and again every `TICK` seconds while a loop runs."""
        if self._timer is not None:
            self._timer.cancel()
        self.inner.write("\r\x1b[2K" + self.text())
        self.inner.flush()
        self.shown = True
        try:
            self._timer = asyncio.get_running_loop().call_later(self.TICK, self.show)
        except RuntimeError:  # fed outside a loop: drawn once per event
            self._timer = None

    def erase(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.shown:
            self.inner.write("\r\x1b[2K")
            self.shown = False


class TextView(EventHandler):
    """Terminal view: the answer streams as text, then shows rendered (terminal.py: rich on a
    colour terminal, plain text elsewhere); tool calls, results and errors as lines, then a footer.

    On a TTY it also shows, before the first token, ``waiting for the first token · N s``
    and the driver's retry notices (``retrying 2/3 in 2.0 s · 429 rate limit``).
    """

    def __init__(self, provider: str, stream: TextIO | None = None) -> None:
        self.state = RunState(provider)
        inner = stream or sys.stdout
        self.out = TerminalOutput(inner)
        self._tool_index: int | None = None
        self._input_shown = False  # the current provider-side call's input is on screen
        self._cited: list[tuple[Segment, Citation]] = []  # the answer's citations and the text each is in
        isatty = getattr(inner, "isatty", None)
        self._wait = _WaitLine(inner, self.state) if callable(isatty) and isatty() else None

    def feed(self, event: Event) -> None:
        self.state.add(event)
        if self._status(event):
            return
        self.handle(event)
        if self.state.finished:
            self.finish()
        else:
            self.out.flush()

    def on_text_delta(self, event: TextDelta) -> None:
        self.out.text(event.text)

    def on_reasoning_delta(self, event: ReasoningDelta) -> None:
        if self.out.colour:  # dimmed; a plain terminal shows the answer only
            self.out.reasoning(event.text)

    def on_tool_call_delta(self, event: ToolCallDelta) -> None:
        if event.index != self._tool_index:
            self._tool_index = event.index
            self.out.part(f"\n[tool call {event.name or ''}] ", "bold cyan")
        self.out.streamed_part(event.arguments, "cyan")

    def on_tool_call_completed(self, event: ToolCallCompleted) -> None:
        self._tool_index = None
        style = "yellow" if event.approval == "denied" or event.stopped else "red" if event.is_error else "green"
        self.out.part(f"\n[{_call_line(event)}] {event.result.to_text()}\n", style)

    def on_model_failed(self, event: ModelFailed) -> None:
        self.out.part(f"\n[error] {event.error.message}", "bold red")

    def on_artifact_stored(self, event: ArtifactStored) -> None:
        self.out.part(
            f"[stored off-prompt: ipyagent.memory[{event.namespace!r}], {event.kind}, {describe_size(event.size)}]\n",
            "magenta",
        )

    def on_history_trimmed(self, event: HistoryTrimmed) -> None:
        self.out.part(f"[{self.state.notices[-1]}]\n", "yellow")

    def _status(self, event: Event) -> bool:
        """The TTY's waiting line: True when `event` only changed it (nothing else to write)."""
        wait = self._wait
        if wait is None:
            return isinstance(event, (ModelStarted, RetryScheduled))
        if isinstance(event, ModelStarted) and self.state.first_token is None:
            wait.show()
            return True
        if isinstance(event, RetryScheduled):
            if self.state.first_token is None:
                wait.show()
            else:  # a later turn: its notice as a line of its own
                self.out.part(f"\n[{event.text}]\n", "yellow")
            return True
        wait.erase()
        return False

    def mark_interrupted(self) -> None:
        self.state.interrupted = True
        if self._wait is not None:
            self._wait.erase()
        self.out.part("\n[interrupted]", "bold yellow")
        self.finish()

    async def request_approval(self, action: ToolAction) -> bool:
        """Ask on the terminal whether to run `action`."""
        if self._wait is not None:
            self._wait.erase()
        question = f"\nwaiting for your approval · run {action.native_name}({json.dumps(action.input)})? [y/N] "
        answer = await asyncio.to_thread(input, question)
        return answer.strip().lower() in ("y", "yes")

    def on_server_tool_delta(self, event: ServerToolDelta) -> None:
        """A provider-side call as it starts: its title, then its input if that streams."""
        if event.index != self._tool_index:
            self._tool_index, self._input_shown = event.index, False
            self.out.part(f"\n[{_server_title(event.tool, event.name)}]", "bold cyan")
        if event.arguments:
            self.out.streamed_part(("" if self._input_shown else " ") + event.arguments, "cyan")
            self._input_shown = True

    def on_block_delta(self, event: BlockDelta) -> None:
        """A provider-side tool's call (its title, query or URL and code, unless its input streamed) and
        result (a line, and the code's output)."""
        block = event.block
        if isinstance(block, ServerToolCallBlock):
            if event.index != self._tool_index:
                self._tool_index, self._input_shown = event.index, False
                self.out.part(f"\n[{_server_title(block.tool, block.name)}]", "bold cyan")
            if not self._input_shown:
                given = next((block.input[k] for k in ("query", "queries", "url", "urls") if block.input.get(k)), None)
                if given:
                    self.out.part(f" {', '.join(given) if isinstance(given, list) else given}", "cyan")
                if block.input.get("code"):
                    self.out.part(f"\n{block.input['code']}", "cyan")
                self._input_shown = True
        elif isinstance(block, ServerToolResultBlock):
            self._tool_index = None
            self.out.part(f"\n[{block.error or _result_line(block)}]", "red" if block.error else "green")
            if block.output:
                self.out.part(f"\n{block.output.rstrip()}", "")
            self.out.part("\n", None)

    def on_citation_delta(self, event: CitationDelta) -> None:
        if self.state.touched is not None:  # the text segment RunState put it on
            self._cited.append((self.state.touched, event.citation))

    def finish(self) -> None:
        """The numbered sources the answer cited (each with the spans it supports: the text is on
        screen already, so it takes no markers), then the footer."""
        lines = _sources_lines(self._cited)
        if lines:
            self.out.part("\n" + "\n".join(["sources:", *lines]) + "\n", "blue")
        self.out.footer(self.state.footer_figures())


def _sources_lines(cited: list[tuple[Segment, Citation]]) -> list[str]:
    """``[1] Title <url>`` and, under it, ``“the span it supports”`` once each, numbered as the
    saved answer numbers them (`render.citations.source_key`, first cited first). A citation
    without a span (Anthropic's, sent before its text) supports its whole text block."""
    numbers: dict[Any, Any] = {}
    spans: dict[Any, list[str]] = {}
    for segment, citation in cited:
        key = source_key(citation)
        numbers.setdefault(key, (len(numbers) + 1, citation))
        text = "".join(segment.parts)
        span = " ".join(text[citation.start or 0:len(text) if citation.end is None else citation.end].split())
        span = span if len(span) <= 100 else span[:99] + "…"
        if span and span not in spans.setdefault(key, []):
            spans[key].append(span)
    ordered = sorted(numbers, key=lambda k: numbers[k][0])
    heads = sources_text(numbers)
    return [line for key, head in zip(ordered, heads)
            for line in [head, *(f"    “{span}”" for span in spans.get(key, ()))]]


def _result_line(block: ServerToolResultBlock) -> str:
    """``2 sources``, ``done · 1 image · chart.csv``: what a provider-side call gave, in a line."""
    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'s' if n != 1 else ''}"

    said = [count(len(block.sources), "source")] if block.sources else ["done"]
    said += [count(len(block.images), "image")] if block.images else []
    said += [f.get("name") or f.get("id") or "a file" for f in block.files]
    return " · ".join(said)


def _server_title(tool: str | None, name: str | None) -> str:
    return TOOL_TITLES.get(tool or "", name or tool or "provider tool")


def _call_line(event: ToolCallCompleted) -> str:
    """``result get_weather, 0.01 s`` / ``error …`` / ``denied get_weather`` / ``result get_weather,
    approved by you, 0.01 s`` / ``interrupted get_weather, after 0.50 s``: how the terminal heads a
    tool call's result."""
    name = event.action.native_name
    if event.approval == "denied":
        return f"denied {name}"
    approved = ", approved by you" if event.approval == "approved" else ""
    if event.stopped:
        return f"{STOPPED_WORDS.get(event.stopped, event.stopped)} {name}{approved}, after {event.duration_s:.2f} s"
    return f"{'error' if event.is_error else 'result'} {name}{approved}, {event.duration_s:.2f} s"


def make_view(provider: str, *, widgets: bool, masked: dict[str, int] | None = None) -> Any:
    """The live view of a run: the widget in a notebook, else the terminal's; `masked`: values the
    redactor masked in the run's context, by block (its footer says so, as the saved transcript's)."""
    view = WidgetView(provider) if widgets else TextView(provider)
    view.state.masked = dict(masked or {})
    return view
