"""`RunOptions`: what one run is given besides its prompt (DESIGN.md, "agent and evaluation").

A run's options are passed in (``agent.arun(prompt, RunOptions(...))``), never
patched onto an `Agent`: one agent can serve runs with different tools,
histories or output schemas, one after another or (on different agents
sharing a driver) at once. A field left None takes the agent's own setting.

To add an option: add a field here (with a default that keeps today's
behaviour and a line in the docstring), read it in `loop.AgentRun`, and, for
the magics, set it in `AgentMagics._run_options`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import (
    BuiltinTool,
    ElicitationAnswer,
    ElicitationRequest,
    Message,
    ModelSettings,
    SamplingRequest,
    SamplingVerdict,
    ToolAction,
    coerce_settings,
)
from ..drivers import Ledger
from ..tools import Toolbox
from . import defaults
from .defaults import check_max_tool_calls, check_timeout

#: ``approve(action)``: True (or an awaitable of True) to run a call that needs approval.
Approve = Callable[[ToolAction], "bool | Awaitable[bool]"]
#: ``approve_sampling(request)``: the user's `SamplingVerdict` on an MCP server's sampling request.
ApproveSampling = Callable[[SamplingRequest], Awaitable[SamplingVerdict]]
#: ``elicit(request)``: the user's `ElicitationAnswer` to an MCP server's elicitation.
Elicit = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]
#: Sampling requests an MCP server may make in one run by default (`RunOptions.max_sampling`).
MAX_SAMPLING = 5


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Options of one run. None (or empty) means: the `Agent`'s own setting.

    Attributes:
        system: the system prompt of this run: text, or `SystemBlock` objects (and text).
        system_budget: tokens (our estimate) the system blocks may take: dynamic blocks are
            dropped, lowest priority first, to fit; None: no limit.
        history: the conversation before the prompt. Given, the run starts from it and
            leaves the agent's own conversation alone (the caller keeps the history:
            notebook threads, comparisons, evaluations); None: the agent's conversation,
            which a completed run then joins.
        tools: the tools the model may call: `BaseTool` objects, functions, or a `Toolbox`.
        builtin_tools: provider-side tools (names or `core.BuiltinTool`: web search, code
            execution, ...) the model may use; None: the agent's.
        max_steps: model turns at most (>= 1); past it the run ends with a ``max_steps`` error.
        react: True: tools through the ReAct text protocol; False: native tool calls.
        approve: asked before each call whose activity `requires_approval`; without it
            such calls are not run.
        output_schema: a pydantic model class or a JSON Schema dict: the reply is validated
            into `AgentResult.output` (asked again once when invalid).
        output_strategy: ``native``, ``tool`` or ``rule`` (None: the driver's default).
        images: image content blocks added to the user message (see `images.image_blocks`).
        files: document blocks (PDFs, text documents) added to the user message (`files.document_blocks`).
        context: `memory.context.ContextBlock` objects (variables, the last error, other
            cells), sent as text blocks at the head of the user message, before the prompt.
        settings: `ModelSettings` (or a dict of its fields) for this run, over the agent's.
        timeout: the run's deadline, seconds, every model turn and tool included; past it
            the run ends with a ``timeout`` error, its text so far kept (None: the agent's,
            by default `defaults.DEFAULT_TIMEOUT`).
        max_tool_calls: tool calls the run may make, all turns together (0 or more; None: the
            default's, `defaults.DEFAULT_MAX_TOOL_CALLS`). A turn whose calls would pass it ends
            the run with a ``max_tool_calls`` error before any of them runs; its stream is not
            read past the call that passes it.
        redact_context: tool results pass the one redactor's context rule before they are sent
            (None: the default's, True unless ``%agent settings redact_context=false``).
        max_history: with the agent's own conversation, the latest completed turns sent at most
            (None: as many as fit); older turns are left out whole.
        context_window: with the agent's own conversation, the tokens (our estimate) the request
            is fitted to by leaving out the oldest turns (None: the model's window).
        ledger: the session spending this run is checked against (``budget``: no run starts
            once it is spent) and records its model turns in (None: the default's,
            `defaults.Defaults.ledger`, which ``%provider --budget`` sets).
        run_id: the id this run is recorded under (a run store's), kept with its turn in the
            agent's thread.
        approve_sampling: asked before an MCP server's sampling request is answered by the
            run's model (a server added with ``approve_sampling`` is not asked); without it
            such requests are refused.
        elicit: asked when an MCP server asks the user for input (a form, or a link to
            open); without it the server is told the user declined.
        max_sampling: sampling requests answered in one run at most (None: `MAX_SAMPLING`);
            past it they are refused.
    """

    system: Any = None
    system_budget: int | None = None
    history: Sequence[Message] | None = None
    tools: Any = None
    builtin_tools: Any = None
    max_steps: int | None = None
    react: bool | None = None
    approve: Approve | None = None
    output_schema: Any = None
    output_strategy: str | None = None
    images: Sequence[Any] = field(default_factory=tuple)
    files: Sequence[Any] = field(default_factory=tuple)
    context: Sequence[Any] = field(default_factory=tuple)
    settings: ModelSettings | dict[str, Any] | None = None
    timeout: float | None = None
    max_tool_calls: int | None = None
    redact_context: bool | None = None
    max_history: int | None = None
    context_window: int | None = None
    ledger: Ledger | None = None
    run_id: str | None = None
    approve_sampling: ApproveSampling | None = None
    elicit: Elicit | None = None
    max_sampling: int | None = None

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be 1 or more, not {self.max_steps}")
        if self.max_sampling is not None and self.max_sampling < 0:
            raise ValueError(f"max_sampling must be 0 or more, not {self.max_sampling}")
        if self.timeout is not None:
            object.__setattr__(self, "timeout", check_timeout(self.timeout))
        if self.max_tool_calls is not None:
            check_max_tool_calls(self.max_tool_calls)

    def merged(self, **changes: Any) -> "RunOptions":
        """A copy with the `changes` that are not None (keyword shortcuts of `Agent.arun`)."""
        given = {k: v for k, v in changes.items() if v is not None}
        return replace(self, **given) if given else self


__all__ = ["Approve", "ApproveSampling", "Elicit", "MAX_SAMPLING", "RunOptions"]


def filled(agent: Any, given: RunOptions) -> RunOptions:
    """`given` with every field left None filled from `agent` (an `Agent`: its system prompt,
    conversation, tools, settings...) or from the session's defaults (`defaults.current_default`)."""
    return RunOptions(
        system=given.system if given.system is not None else agent.system,
        system_budget=given.system_budget if given.system_budget is not None else agent.system_budget,
        history=list(given.history) if given.history is not None else list(agent.messages),
        tools=_toolbox(given.tools) if given.tools is not None else agent.toolbox,
        builtin_tools=builtin_list(given.builtin_tools) if given.builtin_tools is not None else agent.builtin_tools,
        max_steps=given.max_steps or agent.max_steps,
        react=given.react if given.react is not None else agent.react,
        approve=given.approve or agent.approve,
        output_schema=given.output_schema,
        output_strategy=given.output_strategy,
        images=tuple(given.images),
        files=tuple(given.files),
        context=tuple(given.context),
        settings=agent.settings.merged(coerce_settings(given.settings)),
        timeout=given.timeout or agent.timeout,
        max_tool_calls=given.max_tool_calls if given.max_tool_calls is not None
        else defaults.current_default().max_tool_calls,
        redact_context=given.redact_context if given.redact_context is not None
        else defaults.current_default().redact_context,
        max_history=given.max_history,
        context_window=given.context_window,
        ledger=given.ledger if given.ledger is not None else defaults.current_default().ledger,
        run_id=given.run_id,
        approve_sampling=given.approve_sampling,
        elicit=given.elicit,
        max_sampling=given.max_sampling if given.max_sampling is not None else MAX_SAMPLING,
    )


def builtin_list(tools: Any) -> list[BuiltinTool]:
    """Built-in tools given as a name, a `BuiltinTool`, or a list of those (None: none), each
    once (a later one of the same name replaces an earlier).

    Raises:
        ValueError: an unknown tool name; TypeError: something that names no built-in tool.
    """
    given = [tools] if isinstance(tools, (str, BuiltinTool, dict)) else list(tools or ())
    found = {tool.name: tool for tool in map(BuiltinTool.of, given)}
    return list(found.values())


def _toolbox(tools: Any) -> Toolbox:
    return tools if isinstance(tools, Toolbox) else Toolbox(tools or [])
