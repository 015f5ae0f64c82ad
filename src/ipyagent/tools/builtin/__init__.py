"""Built-in tools: `Calculator` (safe arithmetic), `Clock` (date and time) and
`TaskMemoryTool` (reads what off-prompt tools stored).

Each loads at its first use: every run loads `task_memory` (an agent's Task Memory tools), not the others.
"""

from ..._lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "calculator": ("Calculator",),
    "clock": ("Clock",),
    "task_memory": ("TaskMemoryTool",),
})

__all__ = [*__getattr__.exports]
