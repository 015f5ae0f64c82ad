"""The agent loop as typed steps (DESIGN.md, "agent and evaluation").

    compose the prompt stack -> model turn -> structured output -> tool calls -> next turn

Each step is a method of `AgentRun` that returns a value: `compose` a
`PromptStack`, `model_turn` the turn's `ModelCompleted` or `ModelFailed`,
`structured_output` an `Output`, `tool_calls` the message carrying the results (the tool
steps are `tool_steps.ToolSteps`).
Events go to `emit` as they happen; what outlives a step (the messages the run
has added, usage, costs, the calls run) lives on the run, never in event
metadata. `run()` chains the steps and returns the `AgentResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from ..core import (
    MAX_ARGUMENT_CHARS,
    DeltaMessage,
    ErrorArtifact,
    Event,
    InfoArtifact,
    Message,
    MessageError,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PartialReply,
    PromptStack,
    ProviderError,
    StopKind,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    Usage,
    fit_system_blocks,
    reply_so_far,
    system_blocks,
)
from ..drivers import BasePromptDriver, total_cost
from ..memory import TaskMemory
from ..tools import MCPServerError, Toolbox
from . import react, structured
from .defaults import DEFAULT_MAX_TOOL_CALLS
from .options import RunOptions
from .result import AgentResult
from .sampling import Sampler
from .tool_steps import Calls, ToolSteps

#: An output that fails validation is asked for this many more times.
OUTPUT_RETRIES = 1


@dataclass(frozen=True, slots=True)
class Output:
    """A reply checked against the output schema: the validated `value`, or the `error`."""

    value: Any = None
    error: str | None = None


class CallLimits:
    """A model turn's tool calls checked as they stream (`check`, each `ToolCallDelta`): at most
    `left` calls (what is left of the run's `max_tool_calls`), the arguments of each at most
    `MAX_ARGUMENT_CHARS` characters. Past either the turn ends there, so a model asking for
    100,000 calls costs the reading of `left` + 1 of them."""

    __slots__ = ("left", "limit", "ran", "sizes")

    def __init__(self, limit: int, ran: int) -> None:
        self.limit, self.ran, self.left = limit, ran, max(0, limit - ran)
        self.sizes: dict[int, int] = {}  # content index of each call -> characters of its arguments so far

    def check(self, delta: ToolCallDelta) -> None:
        """Raises `ProviderError` (``max_tool_calls``, ``tool_arguments``) for the delta that passes a limit."""
        size = self.sizes.get(delta.index)
        if size is None:
            if len(self.sizes) >= self.left:
                raise self.too_many(f"more than {self.left}")
            size = 0
        size += len(delta.arguments)
        if size > MAX_ARGUMENT_CHARS:
            raise ProviderError("tool_arguments", f"the arguments of the model's tool call {delta.name or ''} passed "
                                f"{MAX_ARGUMENT_CHARS:,} characters, the most a call may have; the run stopped "
                                "there and no call of that turn was run")
        self.sizes[delta.index] = size

    def too_many(self, asked: str) -> ProviderError:
        """The ``max_tool_calls`` error of a turn that asked for `asked` calls."""
        earlier = f" ({self.ran} ran earlier in this run)" if self.ran else ""
        return ProviderError("max_tool_calls", f"the model asked for {asked} tool calls in one turn{earlier}, past "
                             f"max_tool_calls={self.limit} for this run; none of them was run. If that many are meant, "
                             "raise it: --max-tool-calls N, %agent settings max_tool_calls=N, or "
                             "RunOptions(max_tool_calls=N)")


class EventCallbackError(Exception):
    """The run's event callback raised `error` (`Emitter`)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error

    def as_provider_error(self) -> ProviderError:
        """The run's error: ``callback``, one line naming the callback's exception (at most 300 characters)."""
        what = " ".join(f"{type(self.error).__name__}: {self.error}".split())
        what = what if len(what) <= 300 else what[:299] + "…"
        return ProviderError("callback", f"on_event raised {what}; the run stopped there, the text so far is kept")


class Emitter:
    """The run's event callback (`on_event`: user code), called with each event.

    The first exception it raises is raised as `EventCallbackError`, which ends the run, and
    it is not called again (its state is unknown; the run's end is in the result). Once the
    run has stopped (`live` False: interrupted, past its deadline) an exception from it is
    not raised: the run is ending anyway, with its own outcome."""

    __slots__ = ("callback", "failed", "live")

    def __init__(self, callback: Callable[[Event], Any]) -> None:
        self.callback, self.failed, self.live = callback, False, True

    def __call__(self, event: Event) -> None:
        if self.failed:
            return
        try:
            self.callback(event)
        except Exception as exc:
            self.failed = True
            if self.live:
                raise EventCallbackError(exc) from exc


class AgentRun(ToolSteps):
    """One run of the agent loop over `driver`.

    Args:
        driver: the prompt driver of every model turn.
        prompt: the user message (images included); None composes without one.
        options: the run's options, every field resolved (`Agent` fills them in);
            `tools` a `Toolbox`.
        memory: the Task Memory off-prompt outputs go to.
        emit: called with each event as it happens (on the loop's thread). If it raises, the
            run ends there with a ``callback`` error, the reply being streamed kept as a failed
            partial (its HTTP response closed), and it is not called again (`Emitter`).
    """

    def __init__(self, driver: BasePromptDriver, prompt: Message | None, options: RunOptions, memory: TaskMemory,
                 emit: Callable[[Event], Any]) -> None:
        self.driver, self.options, self.memory = driver, options, memory
        self.emit = Emitter(emit)
        self.toolbox: Toolbox = options.tools
        self.react_wanted = options.react if options.react is not None else not driver.supports_tools
        self.react_mode = bool(self.toolbox) and self.react_wanted
        self.pending: list[Message] = [prompt] if prompt is not None else []  # what this run has added, in order
        self.usage = Usage()
        self.costs: list[dict[str, Any] | None] = []  # each completed turn's price (None: unknown)
        self.actions: list[ToolAction] = []  # every call run, ReAct ones included
        self.streaming: PartialReply | None = None  # the reply being streamed (its driver's record), for a stopped run
        self.first_token_s: float | None = None  # seconds to the run's first delta, for a stopped run's figures
        self.verdicts: dict[int, str] = {}  # id(action) -> "approved" / "denied", until its result is emitted
        self.running: tuple[list[ToolAction], float] | None = None  # the calls being run, and since when (monotonic)
        self.max_tool_calls = DEFAULT_MAX_TOOL_CALLS if options.max_tool_calls is None else options.max_tool_calls
        self.redact_results = options.redact_context is not False
        self._sampler: Sampler | None = None

    @property
    def sampler(self) -> Sampler:
        """MCP servers' sampling requests during this run's tool calls: made at the first one asked for
        (it holds the run: a cycle, left to the garbage collector, for a run with tool calls only)."""
        if self._sampler is None:
            self._sampler = Sampler(self)
        return self._sampler

    # -- the steps ---------------------------------------------------------------------

    def compose(self) -> PromptStack:
        """The next request: the system prompt (and the ReAct protocol), the history, this
        run's messages, the tools and the output schema."""
        definitions = self.toolbox.definitions()
        # built from parts already checked (`ToolDefinition`s, `ModelSettings`, `BuiltinTool`s): not validated
        # again, so a run never builds `PromptStack`'s validator (~30 ms, the nested message union's, once);
        # every field given: pydantic (2.14) inspects a default factory's signature at each call (~0.3 ms a run)
        stack = PromptStack.model_construct(tools=[] if self.react_mode else definitions,
                                            settings=self.options.settings,
                                            builtin_tools=list(self.options.builtin_tools or ()),
                                            messages=[], system_blocks=[], system_dropped=[],
                                            output_schema=None, output_strategy=None)
        protocol = react.system_prompt(definitions) if self.react_mode else None
        if isinstance(self.options.system, (str, type(None))):
            system = "\n\n".join(p for p in (self.options.system, protocol) if p)
            if system:
                stack.add_system_message(system)
        else:  # blocks: fitted to the budget; each driver maps them to its own system field
            blocks = system_blocks(self.options.system) + system_blocks(protocol, source="react")
            stack.system_blocks, stack.system_dropped = fit_system_blocks(blocks, self.options.system_budget)
        stack.messages.extend(self.options.history or ())
        stack.messages.extend(self.pending)
        stack.output_schema = self.options.output_schema
        stack.output_strategy = self.options.output_strategy  # type: ignore[assignment]
        return stack

    async def model_turn(self, stack: PromptStack) -> ModelCompleted | ModelFailed:
        """Stream one reply: every event but the last goes to `emit`; the last is returned.
        A request refused before sending (a missing capability), or a stream that ends
        without a result, is a `ModelFailed` too, with what had arrived."""
        started = time.monotonic()
        limits = CallLimits(self.max_tool_calls, len(self.actions))
        try:
            async with aclosing(self.driver.stream(stack)) as events:
                async for event in events:
                    if isinstance(event, (ModelCompleted, ModelFailed)):
                        self.streaming = None  # the reply is whole: an interrupt from now on keeps it, not its deltas
                        return event
                    if isinstance(event, DeltaMessage):
                        if self.first_token_s is None:
                            self.first_token_s = time.monotonic() - started
                        if event.__class__ is ToolCallDelta:
                            limits.check(event)  # past a limit: the stream is closed here, nothing read further
                    elif event.__class__ is ModelStarted:
                        self.streaming = event.reply  # type: ignore[union-attr]  # the driver's record of the reply
                    self.emit(event)
            raise ProviderError(
                "invalid_response",
                f"the {self.driver.id} stream ended without a result (a driver bug); the text so far is kept",
            )
        except (ProviderError, EventCallbackError) as exc:  # the stream is closed by now (aclosing)
            error = exc.as_provider_error() if isinstance(exc, EventCallbackError) else exc
            kept = reply_so_far(self.streaming, "failed", error)
            self.streaming = None
            return ModelFailed(error, kept or Message(role="assistant", status="failed", error=MessageError.of(error)))

    def structured_output(self, message: Message) -> Output:
        """`message` read against the output schema; the output tool's call (never run:
        its input is the answer) gets its verdict as a `ToolCallCompleted`."""
        value, error = structured.read_output(message, self.options.output_schema)
        call = structured.output_call(message)
        if call is not None:
            call.output = (
                InfoArtifact(value="accepted as the final result") if error is None else ErrorArtifact(value=error)
            )
            self.emit(ToolCallCompleted(call, call.output, 0.0))
        return Output(value, error)

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> AgentResult:
        """Model turns and tool calls until the model answers, fails, or `max_steps` turns; an
        event callback that raises ends the run there (``callback`` error, the last reply kept)."""
        try:
            return await self._steps()
        except EventCallbackError as exc:  # after a reply (mid-stream, `model_turn` made it a failed turn)
            return self._fail(self._partial_reply(), exc.as_provider_error())
        finally:
            self.emit.live = False  # stopped (interrupt, deadline) or ended: the callback's errors no longer count

    async def _steps(self) -> AgentResult:
        try:
            if self.options.ledger is not None:
                self.options.ledger.check_budget()  # %provider --budget: no new run once it is spent
        except ProviderError as exc:
            return self._fail(Message(role="assistant"), exc)
        try:
            await self.prepare_tools()
        except MCPServerError as exc:  # nothing was sent
            return self._fail(Message(role="assistant"), ProviderError("tool_unavailable", str(exc)))
        retries = OUTPUT_RETRIES
        for step in range(self.options.max_steps or 1):
            turn = await self.model_turn(await self._next_request(step))
            if isinstance(turn, ModelFailed):
                self._keep_failed(turn)
                self.emit(turn)
                return self._result(turn.partial, error=turn.error, metadata=turn.metadata)
            self._bill(turn.metadata, turn.usage)
            self.pending.append(turn.message)
            calls = self._calls_in(turn.message)
            if not calls and turn.message.metadata.get("paused"):
                # The provider paused its own tool loop (Anthropic's pause_turn): sent back as it is, it goes on.
                self.emit(replace(turn, more_turns=True))
                continue
            if self.options.output_schema is not None and (
                structured.output_call(turn.message) is not None or not calls
            ):
                output = self.structured_output(turn.message)
                again = output.error is not None and retries > 0
                self.emit(replace(turn, more_turns=again))
                if output.error is None:
                    return self._result(turn.message, turn=turn, output=output.value)
                if not again:
                    return self._fail(
                        turn.message, _invalid_output(self.options.output_schema, turn.message, output.error)
                    )
                retries -= 1
                self.pending.append(structured.correction(turn.message, output.error))
                continue
            cut_off = turn.stop_reason.kind is StopKind.max_tokens and bool(
                calls.actions or turn.metadata.get("partial_tool_calls")
            )
            self.emit(replace(turn, more_turns=bool(calls) and not cut_off))
            if cut_off:
                return self._fail(turn.message, _cut_off_error())
            if not calls:
                return self._result(turn.message, turn=turn)
            limits = CallLimits(self.max_tool_calls, len(self.actions))
            if len(calls.actions) > limits.left:  # ReAct's calls, or a reply read whole: none runs
                return self._fail(turn.message, limits.too_many(str(len(calls.actions))))
            self.pending.append(await self.tool_calls(calls))
        # the last reply (its tool results, or a correction, follow it; a paused reply is the last)
        last = self.pending[-1] if self.pending[-1].role == "assistant" else self.pending[-2]
        return self._fail(
            last,
            ProviderError(
                "max_steps",
                f"stopped after {self.options.max_steps} model turns (max_steps); the tool results so far are kept",
            ),
        )

    async def _next_request(self, step: int) -> PromptStack:
        """The prompt stack of turn `step` (0: the first); before a later turn, an MCP server that
        said its tools changed (``tools/list_changed``) lists them again."""
        if step:
            await self.toolbox.refresh()
        return self.compose()

    def interrupted(self) -> AgentResult:
        """The result of a run cancelled now: the reply being streamed as it stood
        (text, reasoning and tool calls), else the last reply; calls it was running read
        ``interrupted`` (`stop_running`)."""
        self.stop_running("interrupted")
        message = self._partial_reply()
        message.status = "interrupted"
        return self._result(message, interrupted=True, metadata=self._stopped_metadata())

    def timed_out(self, timeout: float) -> AgentResult:
        """The result of a run stopped by its deadline: the reply as it stood (as `interrupted`)
        with a ``timeout`` error, emitted so the view and the run store show it; calls it was
        running read "stopped at the deadline" (`stop_running`)."""
        self.stop_running("timeout")
        error = ProviderError(
            "timeout",
            f"the run did not finish within {timeout:g} s (timeout); the text so far is kept; "
            "give it longer with --timeout SECONDS (timeout= in Python)",
            retryable=False,
        )
        message = self._partial_reply()
        message.status, message.error = "failed", MessageError.of(error)
        return self._fail(message, error, self._stopped_metadata())

    def _keep_failed(self, turn: ModelFailed) -> None:
        """A failed turn's partial reply (its status ``failed``, set by whoever built it)
        joins the run's `messages` when something had arrived, never `new_messages`; the usage
        billed before the failure counts, with its price."""
        if turn.partial.content:
            self.pending.append(turn.partial)
        if turn.partial.usage is not None:
            self._bill(turn.metadata, turn.partial.usage)

    def _bill(self, metadata: dict[str, Any], usage: Usage) -> None:
        """A billed model turn: its `usage` and price (``metadata["cost"]``) count in the run's,
        and it is recorded in the run's ledger (`RunOptions.ledger`)."""
        self.usage += usage
        self.costs.append(metadata.get("cost"))
        if self.options.ledger is not None:
            self.options.ledger.record_turn(metadata, usage)

    def _stopped_metadata(self) -> dict[str, Any]:
        """Figures of a run stopped mid-stream that no driver event carries: its first token's time."""
        return {"ttft_s": self.first_token_s} if self.first_token_s is not None else {}

    def _partial_reply(self) -> Message:
        """The reply being streamed as its driver's record has it (`ModelStarted.reply`), else the
        last reply."""
        streamed = reply_so_far(self.streaming)
        if streamed is not None:
            self.pending.append(streamed)
            return streamed
        return next((m for m in reversed(self.pending) if m.role == "assistant"), Message(role="assistant"))

    # -- helpers -----------------------------------------------------------------------

    def _fail(self, message: Message, error: ProviderError, metadata: dict[str, Any] | None = None) -> AgentResult:
        """The loop's own failure after `message` (already billed): emitted and returned."""
        self.emit(ModelFailed(error, message, dict(metadata or {})))
        return self._result(message, error=error, metadata=metadata)

    def _result(
        self,
        message: Message,
        *,
        turn: ModelCompleted | None = None,
        error: ProviderError | None = None,
        metadata: dict[str, Any] | None = None,
        output: Any = None,
        interrupted: bool = False,
    ) -> AgentResult:
        completed = turn is not None
        new_messages = structured.for_conversation(self.pending) if completed else []  # output calls as their JSON text
        return AgentResult(
            self.driver.id,
            message,
            self.usage,
            turn.stop_reason if completed else None,
            error,
            interrupted,
            metadata=dict(turn.metadata) if completed else dict(metadata or {}),
            messages=list(self.pending),
            new_messages=new_messages,
            actions=list(self.actions),
            output=output,
            cost=total_cost(self.costs),
        )


def _cut_off_error() -> ProviderError:
    return ProviderError(
        "invalid_response",
        "the model ran out of output tokens while writing a tool call; raise max_completion_tokens or ask for less",
    )


def _invalid_output(schema: Any, message: Message, error: str) -> ProviderError:
    call = structured.output_call(message)
    return ProviderError(
        "invalid_output",
        f"the reply did not match {structured.schema_name(schema)}, even when asked again: {error}",
        raw={"text": message.text, "tool_input": call.input if call else None},
    )


__all__ = ["AgentRun", "Calls", "OUTPUT_RETRIES", "Output"]
