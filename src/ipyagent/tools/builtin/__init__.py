"""Built-in tools: `Calculator` (safe arithmetic), `Clock` (date and time) and
`TaskMemoryTool` (reads what off-prompt tools stored)."""

from .calculator import Calculator
from .clock import Clock
from .task_memory import TaskMemoryTool

__all__ = ["Calculator", "Clock", "TaskMemoryTool"]
