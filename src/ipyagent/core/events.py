"""Stream events: what `driver.stream()` yields (DESIGN.md, "drivers").

Per-delta events are slotted dataclasses, built without validation: they are
the hot path (one per provider chunk). `DeltaMessage` is their common base: a
streamed fragment tagged with the index of the content block it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ProviderError
from .messages import Message, StopReason, Usage
from .tool_action import ToolAction


@dataclass(slots=True)
class ModelStarted:
    """A model turn begins. `request` is what is sent: {"url", "body"} (no headers, no key)."""

    provider: str
    model: str
    request_id: str | None = None
    request: dict[str, Any] | None = None
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
class BlockDelta(DeltaMessage):
    """A whole content block that arrives at once and is not streamed (Anthropic
    redacted thinking, a server tool's result): kept as it is in the final message."""

    block: Any
    type: str = field(default="block_delta", init=False)


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
    """The agent ran one tool call: its result artifact and the seconds it took."""

    action: ToolAction
    result: Any
    duration_s: float
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


Event = ModelStarted | TextDelta | ReasoningDelta | ToolCallDelta | BlockDelta | ModelCompleted | ModelFailed | ToolCallCompleted | ArtifactStored | HistoryTrimmed
