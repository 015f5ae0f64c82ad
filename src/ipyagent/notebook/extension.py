"""``%load_ext ipyagent`` / ``%unload_ext ipyagent``."""

from __future__ import annotations

from typing import Any

_registered: dict[int, Any] = {}

_AGENT_CELL = "get_ipython().run_cell_magic('agent', "


def await_agent_cells(lines: list[str]) -> list[str]:
    """Input transformer (after IPython's own): a ``%%agent`` cell in a kernel becomes an awaiting cell.

    IPython turns ``%%agent ARGS`` into ``get_ipython().run_cell_magic('agent', 'ARGS', BODY)``;
    this prefixes ``await`` and a hidden flag, so the magic returns a coroutine that the
    kernel awaits. While it awaits, ipykernel handles widget messages (Approve / Deny
    buttons work) and a kernel interrupt cancels the run cleanly (TOOLCHAIN.md §3c, §3d).
    """
    if lines and lines[0].startswith(_AGENT_CELL):
        lines = [f"await {_AGENT_CELL}'--await-in-kernel ' + {lines[0][len(_AGENT_CELL):]}", *lines[1:]]
    return lines


def load(ipython: Any) -> None:
    from .magics import AgentMagics

    if id(ipython) in _registered:
        return
    magics = AgentMagics(ipython)
    ipython.register_magics(magics)
    if getattr(ipython, "kernel", None) is not None:
        ipython.input_transformers_post.append(await_agent_cells)
    _registered[id(ipython)] = magics


def unload(ipython: Any) -> None:
    from ..agent.loop_thread import stop_background_loop

    magics = _registered.pop(id(ipython), None)
    if magics is None:
        return
    magics.close()
    for kind, names in magics.magics.items():
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
    if await_agent_cells in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(await_agent_cells)
    stop_background_loop()
