"""Built-in tools: `Calculator` (safe arithmetic) and `Clock` (date and time)."""

from .calculator import Calculator
from .clock import Clock

__all__ = ["Calculator", "Clock"]
