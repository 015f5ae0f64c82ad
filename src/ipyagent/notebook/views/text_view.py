"""The text view of a run, for terminal IPython: the answer as it streams, tool lines, cited
sources, the footer (`views.terminal.TerminalOutput` writes it, in colour on a terminal)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from typing import Any, TextIO

from ...core import (
    STOPPED_WORDS,
    ArtifactStored,
    BlockDelta,
    Citation,
    CitationDelta,
    ElicitationAnswer,
    ElicitationRequest,
    Event,
    EventHandler,
    HistoryTrimmed,
    ModelFailed,
    ModelStarted,
    ReasoningDelta,
    RetryScheduled,
    SamplingCompleted,
    SamplingRequest,
    SamplingVerdict,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallNote,
    ToolCallProgress,
    plural,
    redact,
)
from ...memory import describe_size
from ..render.citations import TOOL_TITLES, source_key, sources_text
from ..render.text.transcript import INTERRUPTED
from .run_state import RunState, Segment
from .terminal import TerminalOutput, tty_of
from .terminal_asks import ask_elicitation, ask_sampling


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
        self._wait = _WaitLine(inner, self.state) if tty_of(inner) is not None else None

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
        self.out.line(
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
        self.out.part(f"\n{INTERRUPTED}", "bold yellow")
        self.finish()

    async def request_approval(self, action: ToolAction, preview: str | None = None) -> bool:
        """Ask on the terminal whether to run `action`; `preview` (a notebook edit's diff) is printed first."""
        if self._wait is not None:
            self._wait.erase()
        if preview:
            self._before_asking()
            for line in redact(preview).splitlines():
                self.out.line(line)
        question = f"\nwaiting for your approval · run {action.native_name}({json.dumps(action.input)})? [y/N] "
        answer = await asyncio.to_thread(input, question)
        return answer.strip().lower() in ("y", "yes")

    async def request_sampling(self, request: SamplingRequest) -> SamplingVerdict:
        """Ask on the terminal whether an MCP server's sampling request may go to the model (`terminal_asks`)."""
        self._before_asking()
        return await asyncio.to_thread(ask_sampling, request)

    async def request_elicitation(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Ask on the terminal for an MCP server's elicitation: a prompt per field, or a link (`terminal_asks`)."""
        self._before_asking()
        return await asyncio.to_thread(ask_elicitation, request)

    def _before_asking(self) -> None:
        if self._wait is not None:
            self._wait.erase()
        self.out.flush()

    def on_tool_call_progress(self, event: ToolCallProgress) -> None:
        total = f"/{event.total:g}" if event.total is not None else ""
        message = f" {event.message}" if event.message else ""
        self.out.part(f"\n[progress {event.action.native_name} {event.progress:g}{total}{message}]", "cyan")

    def on_sampling_completed(self, event: SamplingCompleted) -> None:
        self.out.part(f"\n[{event.note}]\n", "yellow" if event.error else "magenta")

    def on_tool_call_note(self, event: ToolCallNote) -> None:
        self.out.part(f"\n[{event.text}]\n", "magenta")

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
        if self.state.price_note and self.state.done is not None:  # once per cell: why no cost is shown
            self.out.part("\n" + self.state.price_note, "dim")
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
    said = [plural(len(block.sources), "source")] if block.sources else ["done"]
    said += [plural(len(block.images), "image")] if block.images else []
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
