"""A prompt driver that plays scripted turns: the agent loop's decisions tested on exact
events, with no HTTP in between (the wire is the drivers' tests' business).

Each request takes the next `Script` (the last one repeats) and yields what a driver's
`stream()` yields (DESIGN.md, "drivers"): `ModelStarted`, the deltas, then one
`ModelCompleted` (message aggregated from the deltas, usage, stop reason, cost) or
`ModelFailed`. A script can wait (virtual seconds, with `virtual_clock`) before its first
delta, or hold after some deltas until the test sets `release`, so a test cancels a run
while a reply is surely half streamed, with no sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ipyagent.core import (
    DeltaMessage,
    Event,
    MessageError,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PromptStack,
    ProviderError,
    ReasoningDelta,
    StopKind,
    StopReason,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ipyagent.drivers import Aggregator, BasePromptDriver


@dataclass
class Script:
    """One model turn. `error`: the turn fails after its deltas (`ModelFailed`, the partial
    message's status ``failed`` as the base template sets it, billed `usage`
    unless that is None: nothing billed); `refuse`: raised before any event (a capability check);
    `wait_s`: seconds before the first delta; `hold_after`: deltas sent before the stream
    stops until the driver's `release` is set (`held` is set then)."""

    deltas: list[DeltaMessage] = field(default_factory=list)
    stop: StopKind = StopKind.end_turn
    usage: Usage | None = field(default_factory=Usage)
    cost: dict[str, float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    error: ProviderError | None = None
    refuse: ProviderError | None = None
    wait_s: float = 0.0
    hold_after: int | None = None


def text(value: str, index: int = 0, **kw: Any) -> Script:
    """A turn that answers `value` in one text delta."""
    return Script([TextDelta(index, value)], **kw)


def call(tag: str, name: str, arguments: str, index: int = 0) -> ToolCallDelta:
    return ToolCallDelta(index, call_id=tag, name=name, arguments=arguments)


def calls(*deltas: ToolCallDelta, **kw: Any) -> Script:
    """A turn that asks for tool calls."""
    return Script(list(deltas), stop=StopKind.tool_use, **kw)


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


class ScriptedDriver(BasePromptDriver):
    """Plays `scripts`, one per request (a callable is given the request and returns the
    script); `stacks` are the requests it got."""

    protocol = "scripted"
    default_base_url = "http://127.0.0.1:9"

    def __init__(self, *scripts: Script | Callable[[PromptStack], Script], tools: bool = True) -> None:
        super().__init__("m")
        self.scripts = list(scripts)
        self.stacks: list[PromptStack] = []
        self.native_tools = tools
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    @property
    def supports_tools(self) -> bool:
        return self.native_tools

    async def stream(self, prompt_stack: PromptStack) -> AsyncIterator[Event]:
        script = self.scripts[min(len(self.stacks), len(self.scripts) - 1)]
        self.stacks.append(prompt_stack)
        if callable(script):  # a reply that depends on the request (a namespace a tool result named)
            script = script(prompt_stack)
        if script.refuse is not None:
            raise script.refuse
        aggregator = Aggregator()  # as the driver template does: the reply's one record, given to readers
        yield ModelStarted(self.provider, self.model, reply=aggregator)
        if script.wait_s:
            await asyncio.sleep(script.wait_s)
        for n, delta in enumerate([*script.deltas, None]):
            if n == script.hold_after:
                self.held.set()
                await self.release.wait()
            if delta is not None:
                aggregator.add(delta)
                yield delta
        dropped: list[dict[str, Any]] | None = (
            [] if script.error is not None or script.stop is StopKind.max_tokens else None
        )
        message = aggregator.message(dropped=dropped)
        message.usage = script.usage
        if script.error is not None:
            message.status, message.error = "failed", MessageError.of(script.error)
            metadata = {"cost": script.cost, **script.metadata} if script.cost is not None else dict(script.metadata)
            yield ModelFailed(script.error, message, metadata)
            return
        metadata = {"cost": script.cost, **script.metadata}
        if dropped:
            metadata["partial_tool_calls"] = dropped
        message.metadata = dict(metadata)
        yield ModelCompleted(message, message.usage or Usage(), StopReason(kind=script.stop), metadata)

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:  # pragma: no cover
        raise AssertionError("a scripted driver sends nothing")

    def headers(self) -> dict[str, str]:  # pragma: no cover
        raise AssertionError("a scripted driver sends nothing")

    def decoder(self) -> Any:  # pragma: no cover
        raise AssertionError("a scripted driver reads nothing")


__all__ = ["ReasoningDelta", "Script", "ScriptedDriver", "TextDelta", "call", "calls", "text", "usage"]
