"""Provider-neutral errors.

`ProviderError` is what every prompt driver raises (or reports in a
`model_failed` event) whatever the provider: a normalized `type`, the
provider's own `code` and `message`, whether a retry may help, and the raw
error body.
"""

from __future__ import annotations

from typing import Any, Literal

from .redact import redact, redact_data

ErrorType = Literal[
    "authentication",
    "permission",
    "invalid_request",
    "not_found",
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "connection",
    "unsupported_capability",
    "cancelled",
    "invalid_response",
    "configuration",
    "max_steps",
    "invalid_output",
    "budget",
    "tool_unavailable",  # a tool source (an MCP server) could not be used; nothing was sent
    "callback",  # the run's own event callback (on_event) raised; the run stopped there
]

#: Error types that a retry may fix (DESIGN.md, "drivers": retries).
RETRYABLE_TYPES: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "timeout", "connection"}
)


class ProviderError(Exception):
    """A failure reported by, or on the way to, a model provider.

    Attributes:
        type: normalized error type (see `ErrorType`).
        code: the provider's own error code, if any (``"model_not_found"``).
        message: one human sentence, safe to show: set through the one redactor (`core.redact`),
            on one line (line breaks in it are joined with spaces).
        retryable: whether the base driver may retry the request.
        raw: the provider's error body as parsed JSON (or text), for debugging; set through the
            redactor too (`redact_data`): a provider may echo the key back in its body.
        status: the HTTP status code, when there was one.
        retry_after: seconds the provider asked us to wait (``Retry-After``).
    """

    def __init__(
        self,
        type: ErrorType,
        message: str,
        *,
        code: str | int | None = None,
        retryable: bool | None = None,
        raw: Any = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.type = type
        self.message = message
        self.code = code
        self.retryable = type in RETRYABLE_TYPES if retryable is None else retryable
        self.raw = raw
        self.status = status
        self.retry_after = retry_after

    @property
    def message(self) -> str:
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        lines = value.splitlines()
        if len(lines) > 1:  # one line: a provider's own text (an error body, pydantic's) may span several
            value = " ".join(stripped for line in lines if (stripped := line.strip()))
        self._message = redact(value)
        self.args = (self._message,)

    @property
    def raw(self) -> Any:
        return self._raw

    @raw.setter
    def raw(self, value: Any) -> None:
        self._raw = redact_data(value) if value is not None else None

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ProviderError(type={self.type!r}, code={self.code!r}, message={self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for transcripts and the run store)."""
        return {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "status": self.status,
        }


class ConfigurationError(ProviderError):
    """Bad set-up on our side (unknown provider, missing API key): never retried."""

    def __init__(self, message: str) -> None:
        super().__init__("configuration", message, retryable=False)
