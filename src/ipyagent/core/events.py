"""Stream events: what `driver.stream()` yields (DESIGN.md, "drivers").

Per-delta events are slotted dataclasses, built without validation: they are
the hot path (one per provider chunk). `DeltaMessage` is their common base: a
streamed fragment tagged with the index of the content block it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import ProviderError
from .messages import Message, MessageStatus, StopReason, Usage
from .tool_action import ToolAction


class PartialReply(Protocol):
    """A model turn's reply while it streams: the one record of its deltas (the driver's
    `Aggregator`), which its readers ask instead of keeping the deltas again."""

    def partial(self, status: MessageStatus = "partial", error: ProviderError | None = None) -> Message | None:
        """The reply so far with `status` and `error`, or None when nothing has arrived.

        Raises:
            ValueError, TypeError: the deltas form no message (`reply_so_far` says None)."""


def reply_so_far(reply: PartialReply | None, status: MessageStatus = "partial",
                 error: ProviderError | None = None) -> Message | None:
    """`reply.partial(status, error)`, or None when there is no reply, nothing had arrived, or the
    deltas form no message (a stream that broke that way ends as a failed turn, which says why)."""
    if reply is None:
        return None
    try:
        return reply.partial(status, error)
    except (TypeError, ValueError):
        return None


@dataclass(slots=True)
class ModelStarted:
    """A model turn begins. `request` is what is sent: {"url", "body"} (no headers, no key).

    It is yielded before the request is sent (so a view can show the wait, and the retries), when
    no provider has named the request yet: its id is in the turn's last event,
    ``ModelCompleted.metadata["request_id"]`` / ``ModelFailed.metadata["request_id"]``.
    `reply` is the turn's reply as it streams (`PartialReply`: the driver aggregates the deltas,
    once): a reader that needs the reply of a turn that never ended (an interrupted run) asks it
    (`reply_so_far`) rather than aggregating the deltas itself; None where there is none (a stored
    run's events)."""

    provider: str
    model: str
    request: dict[str, Any] | None = None
    reply: PartialReply | None = field(default=None, repr=False, compare=False)
    type: str = field(default="model_started", init=False)


@dataclass(slots=True)
class DeltaMessage:
    """A streamed fragment of content block `index` of the reply."""

    index: int


@dataclass(slots=True)
class TextDelta(DeltaMessage):
    text: str
    type: str = field(default="text_delta", init=False)


@dataclass(slots=True)
class ReasoningDelta(DeltaMessage):
    text: str
    signature: str | None = None
    type: str = field(default="reasoning_delta", init=False)


@dataclass(slots=True)
class ToolCallDelta(DeltaMessage):
    """A fragment of a tool call. `arguments` is partial JSON text, for display only."""

    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    signature: str | None = None
    type: str = field(default="tool_call_delta", init=False)


@dataclass(slots=True)
class ServerToolDelta(DeltaMessage):
    """Progress of a provider-side tool call at content block `index`, for views: its id, kind
    (`core.BUILTIN_TOOLS`) and provider name when known, a fragment of its input (partial JSON, or
    code as it is written: `arguments`, for display only) and its `status` (``searching``,
    ``interpreting``, ``completed``...). The call itself arrives whole, as a `BlockDelta`."""

    call_id: str | None = None
    tool: str | None = None
    name: str | None = None
    arguments: str = ""
    status: str | None = None
    type: str = field(default="server_tool_delta", init=False)


@dataclass(slots=True)
class CitationDelta(DeltaMessage):
    """A source cited for the text of content block `index` (`core.Citation`: offsets into that
    block's text, or the whole block)."""

    citation: Any
    type: str = field(default="citation_delta", init=False)


@dataclass(slots=True)
class BlockDelta(DeltaMessage):
    """A whole content block that arrives at once and is not streamed (Anthropic
    redacted thinking, a server tool's result): kept as it is in the final message."""

    block: Any
    type: str = field(default="block_delta", init=False)


@dataclass(slots=True)
class RetryScheduled:
    """A try of the request failed before anything arrived and another follows (the driver
    base's retries): `attempt` of `max_attempts` starts after `wait_s` seconds.
    `error` is the failed try's error (type, HTTP status, message)."""

    attempt: int
    max_attempts: int
    wait_s: float
    error: ProviderError
    type: str = field(default="retry_scheduled", init=False)

    @property
    def text(self) -> str:
        """``retrying 2/3 in 2.0 s · 429 rate limit`` (``retrying 2/3 in 0.6 s · connection error``):
        the attempt and the wait first, so a line cut to the screen keeps them."""
        what = _RETRY_WORDS.get(self.error.type, str(self.error.type).replace("_", " "))
        if self.error.status:
            what = f"{self.error.status} {what}"
        return f"retrying {self.attempt}/{self.max_attempts} in {self.wait_s:.1f} s · {what}"


#: How a retry notice names the failure of each retryable error type.
_RETRY_WORDS = {"rate_limit": "rate limit", "overloaded": "overloaded", "server": "server error",
                "timeout": "timed out", "connection": "connection error"}


@dataclass(slots=True)
class ModelCompleted:
    """The whole reply. `metadata` holds latency and first-token times (seconds) and retries.

    `more_turns` is set by the agent loop: True when another model turn follows in
    the same run (after tool calls, or to correct an invalid structured output);
    a driver's own stream leaves it False.
    """

    message: Message
    usage: Usage
    stop_reason: StopReason
    metadata: dict[str, Any] = field(default_factory=dict)
    more_turns: bool = False
    type: str = field(default="model_completed", init=False)

    @property
    def tool_calls(self) -> list[ToolAction]:
        return self.message.tool_calls


@dataclass(slots=True)
class ModelFailed:
    """The request failed; `partial` is the message built from what had arrived."""

    error: ProviderError
    partial: Message
    metadata: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="model_failed", init=False)

    @property
    def partial_text(self) -> str:
        return self.partial.text


@dataclass(slots=True)
class ToolCallCompleted:
    """The agent ran one tool call: its result artifact and the seconds it took.

    `approval`: ``approved`` / ``denied`` when the call needed the user's approval
    (a denied call was not run; its result says so), ``preapproved`` when the user approved
    it in advance (``--approve-runs``), None when it needed none.
    `stopped`: ``interrupted`` (Stop, a kernel interrupt, Ctrl-C) or ``timeout`` (the run's
    deadline) when the run ended while the call ran: the result (an error) says so and
    `duration_s` is how long it had run; None for a call that finished.
    """

    action: ToolAction
    result: Any
    duration_s: float
    approval: str | None = None
    stopped: str | None = None
    type: str = field(default="tool_call_completed", init=False)

    @property
    def is_error(self) -> bool:
        return getattr(self.result, "type", None) == "error"


@dataclass(slots=True)
class ArtifactStored:
    """An off-prompt tool output went to Task Memory instead of the prompt.

    `artifact` is what was stored (text, json, table, blob, image, list);
    `size` is {"chars": n} / {"rows": n, "columns": n} / {"bytes": n} / {"items": n};
    the model was given a reference to `memory` / `namespace` instead.
    """

    call_id: str
    tool: str
    activity: str | None
    memory: str
    namespace: str
    artifact: Any
    size: dict[str, int]
    type: str = field(default="artifact_stored", init=False)

    @property
    def kind(self) -> str:
        return getattr(self.artifact, "type", "unknown")


@dataclass(slots=True)
class HistoryTrimmed:
    """The oldest turns of a conversation thread were left out of the request, whole.

    `reason` is ``max_history`` (turn limit) or ``context_window`` (token budget);
    `estimated_tokens` is our own estimate of the history sent, not the provider's count.
    """

    thread: str
    dropped_turns: int
    kept_turns: int
    estimated_tokens: int
    budget_tokens: int | None
    reason: str
    type: str = field(default="history_trimmed", init=False)


@dataclass(slots=True)
class ToolCallProgress:
    """A running tool call reported how far it is (MCP ``notifications/progress``): `progress` so
    far, of `total` when known (the server's units; both only grow), and its `message`."""

    action: ToolAction
    progress: float
    total: float | None = None
    message: str | None = None
    type: str = field(default="tool_call_progress", init=False)


@dataclass(slots=True)
class ToolCallNote:
    """Something that happened during tool call `action` that its card says, live and saved: how
    the user answered an MCP server's elicitation, for one. `text` is one line."""

    action: ToolAction
    text: str
    type: str = field(default="tool_call_note", init=False)


@dataclass(slots=True)
class SamplingCompleted:
    """An MCP server's sampling request, made during tool call `action`, was answered by `provider`
    (``provider:model``) with `text`: its `usage` and `cost` (a price dict, None: unknown) count in
    the run's figures. Refused (denied, over the run's cap, the model failed): `error` says why,
    and nothing was billed unless `usage` says so."""

    action: ToolAction | None
    server: str
    provider: str
    usage: Usage
    cost: dict[str, Any] | None = None
    text: str = ""
    error: str | None = None
    type: str = field(default="sampling_completed", init=False)

    @property
    def note(self) -> str:
        """Its call's card's line: who answered, the tokens, the start of the answer; or why refused."""
        if self.error is not None:
            return f"sampling request from {self.server} refused: {self.error}"
        head = " ".join(self.text.split())
        head = head if len(head) <= 120 else head[:119] + "…"
        tokens = f"{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
        return f"sampling request from {self.server} answered by {self.provider} ({tokens}): {head}"


Event = (ModelStarted | RetryScheduled | TextDelta | ReasoningDelta | ToolCallDelta | ServerToolDelta | CitationDelta
         | BlockDelta | ModelCompleted | ModelFailed | ToolCallCompleted | ArtifactStored | HistoryTrimmed
         | ToolCallProgress | ToolCallNote | SamplingCompleted)


class EventHandler:
    """One dispatch over events, shared by their consumers (the live view, the run recorder,
    a conversation's turn builder, the transcript converter).

    `handle(event)` calls the ``on_<type>`` method for the event's class and returns what
    it returns; each method does nothing unless a subclass overrides it, so a consumer
    names only the events it reads. The per-delta events are matched first: they are
    the hot path. An object that is no `Event` is ignored.
    """

    __slots__ = ()

    def handle(self, event: Event) -> Any:
        match event:
            case TextDelta():
                return self.on_text_delta(event)
            case ToolCallDelta():
                return self.on_tool_call_delta(event)
            case ReasoningDelta():
                return self.on_reasoning_delta(event)
            case BlockDelta():
                return self.on_block_delta(event)
            case ServerToolDelta():
                return self.on_server_tool_delta(event)
            case CitationDelta():
                return self.on_citation_delta(event)
            case ModelStarted():
                return self.on_model_started(event)
            case RetryScheduled():
                return self.on_retry_scheduled(event)
            case ModelCompleted():
                return self.on_model_completed(event)
            case ModelFailed():
                return self.on_model_failed(event)
            case ToolCallCompleted():
                return self.on_tool_call_completed(event)
            case ArtifactStored():
                return self.on_artifact_stored(event)
            case HistoryTrimmed():
                return self.on_history_trimmed(event)
            case ToolCallProgress():
                return self.on_tool_call_progress(event)
            case ToolCallNote():
                return self.on_tool_call_note(event)
            case SamplingCompleted():
                return self.on_sampling_completed(event)
        return None

    def on_text_delta(self, event: TextDelta) -> Any: ...

    def on_reasoning_delta(self, event: ReasoningDelta) -> Any: ...

    def on_tool_call_delta(self, event: ToolCallDelta) -> Any: ...

    def on_block_delta(self, event: BlockDelta) -> Any: ...

    def on_server_tool_delta(self, event: ServerToolDelta) -> Any: ...

    def on_citation_delta(self, event: CitationDelta) -> Any: ...

    def on_model_started(self, event: ModelStarted) -> Any: ...

    def on_retry_scheduled(self, event: RetryScheduled) -> Any: ...

    def on_model_completed(self, event: ModelCompleted) -> Any: ...

    def on_model_failed(self, event: ModelFailed) -> Any: ...

    def on_tool_call_completed(self, event: ToolCallCompleted) -> Any: ...

    def on_artifact_stored(self, event: ArtifactStored) -> Any: ...

    def on_history_trimmed(self, event: HistoryTrimmed) -> Any: ...

    def on_tool_call_progress(self, event: ToolCallProgress) -> Any: ...

    def on_tool_call_note(self, event: ToolCallNote) -> Any: ...

    def on_sampling_completed(self, event: SamplingCompleted) -> Any: ...
