"""Renderers: HTML (sanitized) and plain text of runs, tools, evaluations and memory.

The modules are imported directly within the notebook layer; the names below load on first use, for a
caller that needs them only on some paths (``%tools``: a terminal's first ``%%agent`` draws no HTML).
"""

from ..._lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "tool_table": ("ToolSource", "tools_bundle"),  # %tools's table (with the HTML transcript's helpers)
})

__all__ = [*__getattr__.exports]
