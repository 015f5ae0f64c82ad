"""One classifier for the error objects OpenAI-style servers put inside a stream or body.

OpenAI Chat (and every compatible server) and OpenAI Responses send
``{"error": {"type": ..., "code": ..., "message": ...}}``; the documented codes
(OpenAI "Error codes" guide, Responses ``error.code``) map exactly, anything
else by the words it contains.
"""

from __future__ import annotations

from typing import Any

#: Documented error codes -> `ProviderError` type.
ERROR_CODE_TYPES: dict[str, str] = {
    "server_error": "server",
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "rate_limit",
    "vector_store_timeout": "timeout",
    "invalid_api_key": "authentication",
    "model_not_found": "not_found",
    "context_length_exceeded": "invalid_request",
    "invalid_prompt": "invalid_request",
}


def error_type_for(code: Any, err_type: Any = None) -> str | None:
    """The `ProviderError` type for an error's `code` and `type`, or None when neither says.

    Known codes first (`ERROR_CODE_TYPES`); then words: ``rate`` / ``quota`` ->
    ``rate_limit``, ``overload`` -> ``overloaded``, ``auth`` / ``api_key`` ->
    ``authentication``, ``invalid`` / ``unsupported`` / ``image`` -> ``invalid_request``.
    """
    for key in (code, err_type):
        if isinstance(key, str) and key in ERROR_CODE_TYPES:
            return ERROR_CODE_TYPES[key]
    text = f"{err_type} {code}".lower()
    if "rate" in text or "quota" in text:
        return "rate_limit"
    if "overload" in text:
        return "overloaded"
    if "auth" in text or "api_key" in text:
        return "authentication"
    if "invalid" in text or "unsupported" in text or "image" in text:
        return "invalid_request"
    return None


__all__ = ["ERROR_CODE_TYPES", "error_type_for"]
