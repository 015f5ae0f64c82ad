"""Anthropic errors: the `{"type": "error", "error": {...}}` envelope ("Errors"), in an HTTP
error body or as an `event: error` inside the stream, read as a `ProviderError`."""

from __future__ import annotations

from typing import Any

from ....core import ProviderError

#: error.type of the error envelope -> ProviderError.type ("Errors").
ERROR_TYPES: dict[str, str] = {
    "invalid_request_error": "invalid_request",
    "request_too_large": "invalid_request",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "billing_error": "permission",
    "not_found_error": "not_found",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "overloaded_error": "overloaded",
    "timeout_error": "timeout",
}


def error_from_object(error: Any, provider: str = "anthropic") -> ProviderError:
    """A `ProviderError` for the `error` object of an `event: error` in the stream."""
    if not isinstance(error, dict):
        return ProviderError("server", f"{provider} stream error: {error}", raw=error)
    raw_type = str(error.get("type") or "")
    etype = ERROR_TYPES.get(raw_type, "server")
    message = error.get("message") or raw_type or "unknown error"
    return ProviderError(
        etype, f"{provider} stream error ({raw_type or 'error'}): {message}", code=raw_type or None, raw=error
    )  # type: ignore[arg-type]

