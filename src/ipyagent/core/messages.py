"""`Message`, `Usage` and `StopReason` (DESIGN.md, "core")."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field

from .content import ActionCallBlock, ActionResultBlock, ContentBlock, ReasoningBlock, TextBlock
from .tool_action import ToolAction

Role = Literal["system", "user", "assistant", "tool"]


class Usage(BaseModel):
    """Token counts as billed by the provider (tokens). `raw` is the provider's own object.

    `total` is the provider's figure when it gives one, else input + output.
    """

    input: int = 0
    output: int = 0
    total: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    raw: dict[str, Any] | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.total:
            self.total = self.input + self.output


class StopKind(str, Enum):
    end_turn = "end_turn"
    tool_use = "tool_use"
    max_tokens = "max_tokens"
    stop_sequence = "stop_sequence"
    content_filter = "content_filter"
    error = "error"


class StopReason(BaseModel):
    """Why the model stopped: normalized `kind` plus the provider's `raw` value."""

    kind: StopKind
    raw: str | None = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, StopKind)):
            return self.kind == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.kind.value


class Message(BaseModel):
    """One message of a conversation: a role and its content blocks.

    `usage` is set on assistant messages that came from a provider; `metadata`
    holds what the driver measured (latency in seconds, retries, request id).
    """

    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    usage: Usage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def reasoning(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, ReasoningBlock))

    @property
    def tool_calls(self) -> list[ToolAction]:
        return [b.action for b in self.content if isinstance(b, ActionCallBlock)]

    @property
    def tool_results(self) -> list[ActionResultBlock]:
        return [b for b in self.content if isinstance(b, ActionResultBlock)]
