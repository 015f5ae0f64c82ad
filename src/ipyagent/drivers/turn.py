"""One model turn inside `BasePromptDriver.stream` (DESIGN.md, "drivers": the base template).

A turn goes send (with retries) -> relay -> complete, the way httpx's client goes ``send`` ->
``_send_handling_auth`` -> ``_send_single_request``, and each step gives back what it produced:
`TurnSteps._send` yields its retry notices and then the `Sent` it ended with (the opened
response or the last try's error, the attempts and waits); `_relay` yields each delta as it
adds it to the turn's one `Aggregator`; `_complete` and `_failed` return the turn's last event.
What the turn knew before sending is a `TurnStart`. The events' metadata dict is made from
those values at the end (`turn_metadata`), a fresh dict for each reader.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2

from ..core import (
    DeltaMessage,
    Message,
    MessageError,
    ModelCompleted,
    ModelFailed,
    ProviderError,
    RetryScheduled,
    StopKind,
    StopReason,
    TextDelta,
    Usage,
    redact,
)
from .catalog import pricing
from .aggregate import Aggregator, StreamMeta
from .decode import NotAStream, StreamDecoder, check_text, looks_like_sse, not_its_stream, read_head, read_unlabelled
from .http import _Deadlined, _pricing_executor, aclose
from .catalog.pricing import Cost

if TYPE_CHECKING:
    from tenacity import RetryCallState


@dataclass(slots=True)
class Opened:
    """A response that answered 2xx (its body bounded by the response deadline): the frames
    of its body not read yet (None: read to its end), the decoder reading them, the
    deltas read up to the first (`head`), and the iterator of its frames (`reader`, None for
    a reply read whole), closed when the turn ends."""

    response: httpx2.Response
    frames: AsyncIterator[Any] | None
    decoder: StreamDecoder
    head: list[DeltaMessage]
    reader: AsyncIterator[Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What a turn knows before it is sent: when it started (`time.monotonic()` seconds),
    whether it is replayed from a cassette, its settings and system blocks (as the events'
    metadata shows them)."""

    started: float
    replayed: bool = False
    settings: dict[str, Any] | None = None
    system_blocks: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """What sending (with retries) ended with: the `opened` response, or the last try's `error`;
    the tries made, the waits between them (seconds) and the last failed try's text."""

    opened: Opened | None
    error: ProviderError | None = None
    attempts: int = 1
    retry_waits: tuple[float, ...] = ()
    last_error: str | None = None

    @property
    def meta(self) -> StreamMeta:
        """The facts the decoder of the try that answered noted (usage, stop reason, ids)."""
        return self.opened.decoder.meta if self.opened is not None else StreamMeta()

    @property
    def request_id(self) -> str | None:
        """The request id a header gave (OpenAI's ``x-request-id``, Anthropic's ``request-id``)."""
        if self.opened is None:
            return None
        headers = self.opened.response.headers
        return headers.get("x-request-id") or headers.get("request-id")


class _Tries:
    """tenacity's hooks for the tries after a first failed one: the attempt under way, the waits
    chosen and the failure each follows (local to one `TurnSteps._retry`)."""

    __slots__ = ("attempts", "retry_waits", "last_error", "retry_error")

    def __init__(self) -> None:
        self.attempts = 1
        self.retry_waits: list[float] = []
        self.last_error: str | None = None
        self.retry_error: ProviderError | None = None

    def attempt(self, state: RetryCallState) -> None:
        self.attempts = state.attempt_number

    def waiting(self, state: RetryCallState) -> None:
        self.retry_waits.append(round(state.upcoming_sleep, 3))
        exc = state.outcome.exception() if state.outcome else None
        self.last_error = str(exc)
        # kept without its traceback: its frames reach `stream`'s (Python 3.12+ keeps a frame's
        # caller), and so the next try's response, in a cycle only the garbage collector frees
        self.retry_error = exc.with_traceback(None) if exc is not None else None  # type: ignore[assignment]

    def sent(self, opened: Opened | None, error: ProviderError | None = None) -> Sent:
        return Sent(opened, error, self.attempts, tuple(self.retry_waits), self.last_error)


async def retry_sleep(seconds: float) -> None:
    """The wait between two tries of a request (tests record the waits instead of sleeping)."""
    await asyncio.sleep(seconds)


async def _no_sleep(seconds: float) -> None:
    """tenacity's sleep: `_retry` sleeps itself (`retry_sleep`), after announcing the retry."""


def model_or(meta: StreamMeta, default: str) -> str:
    """The model the stream named (a server may answer with another), else `default`; a
    name that is not text (a broken proxy's object) is not one."""
    model = meta.model
    return model if isinstance(model, str) and model else default


def turn_metadata(start: TurnStart, sent: Sent | None, ttft_s: float | None, provider: str, model: str,
                  partial_tool_calls: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """A new dict: attempts, retry waits (seconds), replayed, request id, first-token and
    total latency (seconds), provider and model, and `extra` (cost...); ``usage_error``, one
    line, when the provider's usage block could not be read (usage and price unknown)."""
    meta = sent.meta if sent is not None else StreamMeta()
    data: dict[str, Any] = {
        "attempts": sent.attempts if sent is not None else 1,
        "retry_waits": list(sent.retry_waits) if sent is not None else [],
        "replayed": start.replayed,
    }
    if start.settings:
        data["settings"] = dict(start.settings)  # shown in footers and transcripts
    if start.system_blocks:
        data["system_blocks"] = list(start.system_blocks)  # what %agent inspect shows
    if sent is not None and sent.last_error is not None:
        data["last_error"] = sent.last_error
    data["request_id"] = meta.request_id or (sent.request_id if sent is not None else None)
    data["ttft_s"] = ttft_s
    if meta.usage_error is not None:  # usage is not the answer: the turn goes on, its usage and price unknown
        data["usage_error"] = redact(f"{provider} sent a usage block ipyagent could not read ({meta.usage_error}); "
                                     "this turn's usage and price are unknown")
    if partial_tool_calls is not None:
        data["partial_tool_calls"] = list(partial_tool_calls)
    data["latency_s"] = time.monotonic() - start.started
    data["provider"], data["model"] = provider, model
    data.update(extra)
    return data


def stop_reason(meta: StreamMeta, message: Message) -> StopReason:
    """The stop reason the stream noted; without one, ``tool_use`` for a reply with tool calls, else ``end_turn``."""
    if meta.stop_kind is not None:
        kind = meta.stop_kind
    else:
        kind = StopKind.tool_use if message.tool_calls else StopKind.end_turn
    raw = meta.stop_raw
    return StopReason(kind=kind, raw=raw if raw is None or isinstance(raw, str) else str(raw))  # a server's number


class TurnSteps:
    """The steps of one model turn (mixed into `BasePromptDriver`): `_send` (`_open` each try,
    `_retry`), `_relay`, `_complete` or `_failed`."""

    provider: str
    model: str
    price_as: str | None
    price_known: bool
    max_attempts: int
    max_retry_wait: float
    response_timeout: float
    stream_types: tuple[str, ...]
    framing: str
    rate_gate: Any

    # -- step 1: send, with retries ------------------------------------------------------

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
        reader = None
        try:
            if 300 <= response.status_code < 400:
                raise self.redirected(response.status_code, response.headers.get("location"))
            if response.status_code >= 400:
                async with asyncio.timeout_at(deadline):
                    body = await response.aread()
                error = self.error_from_response(response.status_code, response.headers, body)
                if gate is not None and error.type == "rate_limit":
                    gate.hold(error.retry_after)  # the whole lane waits, not only this request
                raise error
            response.stream = _Deadlined(response.stream, deadline)  # a trickling server trips it
            decoder = self.decoder()
            content_type = response.headers.get("content-type", "").split(";")[0].strip()  # as sent (SSE relabels)
            try:
                reader, head = await self._reply(response, decoder)
                rest = None if reader is None else await read_head(reader, decoder, head)
            except NotAStream as exc:
                body = response.stream.head if exc.head is None else exc.head
                if not (exc.no_frame and self.framing == "sse" and looks_like_sse(body)):
                    raise not_its_stream(self.provider, response.status_code, content_type, body) from None
                rest, head = None, []  # keep-alives alone: a stream that ended early (`_complete` says so)
            return Opened(response, rest, decoder, head, reader)
        except BaseException as exc:
            await aclose(reader)
            await response.aclose()
            if isinstance(exc, Exception):
                raise self._as_provider_error(exc, str(request.url)) from None
            raise

    async def _reply(
        self, response: httpx2.Response, decoder: StreamDecoder
    ) -> tuple[AsyncIterator[Any] | None, list[DeltaMessage]]:
        """(the frames of a 2xx reply (`frames`), deltas already read). A reply labelled as this
        driver's stream (`stream_types`) is read as it is; another is looked at (`decode.read_unlabelled`)."""
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not self.stream_types or content_type in self.stream_types:
            return self.frames(response), []
        return await read_unlabelled(response, decoder, self.stream_types[0], self.frames)

    async def _send(self, request: httpx2.Request) -> AsyncIterator[RetryScheduled | Sent]:
        """Step 1, send with retries: timeouts, connection errors, 429, 5xx and overloaded
        are tried again (`max_attempts` in all, `_wait` between), the rest end it at once.

        Yields a `RetryScheduled` before each wait, so a view can say why nothing has
        arrived yet, then the `Sent` it ended with: the opened response, or the last try's
        error. The first try is sent directly: tenacity's machinery is built only once a try
        has failed (most never do).
        """
        try:
            opened = await self._open(request)
        except ProviderError as exc:
            if self.max_attempts == 1 or not self._retryable(exc):
                yield Sent(None, exc)
                return
            async with aclosing(self._retry(request, exc)) as steps:
                async for step in steps:
                    yield step
            step = None  # the failed tries' tracebacks hold this frame: it must not hold the response
            return
        yield Sent(opened)

    async def _retry(self, request: httpx2.Request, failed: ProviderError) -> AsyncIterator[RetryScheduled | Sent]:
        """The tries after a first one that `failed` with a retryable error, through tenacity
        (which is handed that first failure as its own first attempt's); as `_send` yields them."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt  # a first failure only

        first: ProviderError | None = failed
        tries, answered = _Tries(), []
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            sleep=_no_sleep,
            retry=retry_if_exception(self._retryable),
            before=tries.attempt,
            before_sleep=tries.waiting,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                if tries.retry_error is not None:
                    # tenacity chose the wait (before_sleep); it is slept here, once announced
                    wait = tries.retry_waits[-1]
                    yield RetryScheduled(tries.attempts, self.max_attempts, wait, tries.retry_error)
                    await retry_sleep(wait)
                with attempt:
                    if first is not None:
                        error, first = first, None
                        raise error
                    answered.append(await self._open(request))
        except ProviderError as exc:
            yield tries.sent(None, exc)
            return
        yield tries.sent(answered.pop())  # no name holds the response: the tries' errors may outlive this frame

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next try: the provider's ``Retry-After`` when it gave one, else
        exponential backoff with jitter (0.5 s doubling, at most 8 s); never over `max_retry_wait`."""
        exc = state.outcome.exception() if state.outcome else None
        asked = getattr(exc, "retry_after", None)
        if asked is not None:
            return min(asked, self.max_retry_wait)
        from tenacity import wait_exponential_jitter  # loaded by `_retry` already

        return min(wait_exponential_jitter(multiplier=0.5, max=8, jitter=0.5)(state), self.max_retry_wait)

    def _retryable(self, exc: BaseException) -> bool:
        """Retry a retryable `ProviderError`, unless the provider asks for a longer wait than
        `max_retry_wait`: that is reported at once rather than slept through (DESIGN.md)."""
        return (
            isinstance(exc, ProviderError)
            and exc.retryable
            and (exc.retry_after is None or exc.retry_after <= self.max_retry_wait)
        )

    # -- step 2: relay -------------------------------------------------------------------

    @staticmethod
    async def _relay(opened: Opened, reply: Aggregator) -> AsyncIterator[DeltaMessage]:
        """Step 2, relay: every delta as it arrives (the head `_open` read first), added to `reply`;
        the decoder notes the rest (usage, stop reason, ids) in its `meta`. A frame costs one
        call of the decoder's `feed`: no generator between it and `stream`.

        Raises:
            Exception: an error inside the stream (`ProviderError`), a broken connection, an
                unreadable frame, the response past its deadline (``TimeoutError``); `stream`
                says what each means (`_as_provider_error`).
        """
        add = reply.add
        for delta in opened.head:
            check_text(delta)
            add(delta)
            yield delta
        rest, decoder = opened.frames, opened.decoder
        if rest is None:
            return
        feed, texts, others = decoder.feed, reply.texts, reply.others
        async for frame in rest:
            for delta in feed(frame):
                if delta.__class__ is TextDelta:  # Aggregator.add and check_text inline: two calls less a delta
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

    # -- step 3: complete, or fail -------------------------------------------------------

    async def _complete(self, start: TurnStart, sent: Sent, reply: Aggregator, ttft_s: float | None) -> ModelCompleted:
        """Step 3, complete: the final message from `reply`, its usage, stop reason and price.

        A tool call the model wrote badly (arguments that are not a JSON object, no name) is
        kept with its error (`ActionCallBlock.error`): the agent loop gives the model that error
        as the call's result. Cut off by max_tokens, such a call is left out instead, described
        in ``metadata["partial_tool_calls"]``.

        Raises:
            ProviderError: ``invalid_response`` when the stream ended without a stop reason
                (cut short) or the deltas do not form a message.
        """
        meta = sent.meta
        if meta.stop_kind is None and meta.stop_raw is None:
            # Every protocol ends a reply with a stop signal; without one the stream was cut
            # short (a closed connection, a proxy's error page): keep the text, do not pass it off as done.
            raise ProviderError(
                "invalid_response",
                f"the {self.provider} stream ended before the model finished (no stop reason arrived); "
                "the text so far is kept",
                retryable=False,
            )
        cut: list[dict[str, Any]] | None = [] if meta.stop_kind is StopKind.max_tokens else None
        try:
            message = reply.message(dropped=cut)
        except Exception as exc:
            raise ProviderError("invalid_response", str(exc), retryable=False) from None
        model = model_or(meta, self.model)
        usage = _with_tool_calls(meta.usage or Usage(), meta)
        cost = await self._bill(meta, usage, model)
        metadata = turn_metadata(start, sent, ttft_s, self.provider, model,
                                 cut or None,  # cut off by max_tokens inside a tool call: partial, not a mistake
                                 cost=cost.to_dict() if cost is not None else None,
                                 **self._price_note(cost, meta))
        message.usage, message.metadata = usage, {**(meta.extra or {}), **metadata}  # the message's own copy
        return ModelCompleted(message=message, usage=usage, stop_reason=stop_reason(meta, message), metadata=metadata)

    def price(self, usage: Usage, model: str | None = None, *, batch: bool = False) -> Cost | None:
        """The price of one turn's `usage` (genai-prices), or None when unknown: always for a
        host other than the provider's own, unless `price_as` names the price that applies.
        `batch`: a turn sent through the provider's batch API (`pricing.price`)."""
        if self.price_as is not None:
            provider, _, priced_model = self.price_as.partition(":")
            return pricing.price(provider, priced_model, usage, batch=batch)
        if not self.price_known:
            return None
        return pricing.price(
            self.provider, model or self.model, usage, price_provider=getattr(self, "price_provider", None),
            batch=batch,
        )

    def price_note(self) -> str:
        """Why this driver's turns have no price, and how to give them one (one line, for a note
        under the output; the driver's id as configured): a host other than the provider's own,
        a `price_as` or a model genai-prices does not list."""
        how = "set it with %provider ... --price-as PROVIDER:MODEL (price_as= in Python)"
        if self.price_as is not None:
            return f"price unknown: genai-prices has no price for {self.price_as}; name a model it lists in --price-as"
        if not self.price_known:  # not the model's name: eight models on one server say it once
            return f"price unknown: {redact(self.base_url)} is not {self.provider}'s own API; {how}"
        return f"price unknown: genai-prices has no price for {self.id}; {how}"

    def _price_note(self, cost: Cost | None, meta: StreamMeta) -> dict[str, str]:
        """``{"price_note": ...}`` for a turn without a price whose usage was read; else empty."""
        return {"price_note": self.price_note()} if cost is None and meta.usage_error is None else {}

    async def _bill(self, meta: StreamMeta, usage: Usage, model: str) -> Cost | None:
        """The price of a turn's `usage` (the event's ``cost``; a run records it in its ledger,
        `Ledger.record_turn`); None (unknown) when the provider's usage could not be read
        (`StreamMeta.usage_error`)."""
        if meta.usage_error is not None:
            return None
        if pricing.loaded() or not self._prices_from_tables():  # ~0.1 ms at most, usually a lookup: no thread hop
            return self.price(usage, model)
        # off the loop: the first price loads genai-prices' tables (~0.15 s), which must not stall other streams
        return await asyncio.get_running_loop().run_in_executor(_pricing_executor(), self.price, usage, model)

    def _prices_from_tables(self) -> bool:
        """Whether `price` may read genai-prices' tables (or be a driver's own, which may be slow).
        Ours does not for a host other than the provider's own (a local server: no price) nor for a
        provider genai-prices does not list: those turns are priced on the loop even before the
        tables are loaded (`price` never loads them, so `pricing.loaded` would stay False, and
        every turn would hop to a thread and back for nothing)."""
        if type(self).price is not TurnSteps.price or self.price_as is not None:
            return True
        listed = pricing.price_provider_of(self.provider, getattr(self, "price_provider", None)) is not None
        return self.price_known and listed

    async def _failed(self, error: ProviderError, start: TurnStart, sent: Sent | None, reply: Aggregator,
                      ttft_s: float | None) -> ModelFailed:
        """The turn failed: `error` (redacted as every `ProviderError` is; saying why a retryable one was not
        tried again: a longer wait asked than `max_retry_wait`, or the attempts ran out) and the partial
        message of what arrived (`Aggregator.partial`, its status ``failed``, its error `error`).
        Usage the provider sent before failing is the partial's `usage`, priced (``cost`` in
        the metadata) like a completed turn's."""
        self._not_retried(error, sent.attempts if sent is not None else 1)
        try:
            kept = reply.partial("failed", error)
        except Exception:  # deltas that cannot form a message: the error says what broke
            kept = None
        partial = kept or Message(role="assistant", status="failed", error=MessageError.of(error))
        meta = sent.meta if sent is not None else StreamMeta()
        model, extra = model_or(meta, self.model), {}
        if meta.usage is not None:  # billed before it failed: the cost and budgets count it
            partial.usage = _with_tool_calls(meta.usage, meta)
            cost = await self._bill(meta, partial.usage, model)
            extra["cost"] = cost.to_dict() if cost is not None else None
        metadata = turn_metadata(start, sent, ttft_s, self.provider, model, **extra)
        partial.metadata = {**metadata, **partial.metadata}
        return ModelFailed(error=error, partial=partial, metadata=metadata)


def _with_tool_calls(usage: Usage, meta: StreamMeta) -> Usage:
    """`usage` with the provider-side tool calls the stream counted (`StreamMeta.server_tool_calls`)
    where its usage block did not count them."""
    if not meta.server_tool_calls:
        return usage
    return usage.model_copy(update={"server_tool_calls": {**meta.server_tool_calls, **usage.server_tool_calls}})
