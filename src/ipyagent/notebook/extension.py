"""``%load_ext ipyagent`` / ``%unload_ext ipyagent``."""

from __future__ import annotations

from typing import Any

_registered: dict[int, Any] = {}


def load(ipython: Any) -> None:
    from .magics import AgentMagics

    if id(ipython) in _registered:
        return
    magics = AgentMagics(ipython)
    ipython.register_magics(magics)
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
    stop_background_loop()
