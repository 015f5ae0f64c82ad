"""`Agent`: a conversation with one prompt driver, usable from Python and the magics.

`await agent.arun(prompt)` in a notebook cell (top-level await) or
`agent.run(prompt)` anywhere, including inside a running event loop. Both run
the request on the shared background loop (`loop_thread`), so one driver and
its HTTP client always live on one loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import (
    coerce_settings,
    ActionArtifact,
    ArtifactStored,
    BaseArtifact,
    ErrorArtifact,
    Event,
    InfoArtifact,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelSettings,
    PromptStack,
    ProviderError,
    StopReason,
    StopKind,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    Usage,
)
from ..drivers import BasePromptDriver, create_driver
from ..drivers.pricing import LEDGER, Cost, total_cost
from ..memory import TaskMemory, current_memory
from ..tools import Toolbox
from ..tools.builtin.task_memory import with_task_memory
from ..tools.off_prompt import store_output
from . import defaults, react, structured
from .images import image_blocks
from .loop_thread import run_in_background, run_sync


@dataclass
class AgentResult:
    """The outcome of one `%%agent` cell or `Agent.run` call.

    Attributes:
        text: the assistant's text (partial if the run failed or was interrupted).
        message: the last assistant `Message` (content blocks, usage, metadata).
        usage: tokens billed by the provider, summed over the run's model turns.
        tool_calls: the tool calls the model made, each with its `output`.
        messages: every message the run added (user, assistant, tool results).
        stop_reason: why the model stopped; None when it failed.
        error: the `ProviderError` when the run failed, else None.
        interrupted: True when the run was cancelled (kernel interrupt).
        metadata: latency_s, ttft_s (seconds), attempts, replayed, provider, model.
        output: with an output schema, the validated reply (an instance of the
            pydantic model; the parsed JSON for a JSON Schema dict); else None.
        cost: the run's price from genai-prices, summed over model turns: a `Cost`, a
            float in USD with `input_usd` / `output_usd` parts; None when unknown.
    """

    provider: str
    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason | None = None
    error: ProviderError | None = None
    interrupted: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    actions: list[ToolAction] = field(default_factory=list)
    output: Any = None
    cost: Cost | None = None

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolAction]:
        """Every tool call of the run, across model turns, with its `output` once run."""
        if self.actions:  # every call that ran, ReAct ones included
            return list(self.actions)
        return [a for m in self.messages for a in m.tool_calls] or self.message.tool_calls

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted

    def __repr__(self) -> str:
        if self.interrupted:
            state = "interrupted"
        elif self.error is not None:
            state = f"failed: {self.error.type}"
        else:
            state = f"{self.stop_reason}, {self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
        return f"<AgentResult {self.provider}: {len(self.text)} chars, {state}>"


class Agent:
    """A conversation with one model.

    Args:
        provider: ``provider:model`` (``openai:gpt-4.1-mini``), ``replay:CASSETTE``,
            or a ready prompt driver; None: the default's (``%provider``, or the
            innermost ``with ipyagent.using(...)`` block), with its driver options.
        settings: `ModelSettings` (or a dict of its fields) for every run, over the
            default's settings; a run's own `settings` go over these.
        system: the system prompt, sent first on every turn.
        tools: `BaseTool` instances or functions the model may call.
        max_steps: model turns per run at most; the run stops there, keeping
            everything so far, with an error saying so.
        react: use the ReAct text protocol for tools (None: only when the
            driver has no native tool calling).
        approve: called with each tool call whose activity `requires_approval`;
            returns (or resolves to) True to run it. Without it such calls are not run.
        memory: the `TaskMemory` off-prompt tools store their outputs in (default: the
            session's, `ipyagent.memory`); a ``TaskMemory`` tool to read it is added to
            any run with an off-prompt tool.
        **driver_options: passed to `create_driver` (``base_url``, ``api_key_env``,
            ``record``, ``timeout``, ``max_attempts``, ``provider_options``).

    Raises:
        ConfigurationError: unknown provider or missing API key (at creation).
    """

    def __init__(
        self,
        provider: str | BasePromptDriver | None = None,
        *,
        settings: ModelSettings | dict[str, Any] | None = None,
        system: str | None = None,
        tools: list[Any] | None = None,
        max_steps: int = 10,
        react: bool | None = None,
        approve: Callable[[ToolAction], bool | Awaitable[bool]] | None = None,
        memory: TaskMemory | None = None,
        **driver_options: Any,
    ) -> None:
        if isinstance(provider, BasePromptDriver):
            self.driver, self.settings = provider, defaults.current().settings.merged(coerce_settings(settings))
        else:
            provider_id, self.settings, options = defaults.resolve(provider, settings, driver_options)
            self.driver = create_driver(provider_id, **options)
        self.system = system
        self.toolbox = Toolbox(tools or [])
        self.max_steps = max_steps
        self.react = react
        self.approve = approve
        self._lock: asyncio.Lock | None = None
        self.memory = memory  # Task Memory for off-prompt outputs (None: the session's, ipyagent.memory)
        self._stored: list[ArtifactStored] = []
        self.messages: list[Message] = []
        self.results: list[AgentResult] = []

    @property
    def provider(self) -> str:
        return self.driver.id

    @property
    def uses_react(self) -> bool:
        """True when tools go through the ReAct text protocol instead of native tool calls."""
        return self.react if self.react is not None else not self.driver.supports_tools

    def prompt_stack(self, prompt: str | None = None, pending: list[Message] | None = None,
                     settings: ModelSettings | None = None) -> PromptStack:
        """The request: system prompt, the conversation so far, `prompt`, then the run's `pending`
        messages; the agent's settings with the run's `settings` over them."""
        definitions = self.toolbox.definitions()
        react_mode = bool(definitions) and self.uses_react
        stack = PromptStack(tools=[] if react_mode else definitions, settings=self.settings.merged(settings))
        system = "\n\n".join(p for p in (self.system, react.system_prompt(definitions) if react_mode else None) if p)
        if system:
            stack.add_system_message(system)
        stack.messages.extend(self.messages)
        if prompt is not None:
            stack.add_user_message(prompt)
        stack.messages.extend(pending or [])
        return stack

    async def astream(self, prompt: str, *, output_schema: Any = None, output_strategy: str | None = None,
                      images: Any = None, context: Any = None,
                      settings: ModelSettings | dict[str, Any] | None = None) -> AsyncIterator[Event]:
        """Stream a run's events: model turn, tool calls, tool results, next turn, ...

        Runs on the caller's loop (prefer `arun`). Ends with the last turn's
        `ModelCompleted` or a `ModelFailed`. A completed run joins the
        conversation; a failed one does not, so the next prompt is composed
        without the broken reply. See `arun` for the keyword arguments.
        """
        self.toolbox = with_task_memory(self.toolbox, current_memory() if self.memory is None else self.memory, self.driver)
        pending: list[Message] = [self.prompt_stack(prompt).messages[-1]]
        pending[0].content.extend(image_blocks(images))
        pending[0].content[:0] = [TextBlock(text=block.to_text()) for block in context or ()]  # ahead of the question
        react_mode = bool(self.toolbox) and self.uses_react
        run_settings = coerce_settings(settings)
        retries = 1  # an output that fails validation is asked for once more
        try:
            LEDGER.check_budget()  # %provider --budget: no new run once the session has spent it
        except ProviderError as exc:
            yield ModelFailed(exc, Message(role="assistant"), {"run_messages": pending})
            return
        for _ in range(self.max_steps):
            completed: ModelCompleted | None = None
            stack = self.prompt_stack(None, pending, run_settings)
            stack.output_schema, stack.output_strategy = output_schema, output_strategy  # type: ignore[assignment]
            try:
                async for event in self.driver.stream(stack):
                    if isinstance(event, ModelCompleted):
                        completed = event  # yielded below, once a structured output is checked
                        event.metadata["run_messages"] = pending + [event.message]
                        continue
                    yield event
            except ProviderError as exc:  # refused before sending: a missing capability, a bad option
                yield ModelFailed(exc, Message(role="assistant"), {"run_messages": pending})
                return
            if completed is None:
                return
            pending.append(completed.message)
            answered = structured.output_call(completed.message) is not None or not (
                completed.message.tool_calls or (react_mode and react.parse_calls(completed.message.text)))
            if output_schema is not None and answered:
                async for event in self._structured_output(completed, output_schema, pending, retries):
                    yield event
                if completed.metadata.get("structured") == "invalid" and retries:
                    retries -= 1
                    continue
                return
            if react_mode:
                parsed = react.parse_calls(completed.message.text)
                calls = [c.action for c in parsed if c.action is not None]
            else:
                parsed, calls = [], completed.message.tool_calls
            for action in calls:
                self.toolbox.resolve(action)
            cut_off = completed.stop_reason.kind is StopKind.max_tokens and (calls or completed.metadata.get("partial_tool_calls"))
            completed.metadata["run_continues"] = bool(calls or parsed) and not cut_off  # views: more turns follow
            yield completed
            if not calls and not parsed and not cut_off:
                self.messages.extend(pending)
                return
            if cut_off:
                yield ModelFailed(
                    ProviderError("invalid_response", "the model ran out of output tokens while writing a tool call; "
                                  "raise max_completion_tokens or ask for less", retryable=False),
                    completed.message, {"run_messages": pending},
                )
                return
            results = await self._run_calls(calls)  # in call order: ids may repeat (ReAct models copy "c1")
            outcomes = {id(a): r for a, r in zip(calls, results)}
            while self._stored:  # off-prompt outputs that went to Task Memory
                yield self._stored.pop(0)
            if react_mode:
                blocks = []
                for call in parsed:
                    action = call.action or ToolAction(tag=call.tag, name="invalid_tool_call")
                    artifact, seconds = outcomes.get(id(call.action), (ErrorArtifact(value=call.error or "not run"), 0.0))
                    action.output = artifact
                    yield ToolCallCompleted(action, artifact, seconds)
                    blocks.append(react.result_block(call.tag, artifact.to_text(), is_error=artifact.type == "error"))
                pending.append(Message(role="user", content=[TextBlock(text="\n\n".join(blocks))]))
                continue
            result_message = Message(role="tool")
            for action in calls:
                artifact, seconds = outcomes[id(action)]
                action.output = artifact
                yield ToolCallCompleted(action, artifact, seconds)
                result_message.content.extend(PromptStack().add_message("tool", ActionArtifact(value=action)).content)
            pending.append(result_message)
        yield ModelFailed(
            ProviderError("max_steps", f"stopped after {self.max_steps} model turns (max_steps); the tool results so far are kept",
                          retryable=False),
            pending[-2] if len(pending) > 1 else Message(role="assistant"), {"run_messages": pending},
        )

    async def _structured_output(self, completed: ModelCompleted, schema: Any, pending: list[Message],
                                 retries: int) -> AsyncIterator[Event]:
        """Check the answer of a run with an output schema, then yield its `ModelCompleted`
        (``metadata["structured"]``: ``valid`` with ``metadata["output"]``, or ``invalid``).

        Valid: the run joins the conversation. Invalid with `retries` left: the
        correction goes into `pending` for one more turn. Otherwise a `ModelFailed`
        of type ``invalid_output`` follows.
        """
        message = completed.message
        output, error = structured.read_output(message, schema)
        call = structured.output_call(message)
        if call is not None:  # the output tool is never run: its input is the answer
            call.output = InfoArtifact(value="accepted as the final result") if error is None else ErrorArtifact(value=error)
            yield ToolCallCompleted(call, call.output, 0.0)
        completed.metadata["structured"] = "valid" if error is None else "invalid"
        completed.metadata["run_continues"] = error is not None and bool(retries)
        if error is None:
            completed.metadata["output"] = output
            yield completed
            self.messages.extend(structured.for_conversation(pending))
            return
        completed.metadata["output_error"] = error
        yield completed
        if retries:
            pending.append(structured.correction(message, error))
            return
        yield ModelFailed(
            ProviderError("invalid_output", f"the reply did not match {structured.schema_name(schema)}, even when asked again: {error}",
                          retryable=False, raw={"text": message.text, "tool_input": call.input if call else None}),
            message, {"run_messages": pending},
        )

    async def _run_calls(self, calls: list[ToolAction]) -> list[tuple[BaseArtifact, float]]:
        """Run one turn's calls concurrently, asking `approve` first for those that need it."""

        async def one(action: ToolAction) -> tuple[BaseArtifact, float]:
            route = self.toolbox.route(action)
            if route is not None and route[0].needs_approval(route[1]):
                if self.approve is None:
                    return ErrorArtifact(value="this tool needs approval and no one can approve it here; it was not run"), 0.0
                if inspect.iscoroutinefunction(self.approve) or inspect.iscoroutinefunction(getattr(self.approve, "__call__", None)):
                    verdict = await self.approve(action)
                else:  # a blocking callback (input(), a dialog) must not stall the shared loop
                    verdict = await asyncio.get_running_loop().run_in_executor(None, self.approve, action)
                    if inspect.isawaitable(verdict):
                        verdict = await verdict
                if not verdict:
                    return ErrorArtifact(value="denied by the user; the tool was not run"), 0.0
            return await self.toolbox.run_one(action)

        outcomes = list(await asyncio.gather(*(one(a) for a in calls)))
        memory = current_memory() if self.memory is None else self.memory
        for n, (action, (artifact, seconds)) in enumerate(zip(calls, outcomes)):  # in call order: stable namespaces
            artifact, stored = store_output(self.toolbox, action, artifact, memory)  # off-prompt -> Task Memory
            outcomes[n] = (artifact, seconds)
            self._stored += stored
        return outcomes

    async def _arun(self, prompt: str, on_event: Callable[[Event], Any] | None, **options: Any) -> AgentResult:
        result: AgentResult | None = None
        partial: list[Event] = []
        usage = Usage()
        billed: list[Message] = []  # messages whose usage is already in `usage`
        costs: list[dict[str, Any] | None] = []  # each completed turn's price (None: unknown)
        try:
            async for event in self.astream(prompt, **options):
                if on_event is not None:
                    on_event(event)
                partial.append(event)
                if isinstance(event, ModelCompleted):
                    usage = usage + event.usage
                    billed.append(event.message)
                    costs.append(event.metadata.get("cost"))
                    result = AgentResult(self.provider, event.message, usage, event.stop_reason, metadata=event.metadata,
                                         messages=event.metadata.pop("run_messages"), output=event.metadata.pop("output", None),
                                         cost=total_cost(costs))
                elif isinstance(event, ModelFailed):
                    # The loop's own failures (max_steps, a tool call cut by max_tokens) carry a
                    # message that its ModelCompleted already billed: count it once.
                    if not any(event.partial is m for m in billed):
                        usage = usage + (event.partial.usage or Usage())
                    result = AgentResult(self.provider, event.partial, usage, None, event.error, metadata=event.metadata,
                                         messages=event.metadata.pop("run_messages", []), cost=total_cost(costs))
        except asyncio.CancelledError:
            result = AgentResult(self.provider, _partial_message(partial), usage, interrupted=True,
                                 actions=[e.action for e in partial if isinstance(e, ToolCallCompleted)])
            self.results.append(result)
            raise
        assert result is not None, "a run ends with model_completed or model_failed"
        result.actions = [e.action for e in partial if isinstance(e, ToolCallCompleted)]
        self.results.append(result)
        return result

    async def arun(self, prompt: str, *, on_event: Callable[[Event], Any] | None = None, output_schema: Any = None,
                   output_strategy: str | None = None, images: Any = None, context: Any = None,
                   settings: ModelSettings | dict[str, Any] | None = None) -> AgentResult:
        """Run one turn and return its result; `on_event` sees every event as it arrives
        (called on ipyagent's background loop thread). Failures are in `result.error`,
        not raised.

        Args:
            output_schema: a pydantic model class (or a JSON Schema dict): the reply is
                validated into `result.output`. An invalid reply is sent back once with
                the validation error; if the second one fails too, `result.error` has
                type ``invalid_output``.
            output_strategy: ``native`` (the provider's JSON-schema mode), ``tool`` (a
                forced ``final_result`` tool call) or ``rule`` (the schema as a system
                instruction); None: the driver's default (`default_output_strategy`).
            images: images added to the user message: file paths, URLs, bytes, PIL
                images, matplotlib figures (see `images.image_block`). A model without
                vision fails before anything is sent (``unsupported_capability``).
            context: `memory.context.ContextBlock` objects (variables, the last error, other
                cells), sent as text blocks at the head of the user message, before `prompt`.

        Raises:
            ValueError: `prompt` is not text, or is empty.
            FileNotFoundError, ValueError, TypeError: an image that cannot be read.
        """
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"the prompt must be non-empty text, not {prompt!r}")
        options = {"output_schema": output_schema, "output_strategy": output_strategy, "images": image_blocks(images),
                   "context": list(context or ()), "settings": coerce_settings(settings)}
        return await run_in_background(self._locked(self._arun(prompt, on_event, **options)))

    async def _locked(self, run: Any) -> AgentResult:
        """One run of this agent at a time (runs share its conversation), in the order they came."""
        if self._lock is None:
            self._lock = asyncio.Lock()  # created on the background loop, where every run executes
        async with self._lock:
            return await run

    def run(self, prompt: str, *, on_event: Callable[[Event], Any] | None = None, output_schema: Any = None,
            output_strategy: str | None = None, images: Any = None, context: Any = None,
            settings: ModelSettings | dict[str, Any] | None = None) -> AgentResult:
        """Blocking `arun` (same arguments); works inside a running event loop (a notebook cell)."""
        return run_sync(self.arun(prompt, on_event=on_event, output_schema=output_schema,
                                  output_strategy=output_strategy, images=images, context=context, settings=settings))

    def __repr__(self) -> str:
        tools = f", tools={self.toolbox.names()}" if self.toolbox else ""
        return f"<Agent {self.provider}: {len(self.messages)} messages{tools}>"

    def reset(self) -> None:
        """Forget the conversation (the system prompt stays)."""
        self.messages.clear()

    async def aclose(self) -> None:
        await self.driver.close()


def _partial_message(events: list[Event]) -> Message:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return Message(role="assistant", content=[TextBlock(text=text)] if text else [], metadata={"partial": True, "interrupted": True})
