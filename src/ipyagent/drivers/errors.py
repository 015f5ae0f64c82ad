"""What goes wrong on the wire, as the `ProviderError` it means (DESIGN.md, "ProviderError").

An HTTP error status and body, a transport failure, a response past its deadline, a reply
that cannot be read: each becomes one `ProviderError` with one line of text, redacted
(`core.redact`). `ErrorMapping` is the driver template's part that does it; a driver only
reads its provider's error body (`parse_error_body`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

from ..core import ProviderError, redact
from .http import parse_retry_after
from .catalog.lifecycle import retired_hint

_TAGS = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.S | re.I)
EXCERPT_CHARS = 300


def error_excerpt(text: str) -> str:
    """A text error body (often a proxy's HTML page) as one short line: tags dropped,
    whitespace collapsed, at most `EXCERPT_CHARS` characters."""
    line = " ".join(_TAGS.sub(" ", redact(text)).split())  # redacted before the cut: no secret shown in part
    return line if len(line) <= EXCERPT_CHARS else line[: EXCERPT_CHARS - 1] + "…"


def as_duration(seconds: float) -> str:
    """A wait for people: ``31 s``, ``5 min``, ``3 h``, ``2 days`` (a provider's Retry-After may be
    an HTTP date years ahead: not ``2.3e+09 s``)."""
    if seconds >= 1e7 * 86400:
        return "over 10,000,000 days"
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:g} s"


#: HTTP status -> normalized error type (DESIGN.md, "ProviderError").
STATUS_TYPES: dict[int, str] = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "invalid_request",
    413: "invalid_request",
    422: "invalid_request",
    429: "rate_limit",
    529: "overloaded",
}


class ErrorMapping:
    """The driver template's errors: HTTP error responses, transport failures and unreadable
    replies as `ProviderError`s naming the provider (mixed into `BasePromptDriver`)."""

    provider: str
    base_url: str
    read_timeout: float
    response_timeout: float
    max_retry_wait: float
    _api_key: str | None

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        """(code, message, error type or None) from an error body (parsed JSON, or text)."""
        return None, data if isinstance(data, str) and data else None, None

    def error_from_response(self, status: int, headers: httpx2.Headers, body: bytes) -> ProviderError:
        """Map an HTTP error response to a `ProviderError`."""
        text = body.decode("utf-8", "replace")
        try:
            data: Any = json.loads(text)
        except ValueError:
            data = text.strip()
        code, message, etype = self.parse_error_body(status, data)
        if isinstance(data, str) and message:  # a proxy's HTML page or plain text: a line, not the page
            message = error_excerpt(message)
        etype = etype or STATUS_TYPES.get(status) or ("server" if status >= 500 else "invalid_request")
        message = redact(message or f"HTTP {status} from {self.base_url}")
        message += self._next_step(status)
        return ProviderError(
            etype,  # type: ignore[arg-type]
            f"{self.provider} returned HTTP {status}: {message}",
            code=code,
            raw=data,
            status=status,
            retry_after=parse_retry_after(headers),
        )

    def _next_step(self, status: int) -> str:
        """What to do about an HTTP error, as a parenthesis to its message ("" when nothing helps):
        a 404 names the model and ``%provider --models`` (a model the provider shut down says so,
        and what replaced it), and the base URL when it is not the provider's own; a 401 / 403
        names the variable the key came from, or says how to send one."""
        model = getattr(self, "model", "")
        if status == 404:
            own = getattr(self, "price_known", False)
            if own:  # the provider's own API: a shut-down model says so
                hint = retired_hint(self.provider, model)
                if hint:
                    return f" ({hint})"
            where = "" if own else f"; and the base URL {redact(self.base_url)}"
            return (f" (check the model name {model!r}: %provider --models lists the models {self.provider} "
                    f"offers{where})")
        if status not in (401, 403):
            return ""
        if not self._api_key:
            return (f" (no API key was sent to {redact(self.base_url)}; name the variable holding one: "
                    "--api-key-env VAR, or api_key_env= in Python)")
        key_env = getattr(self, "key_env", None)
        return f" (check the API key in {key_env})" if key_env else " (check the API key given as api_key=)"

    def redirected(self, status: int, location: str | None) -> ProviderError:
        """``invalid_request`` for a 3xx answer, naming where it points (redacted). A redirect is not
        followed: the request's API key would go with it to another address."""
        to = f"redirecting to {redact(location)}" if location else "a redirect without a Location"
        return ProviderError(
            "invalid_request",
            f"{self.provider} answered HTTP {status}, {to}: not followed, so the API key stays with "
            f"{redact(self.base_url)} (if that address is the API's, make it the base URL: --base-url)",
            status=status, retryable=False,
        )

    def _transport_error(self, exc: Exception, url: str, answering: bool = False) -> ProviderError:
        """`exc` as a `ProviderError`; `answering`: the reply had begun (a read timeout is then a
        stall in the middle of the answer, not a server that did not answer)."""
        url = redact(url)  # a key may sit in the URL (user-info, a query parameter)
        if isinstance(exc, httpx2.SSEError):  # an event over the size limit: the same reply again would be too
            return ProviderError(
                "invalid_response",
                f"{self.provider} sent a stream ipyagent cannot read: {exc} "
                "(not retried: the same request would get the same reply)",
                retryable=False,
            )
        if isinstance(exc, httpx2.TimeoutException):
            if answering:
                return ProviderError("timeout", f"{self.provider} began its answer, then sent nothing for "
                                     f"{self.read_timeout:g} s (read_timeout); the text so far is kept ({url})")
            return ProviderError("timeout", f"{self.provider} did not answer within {self.read_timeout:g} s ({url})")
        if isinstance(exc, httpx2.ConnectError):
            return ProviderError(
                "connection", f"could not connect to {url}: {redact(str(exc)) or 'connection refused'} "
                f"(check the base URL {redact(self.base_url)}: is a server listening there? --base-url sets it)"
            )
        return ProviderError("connection", f"connection to {url} failed: {type(exc).__name__}: {redact(str(exc))}")

    def _unreadable(self, exc: Exception) -> ProviderError:
        detail = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[:300]  # one line (pydantic's spans lines)
        return ProviderError(
            "invalid_response", f"{self.provider} sent a reply ipyagent could not read ({detail})", retryable=False
        )

    def _as_provider_error(self, exc: Exception, url: str, answering: bool = False) -> ProviderError:
        """Any failure while sending or reading, as the `ProviderError` it means (`answering`:
        the reply had begun, see `_transport_error`)."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, TimeoutError):  # the response's own deadline (`http._Deadlined`), not a network timeout
            return self._too_slow()
        if isinstance(exc, httpx2.TransportError):
            return self._transport_error(exc, url, answering)
        return self._unreadable(exc)  # JSON of the wrong shape: a translation that cannot read it

    def _too_slow(self) -> ProviderError:
        return ProviderError(
            "timeout",
            f"{self.provider} did not finish its response within {self.response_timeout:g} s "
            "(response_timeout); the text so far is kept",
            retryable=False,
        )

    def _not_retried(self, error: ProviderError, attempts: int) -> None:
        """Say in `error` why a retryable error ends the turn: the provider asked for a longer
        wait than `max_retry_wait`, or the `attempts` ran out (more than one was made)."""
        if error.retryable and error.retry_after is not None and error.retry_after > self.max_retry_wait:
            error.message = (
                f"{error.message} (asked to wait {as_duration(error.retry_after)}, more than max_retry_wait="
                f"{self.max_retry_wait:g} s: not retried; try again later)"
            )
        elif attempts > 1 and error.retryable:
            error.message = f"{error.message} (gave up after {attempts} attempts)"
