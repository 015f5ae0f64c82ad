"""One background asyncio loop per process, and `run_sync` to wait on it.

Notebook cells are synchronous while the kernel's own loop is busy running
them, so coroutines run on a dedicated daemon loop thread instead. Waiting
for one with `run_sync` cancels it on KeyboardInterrupt (a kernel interrupt):
without that the stream would go on after the cell failed (TOOLCHAIN.md §3c).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or not (_thread and _thread.is_alive()):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="ipyagent-loop", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def in_background_loop() -> bool:
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def run_sync(coro: Coroutine[Any, Any, T], *, idle: Callable[[], Any] | None = None) -> T:
    """Run `coro` on the background loop and wait for its result.

    Works whether or not the calling thread has a running event loop (a
    notebook cell does). A KeyboardInterrupt while waiting cancels the
    coroutine, waits briefly for it to finish cleaning up, and re-raises.

    `idle`, if given, is called about every 50 ms while waiting (the notebook
    layer uses it to process widget events, such as an Approve click, while
    the cell blocks).

    Raises:
        RuntimeError: called from the background loop itself (await instead).
        Whatever `coro` raises.
    """
    if in_background_loop():
        coro.close()
        raise RuntimeError("run_sync() called from ipyagent's own loop; use await instead")
    # Cancelling the concurrent future marks it cancelled at once, before the task on the
    # loop has even seen the CancelledError; `done` lets us wait for its cleanup instead.
    started, done = threading.Event(), threading.Event()

    async def tracked() -> T:
        started.set()
        try:
            return await coro
        finally:
            done.set()

    future = asyncio.run_coroutine_threadsafe(tracked(), background_loop())
    try:
        if idle is None:
            return future.result()
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                idle()
    except KeyboardInterrupt:
        future.cancel()
        if started.is_set():
            done.wait(timeout=2.0)
        raise


def stop_background_loop() -> None:
    """Stop the shared loop (``%unload_ext``). A later call to `background_loop` starts a new one."""
    global _loop, _thread
    with _lock:
        loop, thread, _loop, _thread = _loop, _thread, None, None
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2.0)
        if not loop.is_running():
            loop.close()
