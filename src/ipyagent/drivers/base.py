"""The prompt-driver template (DESIGN.md, "drivers").

A concrete driver translates, nothing more:

* `build_request(prompt_stack)` -> (path, JSON body) in the provider's format;
* `decoder()` -> a `StreamDecoder` for one reply: fed each frame of the body
  (`framing`: ``"sse"`` events or ``"lines"``), it returns the `TextDelta` /
  `ReasoningDelta` / `ToolCallDelta` deltas a frame stands for and notes the
  stream's facts (usage, stop reason, ids) in its `StreamMeta`, raising
  `ProviderError` for an error inside the stream;
* `parse_error_body(status, data)` -> (code, message, type or None) for an
  HTTP error body.

The base owns the rest: sending over httpx2, cutting the body into frames
(`frames`), retries (tenacity), aggregation of deltas into the final
`Message`, the `model_*` events, timing, redaction of secrets from error text
(`core.redact`), capability checks, and closing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import weakref
from abc import ABC, abstractmethod
from contextlib import aclosing
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, ClassVar

import httpx2
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ..core import (
    DeltaMessage,
    DocumentBlock,
    Event,
    ImageBlock,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PromptStack,
    ProviderError,
    RetryScheduled,
    StopKind,
    StopReason,
    TextDelta,
    Usage,
    add_secret,
    add_url,
    redact,
    redact_head,
    unsupported_setting,
)
from . import pricing
from ._turn import Opened, Turn
from .aggregate import BlockIndex, StreamMeta  # noqa: F401 - for drivers
from .decode import StreamDecoder, body_frames, check_text, stream_json
from .model_rules import DEFAULT_WINDOW, known_context_window
from .models import ModelListing, parse_openai, with_known_facts
from .pricing import Cost
from .structured import STRATEGIES, with_rule_instruction
from .usage import check_counts, read_usage, wire_usage  # noqa: F401 - for drivers

_TAGS = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.S | re.I)
EXCERPT_CHARS = 300


def error_excerpt(text: str) -> str:
    """A text error body (often a proxy's HTML page) as one short line: tags dropped,
    whitespace collapsed, at most `EXCERPT_CHARS` characters."""
    line = " ".join(_TAGS.sub(" ", redact(text)).split())  # redacted before the cut: no secret shown in part
    return line if len(line) <= EXCERPT_CHARS else line[:EXCERPT_CHARS - 1] + "…"


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



#: Seconds one response may take, first to last byte (`BasePromptDriver` ``response_timeout``).
RESPONSE_TIMEOUT = 300.0


#: What may be left of a body once its parser has seen the stop signal (OpenAI's ``[DONE]``):
#: at most this many bytes, arriving within `DRAIN_S` seconds, are read, so the connection goes
#: back to the pool for the next request instead of being closed (and a new one opened).
DRAIN_BYTES = 64 * 1024
DRAIN_S = 0.5


class _Deadlined(httpx2.AsyncByteStream):
    """A response body whose every network read ends by `deadline` (loop time), else
    `TimeoutError`: one timer per chunk of bytes, not one per parsed delta.

    The body's iterator is kept here, not in the generator a reader iterates: a parser that
    stops at its stop signal leaves the rest of the body for `drain`."""

    def __init__(self, stream: httpx2.AsyncByteStream, deadline: float) -> None:
        self.stream, self.deadline = stream, deadline
        self._chunks: AsyncIterator[bytes] | None = None
        self.head = b""  # the body's first bytes, to quote a reply that was no stream at all

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._chunks is None:
            self._chunks = aiter(self.stream)
        chunks = self._chunks
        while True:
            async with asyncio.timeout_at(self.deadline):
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
            if not self.head:
                self.head = chunk[:4096]  # past what is shown: a secret across the cut is redacted whole
            yield chunk

    async def drain(self) -> bool:
        """Read the rest of the body (`DRAIN_BYTES` at most, within `DRAIN_S` and the deadline);
        True when it ended, so the connection can serve another request."""
        if self._chunks is None:
            return False
        left = DRAIN_BYTES
        try:
            async with asyncio.timeout_at(min(self.deadline, asyncio.get_running_loop().time() + DRAIN_S)):
                async for chunk in self._chunks:
                    left -= len(chunk)
                    if left < 0:
                        return False
        except (Exception, TimeoutError):  # noqa: BLE001 - the connection is closed instead, as without a drain
            return False
        return True

    async def aclose(self) -> None:
        self._chunks = None  # a body not read to its end: its iterators are closed as they were before `drain`
        await self.stream.aclose()


async def _read_head(
    frames: AsyncIterator[Any], decoder: StreamDecoder, head: list[DeltaMessage]
) -> AsyncIterator[Any] | None:
    """Feed `decoder` frames until one gives a delta (put in `head`); the frames left, or None
    when the body was read to its end (or to the stop signal), `decoder.finish` included."""
    feed = decoder.feed
    async for frame in frames:
        head.extend(feed(frame))
        if decoder.done:
            break
        if head:
            return frames
    head.extend(decoder.finish())
    return None


async def retry_sleep(seconds: float) -> None:
    """The wait between two tries of a request (tests record the waits instead of sleeping)."""
    await asyncio.sleep(seconds)


async def _no_sleep(seconds: float) -> None:
    """tenacity's sleep: `_send` sleeps itself (`retry_sleep`), after announcing the retry."""


class _Replayed(httpx2.AsyncByteStream):
    """Bytes already read (`head`), then the rest of the body (`rest`)."""

    def __init__(self, head: bytes, rest: AsyncIterator[bytes] | None = None) -> None:
        self.head, self.rest = head, rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        if self.rest is not None:
            async for chunk in self.rest:
                yield chunk


@dataclass(frozen=True)
class Capabilities:
    """What a driver (and model) can do; each flag is checked before sending (`check_capabilities`,
    and `reasoning` for a reasoning setting), and a request needing a missing one fails there."""

    tools: bool = True
    vision: bool = False
    structured_output_native: bool = False
    reasoning: bool = False
    #: Takes PDF documents (`DocumentBlock`); text documents go to every model as text.
    documents: bool = False


@lru_cache(maxsize=1)
def _tls_context() -> Any:
    """One TLS context for every driver's client: building one (the CA bundle loaded) takes
    about 20 ms, which several drivers created at once (``%%compare``) would pay in turn."""
    return httpx2.create_ssl_context()


@lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx2.URL:
    """A request URL parsed once (a driver sends to one or two), not on every request."""
    return httpx2.URL(url)


@lru_cache(maxsize=1)
def _pricing_executor() -> Any:
    """One thread for genai-prices lookups, apart from asyncio's default pool (which hung tools may fill)."""
    import concurrent.futures

    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipyagent-price")


# A forked child (multiprocessing's fork, a tool that forks) has no thread behind the parent's
# executor: a lookup sent to it would wait forever. The child makes its own.
os.register_at_fork(after_in_child=_pricing_executor.cache_clear)


#: Drivers whose HTTP client is open (`close_all_drivers` closes them at kernel shutdown).
_OPEN: "weakref.WeakSet[BasePromptDriver]" = weakref.WeakSet()


async def close_all_drivers() -> int:
    """Close every driver whose HTTP client is open; returns how many were closed.

    A driver whose client cannot close here (made on another, finished loop) is
    forgotten: its sockets go with its loop. Safe to call more than once.
    """
    closed = 0
    for driver in list(_OPEN):
        try:
            await driver.close()
            closed += 1
        except Exception:  # noqa: BLE001 - closing one must not stop closing the others
            driver._client = None
            _OPEN.discard(driver)
    return closed


def parse_retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000
            if value > 0:
                return value
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class BasePromptDriver(ABC):
    """Template for a prompt driver speaking one wire protocol.

    Args:
        model: the provider's model name (``gpt-4.1-mini``).
        api_key: sent as the provider expects; never logged or shown.
        base_url: the API root (``https://api.openai.com/v1``).
        read_timeout: seconds to connect and between two received bytes.
        response_timeout: seconds one whole response may take, from sending the request to
            its last byte (default `RESPONSE_TIMEOUT`), so a server that trickles bytes or
            streams forever is cut off; past it the turn fails as ``timeout`` (not retried),
            its partial text kept.
        max_attempts: tries per request, the first included (retries only
            before the first delta; DESIGN.md "drivers").
        max_retry_wait: the longest wait between tries, seconds.
        transport: an httpx2 async transport (cassette record/replay, tests).
        provider_options: provider-specific request fields; unknown keys are
            rejected with a `ProviderError` of type ``invalid_request``.
        provider: the id the driver was created under (``openai``, ``groq``).
        price_as: ``provider:model`` whose genai-prices price this driver's turns are
            given (a model behind your own base URL billed at a known rate).
        price_known: False when the driver talks to a host other than its provider's own
            (a user-named base URL): its turns have an unknown price unless `price_as` says.
    """

    #: The registry name of the wire protocol.
    protocol: ClassVar[str]
    #: Keys a user may pass in `provider_options`.
    known_options: ClassVar[frozenset[str]] = frozenset()
    #: What the protocol can do; `capabilities_for(model)` may narrow it per model.
    capabilities: ClassVar[Capabilities] = Capabilities()
    default_base_url: ClassVar[str]
    #: Content types this protocol streams as; another reply is looked at (`_reply`).
    #: Empty (a third-party driver that did not say): every reply is read as the stream.
    stream_types: ClassVar[tuple[str, ...]] = ()
    #: How the body is cut into the frames `decoder()` reads: ``"sse"`` (one
    #: `httpx2.ServerSentEvent` each) or ``"lines"`` (one line of text each; NDJSON).
    framing: ClassVar[str] = "sse"
    #: The model-list endpoint (relative to `base_url`) and its first page's query (`list_models`).
    models_path: ClassVar[str] = "/models"
    models_params: ClassVar[dict[str, Any]] = {}
    #: A lane's shared 429 back-off (`RateGate`), set by a scheduler; None: each request alone.
    rate_gate: Any = None

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        read_timeout: float = 60.0,
        response_timeout: float = RESPONSE_TIMEOUT,
        max_attempts: int = 3,
        max_retry_wait: float = 30.0,
        transport: httpx2.AsyncBaseTransport | None = None,
        provider_options: dict[str, Any] | None = None,
        provider: str | None = None,
        price_as: str | None = None,
        price_known: bool = True,
    ) -> None:
        if price_as is not None and ":" not in price_as:
            raise ProviderError(
                "invalid_request",
                f"price_as takes PROVIDER:MODEL (openai:gpt-4.1-mini), not {price_as!r}",
                retryable=False,
            )
        self.price_as, self.price_known = price_as, price_known
        self.model = model
        self.provider = provider or self.protocol
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.read_timeout = read_timeout
        self.response_timeout = response_timeout
        self.max_attempts = max(1, max_attempts)
        self.max_retry_wait = max_retry_wait
        self.transport = transport
        self.provider_options = dict(provider_options or {})
        unknown = set(self.provider_options) - self.known_options
        if unknown:
            raise ProviderError(
                "invalid_request",
                f"unknown provider option(s) {sorted(unknown)} for {self.protocol}; known: "
                f"{sorted(self.known_options)}",
                retryable=False,
            )
        # Keys read from files often end in a newline, which no header may carry.
        self._api_key = api_key.strip() if api_key else api_key
        add_secret(self._api_key)  # the one redactor knows this key whatever its variable is called
        add_url(self.base_url)
        self._client: httpx2.AsyncClient | None = None

    # -- translation: what a concrete driver implements ---------------------------------

    @abstractmethod
    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        """(path relative to `base_url`, JSON body) for a streaming request."""

    @abstractmethod
    def headers(self) -> dict[str, str]:
        """Request headers, authentication included."""

    @abstractmethod
    def decoder(self) -> StreamDecoder:
        """A new `StreamDecoder` for one reply (one try of a request)."""

    def frames(self, response: httpx2.Response) -> AsyncIterator[Any]:
        """The body of a 2xx reply cut into the frames `decoder()` reads (`decode.body_frames`,
        by `framing`); a driver with a framing of its own overrides this."""
        return body_frames(response, self.framing)

    async def _reply(
        self, response: httpx2.Response, decoder: StreamDecoder
    ) -> tuple[AsyncIterator[Any] | None, list[DeltaMessage]]:
        """(the frames of a 2xx reply (`frames`), deltas already read). A reply labelled as
        this driver's stream (`stream_types`) is read as it is; another is looked at (`_read_other`)."""
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not self.stream_types or content_type in self.stream_types:
            return self.frames(response), []
        return await self._read_other(response, content_type, decoder)

    async def _read_other(
        self, response: httpx2.Response, content_type: str, decoder: StreamDecoder
    ) -> tuple[AsyncIterator[Any] | None, list[DeltaMessage]]:
        """A reply not labelled as this driver's stream, as `_reply` gives it: one JSON object is
        read whole (`StreamDecoder.whole`: no frames, its deltas), a stream labelled otherwise is
        read as the stream, anything else is ``invalid_response`` naming its content type and
        first 200 bytes (redacted)."""
        chunks = response.aiter_bytes()
        head = b""
        async for chunk in chunks:
            head += chunk
            if head.strip():
                break
        start = head.lstrip()
        if start[:1] == b"{":
            body = head + b"".join([c async for c in chunks])
            try:
                data = json.loads(body)
            except ValueError:
                data = None  # several objects (NDJSON, a JSON array stream): parsed as the stream
            if isinstance(data, dict):
                deltas = decoder.whole(data)
                if deltas is None:
                    raise ProviderError(
                        "invalid_response",
                        f"{self.provider} sent one JSON reply where a stream was expected: "
                        f"{redact_head(json.dumps(data))!r}",
                        retryable=False,
                    )
                return None, list(deltas)
            stream: httpx2.AsyncByteStream = _Replayed(body)
        elif not start or start[:1] in (b"[", b":") or start.startswith((b"data:", b"event:", b"id:", b"retry:")):
            stream = _Replayed(head, chunks)
        else:
            shown = redact_head(head[:1400].decode("utf-8", "replace"))
            raise ProviderError(
                "invalid_response",
                f"{self.provider} replied with content type {content_type or 'none'!r}, "
                f"neither its stream nor JSON: {shown!r}",
                retryable=False,
            )
        headers = [
            (k, v)
            for k, v in response.headers.items()
            if k.lower() not in ("content-type", "content-encoding", "content-length")
        ]
        replay = httpx2.Response(
            response.status_code,
            headers=[*headers, ("content-type", self.stream_types[0])],
            stream=stream,
            request=response.request,
        )
        return self.frames(replay), []

    def bearer_headers(self, accept: str) -> dict[str, str]:
        """``Accept`` plus ``Authorization: Bearer KEY`` when there is a key (the common case)."""
        return {"Accept": accept, "Authorization": f"Bearer {self._api_key}"} if self._api_key else {"Accept": accept}

    def stream_json(self, line: str) -> Any:
        """One stream line (an SSE ``data`` field, an NDJSON line) parsed as JSON.

        Raises `ProviderError` ``invalid_response`` quoting the line's first 200 characters."""
        return stream_json(self.provider, line)

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        """(code, message, error type or None) from an error body (parsed JSON, or text)."""
        return None, data if isinstance(data, str) and data else None, None

    # -- the template ------------------------------------------------------------------

    @property
    def id(self) -> str:
        """``provider:model``."""
        return f"{self.provider}:{self.model}"

    def _client_for(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(
                transport=self.transport,
                timeout=httpx2.Timeout(self.read_timeout, connect=min(self.read_timeout, 10.0)),
                trust_env=False,
                verify=_tls_context(),
            )
            _OPEN.add(self)
        return self._client

    @property
    def supports_tools(self) -> bool:
        return self.capabilities_for(self.model).tools

    def default_output_strategy(self) -> str:
        """How this driver asks for structured output unless told: ``native`` when the
        model has a JSON-schema mode, else ``tool`` when it takes tools, else ``rule``."""
        caps = self.capabilities_for(self.model)
        return "native" if caps.structured_output_native else "tool" if caps.tools else "rule"

    def output_strategy(self, prompt_stack: PromptStack) -> str | None:
        """The structured-output strategy of this request (None without an output schema).

        Raises:
            ProviderError: ``invalid_request`` for a strategy other than native, tool, rule.
        """
        if prompt_stack.output_schema is None:
            return None
        strategy = prompt_stack.output_strategy or self.default_output_strategy()
        if strategy not in STRATEGIES:
            raise ProviderError(
                "invalid_request",
                f"output strategy {strategy!r} is not one of {', '.join(STRATEGIES)}",
                retryable=False,
            )
        return strategy

    def price(self, usage: Usage, model: str | None = None) -> Cost | None:
        """The price of one turn's `usage` (genai-prices), or None when unknown: always for a
        host other than the provider's own, unless `price_as` names the price that applies."""
        if self.price_as is not None:
            provider, _, priced_model = self.price_as.partition(":")
            return pricing.price(provider, priced_model, usage)
        if not self.price_known:
            return None
        return pricing.price(
            self.provider, model or self.model, usage, price_provider=getattr(self, "price_provider", None)
        )

    def capabilities_for(self, model: str) -> Capabilities:
        """The capabilities for `model` (default: the protocol's)."""
        return self.capabilities

    @property
    def context_window(self) -> int:
        """The input tokens a request to this model may take: the known model's window
        (`model_rules.CONTEXT_WINDOWS`), else `model_rules.DEFAULT_WINDOW` (128,000). The
        memory layer fits a conversation's history to it; ``--context-window`` overrides it."""
        return known_context_window(self.model) or DEFAULT_WINDOW

    def check_capabilities(self, prompt_stack: PromptStack) -> None:
        """Fail before sending anything when the request needs what this driver or model lacks.

        Raises:
            ProviderError: type ``unsupported_capability``, naming provider, model and capability.
        """
        caps = self.capabilities_for(self.model)
        needed = []
        if prompt_stack.tools and not caps.tools:
            needed.append("tools")
        if not caps.vision and any(isinstance(b, ImageBlock) for m in prompt_stack.messages for b in m.content):
            needed.append("vision")
        if not caps.documents and any(
            isinstance(b, DocumentBlock) and b.is_pdf for m in prompt_stack.messages for b in m.content
        ):
            needed.append("pdf")
        strategy = self.output_strategy(prompt_stack)
        if (strategy == "native" and not caps.structured_output_native) or (strategy == "tool" and not caps.tools):
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} does not support structured output with the {strategy} strategy; "
                f"use output_strategy={'tool' if caps.tools else 'rule'!r} or another "
                "model",  # tool fails only without tools
                code="structured_output",
                retryable=False,
            )
        self.check_settings(prompt_stack)
        for capability in needed:
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} does not support {capability}; "
                f"remove it from the request or choose a model that has it",
                code=capability,
                retryable=False,
            )

    # -- settings (ModelSettings): checks shared by every driver's translation -----------

    def unsupported(self, setting: str, why: str = "") -> ProviderError:
        """The ``unsupported_capability`` error for `setting` on this provider and model."""
        return unsupported_setting(self.provider, self.model, setting, why)

    def check_settings(self, prompt_stack: PromptStack) -> None:
        """Checks every protocol shares, before the driver translates the settings.

        Raises:
            ProviderError: ``unsupported_capability`` for reasoning on a model without it;
                ``invalid_request`` for a `tool_choice` that needs tools the request lacks,
                names a tool it does not offer, or contradicts the ``tool`` output strategy.
        """
        settings = prompt_stack.settings
        if settings.reasoning not in (None, 0) and not self.capabilities_for(self.model).reasoning:
            raise self.unsupported("reasoning", "it is not a reasoning model")
        choice = settings.tool_choice
        if choice is None:
            return
        names = {t.name for t in prompt_stack.tools}
        if choice in ("required",) or settings.tool_name:
            if not names:
                raise ProviderError(
                    "invalid_request",
                    f"tool_choice={choice!r} needs tools, and this request offers none "
                    "(--tools NAME, or tools= in Python)",
                    retryable=False,
                )
            if settings.tool_name and settings.tool_name not in names:
                raise ProviderError(
                    "invalid_request",
                    f"tool_choice={choice!r} is not one of the request's tools: {', '.join(sorted(names))}",
                    retryable=False,
                )
        if self.output_strategy(prompt_stack) == "tool":
            raise ProviderError(
                "invalid_request",
                f"tool_choice={choice!r} contradicts the tool output strategy, which forces "
                "a call to its output tool; drop one of them",
                retryable=False,
            )

    def put_settings(
        self, target: dict[str, Any], fields: dict[str, Any], options: dict[str, Any] | None = None
    ) -> None:
        """Put translated settings into `target` (a body or a nested object). A field that
        `options` (default: `provider_options`) also gives with another value is a conflict.

        Raises:
            ProviderError: ``invalid_request`` naming the field set both ways.
        """
        options = self.provider_options if options is None else options
        for key, value in fields.items():
            if key in options and options[key] != value:
                raise ProviderError(
                    "invalid_request",
                    f"{key} is set both by a setting ({value!r}) and by provider_options ({options[key]!r}); keep one",
                    retryable=False,
                )
            target[key] = value

    # -- model lists ------------------------------------------------------------------

    def parse_models(self, data: dict[str, Any]) -> tuple[list[ModelListing], dict[str, Any] | None]:
        """(models on one page of the list, the query for the next page or None); OpenAI's shape."""
        return parse_openai(data)

    async def list_models(self, *, max_pages: int = 20) -> list[ModelListing]:
        """The models this provider offers (`models_path`, every page), with context window and
        price from genai-prices where known (prices only for the provider's own host).

        Raises:
            ProviderError: ``not_found`` when the server has no model list (404/405), else as
                for any request (``authentication``, ``connection``...), or ``invalid_response``.
        """
        client, url = self._client_for(), f"{self.base_url}{self.models_path}"
        params, rows = dict(self.models_params), []
        for _ in range(max_pages):
            try:
                response = await client.get(
                    url, params=params, headers={**self.headers(), "Accept": "application/json"}
                )
            except httpx2.TransportError as exc:
                raise self._transport_error(exc, url) from None
            if response.status_code in (404, 405):
                raise ProviderError(
                    "not_found",
                    f"{self.provider} at {redact(self.base_url)} has no model list "
                    f"(GET {self.models_path} answered HTTP {response.status_code}); name the model yourself",
                    status=response.status_code,
                    retryable=False,
                )
            if response.status_code >= 400:
                raise self.error_from_response(response.status_code, response.headers, response.content)
            try:
                data = response.json()
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise ProviderError(
                    "invalid_response",
                    f"{self.provider}'s model list at {redact(url)} is not a JSON object",
                    retryable=False,
                )
            page, following = self.parse_models(data)
            rows += page
            if not following:
                break
            params = {**self.models_params, **following}
        provider = getattr(self, "price_provider", None) or pricing.PRICE_PROVIDERS.get(self.provider)
        return with_known_facts(rows, provider if self.price_known else None)

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
        if status in (401, 403) and not self._api_key:
            message += (f" (no API key was sent to {redact(self.base_url)}; name the variable holding one: "
                        "--api-key-env VAR, or api_key_env= in Python)")
        return ProviderError(
            etype,  # type: ignore[arg-type]
            f"{self.provider} returned HTTP {status}: {message}",
            code=code,
            raw=data,
            status=status,
            retry_after=parse_retry_after(headers),
        )

    def _transport_error(self, exc: Exception, url: str) -> ProviderError:
        url = redact(url)  # a key may sit in the URL (user-info, a query parameter)
        if isinstance(exc, httpx2.SSEError):  # an event over the size limit: the same reply again would be too
            return ProviderError(
                "invalid_response",
                f"{self.provider} sent a stream ipyagent cannot read: {exc} "
                "(not retried: the same request would get the same reply)",
                retryable=False,
            )
        if isinstance(exc, httpx2.TimeoutException):
            return ProviderError("timeout", f"{self.provider} did not answer within {self.read_timeout:g} s ({url})")
        if isinstance(exc, httpx2.ConnectError):
            return ProviderError(
                "connection", f"could not connect to {url}: {redact(str(exc)) or 'connection refused'}"
            )
        return ProviderError("connection", f"connection to {url} failed: {type(exc).__name__}: {redact(str(exc))}")

    def _unreadable(self, exc: Exception) -> ProviderError:
        detail = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[
            :300
        ]  # one line (pydantic's text spans lines)
        return ProviderError(
            "invalid_response", f"{self.provider} sent a reply ipyagent could not read ({detail})", retryable=False
        )

    def _as_provider_error(self, exc: Exception, url: str) -> ProviderError:
        """Any failure while sending or reading, as the `ProviderError` it means."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, TimeoutError):  # the response's own deadline (`_Deadlined`), not a network timeout
            return self._too_slow()
        if isinstance(exc, httpx2.TransportError):
            return self._transport_error(exc, url)
        return self._unreadable(exc)  # JSON of the wrong shape: a translation that cannot read it

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next try: the provider's ``Retry-After`` when it gave one, else
        exponential backoff with jitter (0.5 s doubling, at most 8 s); never over `max_retry_wait`."""
        exc = state.outcome.exception() if state.outcome else None
        asked = getattr(exc, "retry_after", None)
        if asked is not None:
            return min(asked, self.max_retry_wait)
        return min(wait_exponential_jitter(multiplier=0.5, max=8, jitter=0.5)(state), self.max_retry_wait)

    def _too_slow(self) -> ProviderError:
        return ProviderError(
            "timeout",
            f"{self.provider} did not finish its response within {self.response_timeout:g} s "
            "(response_timeout); the text so far is kept",
            retryable=False,
        )

    def _retryable(self, exc: BaseException) -> bool:
        """Retry a retryable `ProviderError`, unless the provider asks for a longer wait than
        `max_retry_wait`: that is reported at once rather than slept through (DESIGN.md)."""
        return (
            isinstance(exc, ProviderError)
            and exc.retryable
            and (exc.retry_after is None or exc.retry_after <= self.max_retry_wait)
        )

    async def _open(self, request: httpx2.Request) -> Opened:
        """One try: send `request` and read until the first delta (or the end of the stream).

        Everything up to here may be retried: nothing has been shown yet. A failed try
        closes its response and raises `ProviderError`.
        """
        gate = self.rate_gate
        if gate is not None:
            await gate.wait()
        deadline = asyncio.get_running_loop().time() + self.response_timeout
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client_for().send(request, stream=True)
        except (httpx2.TransportError, TimeoutError) as exc:
            raise self._as_provider_error(exc, str(request.url)) from None
        try:
            if response.status_code >= 400:
                async with asyncio.timeout_at(deadline):
                    body = await response.aread()
                error = self.error_from_response(response.status_code, response.headers, body)
                if gate is not None and error.type == "rate_limit":
                    gate.hold(error.retry_after)  # the whole lane waits, not only this request
                raise error
            response.stream = _Deadlined(response.stream, deadline)  # a trickling server trips it
            decoder = self.decoder()
            rest, head = await self._reply(response, decoder)
            if rest is not None:
                rest = await _read_head(rest, decoder, head)
            return Opened(response, rest, decoder, head)
        except BaseException as exc:
            await response.aclose()
            if isinstance(exc, Exception):
                raise self._as_provider_error(exc, str(request.url)) from None
            raise

    async def _send(self, request: httpx2.Request, turn: Turn) -> AsyncIterator[RetryScheduled]:
        """Step 1, send with retries: timeouts, connection errors, 429, 5xx and overloaded
        are tried again (`max_attempts` in all, `_wait` between), the rest raise at once.

        Yields a `RetryScheduled` before each wait, so a view can say why nothing has
        arrived yet; the opened response is then `turn.opened`. The first try is sent
        directly: tenacity's machinery is built only once a try has failed (most never do).

        Raises:
            ProviderError: the last try's error.
        """
        turn.attempts = 1
        try:
            turn.opened = await self._open(request)
        except ProviderError as exc:
            if self.max_attempts == 1 or not self._retryable(exc):
                raise
            async with aclosing(self._retry(request, turn, exc)) as notices:
                async for notice in notices:
                    yield notice
        assert turn.opened is not None
        turn.meta = turn.opened.decoder.meta  # the facts of the try that answered
        headers = turn.opened.response.headers
        turn.request_id = headers.get("x-request-id") or headers.get("request-id")  # OpenAI's / Anthropic's

    async def _retry(self, request: httpx2.Request, turn: Turn, failed: ProviderError) -> AsyncIterator[RetryScheduled]:
        """The tries after a first one that `failed` with a retryable error, through tenacity
        (which is handed that first failure as its own first attempt's)."""
        first: ProviderError | None = failed
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            sleep=_no_sleep,
            retry=retry_if_exception(self._retryable),
            before=turn.attempt,
            before_sleep=turn.waiting,
            reraise=True,
        )
        async for attempt in retrying:
            if turn.retry_error is not None:
                # tenacity chose the wait (before_sleep); it is slept here, once announced
                wait = turn.retry_waits[-1]
                yield RetryScheduled(turn.attempts, self.max_attempts, wait, turn.retry_error)
                await retry_sleep(wait)
            with attempt:
                if first is not None:
                    error, first = first, None
                    raise error
                turn.opened = await self._open(request)

    @staticmethod
    async def _relay(opened: Opened, turn: Turn) -> AsyncIterator[DeltaMessage]:
        """Step 2, relay: every delta as it arrives (the head `_open` read first), kept for the
        final message; the decoder notes the rest (usage, stop reason, ids) in `turn.meta`.
        A frame costs one call of the decoder's `feed`: no generator between it and `stream`.

        Raises:
            Exception: an error inside the stream (`ProviderError`), a broken connection, an
                unreadable frame, the response past its deadline (``TimeoutError``); `stream`
                says what each means (`_as_provider_error`).
        """
        agg, head = turn.agg, opened.head
        add = agg.add
        if head:
            turn.ttft_s = time.monotonic() - turn.started
            for delta in head:
                check_text(delta)
                add(delta)
                yield delta
        rest, decoder = opened.frames, opened.decoder
        if rest is None:
            return
        feed, texts, others = decoder.feed, agg.texts, agg.others
        async for frame in rest:
            for delta in feed(frame):
                if (
                    delta.__class__ is TextDelta
                ):  # Aggregator.add and check_text, inline: two Python calls less per delta
                    text = delta.text  # type: ignore[attr-defined]
                    if text.__class__ is not str:
                        check_text(delta)
                    texts[delta.index].append(text)
                else:
                    check_text(delta)
                    others.append(delta)
                yield delta
            if decoder.done:
                break
        for delta in decoder.finish():
            check_text(delta)
            add(delta)
            yield delta

    async def _complete(self, turn: Turn) -> ModelCompleted:
        """Step 3, complete: the final message from the deltas, its usage, stop reason and price.

        A tool call the model wrote badly (arguments that are not a JSON object, no name) is
        kept with its error (`ActionCallBlock.error`): the agent loop gives the model that error
        as the call's result. Cut off by max_tokens, such a call is left out instead, described
        in ``metadata["partial_tool_calls"]``.

        Raises:
            ProviderError: ``invalid_response`` when the stream ended without a stop reason
                (cut short) or the deltas do not form a message.
        """
        meta = turn.meta
        if meta.stop_kind is None and meta.stop_raw is None:
            # Every protocol ends a reply with a stop signal; without one the stream was cut
            # short (a closed connection, a proxy's error page): keep the text, do not pass it off as done.
            raise ProviderError(
                "invalid_response",
                f"the {self.provider} stream ended before the model finished "
                f"(no stop reason arrived); the text so far is kept{self._not_a_stream(turn)}",
                retryable=False,
            )
        cut: list[dict[str, Any]] | None = [] if meta.stop_kind is StopKind.max_tokens else None
        try:
            message = turn.agg.message(dropped=cut)
        except Exception as exc:
            raise ProviderError("invalid_response", str(exc), retryable=False) from None
        if cut:  # cut off by max_tokens inside a tool call: reported as partial, not as the model's mistake
            turn.partial_tool_calls = cut
        model = turn.model_or(self.model)
        usage = meta.usage or Usage()
        cost = await self._bill(turn, usage, model)
        metadata = turn.metadata(self.provider, model, cost=cost.to_dict() if cost is not None else None)
        message.usage, message.metadata = usage, dict(metadata)  # the message's own copy: no dict shared with the event
        return ModelCompleted(
            message=message, usage=usage, stop_reason=self._stop_reason(meta, message), metadata=metadata
        )

    async def _bill(self, turn: Turn, usage: Usage, model: str) -> Cost | None:
        """The price of a turn's `usage`, recorded in the session's ledger (budgets) unless replayed;
        None (unknown) when the provider's usage could not be read (`StreamMeta.usage_error`)."""
        if turn.meta.usage_error is not None:
            cost = None
        elif pricing.loaded():  # ~0.1 ms at most, usually a lookup: no thread hop
            cost = self.price(usage, model)
        else:  # off the loop: the first price loads genai-prices' tables (~0.15 s), which must not stall other streams
            cost = await asyncio.get_running_loop().run_in_executor(_pricing_executor(), self.price, usage, model)
        if not turn.replayed:
            pricing.LEDGER.record(self.provider, model, cost, usage)
        return cost

    async def stream(self, prompt_stack: PromptStack) -> AsyncIterator[Event]:
        """Stream one model turn as events: send (with retries) -> relay -> complete.

        Yields `ModelStarted`, then `TextDelta` / `ReasoningDelta` /
        `ToolCallDelta` as they arrive, then exactly one `ModelCompleted` or
        `ModelFailed`. A capability or option problem raises `ProviderError`
        before anything is sent. The response is closed in one place, however
        the turn ends (cancelling the consumer included).
        """
        self.check_capabilities(prompt_stack)
        if self.output_strategy(prompt_stack) == "rule":
            prompt_stack = with_rule_instruction(prompt_stack)
        path, body = self.build_request(prompt_stack)
        request = self._client_for().build_request(
            "POST", _parsed_url(f"{self.base_url}{path}"), json=body, headers=self.headers()
        )
        turn = Turn(time.monotonic(), bool(getattr(self.transport, "replays", False)), prompt_stack.settings.as_dict())
        if prompt_stack.system_blocks or prompt_stack.system_dropped:  # what %agent inspect shows
            turn.system_blocks = [b.summary(True) for b in prompt_stack.system_blocks] + [
                b.summary(False) for b in prompt_stack.system_dropped
            ]
        yield ModelStarted(
            provider=self.provider, model=self.model, request={"url": redact(str(request.url)), "body": body}
        )  # no headers: no key
        try:
            async with aclosing(self._send(request, turn)) as notices:
                async for notice in notices:
                    yield notice
            opened = turn.opened
            assert opened is not None
            async with aclosing(self._relay(opened, turn)) as deltas:
                async for delta in deltas:
                    yield delta
            if isinstance(opened.response.stream, _Deadlined):  # the connection back to the pool
                await opened.response.stream.drain()
            completed = await self._complete(turn)
        except (
            Exception
        ) as exc:  # a reply of the wrong shape may trip anything (a number where text goes): a failed turn
            yield await self._failed(self._as_provider_error(exc, str(request.url)), turn)
        else:
            yield completed
        finally:
            opened, turn.opened = turn.opened, None  # nothing of the response outlives the turn
            if opened is not None:
                await opened.response.aclose()

    @staticmethod
    def _not_a_stream(turn: Turn) -> str:
        """For a reply labelled as a stream that held no event at all (a proxy's HTML page sent as
        ``text/event-stream``): what it began with, as one line; else nothing."""
        body = turn.opened.response.stream  # type: ignore[union-attr]  # the turn completes on a response `_open` opened,
        head = body.head.lstrip()  # type: ignore[attr-defined]  # its body a `_Deadlined`
        if (
            turn.agg
            or not head
            or head[:1] in (b"{", b"[", b":")
            or head.startswith((b"data:", b"event:", b"id:", b"retry:"))
        ):
            return ""
        return f"; it sent no event, only: {error_excerpt(head.decode('utf-8', 'replace'))!r}"

    async def _failed(self, error: ProviderError, turn: Turn) -> ModelFailed:
        """The turn failed: `error` (redacted as every `ProviderError` is; saying why a retryable one was not
        tried again: a longer wait asked than `max_retry_wait`, or the attempts ran out) and the partial
        message of what arrived (`Aggregator.partial`, marked ``partial`` and ``failed``).
        Usage the provider sent before failing is the partial's `usage`, priced (``cost`` in
        the metadata) and recorded in the ledger like a completed turn's."""
        if error.retryable and error.retry_after is not None and error.retry_after > self.max_retry_wait:
            error.message = (
                f"{error.message} (asked to wait {as_duration(error.retry_after)}, more than max_retry_wait="
                f"{self.max_retry_wait:g} s: not retried; try again later)"
            )
        elif turn.attempts > 1 and error.retryable:
            error.message = f"{error.message} (gave up after {turn.attempts} attempts)"
        try:
            kept = turn.agg.partial()
        except Exception:  # deltas that cannot form a message: the error says what broke
            kept = None
        partial = kept or Message(role="assistant")
        model, extra = turn.model_or(self.model), {}
        if turn.meta.usage is not None:  # billed before it failed: the cost and budgets count it
            partial.usage = turn.meta.usage
            cost = await self._bill(turn, partial.usage, model)
            extra["cost"] = cost.to_dict() if cost is not None else None
        metadata = turn.metadata(self.provider, model, **extra)
        partial.metadata = {**metadata, "partial": True, **partial.metadata, "failed": True, "error": error.to_dict()}
        return ModelFailed(error=error, partial=partial, metadata=metadata)

    @staticmethod
    def _stop_reason(meta: StreamMeta, message: Message) -> StopReason:
        if meta.stop_kind is not None:
            kind = meta.stop_kind
        else:
            kind = StopKind.tool_use if message.tool_calls else StopKind.end_turn
        raw = meta.stop_raw
        return StopReason(kind=kind, raw=raw if raw is None or isinstance(raw, str) else str(raw))  # a server's number

    async def run(self, prompt_stack: PromptStack) -> ModelCompleted:
        """Consume `stream()` and return its `ModelCompleted`.

        Raises:
            ProviderError: the request failed (after retries).
        """
        async for event in self.stream(prompt_stack):
            if isinstance(event, ModelCompleted):
                return event
            if isinstance(event, ModelFailed):
                raise event.error
        # stream() always ends with one of the two: unreachable, so neither tested nor mutated
        raise ProviderError("invalid_response", "the stream ended without a result")  # pragma: no cover, no mutate

    async def close(self) -> None:
        """Release the HTTP client. Safe to call more than once."""
        client, self._client = self._client, None
        _OPEN.discard(self)
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> "BasePromptDriver":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} at {redact(self.base_url)}>"
