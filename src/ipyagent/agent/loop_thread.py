"""One background asyncio loop per process, and `run_sync` to wait on it.

Notebook cells are synchronous while the kernel's own loop is busy running
them, so coroutines run on a dedicated daemon loop thread instead. Waiting
for one with `run_sync` cancels it on KeyboardInterrupt (a kernel interrupt):
without that the stream would go on after the cell failed (TOOLCHAIN.md §3c).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

#: Ids of the agents whose run this code is part of (their tools included, in threads too):
#: an agent asked to run from inside its own run refuses at once rather than wait for itself.
RUNNING_AGENTS: ContextVar[frozenset[int]] = ContextVar("ipyagent_running_agents", default=frozenset())

#: Seconds an interrupted `run_sync`/`run_in_background` waits for the coroutine's cleanup (the
#: view marked interrupted, the response closed) before it re-raises: a cleanup that hangs cannot
#: keep the cell from ending.
CLEANUP_WAIT_S = 2.0

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


def background_loop_running() -> bool:
    """True while the shared loop runs (it was started and not stopped); never starts it."""
    loop = _loop
    return loop is not None and not loop.is_closed() and loop.is_running()


def in_background_loop() -> bool:
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


class _Tracked:
    """Runs a coroutine on the background loop and notes when it has really finished.

    Cancelling a concurrent future marks it cancelled at once, before the task on
    the loop has even seen the CancelledError; `done` lets a waiter wait for the
    task's cleanup (the view marked interrupted, the HTTP response closed).
    """

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self.started, self.done = threading.Event(), threading.Event()
        running = RUNNING_AGENTS.get()  # the caller's (a tool's thread): the task starts from the loop's own context
        self.future = asyncio.run_coroutine_threadsafe(self._run(coro, running), background_loop())

    async def _run(self, coro: Coroutine[Any, Any, T], running: frozenset[int]) -> T:
        RUNNING_AGENTS.set(running)
        self.started.set()
        try:
            return await coro
        finally:
            self.done.set()

    def cancel_and_wait(self) -> None:
        """Cancel the coroutine and wait up to `CLEANUP_WAIT_S` for its cleanup, if it started."""
        self.future.cancel()
        if self.started.is_set():
            self.done.wait(timeout=CLEANUP_WAIT_S)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the background loop and block until its result.

    Works whether or not the calling thread has a running event loop (a
    notebook cell does). A KeyboardInterrupt while waiting cancels the
    coroutine, waits up to `CLEANUP_WAIT_S` for it to finish cleaning up, and
    re-raises.

    Raises:
        RuntimeError: called from the background loop itself (await instead).
        Whatever `coro` raises.
    """
    if in_background_loop():
        coro.close()
        raise RuntimeError("run_sync() called from ipyagent's own loop; use await instead")
    tracked = _Tracked(coro)
    try:
        return tracked.future.result()
    except KeyboardInterrupt:
        tracked.cancel_and_wait()
        raise


async def run_in_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on the background loop, from any other loop (a notebook cell's).

    While this waits, the caller's loop stays free: ipykernel keeps handling
    widget events (an Approve click). Cancelling the caller (a kernel interrupt
    of an awaiting cell) cancels `coro` and waits up to `CLEANUP_WAIT_S` for its cleanup.
    """
    if in_background_loop():
        return await coro
    tracked = _Tracked(coro)
    future = asyncio.wrap_future(tracked.future)
    try:
        # Wake the caller's loop now and then: ipykernel turns SIGINT into a callback
        # on that loop, which a loop asleep on one future would only run at the end.
        while not future.done():
            await asyncio.wait([future], timeout=0.1)
        return future.result()
    except asyncio.CancelledError:
        await asyncio.get_running_loop().run_in_executor(None, tracked.cancel_and_wait)
        raise


class OneRunAtATime:
    """The runs of one agent (`owner`): one at a time (they share its conversation), in the order
    they came, on the background loop; its tools see it in `RUNNING_AGENTS` while it runs, and one
    that asks it to run again is refused at once (`check`) rather than wait for itself."""

    def __init__(self, owner: Any) -> None:
        # the owner by id and a weak reference, not the owner: it holds this gate, and a cycle would leave
        # every agent (an evaluation makes one a run) and its results to the garbage collector
        self.owner_id, self._owner = id(owner), weakref.ref(owner)
        self._lock: asyncio.Lock | None = None

    @property
    def owner(self) -> Any:
        """The agent whose runs these are (None once it is gone)."""
        return self._owner()

    def check(self) -> None:
        """Raises:
            RuntimeError: called from a tool of the owner's own run."""
        if self.owner_id in RUNNING_AGENTS.get():
            raise RuntimeError(
                f"{self.owner!r} is running the tool that tried to run it again; that run would wait for "
                "itself. A tool can run another Agent (Agent(...).run(...)), not the one calling it"
            )

    async def run(self, run: Coroutine[Any, Any, T]) -> T:
        """Await `run` when the owner's earlier runs are done (`run` is closed, unrun, if `check` fails)."""
        if self._lock is None:
            self._lock = asyncio.Lock()  # created on the background loop, where every run executes
        try:
            self.check()
        except RuntimeError:
            run.close()
            raise
        token = RUNNING_AGENTS.set(RUNNING_AGENTS.get() | {self.owner_id})  # seen by this run's tools only
        try:
            async with self._lock:
                return await run
        finally:
            RUNNING_AGENTS.reset(token)


class Detached:
    """A coroutine running on the background loop that nobody awaits (a background evaluation):
    `run_detached` starts it and returns at once. Cancelling it (`cancel`, `stop_detached`) throws
    CancelledError into it, so its ``finally`` blocks run (what finished is committed); `finished`
    is set only once it has really ended, whether it returned, raised, was cancelled or never began.

    Attributes:
        finished: a `threading.Event`, set when the coroutine has ended.
        result: what it returned (None until then); error: what it raised, CancelledError aside.
        cancelled: it ended cancelled (or was cancelled before it began).
    """

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.finished = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancelled = False
        self._task: asyncio.Task[Any] | None = None
        self._loop = background_loop()
        running = RUNNING_AGENTS.get()
        with _lock:
            _detached.add(self)
        self._loop.call_soon_threadsafe(self._start, coro, running)

    def _start(self, coro: Coroutine[Any, Any, Any], running: frozenset[int]) -> None:
        if self.cancelled:  # cancelled before the loop got to it: never begun
            coro.close()
            return self._ended(None)
        self._task = self._loop.create_task(self._run(coro, running))
        self._task.add_done_callback(self._ended)

    @staticmethod
    async def _run(coro: Coroutine[Any, Any, T], running: frozenset[int]) -> T:
        RUNNING_AGENTS.set(running)
        return await coro

    def _ended(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            if task.cancelled():
                self.cancelled = True
            elif task.exception() is not None:
                self.error = task.exception()
            else:
                self.result = task.result()
        with _lock:
            _detached.discard(self)
        self.finished.set()

    def _cancel(self) -> None:
        self.cancelled = True
        if self._task is not None:
            self._task.cancel()

    def cancel(self, timeout: float | None = 10.0) -> bool:
        """Cancel it and wait up to `timeout` seconds (None: no limit) for it to end; True when it
        has ended. From the background loop itself it is only asked to stop (no wait).

        Raises:
            Nothing: an already ended coroutine is left as it is.
        """
        if self.finished.is_set():
            return True
        if self._loop.is_closed():
            return self.finished.is_set()
        self._loop.call_soon_threadsafe(self._cancel)
        if in_background_loop():
            return self.finished.is_set()
        return self.finished.wait(timeout)


_detached: set[Detached] = set()


def run_detached(coro: Coroutine[Any, Any, Any]) -> Detached:
    """Start `coro` on the background loop and return at once (see `Detached`); a kernel interrupt
    does not reach it (nothing awaits it), `stop_detached` (``%unload_ext``, the process' end) does."""
    return Detached(coro)


def stop_detached(timeout: float = 10.0) -> int:
    """Cancel every `Detached` coroutine still running and wait for them to end, `timeout` seconds
    in all at most; returns how many were running. Never raises."""
    with _lock:
        running = list(_detached)
    deadline = time.monotonic() + timeout
    for job in running:
        job.cancel(timeout=max(0.0, deadline - time.monotonic()))
    return len(running)


def stop_background_loop() -> None:
    """Stop the shared loop (``%unload_ext``). A later call to `background_loop` starts a new one.
    Background coroutines (`run_detached`) are cancelled first: their clean-up runs on the loop."""
    global _loop, _thread
    if background_loop_running() and not in_background_loop():
        stop_detached()
    with _lock:
        loop, thread, _loop, _thread = _loop, _thread, None, None
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2.0)
        if not loop.is_running():
            loop.close()
