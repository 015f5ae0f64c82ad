"""A hostile server and a user who interrupts: every case ends as one clear result, nothing
lost, no traceback, no hang. Streams are the recordings in ../shared/fixtures/providers,
then mutated."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ipyagent import Agent, RunOptions
from ipyagent.core import ModelCompleted, ModelFailed, ModelStarted, TextDelta, ToolCallCompleted
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

from ..support.stub_server import FIXTURES
from ..support.toy_driver import Scripted

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
    return [
        type(e).__name__
        for e in events
        if isinstance(e, (ModelStarted, ModelCompleted, ModelFailed, ToolCallCompleted))
    ]


def test_a_recorded_call_whose_arguments_broke_goes_back_to_the_model_and_the_run_answers():
    """OpenAI's recorded get_weather call with its last fragment (``"}``) replaced by ``"``: the turn
    completes, the call gets an error result quoting its arguments, the next request sends the call
    back with arguments ``{}`` (valid for every provider) and that result; the run answers."""
    broken = TOOL_CALL.read_bytes().replace(b'"arguments":"\\"}"', b'"arguments":"\\""')
    assert broken != TOOL_CALL.read_bytes()
    transport = Scripted((200, SSE, broken), (200, SSE, TEXT.read_bytes()))
    agent = Agent(OpenAIChatPromptDriver("m", api_key="sk-test", transport=transport), tools=[get_weather])
    result = agent.run("Weather in San Francisco?")
    assert result.ok and result.text and result.actions[0].output.type == "error"
    second = json.loads(transport.requests[1].content)["messages"]
    call = second[-2]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": "{}"}
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == call["id"]
    assert """its arguments are not valid JSON (Expecting ',' delimiter): '{"city":"San Francisco","state":"CA\"'""" \
        in second[-1]["content"]


def test_an_on_event_raising_mid_stream_closes_the_response_and_keeps_the_text():
    transport = Scripted((200, SSE, sse_pieces(TEXT)))
    agent = Agent(OpenAIChatPromptDriver("m", api_key="sk-test", transport=transport))
    texts: list[str] = []

    def on_event(event: Any) -> None:
        if isinstance(event, TextDelta):
            texts.append(event.text)
            if len(texts) == 2:
                raise RuntimeError("the view\nbroke")

    result = agent.run("hi", on_event=on_event)
    assert transport.body.closed and transport.body.sent < len(
        [p for p in transport.body.pieces if isinstance(p, bytes)]
    )
    assert result.error is not None and result.error.type == "callback"
    assert (
        result.error.message
        == "on_event raised RuntimeError: the view broke; the run stopped there, the text so far is kept"
    )
    assert (
        result.message.text == "".join(texts)
        and result.message.status == "failed"
        and result.message.error.type == "callback"
    )


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
        assert result.message.status == "interrupted", steps
        for action in result.actions:
            assert action.output is not None, steps
        asked = [e for e in events if isinstance(e, ToolCallCompleted)]
        assert len(asked) == len({id(e.action) for e in asked}), f"a call completed twice at step {steps}"
        steps += 1
    assert full.ok and full.text.startswith("I'm unable"), full.text
    assert steps > 20  # the run really was cut at many points


def test_a_tool_raising_with_megabytes_in_its_message_sends_the_model_its_head(monkeypatch):
    """An exception whose message carries data (50 MB in the report) was sent whole to the
    model: results over the limit went to Task Memory, errors never did. The model gets the
    error's head, still an error; Task Memory keeps it whole."""
    from ipyagent.core import ArtifactStored, ErrorArtifact
    from ipyagent.memory import TaskMemory
    from ipyagent.tools.off_prompt import HEAD_CHARS, MAX_RESULT_CHARS

    from ..support.stub_server import Reply, StubServer, openai_text_reply

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    message = "row;" * (MAX_RESULT_CHARS // 2)

    def get_weather(city: str, state: str = "") -> str:
        raise ValueError(message)

    memory, events = TaskMemory(), []
    with StubServer(Reply.sse_file(TOOL_CALL), openai_text_reply("it failed")) as server:
        result = Agent("openai:m", base_url=server.url, tools=[get_weather], memory=memory).run(
            "weather?", on_event=events.append
        )
    sent = server.requests[1]["body"]["messages"][-1]["content"]
    assert len(sent) < HEAD_CHARS + 400 and sent.startswith("ValueError: row;row;")
    assert f"an error of {len(message):,} characters" in sent
    output = result.tool_calls[0].output
    assert isinstance(output, ErrorArtifact) and output.exception_type == "ValueError"
    stored = [e for e in events if isinstance(e, ArtifactStored)]
    assert len(stored) == 1 and memory.entry(stored[0].namespace).artifact.value == message
    assert result.ok and result.text == "it failed"


@pytest.mark.parametrize("option, said", [
    ({"api_key": "sk-typed-into-a-cell"}, "ipyagent takes no api_key: keys are read from environment variables"),
    ({"temperature": 0.2}, "temperature is a model setting: pass settings={'temperature': ...}"),
    ({"read_timout": 5}, "unknown option 'read_timout' for openai; its options: api_key_env, base_url, max_attempts,"),
], ids=["api_key", "a-setting", "a-typo"])
def test_an_option_agent_does_not_take_says_what_to_write_instead(monkeypatch, option, said):
    """They raised TypeError from deep in the driver: "got multiple values for keyword argument
    'api_key'", "unexpected keyword argument 'temperature'"."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(TypeError) as raised:
        Agent("openai:m", **option)
    assert str(raised.value).startswith(said), str(raised.value)
    assert "sk-typed" not in str(raised.value)
