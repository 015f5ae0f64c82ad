"""Live views of a run: an ipywidgets view for Jupyter, a text view for terminal IPython.

Both take the driver's events through `feed(event)`, called on ipyagent's
background loop. The widget view coalesces updates: at most one frame every
`FRAME_INTERVAL` seconds whatever the token rate, plus one exact final frame.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, TextIO

from ..core.content import join_text
from ..core.redact import StreamRedactor, redact
from ..core import (
    ArtifactStored,
    Event,
    HistoryTrimmed,
    ModelCompleted,
    ModelFailed,
    ModelSettings,
    ModelStarted,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
)
from ..drivers.pricing import total_cost
from .render import escape, markdown_to_html

#: Seconds between two frames sent to the front end (~33 frames per second).
FRAME_INTERVAL = 0.03

STYLE = """<style>
.ipyagent-view{font-size:var(--jp-content-font-size1,14px)}
.ipyagent-tool{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;margin:4px 0;padding:2px 8px}
.ipyagent-tool pre{margin:2px 0;white-space:pre-wrap;word-break:break-all}
.ipyagent-tool-error{border-color:var(--jp-error-color1,#b00)}
.ipyagent-error{color:var(--jp-error-color1,#b00);border-left:3px solid var(--jp-error-color1,#b00);padding-left:8px}
.ipyagent-status{color:var(--jp-warn-color1,#a60)}
.ipyagent-footer{color:var(--jp-ui-font-color2,#777);font-size:var(--jp-ui-font-size0,11px)}
.ipyagent-artifact{border:1px dashed var(--jp-border-color1,#bbb);border-radius:4px;margin:4px 0;padding:2px 8px}
.ipyagent-artifact-body{max-height:24em;overflow:auto}
.ipyagent-artifact table{border-collapse:collapse}.ipyagent-artifact td,.ipyagent-artifact th{border:1px solid var(--jp-border-color2,#ddd);padding:1px 4px}
.ipyagent-json ul{list-style:none;margin:0;padding-left:1.2em}
</style>"""


class Segment:
    """One block of the transcript: text, reasoning, or a tool call (with its result once run)."""

    __slots__ = ("kind", "parts", "call_id", "name", "result", "is_error", "duration", "data")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.call_id = self.name = ""
        self.result: str | None = None
        self.is_error = False
        self.duration: float | None = None
        self.data: Any = None  # an "artifact" segment's ArtifactStored event


class RunState:
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

    def _segment(self, index: int, kind: str) -> Segment:
        segment = self.segments.get((self.turn, index))
        if segment is None:
            segment = self.segments[(self.turn, index)] = Segment(kind)
        return segment

    def tool_segment(self, action: ToolAction) -> Segment:
        """The card of `action`; calls that never streamed (ReAct) get one now."""
        for (turn, _), segment in self.segments.items():
            # Results come right after the turn that made the calls; ids may repeat across turns.
            if turn == self.turn and segment.kind == "tool" and segment.call_id == action.tag:
                return segment
        segment = self.segments[(self.turn, 10_000 + len(self.segments))] = Segment("tool")
        segment.call_id, segment.name = action.tag, action.native_name if action.name else "tool call"
        segment.parts.append(json.dumps(action.input))
        return segment

    @property
    def text(self) -> str:
        return "".join(p for s in self.segments.values() if s.kind == "text" for p in s.parts)

    def add(self, event: Event) -> bool:
        """Take one event; True when it changes what is shown."""
        if isinstance(event, TextDelta):
            self._segment(event.index, "text").parts.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._segment(event.index, "reasoning").parts.append(event.text)
        elif isinstance(event, ToolCallDelta):
            call = self._segment(event.index, "tool")
            call.call_id = event.call_id or call.call_id
            call.name = event.name or call.name
            call.parts.append(event.arguments)
        elif isinstance(event, ToolCallCompleted):
            segment = self.tool_segment(event.action)
            segment.result = event.result.to_text()
            segment.is_error, segment.duration = event.is_error, event.duration_s
            return True
        elif isinstance(event, ModelCompleted):
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
        elif isinstance(event, ModelFailed):
            self.error = event.error
            self.settings = (event.metadata or {}).get("settings") or self.settings
            return True
        elif isinstance(event, ArtifactStored):  # an off-prompt output, shown as a collapsed entry
            self.segments[(self.turn, 20_000 + len(self.segments))] = segment = Segment("artifact")
            segment.data = event
            return True
        elif isinstance(event, HistoryTrimmed):
            from .memory_html import trimmed_text

            self.notices.append(trimmed_text(event))
            return True
        elif isinstance(event, ModelStarted):
            self.turn += 1
            if self.turn == 1:
                self.started = time.monotonic()
            return False
        else:
            return False
        if self.first_token is None:
            self.first_token = time.monotonic() - self.started
        return True

    @property
    def finished(self) -> bool:
        return self.done is not None or self.error is not None or self.interrupted

    def footer_figures(self) -> list[str]:
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
        else:
            figures.append(f"{elapsed:.2f} s")
            if self.interrupted:
                figures.append("interrupted")
            elif self.error is not None:
                figures.append("failed")
            else:
                figures.append("streaming…")
        if self.costs:
            cost = total_cost(self.costs)
            figures.append(str(cost) if cost is not None else "unknown price")
        if self.settings:
            figures.append(ModelSettings(**self.settings).describe())
        return figures


class WidgetView:
    """ipywidgets view: one HTML widget for the body, one for the footer."""

    def __init__(self, provider: str) -> None:
        import ipywidgets as widgets

        self.state = RunState(provider)
        self.body = widgets.HTML(value="")
        self.approvals = widgets.VBox([])
        self.footer = widgets.HTML(value=self._footer_html())
        self.widget = widgets.VBox([widgets.HTML(STYLE), self.body, self.approvals, self.footer])
        self.widget.add_class("ipyagent-view")
        self.frames = 0
        self._last_frame = 0.0
        self._pending: asyncio.TimerHandle | None = None

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def feed(self, event: Event) -> None:
        if not self.state.add(event):
            return
        if self.state.finished:
            self.finish()
            return
        if self._pending is not None:
            return
        wait = self._last_frame + FRAME_INTERVAL - time.monotonic()
        if wait <= 0:
            self._frame()
        else:
            self._pending = asyncio.get_running_loop().call_later(wait, self._frame)

    def mark_interrupted(self) -> None:
        self.state.interrupted = True
        self.finish()

    async def request_approval(self, action: ToolAction) -> bool:
        """Approve / Deny buttons under the transcript (an `Agent.approve` callback)."""
        from .approval import ApprovalButtons

        return await ApprovalButtons(self.approvals)(action)

    def finish(self) -> None:
        """The exact final frame."""
        if self._pending is not None:
            self._pending.cancel()
        self._frame()

    def _frame(self) -> None:
        self._pending = None
        self._last_frame = time.monotonic()
        self.frames += 1
        # Every frame passes the one redactor, so the saved widget state holds no secret either.
        self.body.value = redact(self._body_html())
        self.footer.value = redact(self._footer_html())

    def _body_html(self) -> str:
        s = self.state
        parts = [f'<div class="ipyagent-status">{escape(n)}</div>' for n in s.notices]
        for segment in s.segments.values():
            if segment.kind == "reasoning":
                parts.append(f"<details><summary>reasoning</summary>{markdown_to_html(join_text(segment.parts))}</details>")
            elif segment.kind == "text":
                parts.append(markdown_to_html(join_text(segment.parts)))
            else:
                parts.append(_tool_card(segment) if segment.kind != "artifact" else _artifact_entry(segment.data))
        if s.error is not None:
            parts.append(f'<div class="ipyagent-error">⚠ {escape(s.error.message)}</div>')
        if s.interrupted:
            parts.append('<div class="ipyagent-status">⏹ interrupted; the text above is partial</div>')
        return "".join(parts)

    def _footer_html(self) -> str:
        return '<div class="ipyagent-footer">' + " · ".join(escape(f) for f in self.state.footer_figures()) + "</div>"


class _RedactedStream:
    """A text stream whose writes pass a `StreamRedactor`; `finish` releases the held-back word."""

    def __init__(self, inner: TextIO) -> None:
        self.inner, self._redactor = inner, StreamRedactor()

    def write(self, text: str) -> None:
        self.inner.write(self._redactor.feed(text))

    def flush(self) -> None:
        self.inner.flush()

    def finish(self) -> None:
        self.inner.write(self._redactor.flush())
        self.inner.flush()


class TextView:
    """Terminal view: prints text deltas to `stream` as they arrive, then a footer line."""

    def __init__(self, provider: str, stream: TextIO | None = None) -> None:
        self.state = RunState(provider)
        self.stream = _RedactedStream(stream or sys.stdout)
        self._tool_index: int | None = None

    def feed(self, event: Event) -> None:
        self.state.add(event)
        out = self.stream
        if isinstance(event, TextDelta):
            out.write(event.text)
        elif isinstance(event, ToolCallDelta):
            if event.index != self._tool_index:
                self._tool_index = event.index
                out.write(f"\n[tool call {event.name or ''}] ")
            out.write(event.arguments)
        elif isinstance(event, ToolCallCompleted):
            self._tool_index = None
            label = "error" if event.is_error else "result"
            out.write(f"\n[{label} {event.action.native_name}, {event.duration_s:.2f} s] {event.result.to_text()}\n")
        elif isinstance(event, ModelFailed):
            out.write(f"\n[error] {event.error.message}")
        elif isinstance(event, ArtifactStored):
            from ..memory.artifacts import describe_size

            out.write(f"[stored off-prompt: ipyagent.memory[{event.namespace!r}], {event.kind}, {describe_size(event.size)}]\n")
        elif isinstance(event, HistoryTrimmed):
            out.write(f"[{self.state.notices[-1]}]\n")
        if self.state.finished:
            self.finish()
        else:
            out.flush()

    def mark_interrupted(self) -> None:
        self.state.interrupted = True
        self.stream.write("\n[interrupted]")
        self.finish()

    async def request_approval(self, action: ToolAction) -> bool:
        """Ask on the terminal whether to run `action`."""
        question = f"\nRun {action.native_name}({json.dumps(action.input)})? [y/N] "
        answer = await asyncio.to_thread(input, question)
        return answer.strip().lower() in ("y", "yes")

    def finish(self) -> None:
        self.stream.write("\n[" + " · ".join(self.state.footer_figures()) + "]\n")
        self.stream.finish()


def _tool_card(segment: Segment) -> str:
    """A tool call as a collapsible card: name and arguments, then its result once run."""
    if segment.result is None:
        status = "running…" if segment.duration is None else ""
        result = ""
    else:
        status = f"{'error' if segment.is_error else 'done'} in {segment.duration or 0:.2f} s"
        label = "error" if segment.is_error else "result"
        result = f'<details class="ipyagent-result"><summary>{label}</summary><pre>{escape(segment.result)}</pre></details>'
    css = "ipyagent-tool ipyagent-tool-error" if segment.is_error else "ipyagent-tool"
    return (
        f'<details class="{css}" open><summary><b>{escape(segment.name or "tool call")}</b> '
        f'<span class="ipyagent-footer">{escape(segment.call_id)} · {escape(status)}</span></summary>'
        f'<pre>{escape("".join(segment.parts))}</pre>{result}</details>'
    )


def _artifact_entry(event: ArtifactStored) -> str:
    from .memory_html import stored_event_html

    return stored_event_html(event)


def make_view(provider: str, *, widgets: bool) -> Any:
    return WidgetView(provider) if widgets else TextView(provider)
