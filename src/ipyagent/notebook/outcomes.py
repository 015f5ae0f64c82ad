"""Expected ends of a cell (an interrupt, a stopped run) without a traceback.

A run stopped by the toolbar's Stop, a kernel interrupt or Ctrl-C in the
terminal is shown in its view ("interrupted", the partial text kept). The
cell must still fail, so that "Run all" stops there, but print nothing more:
`RunStopped` is raised, and IPython's custom exception hook (installed by
`%load_ext`) marks the cell failed and shows only its message, if any. The
execute reply says ``error`` (ename ``RunStopped``), and no ``error`` output is
published, so nothing of it is saved in the notebook.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ..agent import run_in_background, run_sync


class RunStopped(Exception):
    """A cell's run ended as expected (interrupted) and was shown in its view already.

    `message` is printed as one line to stderr ("" prints nothing)."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:  # IPython without our hook: just the line
        return [self.message] if self.message else []


def _show(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
    message = getattr(value, "message", "")
    if message:
        print(message, file=sys.stderr)


_previous: dict[int, tuple[tuple[type, ...], Any]] = {}


def install(shell: Any) -> None:
    """Have `shell` end cells raising `RunStopped` quietly (other handlers set before keep working)."""
    if id(shell) in _previous or not hasattr(shell, "set_custom_exc"):
        return
    previous = (tuple(shell.custom_exceptions), shell.CustomTB)
    _previous[id(shell)] = previous
    prior_types, prior_handler = previous

    def handler(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> Any:
        if isinstance(value, RunStopped):
            return _show(self, etype, value, tb, tb_offset)
        return prior_handler(etype, value, tb, tb_offset=tb_offset)

    shell.set_custom_exc((*prior_types, RunStopped), handler)


def uninstall(shell: Any) -> None:
    """Put back the handler `install` replaced."""
    previous = _previous.pop(id(shell), None)
    if previous is None:
        return
    types, handler = previous
    shell.custom_exceptions = types
    shell.CustomTB = handler


def run_cell(coro: Any, done: Any, *, await_in_kernel: bool) -> Any:
    """Run a cell's `coro` on ipyagent's loop and hand its result to `done`; the cell returns None.

    In a kernel (`await_in_kernel`) this returns a coroutine the kernel awaits, so widget
    events keep flowing and an interrupt cancels the run; elsewhere it blocks. A stop
    (toolbar Stop, kernel interrupt, Ctrl-C) raises `RunStopped`: the view already says so.
    """


    if await_in_kernel:
        async def awaited() -> None:
            try:
                result = await run_in_background(coro)
            except asyncio.CancelledError:
                raise RunStopped() from None
            done(result)

        return awaited()
    try:
        result = run_sync(coro)
    except KeyboardInterrupt:
        raise RunStopped() from None
    done(result)
    return None


async def resolved(value: Any) -> Any:
    """`value`, awaitable: what a kernel-awaited cell returns when it ends before running."""
    return value
