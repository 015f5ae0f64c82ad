"""``%load_ext ipyagent`` / ``%unload_ext ipyagent``, and closing at kernel shutdown."""

from __future__ import annotations

import atexit
import sys
from typing import Any

_registered: dict[int, Any] = {}
#: Each shell's ``%provider`` magics (`ProviderMagics`), loaded alone when ``%provider`` is the first magic used.
_providers: dict[int, Any] = {}

#: Cell magics whose cells await in a kernel (each takes the hidden ``--await-in-kernel`` flag).
_AWAITED_CELLS = tuple(f"get_ipython().run_cell_magic('{name}', " for name in ("agent", "compare"))


def await_agent_cells(lines: list[str]) -> list[str]:
    """Input transformer (after IPython's own): a ``%%agent`` cell in a kernel becomes an awaiting cell.

    IPython turns ``%%agent ARGS`` into ``get_ipython().run_cell_magic('agent', 'ARGS', BODY)``;
    this prefixes ``await`` and a hidden flag, so the magic returns a coroutine that the
    kernel awaits. While it awaits, ipykernel handles widget messages (Approve / Deny
    buttons work) and a kernel interrupt cancels the run cleanly (TOOLCHAIN.md §3c, §3d).
    """
    for prefix in _AWAITED_CELLS:  # %%agent and %%compare
        if lines and lines[0].startswith(prefix):
            return [f"await {prefix}'--await-in-kernel ' + {lines[0][len(prefix):]}", *lines[1:]]
    return [_await_fix(line) for line in lines]


#: ``%agent fix ...`` as IPython writes it; awaited like a ``%%agent`` cell when it is a top-level line.
_FIX_LINE = "get_ipython().run_line_magic('agent', 'fix"


def _await_fix(line: str) -> str:
    rest = line[len(_FIX_LINE):]
    if line.startswith(_FIX_LINE) and rest[:1] in ("'", " "):
        return f"await {_FIX_LINE} --await-in-kernel{rest}"
    return line


#: Every magic of the extension. ``%load_ext`` only declares them; the package behind them
#: (pydantic, httpx2, ...) is imported on first use, so loading costs almost nothing
#: (benchmarks/import_load.py). A magic missing here is found only after another one was
#: used: tests/notebook/test_compare.py::test_load_declares_every_magic checks the list.
MAGICS = (
    ("line", "provider"),
    ("line", "tools"),
    ("line", "agent"),
    ("cell", "agent"),
    ("cell", "compare"),
    ("line", "mcp"),
)
_declared: set[int] = set()
#: Magics whose line IPython must not expand (``{{ row.x }}`` in ``%%compare --assert`` is Jinja).
_NO_VAR_EXPAND = {("cell", "compare")}


class _FirstUse:
    """Stands in for one magic until it is first used: loads the extension for real, then calls it.

    Not IPython's `MagicsManager.register_lazy`, though declaring through it costs as little:
    IPython loads a lazy spec once per shell and remembers it (``_loaded_lazy``; for a module
    spec, the extension manager), so after ``%unload_ext ipyagent`` and ``%load_ext ipyagent``
    the first magic fails ("registered as lazy but loading it did not provide..."); the
    ``module:Class`` form builds one Magics class alone, while ours share one `AgentMagics`
    and first use also installs the interrupt hook and the input transformer; and IPython
    before 9 (we take ``ipython>=8.12``) shows a lazy magic in neither ``%lsmagic`` nor ``%agent?``.
    """

    def __init__(self, shell: Any, kind: str, name: str) -> None:
        self.shell, self.kind, self.name = shell, kind, name
        if (kind, name) in _NO_VAR_EXPAND:  # as the real magic: IPython checks the function it finds
            from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR

            setattr(self, MAGIC_NO_VAR_EXPAND_ATTR, True)

    def _real(self) -> Any:
        if (self.kind, self.name) == ("line", "provider"):  # often a session's first magic: it needs no agent
            _load_providers(self.shell)
        else:
            _load_now(self.shell)
            _load_extra(self.shell, self.kind, self.name)
        real = self.shell.magics_manager.magics[self.kind].get(self.name)
        if real is None or isinstance(real, _FirstUse):
            raise RuntimeError(f"ipyagent has no {self.kind} magic {self.name!r}")
        return real

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    @property  # type: ignore[misc]
    def __doc__(self) -> str | None:  # `%%agent?` shows the real help
        return self._real().__doc__


def close_drivers() -> int:
    """Close every open driver's HTTP client on the background loop (kernel shutdown,
    ``%unload_ext``); returns how many were closed. Idempotent; never raises."""
    from ..agent import background_loop_running, run_sync

    if not background_loop_running():
        return 0
    from ..drivers import close_all_drivers

    try:
        return run_sync(close_all_drivers())
    except Exception:  # noqa: BLE001 - shutting down: nothing to report to
        return 0


def stop_background_runs() -> int:
    """Cancel the evaluations running in the background (``--background``) and wait for them to
    commit what finished (`loop_thread.stop_detached`); returns how many. Never raises."""
    from ..agent import background_loop_running, stop_detached

    return stop_detached() if background_loop_running() else 0


def _at_exit() -> None:
    """The process is ending (a kernel shut down, IPython exited): close what is open, then the loop.
    MCP servers are closed only if their module was loaded: none can be open otherwise, and importing
    the tools (with httpx2 and the MCP client) only to find none took ~0.1 s at every exit."""
    from ..agent import stop_background_loop

    stop_background_runs()  # before their clients close: what finished is committed, nothing fails
    mcp = sys.modules.get("ipyagent.tools.mcp")
    if mcp is not None:
        mcp.close_all_at_exit()  # MCP servers first: they run on the loop stopped below
    close_drivers()
    stop_background_loop()


_exit_registered = False


def load(ipython: Any) -> None:
    """Declare the magics (`MAGICS`); the real ones are loaded when one is first used.
    Every open driver is closed when the process ends (`_at_exit`)."""
    global _exit_registered
    if not _exit_registered:
        # atexit runs before the interpreter stops the daemon loop thread: the clients can close there.
        atexit.register(_at_exit)
        _exit_registered = True
    if id(ipython) in _registered or id(ipython) in _declared:
        return
    _declared.add(id(ipython))
    from .context import cell_log  # stdlib only: what cells print and raise, for %agent fix and --cells

    cell_log.install(ipython)
    for kind, name in MAGICS:
        ipython.magics_manager.magics[kind][name] = _FirstUse(ipython, kind, name)
    if getattr(ipython, "kernel", None) is not None and await_agent_cells not in ipython.input_transformers_post:
        ipython.input_transformers_post.append(await_agent_cells)


def _load_providers(ipython: Any) -> Any:
    """Register ``%provider`` alone (once per shell) and return its `ProviderMagics`: the first
    ``%provider`` of a session loads the drivers' registry and the default configuration, not the
    agent's magics, views and evaluations (benchmarks/import_load.py)."""
    from .magics.provider import ProviderMagics

    providers = _providers.get(id(ipython))
    if providers is None:
        providers = _providers[id(ipython)] = ProviderMagics(ipython)
        ipython.register_magics(providers)
    return providers


def _load_now(ipython: Any) -> None:
    """Register every magic (once per shell), reusing ``%provider``'s when it was loaded alone."""
    from .magics.agent import AgentMagics

    if id(ipython) in _registered:
        return
    providers = _load_providers(ipython)
    magics = AgentMagics(ipython, providers)
    ipython.register_magics(magics)
    magics.compare_magics = lambda: _load_extra(ipython, "cell", "compare")  # %%agent --compare
    if getattr(ipython, "kernel", None) is not None and await_agent_cells not in ipython.input_transformers_post:
        ipython.input_transformers_post.append(await_agent_cells)
    from .outcomes import install

    install(ipython)  # an interrupted run ends its cell without a traceback
    from .saved_outputs import register

    register(ipython)  # a page that missed a run's end asks for its saved output
    if getattr(ipython, "kernel", None) is not None:  # a terminal has no matrix to click in
        from .grading import register as register_grading

        register_grading(ipython, lambda: magics.session.store)  # a click in a matrix grades a run
    _registered[id(ipython)] = magics


def _load_extra(ipython: Any, kind: str, name: str) -> Any:
    """Register, once per shell and after `_load_now`, the magics of ``%%compare`` (with the
    evaluations), of the ``%agent`` line (threads, history, memory, run store) or of ``%mcp``
    when one is first used, and return them (None for another magic): a first ``%%agent``
    cell imports none of them."""
    magics = _registered[id(ipython)]
    registry = ipython.magics_manager.registry
    if (kind, name) == ("cell", "compare") and "CompareMagics" not in registry:
        from .magics.compare import CompareMagics

        ipython.register_magics(CompareMagics(ipython, magics))
    elif (kind, name) == ("line", "agent") and "SessionMagics" not in registry:
        from .magics.session import SessionMagics  # %agent threads/history/memory/inspect/replay

        ipython.register_magics(SessionMagics(ipython, magics))
    elif (kind, name) == ("line", "mcp") and "MCPMagics" not in registry:
        from .magics.mcp import MCPMagics  # %mcp add/list/log/restart/remove

        ipython.register_magics(MCPMagics(ipython, magics))
    owner = {("cell", "compare"): "CompareMagics", ("line", "agent"): "SessionMagics", ("line", "mcp"): "MCPMagics"}
    return registry.get(owner.get((kind, name), ""))


def unload(ipython: Any) -> None:
    from .context import cell_log

    cell_log.uninstall(ipython)
    _declared.discard(id(ipython))
    for kind, name in MAGICS:  # magics never used are still placeholders
        if isinstance(ipython.magics_manager.magics[kind].get(name), _FirstUse):
            del ipython.magics_manager.magics[kind][name]
    if await_agent_cells in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(await_agent_cells)
    stop_background_runs()  # before their clients close: what finished is committed, nothing fails
    close_drivers()  # Python agents' too: the loop they live on stops below
    providers = _providers.pop(id(ipython), None)
    magics = _registered.pop(id(ipython), None)
    if magics is None:
        if providers is not None:  # only %provider was used
            _unload_providers(ipython, providers)
        return
    from ..agent import reset_default, stop_background_loop
    from .outcomes import uninstall

    uninstall(ipython)
    from .saved_outputs import unregister

    unregister(ipython)
    if getattr(ipython, "kernel", None) is not None:
        from .grading import unregister as unregister_grading

        unregister_grading(ipython)
    magics.close()
    reset_default()  # the %provider default goes with the extension, and the session's spending and budget
    compare = ipython.magics_manager.registry.pop("CompareMagics", None)
    session = ipython.magics_manager.registry.pop("SessionMagics", None)
    mcp = ipython.magics_manager.registry.pop("MCPMagics", None)
    ipython.magics_manager.registry.pop("ProviderMagics", None)
    magics.session.close()
    for kind, names in [
        *magics.magics.items(),
        *magics.providers.magics.items(),
        *(compare.magics.items() if compare else ()),
        *(session.magics.items() if session else ()),
        *(mcp.magics.items() if mcp else ()),
    ]:
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
    if await_agent_cells in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(await_agent_cells)
    stop_background_loop()


def _unload_providers(ipython: Any, providers: Any) -> None:
    """Remove ``%provider`` loaded alone, with the default it set, and stop the loop it may have started."""
    from ..agent import reset_default, stop_background_loop

    reset_default()
    ipython.magics_manager.registry.pop("ProviderMagics", None)
    for kind, names in providers.magics.items():
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
    stop_background_loop()
