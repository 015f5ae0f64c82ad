"""Which async generators a piece of code left to the event loop's finalizer: not closed by
the code that iterated them, they are closed later, each in a task of its own, holding what
they read (a response) until then, and in a reference cycle when the loop ends first."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable
from typing import Any


def left_to_the_loop(run: Callable[[], Awaitable[Any]]) -> list[str]:
    """The qualified names of the async generators that `run()`, awaited in a new event loop,
    left open for the loop's finalizer, in the order they were finalized."""
    left: list[str] = []

    async def main() -> None:
        firstiter, finalizer = sys.get_asyncgen_hooks()  # the loop's, set when it started

        def record(agen: Any) -> None:
            left.append(agen.__qualname__)
            finalizer(agen)  # type: ignore[misc]

        sys.set_asyncgen_hooks(firstiter, record)  # bound to each generator on its first step
        try:
            await run()
            gc.collect()
        finally:
            sys.set_asyncgen_hooks(firstiter, finalizer)

    asyncio.run(main())
    return left
