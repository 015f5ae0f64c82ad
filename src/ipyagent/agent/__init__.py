"""The agent layer: conversations over a prompt driver; knows no provider by name."""

from .agent import Agent
from .loop import AgentRun
from .loop_thread import background_loop, run_in_background, run_sync
from .options import RunOptions
from .result import AgentResult

__all__ = ["Agent", "AgentResult", "AgentRun", "RunOptions", "background_loop", "run_in_background", "run_sync"]
