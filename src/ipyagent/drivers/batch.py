"""Provider batch APIs: many requests sent at once, answered within a day, at about half price.

`batch_apis.batch_api(driver)` gives the batch API of a driver's provider, or None (Ollama, a local
OpenAI-compatible server: those run live). Each request of a batch is the body a live turn
sends (the driver's `build_request`) in its non-streaming form, and each answer is read by the
driver's own decoder (`StreamDecoder.whole`): no second request builder, no second reader.

* OpenAI, "Batch API" guide and reference: the requests as a JSONL file uploaded to
  ``POST /files`` (``purpose=batch``), ``POST /batches`` (``input_file_id``, ``endpoint``,
  ``completion_window: 24h``), ``GET /batches/{id}`` (``status``, ``request_counts``), the answers
  in ``GET /files/{output_file_id}/content`` and the failures in ``error_file_id``'s; at most
  50,000 requests and 200 MB a file; ``POST /batches/{id}/cancel``.
* Anthropic, "Message Batches": ``POST /messages/batches`` (``requests``: ``custom_id`` and
  ``params``), ``GET /messages/batches/{id}`` (``processing_status``, ``request_counts``), the
  results JSONL at ``results_url`` (``result.type``: succeeded, errored, canceled, expired); at
  most 100,000 requests and 256 MB a batch; ``POST /messages/batches/{id}/cancel``.
* Gemini, "Batch Mode": ``POST /models/{model}:batchGenerateContent`` with inline requests
  (``batch.input_config.requests.requests[]``: ``request`` and ``metadata.key``), a long-running
  operation polled at ``GET /batches/{id}`` (``metadata.state``, ``metadata.batchStats``), the
  answers inline in ``response.inlinedResponses.inlinedResponses[]``; at most 20 MB of inline
  requests a batch; ``POST /batches/{id}:cancel``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx2

from ..core import Message, ProviderError, PromptStack, Usage, redact
from . import Cost  # the package face: where pricing lives may change
from . import turn  # its `retry_sleep`, as tests record it
from .aggregate import Aggregator
from .structured import with_rule_instruction


def origin(url: str) -> tuple[str, str, int | None] | None:
    """`url`'s origin: (scheme, host, port, the scheme's default port when none is written), as the
    HTTP client reads it; None when it cannot read it (never the same origin as another)."""
    try:
        parsed = httpx2.URL(url)
    except Exception:  # noqa: BLE001 - an address the client cannot read is no origin
        return None
    scheme = parsed.scheme.lower()
    return (scheme, parsed.host.lower(), parsed.port or _DEFAULT_PORTS.get(scheme)) if parsed.host else None


_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(slots=True)
class BatchState:
    """A batch as its provider last described it.

    Attributes:
        id: the provider's batch id.
        status: the provider's word for it (``in_progress``, ``ended``, ``BATCH_STATE_RUNNING``...).
        ended: no request of it will change any more (completed, failed, expired, cancelled).
        total, succeeded, failed: requests in it, answered, failed (errored, expired, cancelled).
        handle: what `BatchAPI.results` reads the answers from (file ids, a URL, the inline answers).
    """

    id: str
    status: str
    ended: bool
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    handle: Any = None


@dataclass(slots=True)
class BatchAnswer:
    """One request's outcome in an ended batch: `body` the provider's response object (a
    ``chat.completion``, a ``message``, a ``GenerateContentResponse``), or `error` with its type.

    `error` is set through the one redactor (`core.redact`) when the answer is built, as a live
    `ProviderError`'s message is: the provider's error text may echo the key back."""

    custom_id: str
    body: dict[str, Any] | None = None
    error: str | None = None
    error_type: str = "provider_error"

    def __post_init__(self) -> None:
        if self.error is not None:
            self.error = redact(self.error)


@dataclass(slots=True)
class Decoded:
    """One answer read by the driver: its assistant message, usage, stop reason and batch price."""

    message: Message
    usage: Usage
    stop: str | None
    model: str
    cost: Cost | None
    extra: dict[str, Any] = field(default_factory=dict)


class BatchAPI:
    """A provider's batch API, over the driver's own HTTP client, key and base URL."""

    #: The most requests, and bytes of them, one batch may hold (the provider's documented limits).
    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 200 * 1024 * 1024
    #: The provider's name for the API, in notes and errors.
    name: ClassVar[str] = "batch API"
    #: The provider ids whose own host serves it; another host is asked `probe` (`available`).
    providers: ClassVar[frozenset[str]] = frozenset()
    probe: ClassVar[str] = "/batches"
    #: Seconds before a ``GET`` that failed with a retryable HTTP error is sent again (`call`).
    RETRY_WAIT_S: ClassVar[float] = 5.0

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    # -- requests ------------------------------------------------------------------------

    def body(self, stack: PromptStack) -> dict[str, Any]:
        """The body a live turn of `stack` sends (`build_request`), in its non-streaming form.

        Raises:
            ProviderError: the request cannot be sent (a capability the model lacks, a bad option).
        """
        driver = self.driver
        driver.check_capabilities(stack)
        if driver.output_strategy(stack) == "rule":
            stack = with_rule_instruction(stack)
        _, body = driver.build_request(stack)
        body = dict(body)
        body.pop("stream", None)
        body.pop("stream_options", None)
        return body

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request as the batch carries it."""
        raise NotImplementedError

    def chunks(self, items: list[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        """`items` ((custom id, body)) as batch lines, cut into batches within `max_requests` and
        `max_bytes` (a batch's JSON, with a margin for its envelope)."""
        chunks: list[list[dict[str, Any]]] = [[]]
        size = 0
        for custom_id, body in items:
            line = self.line(custom_id, body)
            length = len(json.dumps(line, separators=(",", ":"))) + 1
            if chunks[-1] and (len(chunks[-1]) >= self.max_requests or size + length > self.max_bytes - 4096):
                chunks.append([])
                size = 0
            chunks[-1].append(line)
            size += length
        return [c for c in chunks if c]

    # -- the wire ------------------------------------------------------------------------

    async def available(self) -> bool:
        """Whether the driver's host serves this batch API: the provider's own host does; another
        (a local server speaking the protocol) when a ``GET`` of `probe` answers 2xx."""
        if self.driver.provider in self.providers and self.driver.price_known:
            return True
        try:
            await self.call("GET", self.probe)
        except ProviderError:
            return False
        return True

    def headers(self) -> dict[str, str]:
        return {**self.driver.headers(), "Accept": "application/json"}

    async def call(self, method: str, path: str, **options: Any) -> Any:
        """One request to the batch API at `path` (relative to the driver's base URL, or absolute):
        its JSON reply (or its text with ``text=True``). The key goes only to the base URL's `origin`.
        A ``GET`` (a look at a batch, its answers) answered with a retryable HTTP error (a 5xx, a 429)
        is sent once more, after its ``Retry-After`` or `RETRY_WAIT_S` (a batch runs for hours: one
        gateway error must not end its collection); a wait over the driver's `max_retry_wait` is not.

        Raises:
            ProviderError: a transport error or a reply other than 2xx (the driver's error mapping);
                `elsewhere` for an absolute `path` at another origin (nothing sent).
        """
        try:
            return await self._send(method, path, dict(options))
        except ProviderError as exc:
            wait = exc.retry_after if exc.retry_after is not None else self.RETRY_WAIT_S
            if method != "GET" or not exc.retryable or exc.status is None or wait > self.driver.max_retry_wait:
                raise
        await turn.retry_sleep(wait)
        return await self._send(method, path, options)

    async def _send(self, method: str, path: str, options: dict[str, Any]) -> Any:
        """`call`'s one try."""
        text = options.pop("text", False)
        url = path if "://" in path else f"{self.driver.base_url}{path}"
        here = origin(url)
        if here is None or here != origin(self.driver.base_url):
            raise self.elsewhere(url)
        client = self.driver._client_for()
        try:
            response = await client.request(method, url, headers={**self.headers(), **options.pop("headers", {})},
                                            **options)
        except Exception as exc:  # noqa: BLE001 - mapped as a live request's would be
            raise self.driver._as_provider_error(exc, url) from None
        if response.status_code >= 300:
            raise self.driver.error_from_response(response.status_code, response.headers, response.content)
        if text:
            return response.text
        try:
            return response.json()
        except ValueError:
            raise ProviderError("invalid_response", f"{self.name} sent a reply that is not JSON: "
                                f"{response.text[:200]!r}", retryable=False) from None

    def elsewhere(self, url: str) -> ProviderError:
        """``invalid_response`` for an address the provider handed over (Anthropic's ``results_url``)
        at another origin than the base URL's: not fetched, as a redirect there is not followed (the
        driver's `redirected`), so the API key stays with the base URL; the batch stays at the provider."""
        base = redact(self.driver.base_url)
        return ProviderError(
            "invalid_response",
            f"{self.name} named {redact(url)}, another address than {base}: not fetched, so the API key "
            f"stays with {base} (the batch is kept at the provider; if that address is the API's, make it "
            "the base URL: --base-url)", retryable=False)

    @contextmanager
    def reading(self, what: str) -> Iterator[None]:
        """Reading a reply about `what` (``batch ID``): a reply of another shape than the API's
        (a list for an object, a string for a number...) raises ``invalid_response`` saying so.

        Raises:
            ProviderError: the reply could not be read.
        """
        try:
            yield
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            detail = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[:200]
            raise ProviderError("invalid_response", f"{self.name} described {what} in a shape ipyagent cannot "
                                f"read ({detail})", retryable=False) from None

    async def submit(self, lines: list[dict[str, Any]]) -> str:
        """Create one batch of `lines` (one of `chunks`); its id.

        Raises:
            ProviderError: `call`'s errors; ``invalid_response`` for a reply of another shape (`reading`).
        """
        raise NotImplementedError

    async def poll(self, batch_id: str) -> BatchState:
        """The batch as it is now (a request count that is not a whole number reads as 0).

        Raises:
            ProviderError: `call`'s errors; ``invalid_response`` for a reply of another shape (`reading`).
        """
        raise NotImplementedError

    async def answers(self, state: BatchState, ids: list[str]) -> list[BatchAnswer]:
        """Every request's outcome of an ended batch, the first answer to each custom id; `ids`: its
        custom ids in the order sent. An answer that cannot be read (a line not JSON, a body not an
        object) is its run's error, ``batch answer N could not be read: ...``: the others are kept.

        Raises:
            ProviderError: `call`'s errors (fetching the answers).
        """
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to cancel the batch (requests already answered stay answered)."""
        raise NotImplementedError

    # -- answers -------------------------------------------------------------------------

    def decode(self, body: dict[str, Any]) -> Decoded:
        """One answer read by the driver's decoder (`StreamDecoder.whole`), priced at the batch price.

        Raises:
            ProviderError: an error object in place of the answer, or an answer of another shape.
        """
        decoder = self.driver.decoder()
        try:
            deltas = decoder.whole(body)
            if deltas is None:
                raise ProviderError("invalid_response", f"{self.driver.protocol} has no reading of a whole reply")
            reply = Aggregator()
            for delta in deltas:
                reply.add(delta)
            message = reply.message()
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - a reply of another shape: the live turn's error
            raise self.driver._unreadable(exc) from None
        meta = decoder.meta
        usage = meta.usage or Usage()
        model = meta.model or self.driver.model
        cost = self.driver.price(usage, model, batch=True)
        message.usage = usage
        return Decoded(message, usage, meta.stop_raw, model, cost, dict(meta.extra or {}))

