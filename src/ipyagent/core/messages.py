"""`Message`, `Usage` and `StopReason` (DESIGN.md, "core")."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .content import ActionCallBlock, ActionResultBlock, ContentBlock, ReasoningBlock, TextBlock
from .errors import ProviderError
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
    model_config = ConfigDict(defer_build=True)

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


#: `TokenCounts`' field names, read once: ``model_fields`` is a descriptor that costs a call a read.
_COUNT_NAMES = tuple(TokenCounts.model_fields)


class Usage(TokenCounts):
    """Token counts as billed by the provider (see `TokenCounts`); `raw` is the provider's own usage object.

    `server_tool_calls` counts the provider-side tool calls the turn was billed for, by kind
    (``{"web_search": 2}``: Anthropic's ``server_tool_use``, the Responses API's search calls,
    Gemini's search queries); they are priced per call.

    Usages add with ``+``: counts are summed, `raw` is dropped.
    """

    raw: dict[str, Any] | None = None
    server_tool_calls: dict[str, int] = Field(default_factory=dict)

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        calls = dict(self.server_tool_calls)
        for kind, count in other.server_tool_calls.items():
            calls[kind] = calls.get(kind, 0) + count
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in _COUNT_NAMES},
                     server_tool_calls=calls)


class StopKind(str, Enum):
    end_turn = "end_turn"
    tool_use = "tool_use"
    max_tokens = "max_tokens"
    stop_sequence = "stop_sequence"
    content_filter = "content_filter"
    error = "error"


class StopReason(BaseModel):
    """Why the model stopped: normalized `kind` plus the provider's `raw` value."""
    model_config = ConfigDict(defer_build=True)

    kind: StopKind
    raw: str | None = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, StopKind)):
            return self.kind == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.kind.value


#: Whether a message is whole: ``complete``; ``partial`` (the reply so far of a stream that has
#: not ended: a snapshot, or what a process killed mid-turn left); ``failed`` (the turn's stream
#: ended with an error, `Message.error`, after the content it has); ``interrupted`` (the run was
#: stopped, Stop or a kernel interrupt, while it streamed).
MessageStatus = Literal["complete", "partial", "failed", "interrupted"]

#: The metadata keys that said this before issue 27 (saved transcripts and run stores still load).
LEGACY_STATUS_KEYS = ("partial", "failed", "interrupted", "error")


class MessageError(BaseModel):
    """The error a message's turn ended with: a `ProviderError` as `ProviderError.to_dict` gives
    it (type, one line of message, the provider's code, whether a retry may help, HTTP status)."""
    model_config = ConfigDict(defer_build=True)

    type: str
    message: str = ""
    code: str | int | None = None
    retryable: bool | None = None
    status: int | None = None

    @classmethod
    def of(cls, error: ProviderError) -> "MessageError":
        return cls(type=str(error.type), message=error.message, code=error.code, retryable=error.retryable,
                   status=error.status)


def upgrade_status_keys(data: Any) -> Any:
    """Message data whose metadata says ``partial`` / ``failed`` / ``interrupted`` / ``error`` (as
    before issue 27) with those keys moved to `Message.status` and `Message.error`; anything
    else as it is. A status or error given outright wins."""
    if not isinstance(data, dict):
        return data
    metadata = data.get("metadata")
    if not isinstance(metadata, dict) or not any(key in metadata for key in LEGACY_STATUS_KEYS):
        return data
    metadata = dict(metadata)
    partial, failed, interrupted = (bool(metadata.pop(key, False)) for key in ("partial", "failed", "interrupted"))
    error = metadata.pop("error", None)
    status = "interrupted" if interrupted else "failed" if failed or error else "partial" if partial else "complete"
    upgraded = {"status": status, **data, "metadata": metadata}
    if isinstance(error, dict) and error.get("type") and upgraded.get("error") is None:
        upgraded["error"] = error
    return upgraded


#: The fields of `Message` (a run store's message node holds others beside them: stop reason, response).
MESSAGE_FIELDS = ("role", "content", "usage", "metadata", "status", "error")


class Message(BaseModel):
    """One message of a conversation: a role and its content blocks.

    `usage` is set on assistant messages that came from a provider; `metadata`
    holds what the driver measured (latency in seconds, retries, request id).
    `status` says whether the message is whole (`MessageStatus`); `error` is the
    error a ``failed`` one's turn ended with. Only complete messages are sent again
    in a later request. Data with the old metadata keys (``partial``, ``failed``,
    ``interrupted``, ``error``) validates too.
    """
    model_config = ConfigDict(defer_build=True)

    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    usage: Usage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: MessageStatus = "complete"
    error: MessageError | None = None

    @model_validator(mode="before")
    @classmethod
    def _accept_legacy_status(cls, data: Any) -> Any:
        return upgrade_status_keys(data)

    @property
    def complete(self) -> bool:
        """True for a whole message (`status` ``complete``)."""
        return self.status == "complete"

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
