"""A virtual clock for asyncio tests: time moves only when every task waits, then it jumps to the
next timer. Coalescing timers, frame gaps and pacing are then checked exactly, instantly, and
the same under any load (no sleeps, no wall-clock bounds)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` starts at the real monotonic time (code may take 0 for "never")
    and advances to the next scheduled timer whenever
    nothing is ready to run. I/O still works, but a test that waits on another thread gets no
    time from it: use it for code that waits only on its own loop's timers."""

    def __init__(self) -> None:
        super().__init__()
        self.now = float(math.ceil(time.monotonic()))  # whole seconds: sums of waits are exact

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


def run_virtual(main: Callable[[], Awaitable[T]], monkeypatch: Any, *modules: ModuleType) -> T:
    """Run `main()` to the end on a `VirtualClockLoop`; `time.monotonic()` in each of `modules`
    reads the loop's clock meanwhile."""
    loop = VirtualClockLoop()
    with monkeypatch.context() as patch:
        for module in modules:
            patch.setattr(module, "time", _Clock(loop))
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()
