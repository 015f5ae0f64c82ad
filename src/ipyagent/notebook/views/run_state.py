"""What a live view keeps of a run (`RunState`: its segments of text, reasoning, tool calls and
provider-side tool cards, the retries and notices, the figures of its footer), fed the driver's events;
both views draw it."""

from __future__ import annotations

import json
import time
from typing import Any

from ...core import (
    ArtifactStored,
    BlockDelta,
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
    SamplingCompleted,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallNote,
    ToolCallProgress,
    card_result,
    masked_figure,
    plural,
)
from ...drivers import total_cost
from ..render.memory_html import trimmed_text
from .server_cards import citation_json, new_card, progress, with_call, with_result

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
        "progress",
        "notes",
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
        self.progress: dict[str, Any] | None = None  # a running call's last progress: progress, total, message
        self.notes: list[str] = []  # what happened during a call: a server's sampling request, an elicitation


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
        self.price_note: str | None = None  # why a turn's price is unknown and how to set it (the driver's)
        self.settings: dict[str, Any] = {}  # the generation settings the run used (ModelSettings.as_dict)
        self.created: list[Segment] = []  # segments made since a view last took them (WidgetView)
        self.touched: Segment | None = None  # the segment the last event went to
        self.retry: str | None = None  # a retry notice, shown until the turn's first token
        self.asking = 0  # tool calls waiting for the user's Approve / Deny (or an answer)
        self.answering = 0  # of those, the ones waiting for the user's answer to an MCP server's elicitation
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

    def on_tool_call_progress(self, event: ToolCallProgress) -> bool:
        segment = self.tool_segment(event.action)
        if segment.result is not None:  # a late report after the result: the card is done
            return False
        segment.progress = {"progress": event.progress, "total": event.total, "message": event.message}
        return True

    def on_tool_call_note(self, event: ToolCallNote) -> bool:
        self.tool_segment(event.action).notes.append(event.text)
        return True

    def on_sampling_completed(self, event: SamplingCompleted) -> bool:
        """An MCP server's sampling request: its tokens and price count in the figures; its call's
        card says what happened."""
        if event.usage.input_tokens or event.usage.output_tokens:
            self.input_tokens += event.usage.input_tokens
            self.output_tokens += event.usage.output_tokens
            self.costs.append(event.cost)
        if event.action is not None:
            self.tool_segment(event.action).notes.append(event.note)
        return True

    def on_model_completed(self, event: ModelCompleted) -> bool:
        self.settings = event.metadata.get("settings") or self.settings
        self.input_tokens += event.usage.input_tokens
        self.output_tokens += event.usage.output_tokens
        if "cost" in event.metadata:  # set by every driver (BasePromptDriver.stream)
            self.costs.append(event.metadata["cost"])
        self.price_note = self.price_note or event.metadata.get("price_note")
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
        ``answer`` while an MCP server's elicitation does, ``streaming`` otherwise, None once
        finished) from `elapsed` seconds on."""
        if self.finished:
            return {"figures": self.footer_figures(), "ticking": None, "elapsed": 0}
        figures = [self.provider]
        if self.input_tokens or self.output_tokens:
            figures.append(f"{self.input_tokens} in / {self.output_tokens} out tokens")
        if self.first_token is not None:
            figures.append(f"first token {self.first_token:.2f} s")
        cost = total_cost(self.costs) if self.costs else None
        if cost is not None:  # an unknown price is said once, under the output (`price_note`), not here
            figures.append(str(cost))
        if self.retry:
            figures.append(self.retry)
        ticking = "waiting" if self.first_token is None else "streaming"
        if self.asking:
            ticking = "answer" if self.answering else "approval"
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
                figures.append(plural(meta["attempts"] - 1, "retry", "retries"))
            if meta.get("replayed"):
                figures.append("replayed from cassette")
        else:  # a run that ended is timed as the transcript's footer times it: "total"
            figures.append(f"total {elapsed:.2f} s" if self.finished else f"{elapsed:.2f} s")
        cost = total_cost(self.costs) if self.costs else None
        if cost is not None:  # an unknown price is said once, under the output (`price_note`), not here
            figures.append(str(cost))
        if masked_figure(self.masked):
            figures.append(masked_figure(self.masked))
        if self.done is None:
            state = "interrupted" if self.interrupted else "failed" if self.error is not None else "streaming…"
            figures.append(state)
        if self.settings:
            figures.append(ModelSettings(**self.settings).describe())
        return figures
