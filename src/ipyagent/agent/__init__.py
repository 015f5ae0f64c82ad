"""The agent layer: conversations over a prompt driver; knows no provider by name."""

from .agent import Agent, AgentResult
from .loop_thread import background_loop, run_in_background, run_sync

__all__ = ["Agent", "AgentResult", "background_loop", "run_in_background", "run_sync"]
