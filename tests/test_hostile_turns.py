"""A hostile server and a user who interrupts: every case ends as one clear result, nothing
lost, no traceback, no hang. Streams are the recordings in ../shared/fixtures/providers,
then mutated."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ipyagent import Agent, RunOptions
from ipyagent.core import ModelCompleted, ModelFailed, ModelStarted, ToolCallCompleted
from ipyagent.drivers.openai_chat import OpenAIChatPromptDriver

from .stub_server import FIXTURES
from .toy_driver import Scripted

TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
SSE = {"content-type": "text/event-stream"}


def sse_pieces(path, pause: bool = True) -> list[Any]:
    """A recorded SSE body, one event a piece, each followed by a turn of the loop (0 s pause)."""
    raw = path.read_bytes()
    pieces: list[Any] = []
    for event in raw.split(b"\n\n"):
        if event.strip():
            pieces += [event + b"\n\n", 0] if pause else [event + b"\n\n"]
    return pieces


async def get_weather(city: str, state: str = "") -> str:
    """Weather now."""
    for _ in range(3):
        await asyncio.sleep(0)
    return f"18 C in {city}"


def _turns_of(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events if isinstance(e, (ModelStarted, ModelCompleted, ModelFailed, ToolCallCompleted))]


def test_an_interrupt_at_every_await_of_a_run_keeps_what_arrived_and_closes_every_stream():
    """The run (a tool call turn, the tool, the answer turn) is cancelled after 0, 1, 2 ...
    turns of the loop, until it finishes first: each time the result is interrupted, not an
    exception; the reply keeps a prefix of the recorded text; every response opened is closed;
    a call asked for has a result (its own, or "interrupted"); nothing is left running."""
    full = None
    steps = 1  # (at 0 the run is cancelled before it starts: nothing to keep)
    while True:
        transport = Scripted((200, SSE, sse_pieces(TOOL_CALL)), (200, SSE, sse_pieces(TEXT)))
        bodies: list[Any] = []
        handle = transport.handle_async_request

        async def track(request, handle=handle, bodies=bodies):
            response = await handle(request)
            bodies.append(transport.body)
            return response

        transport.handle_async_request = track  # type: ignore[method-assign]
        agent = Agent(OpenAIChatPromptDriver("m", api_key="sk-test", transport=transport), tools=[get_weather])
        events: list[Any] = []

        async def main() -> tuple[bool, Any]:
            task = asyncio.create_task(agent._arun("Weather in Boston?", RunOptions(), events.append))
            for _ in range(steps):
                await asyncio.sleep(0)
                if task.done():
                    break
            if task.done():
                return True, task.result()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(10):  # httpx2's byte iterators, left suspended, are closed by the loop's finalizer tasks
                others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                if not others:
                    break
                await asyncio.sleep(0)
            assert not others, f"left running after the interrupt at step {steps}: {others}"
            return False, agent.results[-1]

        finished, result = asyncio.run(main())
        assert all(body.closed for body in bodies), f"a response left open at step {steps}"
        if finished:
            full = result
            break
        assert result.interrupted and result.error is None, steps
        assert result.message.metadata.get("interrupted") and result.message.metadata.get("partial"), steps
        for action in result.actions:
            assert action.output is not None, steps
        asked = [e for e in events if isinstance(e, ToolCallCompleted)]
        assert len(asked) == len({id(e.action) for e in asked}), f"a call completed twice at step {steps}"
        steps += 1
    assert full.ok and full.text.startswith("I'm unable"), full.text
    assert steps > 20  # the run really was cut at many points
