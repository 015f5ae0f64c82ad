"""`Message`, `Usage` and `StopReason` (DESIGN.md, "core")."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from .content import ActionCallBlock, ActionResultBlock, ContentBlock, ReasoningBlock, TextBlock
from .tool_action import ToolAction

Role = Literal["system", "user", "assistant", "tool"]


#: Field names before issue 12 (``input``, ``cache_read``, ...): saved transcripts and run stores still load.
LEGACY_USAGE_NAMES = {
    "input": "input_tokens",
    "output": "output_tokens",
    "total": "total_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "reasoning": "reasoning_tokens",
}


def upgrade_usage_names(data: Any) -> Any:
    """A usage dict with the old field names (``input``, ``output``, ...) renamed; anything else as it is."""
    if not isinstance(data, dict) or not any(k in data for k in LEGACY_USAGE_NAMES):
        return data
    upgraded = {LEGACY_USAGE_NAMES.get(k, k): v for k, v in data.items() if k in LEGACY_USAGE_NAMES}
    return upgraded | {k: v for k, v in data.items() if k not in LEGACY_USAGE_NAMES}  # a new name wins


class TokenCounts(BaseModel):
    """The token counts of `Usage` (all in tokens), without the provider's raw object.

    `cache_read_tokens` and `cache_write_tokens` are parts of `input_tokens`;
    `total_tokens` is the provider's figure when it gives one, else input + output.
    Dicts with the old names (``input``, ``output``, ``total``, ``cache_read``, ...)
    validate too.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @model_validator(mode="before")
    @classmethod
    def _accept_legacy_names(cls, data: Any) -> Any:
        return upgrade_usage_names(data)

    def model_post_init(self, __context: Any) -> None:
        if not self.total_tokens:
            self.total_tokens = self.input_tokens + self.output_tokens


class Usage(TokenCounts):
    """Token counts as billed by the provider (see `TokenCounts`); `raw` is the provider's own usage object.

    Usages add with ``+``: counts are summed, `raw` is dropped.
    """

    raw: dict[str, Any] | None = None

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in TokenCounts.model_fields})


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
