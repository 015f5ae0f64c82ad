"""Time limits for an evaluation's checks: regex searches that cannot hang, and user functions
run in threads that an interrupt or a deadline stops.

A regex check runs on the `regex` package, whose searches take a ``timeout``. Most patterns
answer in microseconds, so a search first runs on the calling thread (ipyagent's loop) for at
most `INLINE_S`; one still searching then goes on in a worker thread (the GIL released:
``concurrent=True``) for the rest of its limit, while the loop serves the other runs. The
`regex` package checks its timeout now and then, not exactly, so the caller stops waiting at
the limit (`asyncio.wait_for`) and the search ends by itself a little later.

A synchronous ``python:`` check is called in a `Stoppable` thread: past its limit, or when
the evaluation is cancelled (an interrupt), the caller stops waiting and the thread is sent
`CheckStopped` (CPython's asynchronous exception, raised at its next bytecode), so a check
looping forever does not keep running. A thread blocked in C (``time.sleep``, a socket read)
gets it when that call returns.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable
from typing import Any

#: Seconds a regex search runs on the loop's thread before it moves to a worker thread.
INLINE_S = 0.005
#: Default seconds a check may take (``--check-timeout``).
CHECK_TIMEOUT_S = 1.0


class CheckStopped(BaseException):
    """Raised inside a check's thread that ran past its limit or was interrupted."""


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by the `regex` package (Python `re` syntax).

    Raises:
        ValueError: not a valid pattern; the message quotes the engine's reason.
    """
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, TypeError, OverflowError) as exc:
        raise ValueError(f"not a valid pattern ({exc})") from None


async def search(compiled: Any, text: str, limit: float) -> bool | None:
    """Whether `compiled` matches somewhere in `text`; None when it ran past `limit` seconds."""
    try:
        return compiled.search(text, timeout=min(INLINE_S, limit)) is not None
    except TimeoutError:
        pass
    if limit <= INLINE_S:
        return None
    rest = limit - INLINE_S
    try:
        found = await asyncio.wait_for(asyncio.to_thread(compiled.search, text, concurrent=True, timeout=rest), rest)
    except TimeoutError:
        return None
    return found is not None


class _Worker(threading.Thread):
    """A daemon thread running one call at a time, until it is retired."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="ipyagent-check")
        self.wake = threading.Event()
        self.job: tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]] | None = None
        self.retired = False

    def run(self) -> None:
        try:
            while not self.retired:
                self.wake.wait()
                self.wake.clear()
                job, self.job = self.job, None
                if job is None:
                    continue
                call, done = job
                try:
                    value, error = call(), None
                except CheckStopped:
                    return
                except BaseException as exc:  # noqa: BLE001 - a check's failure is its outcome
                    value, error = None, exc
                done(value, error)
        except CheckStopped:  # it came late, after the call: the thread was retired anyway
            return

    def stop(self) -> None:
        """Retire the thread and raise `CheckStopped` in it (at its next bytecode)."""
        self.retired = True
        if self.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(CheckStopped))
        self.wake.set()


class Stoppable:
    """Worker threads for synchronous checks, kept for the next call unless stopped."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` in a worker thread; its value (or its exception, raised here).
        Cancelled (a deadline, an interrupt): the thread is stopped and the cancellation goes on."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def done(value: Any, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, value, error)

        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker()
            worker.start()
        worker.job = (lambda: function(*args), done)
        worker.wake.set()
        try:
            value = await future
        except BaseException:
            if not future.done() or future.cancelled():
                worker.stop()
                raise
            with self._lock:
                self._idle.append(worker)
            raise
        with self._lock:
            self._idle.append(worker)
        return value

    def close(self) -> None:
        """End the idle threads."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.retired = True
            worker.wake.set()
