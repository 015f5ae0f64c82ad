"""ipyagent: build, try and compare LLM agents in Jupyter.

``%load_ext ipyagent`` registers the magics. From Python: ``ipyagent.Agent``.
Heavy modules (drivers, widgets, Jinja, markdown) load on first use, so this
import stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .agent import Agent, AgentResult, RunOptions
    from .agent.compare import Comparison, acompare, compare
    from .agent.defaults import set_default, using
    from .agent.evaluation import Evaluation, aevaluate, evaluate, load_evaluation
    from .agent.telemetry.tracing import trace
    from .core import BuiltinTool, Citation, ModelSettings, SystemBlock

__all__ = [
    "Agent",
    "AgentResult",
    "RunOptions",
    "last_result",
    "ModelSettings",
    "SystemBlock",
    "BuiltinTool",
    "Citation",
    "using",
    "set_default",
    "compare",
    "acompare",
    "Comparison",
    "evaluate",
    "aevaluate",
    "Evaluation",
    "load_evaluation",
    "trace",
    "load_ipython_extension",
    "unload_ipython_extension",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in ("Agent", "AgentResult", "RunOptions"):
        from . import agent

        return getattr(agent, name)
    if name in ("using", "set_default"):  # the default configuration, switchable for a block
        from .agent import defaults

        return getattr(defaults, name)
    if name in ("ModelSettings", "SystemBlock", "BuiltinTool", "Citation"):
        from . import core

        return getattr(core, name)
    if name in ("compare", "acompare", "Comparison"):
        from .agent import compare as comparison

        return getattr(comparison, name)
    if name in ("evaluate", "aevaluate", "Evaluation", "load_evaluation"):
        from .agent import evaluation

        return getattr(evaluation, name)
    if name == "trace":  # OpenTelemetry spans of every run (the SDK imported only when turned on)
        from .agent.telemetry.tracing import trace

        return trace
    if name == "memory":  # ipyagent.memory["NAMESPACE"]: the session's Task Memory
        import importlib

        return importlib.import_module(".memory", __name__)
    raise AttributeError(f"module 'ipyagent' has no attribute {name!r}")


def last_result() -> Any:
    """The `AgentResult` of the last ``%%agent`` cell in this IPython session (None: none yet).

    ``%%agent`` cells print no ``Out[n]``; ``-o VAR`` binds a cell's result to VAR."""
    from IPython import get_ipython

    from .notebook.extension import _registered

    magics = _registered.get(id(get_ipython()))
    return magics.last_result if magics is not None else None


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext ipyagent``: register ``%provider`` and ``%%agent``."""
    from .notebook.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext ipyagent``: remove the magics and stop the background loop."""
    from .notebook.extension import unload

    unload(ipython)
