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

The base owns the rest, each part in its own module: sending over httpx2 with a deadline
per response (`http`), cutting the body into frames (`decode`), the turn's steps with their
retries (tenacity), the aggregation of deltas into the final `Message` and the `model_*`
events (`turn`, `aggregate`), errors as `ProviderError`s with secrets redacted (`errors`,
`core.redact`), capability and settings checks (`capabilities`), model lists (`models`),
and closing. This module is the template that joins them: `stream()`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, ClassVar

import httpx2

from ..core import (
    Event,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PromptStack,
    ProviderError,
    RetryScheduled,
    add_secret,
    add_url,
    redact,
)
from .aggregate import Aggregator, BlockIndex, StreamMeta
from .capabilities import Capabilities, CapabilityChecks
from .decode import StreamDecoder, body_frames, stream_json
from .errors import STATUS_TYPES, ErrorMapping, as_duration, error_excerpt
from .http import (_OPEN, RESPONSE_TIMEOUT, _Deadlined, _parsed_url, aclose, close_all_drivers, new_client,
                   parse_retry_after, post_request)
from .catalog.lifecycle import example_id
from .catalog.models import ModelLists
from .structured import with_rule_instruction
from .turn import Sent, TurnStart, TurnSteps
from .usage import check_counts, read_usage, wire_usage

__all__ = [  # what drivers (ours and third-party ones) import from here
    "BasePromptDriver", "BlockIndex", "Capabilities", "STATUS_TYPES", "StreamDecoder", "StreamMeta", "as_duration",
    "check_counts", "close_all_drivers", "error_excerpt", "parse_retry_after", "read_usage", "wire_usage",
]


class BasePromptDriver(TurnSteps, CapabilityChecks, ErrorMapping, ModelLists, ABC):
    """Template for a prompt driver speaking one wire protocol.

    Args:
        model: the provider's model name (``gpt-6-luna``).
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
    #: The provider-side tools (`core.BUILTIN_TOOLS`) this protocol can ask for (`core.BuiltinTool`).
    builtin_tools: ClassVar[frozenset[str]] = frozenset()
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
    #: The environment variable the API key was read from (`registry.create_driver`), named in a
    #: 401's next step; None: the key was given as api_key=, or none was sent.
    key_env: str | None = None

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
                f"price_as takes PROVIDER:MODEL ({example_id()}), not {price_as!r}",
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
        #: (client, the driver's headers, merged with the client's, its timeouts): `post_request`'s memo
        self._sent_headers: tuple[httpx2.AsyncClient, dict[str, str], httpx2.Headers, dict[str, Any]] | None = None

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

    def bearer_headers(self, accept: str) -> dict[str, str]:
        """``Accept`` plus ``Authorization: Bearer KEY`` when there is a key (the common case)."""
        return {"Accept": accept, "Authorization": f"Bearer {self._api_key}"} if self._api_key else {"Accept": accept}

    def stream_json(self, line: str) -> Any:
        """One stream line (an SSE ``data`` field, an NDJSON line) parsed as JSON.

        Raises `ProviderError` ``invalid_response`` quoting the line's first 200 characters."""
        return stream_json(self.provider, line)

    # -- the template ------------------------------------------------------------------

    @property
    def id(self) -> str:
        """``provider:model``."""
        return f"{self.provider}:{self.model}"

    def _client_for(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = new_client(self)
        return self._client

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
        request = post_request(self, _parsed_url(f"{self.base_url}{path}"), body)
        start = _turn_start(prompt_stack, bool(getattr(self.transport, "replays", False)))
        reply = Aggregator()  # the turn's one record of its deltas: every reader asks it (ModelStarted.reply)
        sent: Sent | None = None
        ttft_s: float | None = None
        shown = {"url": redact(str(request.url)), "body": body}  # no headers: no key
        yield ModelStarted(provider=self.provider, model=self.model, request=shown, reply=reply)
        try:
            async with aclosing(self._send(request)) as steps:
                async for step in steps:
                    if step.__class__ is RetryScheduled:
                        yield step  # type: ignore[misc]
                    else:
                        sent = step  # type: ignore[assignment]
            assert sent is not None
            if sent.error is not None:
                raise sent.error
            opened = sent.opened
            assert opened is not None
            if opened.head:
                ttft_s = time.monotonic() - start.started
            async with aclosing(self._relay(opened, reply)) as deltas:
                async for delta in deltas:
                    yield delta
            if isinstance(opened.response.stream, _Deadlined):  # the connection back to the pool
                await opened.response.stream.drain()
            completed = await self._complete(start, sent, reply, ttft_s)
        except Exception as exc:  # a reply of the wrong shape may trip anything (a number where text goes)
            answering = sent is not None and sent.opened is not None  # a stall mid-answer, not silence
            error = self._as_provider_error(exc, str(request.url), answering)
            yield await self._failed(error, start, sent, reply, ttft_s)
        else:
            yield completed
        finally:
            opened = sent.opened if sent is not None else None
            sent = None  # nothing of the response outlives the turn
            if opened is not None:
                await aclose(opened.reader)  # after the drain: closing the frames closes the response
                await opened.response.aclose()

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


def _turn_start(prompt_stack: PromptStack, replayed: bool) -> TurnStart:
    """What the turn of `prompt_stack` knows before sending: now, `replayed`, its settings and
    system blocks (the ones sent, then the ones dropped to fit: what ``%agent inspect`` shows)."""
    blocks = None
    if prompt_stack.system_blocks or prompt_stack.system_dropped:
        blocks = [b.summary(True) for b in prompt_stack.system_blocks] + [
            b.summary(False) for b in prompt_stack.system_dropped
        ]
    return TurnStart(time.monotonic(), replayed, prompt_stack.settings.as_dict(), blocks)
