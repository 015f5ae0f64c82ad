"""The tool-call steps of the agent loop: find a reply's calls, run them (concurrently, approval first
where an activity needs it; a call the model wrote badly gets its error as the result), keep
off-prompt outputs in Task Memory, and say which calls a stopped run cut off."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import (
    ActionArtifact,
    ActionCallBlock,
    BaseArtifact,
    ErrorArtifact,
    Event,
    Message,
    PromptStack,
    TextBlock,
    ToolAction,
    ToolCallCompleted,
)
from ..memory import TaskMemory
from ..tools import CallContext, Toolbox, store_output, with_task_memory
from . import react
from .tool_results import context_safe


@dataclass(frozen=True, slots=True)
class Calls:
    """The tool calls of one reply: `actions` to run; with ReAct also every parsed block
    (`parsed`, some with only an error) whose results go back as text. `unreadable`: id() of
    each action the model wrote badly (`ActionCallBlock.error`) -> that error, its result
    instead of running it."""

    actions: list[ToolAction]
    parsed: list[react.ReactCall]
    unreadable: dict[int, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.actions or self.parsed)


class ToolSteps:
    """The tool-call steps of the agent loop (mixed into `loop.AgentRun`, whose state they use):
    the calls a reply holds (`_calls_in`), running them with approval and Task Memory
    (`tool_calls`), and the calls a stopped run cut off (`stop_running`)."""

    driver: Any
    options: Any
    memory: TaskMemory
    toolbox: Toolbox
    react_wanted: bool
    react_mode: bool
    emit: Callable[[Event], None]
    actions: list[ToolAction]
    verdicts: dict[int, str]
    redact_results: bool
    running: tuple[list[ToolAction], float] | None
    sampler: Any

    async def tool_calls(self, calls: Calls) -> Message:
        """Run one reply's calls (concurrently, approval first where needed), emit their
        stored artifacts and results, and return the message that carries the results."""
        self.running = (list(calls.actions), time.monotonic())  # left set if the run is stopped meanwhile
        results = await self._execute(calls.actions, calls.unreadable)
        self.running = None
        if self.react_mode:
            outcomes = {id(a): r for a, r in zip(calls.actions, results)}
            blocks = []
            for call in calls.parsed:
                if call.action is None:  # a block that did not parse: its error goes back, nothing ran
                    action, (artifact, seconds) = (
                        ToolAction(tag=call.tag, name="invalid_tool_call"),
                        (ErrorArtifact(value=str(call.error)), 0.0),
                    )
                else:
                    action, (artifact, seconds) = call.action, outcomes[id(call.action)]
                self._completed_call(action, artifact, seconds)
                blocks.append(react.result_block(call.tag, artifact.to_text(), is_error=artifact.type == "error"))
            return Message(role="user", content=[TextBlock(text="\n\n".join(blocks))])
        message = Message(role="tool")
        for action, (artifact, seconds) in zip(calls.actions, results):
            self._completed_call(action, artifact, seconds)
            message.content.extend(PromptStack().add_message("tool", ActionArtifact(value=action)).content)
        return message

    async def prepare_tools(self) -> None:
        """Let tools that learn theirs at run time do so (MCP servers start on first use and
        list their tools), then add the Task Memory reader if one of them is off-prompt."""
        await self.toolbox.prepare()
        self.toolbox = with_task_memory(self.toolbox, self.memory, self.driver, self.options.ledger)
        self.react_mode = bool(self.toolbox) and self.react_wanted

    def stop_running(self, why: str) -> None:
        """The run stopped (`why`: ``interrupted`` or ``timeout``) while it ran tool calls: each
        call without a result gets one that says so, emitted as a `ToolCallCompleted` with
        `stopped` set and the seconds it had run, so the views, the transcript and the run store
        tell it from a call never started ("not run")."""
        if self.running is None:
            return
        actions, started = self.running
        self.running = None
        seconds = time.monotonic() - started
        what = "interrupted" if why == "interrupted" else "stopped at the run's deadline"
        for action in actions:
            if action.output is None:
                self._completed_call(
                    action,
                    ErrorArtifact(value=f"{what} while the tool ran; it may not have finished"),
                    seconds,
                    stopped=why,
                )

    def _calls_in(self, message: Message) -> Calls:
        unreadable: dict[int, str] = {}
        if self.react_mode:
            parsed = react.parse_calls(message.text)
            actions = [c.action for c in parsed if c.action is not None]
        else:
            parsed, actions = [], message.tool_calls
            unreadable = {id(b.action): b.error for b in message.content if isinstance(b, ActionCallBlock) and b.error}
        for action in actions:
            self.toolbox.resolve(action)
        return Calls(actions, parsed, unreadable)

    def _completed_call(
        self, action: ToolAction, artifact: BaseArtifact, seconds: float, stopped: str | None = None
    ) -> None:
        if self.redact_results:  # what the model is sent: secrets in a tool's result masked (`context_safe`)
            artifact = context_safe(artifact)
        action.output = artifact
        self.actions.append(action)
        self.emit(ToolCallCompleted(action, artifact, seconds, self.verdicts.pop(id(action), None), stopped))

    async def _execute(self, actions: list[ToolAction], unreadable: dict[int, str]) -> list[tuple[BaseArtifact, float]]:
        """(result, seconds) per call, in call order (ids may repeat: ReAct models copy
        "c1"); a call in `unreadable` is not run, its error is its result; off-prompt outputs
        go to Task Memory, their `ArtifactStored` emitted here."""

        async def refuse(action: ToolAction) -> ErrorArtifact | None:
            error = unreadable.get(id(action))
            return ErrorArtifact(value=error) if error is not None else await self._refusal(action)

        outcomes = await self.toolbox.run_all(actions, refuse=refuse, context=self._call_context)
        for n, (action, (artifact, seconds)) in enumerate(zip(actions, outcomes)):  # in call order: stable namespaces
            artifact, stored = store_output(self.toolbox, action, artifact, self.memory)
            outcomes[n] = (artifact, seconds)
            for event in stored:
                self.emit(event)
        return outcomes

    def _call_context(self, action: ToolAction) -> CallContext:
        """What call `action` reaches of this run: its events, its model for a server's sampling
        request (`sampling.Sampler`), the user for an elicitation (`RunOptions.elicit`)."""
        return CallContext(action, emit=self.emit, sample=self.sampler, elicit=self.options.elicit)

    async def _refusal(self, action: ToolAction) -> ErrorArtifact | None:
        """None when `action` may run; else why not (no one to approve it, or denied)."""
        route = self.toolbox.route(action)
        if route is None or not route[0].needs_approval(route[1]):
            if route is not None and route[0].preapproved(route[1]):
                self.verdicts[id(action)] = "preapproved"
            return None
        approve = self.options.approve
        if approve is None:
            return ErrorArtifact(value="this tool needs approval and no one can approve it here; it was not run")
        # called off the loop: a blocking callback (input(), a dialog) must not stall the shared loop;
        # an async one only makes its coroutine there, awaited here
        verdict = await asyncio.get_running_loop().run_in_executor(None, approve, action)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        self.verdicts[id(action)] = "approved" if verdict else "denied"
        return None if verdict else ErrorArtifact(value="denied by the user; the tool was not run")
