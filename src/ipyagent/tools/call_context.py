"""What a running tool call can reach of the run that called it: the run's events (a progress
report), its model (an MCP server's sampling request) and its user (an elicitation).

The agent loop gives each call a `CallContext` (`Toolbox.run_all(..., context=...)`); the call's
task sees it through `current_call()`. Outside a run there is none, and a tool that needs the run
refuses what it cannot do (`InteractionRefused`) in one line.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..core import ElicitationAnswer, ElicitationRequest, SamplingAnswer, SamplingRequest, ToolAction


class InteractionRefused(Exception):
    """A sampling request or elicitation that is not answered: no run, no one to approve, denied,
    over the run's cap, the model failed. The message says why, in one line."""


@dataclass(slots=True)
class CallContext:
    """One tool call's reach into its run.

    `emit(event)` sends an event to the run's views (a `ToolCallProgress`); it never raises.
    `sample(request)` answers a `SamplingRequest` with the run's model, after the user's approval
    (raises `InteractionRefused`). `elicit(request)` asks the user (None: no one can answer here).
    """

    action: ToolAction
    emit: Callable[[Any], None]
    sample: Callable[[SamplingRequest], Awaitable[SamplingAnswer]] | None = None
    elicit: Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]] | None = None


_current: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("ipyagent_tool_call", default=None)


def current_call() -> CallContext | None:
    """The context of the tool call running in this task, None outside a run's call."""
    return _current.get()


def set_call(context: CallContext | None) -> contextvars.Token[CallContext | None]:
    return _current.set(context)


def reset_call(token: contextvars.Token[CallContext | None]) -> None:
    _current.reset(token)
