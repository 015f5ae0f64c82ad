"""A virtual clock for asyncio tests: time moves only when every task waits, then it jumps to the
next timer. Coalescing timers, frame gaps and pacing are then checked exactly, instantly, and
the same under any load (no sleeps, no wall-clock bounds)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from typing import Any, TypeVar

import httpx2

from ipyagent.agent import loop_thread
from ipyagent.core import Usage
from ipyagent.drivers.catalog import pricing

from .stub_server import Reply

T = TypeVar("T")


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` starts at 1000 s (not 0: code may take 0 for "never") and
    advances to the next scheduled timer whenever nothing is ready to run. I/O still works, but a
    test that waits on another thread gets no time from it: use it for code that waits only on its
    own loop's timers."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0  # fixed, not the machine's uptime: a test's sums of float waits round alike everywhere

    def time(self) -> float:
        return self.now

    def _run_once(self) -> None:
        if not self._ready:  # type: ignore[attr-defined]
            due = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
            if due:
                self.now = max(self.now, min(due))
        super()._run_once()  # type: ignore[misc]


class _Clock:
    """Stands in for the `time` module in the modules under test: `monotonic` is the loop's clock."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self.monotonic = loop.time

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def run_virtual(main: Callable[[], Awaitable[T]], monkeypatch: Any, *modules: ModuleType, own_loop: bool = False) -> T:
    """Run `main()` to the end on a `VirtualClockLoop`; `time.monotonic()` in each of `modules`
    reads the loop's clock meanwhile. `own_loop`: the loop stands for ipyagent's background loop
    too, so `Agent.arun`, `acompare` and `aevaluate` run their runs on it (as they do on their own
    loop) rather than hand them to a real one; the price tables are loaded first, since a run's
    first price loads them in a thread, which the virtual clock does not wait for."""
    if own_loop:
        pricing.price("openai", "gpt-4.1-mini", Usage(input_tokens=1, output_tokens=1))
    loop = VirtualClockLoop()
    with monkeypatch.context() as patch:
        for module in modules:
            patch.setattr(module, "time", _Clock(loop))
        if own_loop:
            patch.setattr(loop_thread, "_loop", loop)
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()


class LoopServer(httpx2.AsyncBaseTransport):
    """`StubServer`'s scripts (`Reply`: status, headers, pieces `delay` seconds apart, `wait` before
    the status line) played in the process, every pause on the running loop's clock: a driver
    given it as its ``transport`` meets a slow provider on a `VirtualClockLoop` in no real time.
    Each request takes the next reply (the last one repeats), or `responder(body)`'s when given;
    `requests` keeps them as `StubServer.requests` does (method, path, headers, parsed JSON body),
    `request_times` when each came (loop seconds)."""

    def __init__(self, *replies: Reply, responder: Callable[[Any], Reply] | None = None) -> None:
        self.replies, self.responder = list(replies), responder
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raw = await request.aread()
        body = json.loads(raw) if raw else None
        reply = self.responder(body) if self.responder else self.replies[min(len(self.requests), len(self.replies) - 1)]
        self.requests.append({"method": request.method, "path": request.url.path, "headers": dict(request.headers),
                              "body": body})
        self.request_times.append(asyncio.get_running_loop().time())
        if reply.wait:
            await asyncio.sleep(reply.wait)
        return httpx2.Response(reply.status, headers=reply.headers, stream=_Played(reply))


class _Played(httpx2.AsyncByteStream):
    """A reply's body, piece by piece, `delay` seconds after each (on the loop's clock)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.reply.pieces:
            yield piece
            if self.reply.delay:
                await asyncio.sleep(self.reply.delay)
