"""Gemini errors: the `google.rpc.Status` error model (with `RetryInfo` and `ErrorInfo` details),
in an HTTP error body or found inside the stream, read as a `ProviderError`.

Follows the Gemini API reference, "Troubleshooting" (API errors) and Google's API design guide,
"Errors" (`google.rpc.Status`, `google.rpc.ErrorInfo`, `google.rpc.RetryInfo`).
"""

from __future__ import annotations

import re
from typing import Any

from ....core import ProviderError, redact

#: `google.rpc.Status.status` -> ProviderError type.
STATUS_TYPES: dict[str, str] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "DATA_LOSS": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
}

#: `google.rpc.ErrorInfo.reason` values that decide the type whatever the HTTP status
#: (Gemini reports a bad key as HTTP 400 INVALID_ARGUMENT with reason API_KEY_INVALID).
REASON_TYPES: dict[str, str] = {
    "API_KEY_INVALID": "authentication",
    "API_KEY_EXPIRED": "authentication",
    "ACCESS_TOKEN_EXPIRED": "authentication",
    "CREDENTIALS_MISSING": "authentication",
    "API_KEY_SERVICE_BLOCKED": "permission",
    "SERVICE_DISABLED": "permission",
}


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")


def parse_duration(value: Any) -> float | None:
    """Seconds from a protobuf JSON `Duration` (``"48s"``, ``"1.5s"``), else None."""
    if not isinstance(value, str):
        return None
    match = _DURATION_RE.match(value)
    return float(match.group(1)) if match else None


def _details(error: dict[str, Any]) -> list[dict[str, Any]]:
    details = error.get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def error_reason(error: dict[str, Any]) -> str | None:
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo") and detail.get("reason"):
            return str(detail["reason"])
    return None


def retry_delay(error: Any) -> float | None:
    """Seconds from the `google.rpc.RetryInfo.retryDelay` of an error body, else None."""
    if isinstance(error, list) and error:
        error = error[0]
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict):
        return None
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return parse_duration(detail.get("retryDelay"))
    return None


def error_type(error: dict[str, Any]) -> str | None:
    reason = error_reason(error)
    if reason in REASON_TYPES:
        return REASON_TYPES[reason]
    return STATUS_TYPES.get(str(error.get("status") or ""))


def stream_error(error: Any) -> ProviderError:
    """A `ProviderError` for an ``error`` object (`google.rpc.Status`) found in a stream."""
    if not isinstance(error, dict):
        return ProviderError("server", f"gemini stream error: {error}", raw=error)
    message = str(error.get("message") or error.get("status") or error)
    message = redact(message)
    code = error.get("code")
    status = code if isinstance(code, int) else None
    etype = error_type(error) or ("server" if status is None or status >= 500 else "invalid_request")
    return ProviderError(
        etype,  # type: ignore[arg-type]
        f"gemini stream error: {message}",
        code=error_reason(error) or error.get("status") or code,
        raw=error,
        status=status,
        retry_after=retry_delay(error),
    )
