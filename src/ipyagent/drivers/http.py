"""HTTP for every prompt driver: one client per driver over one TLS context, a response body
bounded by its deadline, the Retry-After header, and closing every open client.

The driver template (`base.BasePromptDriver`) sends through these; a driver's own module
never touches HTTP (DESIGN.md, "drivers": a driver translates).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
import weakref
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import httpx2

if TYPE_CHECKING:
    from .base import BasePromptDriver

#: Seconds one response may take, first to last byte (`BasePromptDriver` ``response_timeout``).
RESPONSE_TIMEOUT = 300.0


#: What may be left of a body once its parser has seen the stop signal (OpenAI's ``[DONE]``):
#: at most this many bytes, arriving within `DRAIN_S` seconds, are read, so the connection goes
#: back to the pool for the next request instead of being closed (and a new one opened).
DRAIN_BYTES = 64 * 1024
DRAIN_S = 0.5


async def aclose(iterator: Any) -> None:
    """Close an async iterator that can be closed (an async generator; a driver's own frames may
    be a plain iterator), rather than leave it to the event loop's finalizer."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


class _Deadlined(httpx2.AsyncByteStream):
    """A response body whose every network read ends by `deadline` (loop time), else
    `TimeoutError`: one timer per chunk of bytes, not one per parsed delta.

    It is its own iterator, the transport's kept in it: a parser that stops at its stop signal
    leaves the rest of the body for `drain`, and no generator is left suspended to close."""

    def __init__(self, stream: httpx2.AsyncByteStream, deadline: float) -> None:
        self.stream, self.deadline = stream, deadline
        self._chunks: AsyncIterator[bytes] | None = None
        self.head = b""  # the body's first bytes, to quote a reply that was no stream at all

    def __aiter__(self) -> _Deadlined:  # type: ignore[override]  # an iterator, not a generator: nothing to close
        if self._chunks is None:
            self._chunks = aiter(self.stream)
        return self

    async def __anext__(self) -> bytes:
        chunks = self._chunks
        if chunks is None:  # closed
            raise StopAsyncIteration
        async with asyncio.timeout_at(self.deadline):
            chunk = await anext(chunks)
        if len(self.head) < 4096:  # past what is shown: a secret across the cut is redacted whole
            self.head += chunk[: 4096 - len(self.head)]
        return chunk

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
        chunks, self._chunks = self._chunks, None
        await aclose(chunks)  # the transport's iterator, read to its end or not
        await self.stream.aclose()


class _Replayed(httpx2.AsyncByteStream):
    """Bytes already read (`head`), then the rest of the body (`rest`)."""

    def __init__(self, head: bytes, rest: AsyncIterator[bytes] | None = None) -> None:
        self.head, self.rest = head, rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            yield self.head
            if self.rest is not None:
                async for chunk in self.rest:
                    yield chunk
        finally:
            await aclose(self.rest)


@lru_cache(maxsize=1)
def _tls_context() -> Any:
    """One TLS context for every driver's client: building one (the CA bundle loaded) takes
    about 20 ms, which several drivers created at once (``%%compare``) would pay in turn."""
    return httpx2.create_ssl_context()


@lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx2.URL:
    """A request URL parsed once (a driver sends to one or two), not on every request."""
    return httpx2.URL(url)


def post_request(driver: BasePromptDriver, url: httpx2.URL, body: Any) -> httpx2.Request:
    """The POST of `body` to `url` that ``client.build_request`` would give, built directly while
    the client's cookie jar is empty: the client's headers merged with the driver's once, while
    they stay the same (half the CPU of `build_request`, which merges and parses them for every
    request). Once a provider has set a cookie (Cloudflare's ``__cf_bm``), the client builds it."""
    client, headers = driver._client_for(), driver.headers()
    if client.cookies:
        return client.build_request("POST", url, json=body, headers=headers)
    sent = driver._sent_headers
    if sent is None or sent[0] is not client or sent[1] != headers:
        merged = httpx2.Headers(client.headers)
        merged.update(headers)
        sent = driver._sent_headers = (client, dict(headers), merged, client.timeout.as_dict())
    return httpx2.Request("POST", url, json=body, headers=sent[2], extensions={"timeout": dict(sent[3])})


def new_client(driver: BasePromptDriver) -> httpx2.AsyncClient:
    """`driver`'s HTTP client (its transport, `read_timeout` to connect, at most 10 s, and
    between two bytes; no proxy from the environment), noted open for `close_all_drivers`."""
    client = httpx2.AsyncClient(
        transport=driver.transport,
        timeout=httpx2.Timeout(driver.read_timeout, connect=min(driver.read_timeout, 10.0)),
        trust_env=False,
        verify=_tls_context(),
    )
    _OPEN.add(driver)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # made outside a loop: nothing to close it on
        return client
    weakref.finalize(driver, _close_dropped, client, loop).atexit = False  # at exit: close_all_drivers
    return client


#: The closings of dropped drivers' clients under way (a task is only weakly held by its loop).
_CLOSING: set[asyncio.Task[None]] = set()


def _close_dropped(client: httpx2.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
    """A driver was dropped without `close` (``Agent(...).run(...)`` in a cell): its client, still
    open, is closed on the loop it connected on, rather than its pooled sockets left to the
    garbage collector. Called by the collector, in any thread."""
    if client.is_closed or loop.is_closed():
        return

    def close() -> None:
        task = loop.create_task(client.aclose())
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    try:
        loop.call_soon_threadsafe(close)
    except RuntimeError:  # the loop closed meanwhile: its sockets went with it
        pass


@lru_cache(maxsize=1)
def _pricing_executor() -> Any:
    """One thread for genai-prices lookups, apart from asyncio's default pool (which hung tools may fill)."""

    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipyagent-price")


# A forked child (multiprocessing's fork, a tool that forks) has no thread behind the parent's
# executor: a lookup sent to it would wait forever. The child makes its own.
os.register_at_fork(after_in_child=_pricing_executor.cache_clear)


#: Drivers whose HTTP client is open (`close_all_drivers` closes them at kernel shutdown).
_OPEN: weakref.WeakSet[BasePromptDriver] = weakref.WeakSet()


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
