"""`Agent`: a conversation with one prompt driver, usable from Python and the magics.

`await agent.arun(prompt)` in a notebook cell (top-level await) or
`agent.run(prompt)` anywhere, including inside a running event loop. Both run
the request on the shared background loop (`loop_thread`), so one driver and
its HTTP client always live on one loop. The loop itself is `loop.AgentRun`;
what a run is given besides its prompt is a `RunOptions` (`options.filled` completes one from the agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..core import (
    Event,
    Message,
    ModelSettings,
    PromptStack,
    SystemBlock,
    TextBlock,
    coerce_settings,
    to_blocks,
)
from ..drivers import BasePromptDriver, create_driver
from ..memory import TaskMemory, current_memory
from ..tools import with_task_memory
from . import defaults
from .conversation import Thread, history_for, result_turn
from .inputs.files import document_blocks
from .inputs.images import image_blocks
from .loop import AgentRun
from .loop_thread import OneRunAtATime, run_in_background, run_sync
from .options import Approve, RunOptions, _toolbox, builtin_list, filled
from .result import AgentResult
from .telemetry.trace_spans import run_spans


class Agent:
    """A conversation with one model.

    The keyword arguments are the agent's defaults; a run's `RunOptions` override them.

    Args:
        provider: ``provider:model`` (``openai:gpt-6-luna``), ``replay:CASSETTE``,
            or a ready prompt driver; None: the default's (``%provider``, or the
            innermost ``with ipyagent.using(...)`` block), with its driver options.
        settings: `ModelSettings` (or a dict of its fields) for every run, over the
            default's settings; a run's own `settings` go over these.
        system: the system prompt, sent first on every turn: text, or a list of
            `SystemBlock` (and text): static blocks are always sent, dynamic ones are
            dropped lowest priority first to fit `system_budget`.
        system_budget: tokens (our estimate) the system blocks may take; None: no limit.
        tools: `BaseTool` instances or functions the model may call (or a `Toolbox`).
        builtin_tools: provider-side tools the model may use: names (``"web_search"``,
            ``"web_fetch"``, ``"code_execution"``, ``"file_search"``, ``"url_context"``) or
            `core.BuiltinTool` objects with options (``BuiltinTool("web_search",
            allowed_domains=["python.org"])``); the provider runs them. A driver without one
            refuses the run, naming the providers that have it.
        max_steps: model turns per run at most; the run stops there, keeping
            everything so far, with an error saying so.
        react: use the ReAct text protocol for tools (None: only when the
            driver has no native tool calling).
        approve: called with each tool call whose activity `requires_approval`;
            returns (or resolves to) True to run it. Without it such calls are not run.
        memory: the `TaskMemory` off-prompt tools store their outputs in (default: the
            session's, `ipyagent.memory`); a ``TaskMemory`` tool to read it is added to
            any run with an off-prompt tool.
        timeout: a run's deadline, seconds, every model turn and tool included (None:
            the default's, `defaults.DEFAULT_TIMEOUT` = 600 s unless ``%provider --timeout``
            or ``ipyagent.using(timeout=...)`` says otherwise).
        thread: the conversation this agent continues (a `Thread`, shared with whoever else
            holds it: a notebook's named thread); None: a new one of its own. Each run adds
            its turn to it, a failed or interrupted one marked; `messages` is what the next
            request carries of it. `system`, given, becomes the thread's system prompt.
        **driver_options: passed to `create_driver` (``base_url``, ``api_key_env``,
            ``record``, ``max_attempts``, ``provider_options``; ``read_timeout``: seconds
            between two received bytes; ``response_timeout``: seconds for one whole response).

    Raises:
        ConfigurationError: unknown provider or missing API key (at creation).
        ValueError: a timeout that is not a positive number.
    """

    def __init__(
        self,
        provider: str | BasePromptDriver | None = None,
        *,
        settings: ModelSettings | dict[str, Any] | None = None,
        system: str | SystemBlock | list[str | SystemBlock] | None = None,
        system_budget: int | None = None,
        tools: Any = None,
        builtin_tools: Any = None,
        max_steps: int = 10,
        react: bool | None = None,
        approve: Approve | None = None,
        memory: TaskMemory | None = None,
        timeout: float | None = None,
        thread: Thread | None = None,
        **driver_options: Any,
    ) -> None:
        if isinstance(provider, BasePromptDriver):
            self.driver, self.settings = provider, defaults.current_default().settings.merged(coerce_settings(settings))
        else:
            provider_id, self.settings, options = defaults.resolve(provider, settings, driver_options)
            self.driver = create_driver(provider_id, **options)
        self.thread = thread if thread is not None else Thread()
        if system is not None or thread is None:
            self.thread.system = system
        self.system_budget = system_budget
        self.toolbox = _toolbox(tools)
        self.builtin_tools = builtin_list(builtin_tools)
        self.max_steps = max_steps
        self.react = react
        self.approve = approve
        self.memory = memory  # Task Memory for off-prompt outputs (None: the session's, ipyagent.memory)
        self._gate = OneRunAtATime(self)  # runs share the conversation: one at a time, in order
        self.results: list[AgentResult] = []
        self._timeout = None if timeout is None else defaults.check_timeout(timeout)

    @property
    def timeout(self) -> float:
        """A run's deadline, seconds: the one given, else the default's in force (`defaults.DEFAULT_TIMEOUT`)."""
        return defaults.current_default().timeout if self._timeout is None else self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._timeout = None if value is None else defaults.check_timeout(value)

    @property
    def provider(self) -> str:
        return self.driver.id

    @property
    def system(self) -> Any:
        """The system prompt: its thread's (text, or `SystemBlock` objects and text)."""
        return self.thread.system

    @system.setter
    def system(self, value: Any) -> None:
        self.thread.system = value

    @property
    def messages(self) -> list[Message]:
        """The conversation as the next request carries it (a new list): the messages of the
        thread's completed turns, oldest first (`Thread.compose`)."""
        return self.thread.compose().messages

    @property
    def uses_react(self) -> bool:
        """True when tools go through the ReAct text protocol instead of native tool calls."""
        return self.react if self.react is not None else not self.driver.supports_tools

    def options(self, options: RunOptions | None = None, **changes: Any) -> RunOptions:
        """`options` (and keyword `changes`) with every field left None filled from this agent.

        Raises:
            ValueError: `max_steps` below 1.
        """
        return filled(self, (options or RunOptions()).merged(**changes))

    def prompt_stack(self, prompt: str | None = None, options: RunOptions | None = None) -> PromptStack:
        """The first request of a run of `prompt` with `options`: system prompt, history, prompt, tools."""
        user = Message(role="user", content=to_blocks(prompt)) if prompt is not None else None
        return AgentRun(self.driver, user, self.options(options), self._memory(), _ignore).compose()

    def user_message(self, prompt: str, options: RunOptions | None = None) -> Message:
        """The user message of a run of `prompt`, built once: the context blocks (`options.context`)
        as text ahead of the question, then the prompt, the images and the files."""
        given = options or RunOptions()
        user = Message(role="user", content=to_blocks(prompt))  # as `PromptStack.add_user_message`, no stack built
        user.content[:0] = [TextBlock(text=block.to_text()) for block in given.context]  # ahead of the question
        user.content.extend(given.images)
        user.content.extend(given.files)
        return user

    def _composed(self, user: Message, options: RunOptions, emit: Callable[[Event], Any]) -> RunOptions:
        """`options` with this agent's conversation as the history (`conversation.history_for`); a
        `HistoryTrimmed` notice goes to `emit` when turns were left out. An empty conversation (a fresh
        agent: an evaluation's every run) has nothing to fit: no estimate of the prompt's tokens, and
        `options` as they are when their history is empty already."""
        if not self.thread.turns:
            return options if options.history == [] else replace(options, history=[])  # `filled` gave [] already
        composition = history_for(self.thread, user, options, options.context_window or self.driver.context_window)
        notice = composition.notice(self.thread.name)
        if notice is not None:
            emit(notice)
        return replace(options, history=composition.messages)

    async def _arun(self, prompt: str | Message, options: RunOptions,
                    on_event: Callable[[Event], Any] | None) -> AgentResult:
        resolved, memory, emit = self.options(options), self._memory(), on_event or _ignore
        tools = with_task_memory(resolved.tools, memory, self.driver, resolved.ledger)
        if tools is not resolved.tools:  # most runs have no off-prompt tool: the options are not copied
            resolved = replace(resolved, tools=tools)
        user = prompt if isinstance(prompt, Message) else self.user_message(prompt, resolved)
        own = options.history is None  # the agent's own conversation: the run's turn joins it
        if own:
            resolved = self._composed(user, resolved, emit)
        spans = run_spans(self.driver, resolved, user, self.thread.name)  # None: tracing off
        run = AgentRun(self.driver, user, resolved, memory, emit if spans is None else spans.tee(emit))
        deadline = asyncio.timeout(resolved.timeout)
        result: AgentResult | None = None
        try:
            async with deadline:  # every model turn and tool
                result = await run.run()
        except TimeoutError:
            if not deadline.expired():
                raise
            result = run.timed_out(resolved.timeout)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            result = run.interrupted()
            self._keep(result, own, resolved.run_id)
            raise
        finally:
            if spans is not None:
                spans.finish(result)
        self._keep(result, own, resolved.run_id)
        return result

    def _keep(self, result: AgentResult, own: bool, run_id: str | None) -> None:
        """`result` joins `results`, and its turn this agent's thread (`own`: the run continued
        it), completed or marked failed or interrupted (`result_turn`)."""
        if own:
            self.thread.add(result_turn(result, run_id=run_id))
        self.results.append(result)

    async def arun(
        self,
        prompt: str | Message,
        options: RunOptions | None = None,
        *,
        on_event: Callable[[Event], Any] | None = None,
        output_schema: Any = None,
        output_strategy: str | None = None,
        images: Any = None,
        context: Any = None,
        settings: ModelSettings | dict[str, Any] | None = None,
        timeout: float | None = None,
        files: Any = None,
    ) -> AgentResult:
        """Run `prompt` (model turns and tool calls until the model answers) and return the result.

        `on_event` sees every event as it arrives (called on ipyagent's background loop
        thread). Failures are in `result.error`, not raised. A run with `options.history`
        leaves this agent's conversation alone; otherwise a completed run joins it.

        Args:
            prompt: the prompt, or the user message built already (`user_message`; options' context not added again).
            options: this run's `RunOptions` (fields left None: this agent's settings).
            output_schema, output_strategy: shortcuts for the `RunOptions` fields: a pydantic
                model class (or a JSON Schema dict) the reply is validated into (`result.output`;
                an invalid reply is sent back once, then `result.error` has type
                ``invalid_output``); ``native`` / ``tool`` / ``rule``.
            images: images added to the user message: file paths, URLs, bytes, PIL
                images, matplotlib figures (see `images.image_block`). A model without
                vision fails before anything is sent (``unsupported_capability``).
            context: `memory.context.ContextBlock` objects (variables, the last error, other
                cells), sent as text blocks at the head of the user message, before `prompt`.
            settings: `ModelSettings` (or a dict) for this run, over the agent's.
            timeout: this run's deadline, seconds (the `RunOptions` field): past it the run
                ends with a ``timeout`` error, its text so far kept.
            files: PDFs and text documents (paths, bytes, `DocumentBlock`) added to the user
                message; a provider or model that cannot take one refuses it before sending.

        Raises:
            ValueError: `prompt` is not text, or is empty; `max_steps` below 1; a timeout
                that is not a positive number.
            FileNotFoundError, ValueError, TypeError: an image that cannot be read.
            RuntimeError: a tool of this agent's own run calls it (`Agent.run` or ``%%agent``):
                that run would wait for itself. A tool may run another `Agent`.
        """
        if not (isinstance(prompt, str) and prompt.strip() or isinstance(prompt, Message) and prompt.content):
            raise ValueError(f"the prompt must be non-empty text, not {prompt!r}")
        blocks = image_blocks(images) if images is not None else None
        documents = tuple(document_blocks(files)) if files is not None else None
        options = (options or RunOptions()).merged(
            output_schema=output_schema,
            output_strategy=output_strategy,
            images=blocks,
            files=documents,
            context=tuple(context) if context is not None else None,
            settings=settings,
            timeout=timeout,
        )
        self._gate.check()
        return await run_in_background(self._gate.run(self._arun(prompt, options, on_event)))

    def run(self, prompt: str | Message, options: RunOptions | None = None, **shortcuts: Any) -> AgentResult:
        """Blocking `arun` (the same arguments: `on_event`, `output_schema`, `output_strategy`, `images`,
        `context`, `settings`, `timeout`, `files`); works inside a running event loop (a notebook cell)."""
        self._gate.check()
        return run_sync(self.arun(prompt, options, **shortcuts))

    def _memory(self) -> TaskMemory:
        return current_memory() if self.memory is None else self.memory

    def __repr__(self) -> str:
        tools = f", tools={self.toolbox.names()}" if self.toolbox else ""
        return f"<Agent {self.provider}: {len(self.messages)} messages{tools}>"

    def fresh(self) -> "Agent":
        """A new agent with an empty conversation and this one's driver (shared, not copied),
        settings, system prompt and its budget, tools, max_steps, react, approve, Task Memory
        and own timeout (None stays None: the default's in force at each run), all passed to
        the constructor. An evaluation runs each cell on one, so cells share no history and
        run concurrently (an agent runs one run at a time)."""
        return Agent(self.driver, settings=self.settings, system=self.system, system_budget=self.system_budget,
                     tools=self.toolbox, builtin_tools=self.builtin_tools, max_steps=self.max_steps,
                     react=self.react, approve=self.approve, memory=self.memory, timeout=self._timeout)

    def reset(self) -> None:
        """Forget the conversation (the system prompt stays)."""
        self.thread.reset()

    async def aclose(self) -> None:
        await self.driver.close()


def _ignore(event: Event) -> None:
    return None


__all__ = ["Agent", "AgentResult", "RunOptions"]
