"""Live views of a run: an ipywidgets view for Jupyter, a text view for terminal IPython.

Both take the driver's events through `feed(event)`, called on ipyagent's
background loop. The widget view coalesces updates: at most one frame every
`FRAME_INTERVAL` seconds whatever the token rate, plus one exact final frame.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, TextIO

from ..core import (
    Event,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from .render import escape, markdown_to_html

#: Seconds between two frames sent to the front end (~33 frames per second).
FRAME_INTERVAL = 0.03

STYLE = """<style>
.ipyagent-view{font-size:var(--jp-content-font-size1,14px)}
.ipyagent-tool{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;margin:4px 0;padding:2px 8px}
.ipyagent-tool pre{margin:2px 0;white-space:pre-wrap;word-break:break-all}
.ipyagent-error{color:var(--jp-error-color1,#b00);border-left:3px solid var(--jp-error-color1,#b00);padding-left:8px}
.ipyagent-status{color:var(--jp-warn-color1,#a60)}
.ipyagent-footer{color:var(--jp-ui-font-color2,#777);font-size:var(--jp-ui-font-size0,11px)}
</style>"""


class RunState:
    """What a view shows, built from events: text, reasoning, tool calls, footer figures."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools: dict[int, list[str]] = {}  # content index -> [call id, name, arguments...]
        self.done: ModelCompleted | None = None
        self.error: ProviderError | None = None
        self.interrupted = False
        self.started = time.monotonic()
        self.first_token: float | None = None

    def add(self, event: Event) -> bool:
        """Take one event; True when it changes what is shown."""
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            call = self.tools.setdefault(event.index, ["", ""])
            call[0] = event.call_id or call[0]
            call[1] = event.name or call[1]
            call.append(event.arguments)
        elif isinstance(event, ModelCompleted):
            self.done = event
            return True
        elif isinstance(event, ModelFailed):
            self.error = event.error
            return True
        elif isinstance(event, ModelStarted):
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
        if self.done is not None:
            usage, meta = self.done.usage, self.done.metadata
            figures.append(f"{usage.input} in / {usage.output} out tokens")
            if meta.get("ttft_s") is not None:
                figures.append(f"first token {meta['ttft_s']:.2f} s")
            figures.append(f"total {meta.get('latency_s', 0):.2f} s")
            if self.done.stop_reason.kind.value != "end_turn":
                figures.append(f"stop: {self.done.stop_reason}")
            if meta.get("attempts", 1) > 1:
                figures.append(f"{meta['attempts'] - 1} retries")
            if meta.get("replayed"):
                figures.append("replayed from cassette")
        else:
            if self.first_token is not None:
                figures.append(f"first token {self.first_token:.2f} s")
            figures.append(f"{time.monotonic() - self.started:.2f} s")
            if self.interrupted:
                figures.append("interrupted")
            elif self.error is not None:
                figures.append("failed")
            else:
                figures.append("streaming…")
        return figures


class WidgetView:
    """ipywidgets view: one HTML widget for the body, one for the footer."""

    def __init__(self, provider: str) -> None:
        import ipywidgets as widgets

        self.state = RunState(provider)
        self.body = widgets.HTML(value="")
        self.footer = widgets.HTML(value=self._footer_html())
        self.widget = widgets.VBox([widgets.HTML(STYLE), self.body, self.footer])
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

    def finish(self) -> None:
        """The exact final frame."""
        if self._pending is not None:
            self._pending.cancel()
        self._frame()

    def _frame(self) -> None:
        self._pending = None
        self._last_frame = time.monotonic()
        self.frames += 1
        self.body.value = self._body_html()
        self.footer.value = self._footer_html()

    def _body_html(self) -> str:
        s = self.state
        parts = []
        if s.reasoning:
            parts.append(f"<details><summary>reasoning</summary>{markdown_to_html(''.join(s.reasoning))}</details>")
        if s.text:
            parts.append(markdown_to_html("".join(s.text)))
        for call_id, name, *args in s.tools.values():
            parts.append(
                f'<div class="ipyagent-tool"><b>{escape(name or "tool call")}</b> '
                f'<span class="ipyagent-footer">{escape(call_id)}</span><pre>{escape("".join(args))}</pre></div>'
            )
        if s.error is not None:
            parts.append(f'<div class="ipyagent-error">⚠ {escape(s.error.message)}</div>')
        if s.interrupted:
            parts.append('<div class="ipyagent-status">⏹ interrupted; the text above is partial</div>')
        return "".join(parts)

    def _footer_html(self) -> str:
        return '<div class="ipyagent-footer">' + " · ".join(escape(f) for f in self.state.footer_figures()) + "</div>"


class TextView:
    """Terminal view: prints text deltas to `stream` as they arrive, then a footer line."""

    def __init__(self, provider: str, stream: TextIO | None = None) -> None:
        self.state = RunState(provider)
        self.stream = stream or sys.stdout
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
        elif isinstance(event, ModelFailed):
            out.write(f"\n[error] {event.error.message}")
        if self.state.finished:
            self.finish()
        else:
            out.flush()

    def mark_interrupted(self) -> None:
        self.state.interrupted = True
        self.stream.write("\n[interrupted]")
        self.finish()

    def finish(self) -> None:
        self.stream.write("\n[" + " · ".join(self.state.footer_figures()) + "]\n")
        self.stream.flush()


def make_view(provider: str, *, widgets: bool) -> Any:
    return WidgetView(provider) if widgets else TextView(provider)
