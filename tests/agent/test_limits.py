"""Limits on what a model can make the kernel do (issue 26): `max_tool_calls` per run, a tool
call's argument size and nesting, and tool results masked before they are sent."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from ipyagent import Agent
from ipyagent.agent import RunOptions, set_default
from ipyagent.core import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, TextArtifact

from ..support.scripted_driver import Script, ScriptedDriver, call, calls, text
from ..support.stub_server import Reply, StubServer


def weather_tool(ran: list[str]):
    def get_weather(city: str) -> str:
        """Weather of a city."""
        ran.append(city)
        return f"sunny in {city}"

    return get_weather


def asks(n: int, start: int = 0) -> Script:
    """A turn asking for `n` weather calls."""
    return calls(*(call(f"c{i}", "get_weather", json.dumps({"city": f"C{i}"}), i) for i in range(start, start + n)))


def test_a_turn_past_max_tool_calls_ends_the_run_before_any_call_runs() -> None:
    ran: list[str] = []
    driver = ScriptedDriver(asks(3), text("done"))
    result = Agent(driver, tools=[weather_tool(ran)]).run("go", RunOptions(max_tool_calls=2))
    assert ran == [] and len(driver.stacks) == 1
    assert result.error.type == "max_tool_calls"
    assert "past max_tool_calls=2 for this run; none of them was run" in result.error.message
    assert "--max-tool-calls N" in result.error.message and "%agent settings max_tool_calls=N" in result.error.message


def test_the_limit_counts_every_turn_of_the_run() -> None:
    ran: list[str] = []
    driver = ScriptedDriver(asks(2), asks(1, start=2), text("done"))
    result = Agent(driver, tools=[weather_tool(ran)]).run("go", RunOptions(max_tool_calls=2))
    assert sorted(ran) == ["C0", "C1"] and result.error.type == "max_tool_calls"  # calls run concurrently
    assert "asked for more than 0 tool calls in one turn (2 ran earlier in this run)" in result.error.message
    exactly = Agent(ScriptedDriver(asks(2), text("done")), tools=[weather_tool([])]).run(
        "go", RunOptions(max_tool_calls=2))
    assert exactly.ok and exactly.text == "done"  # the limit itself is allowed


def test_the_default_is_the_sessions_and_128() -> None:
    ran: list[str] = []
    assert Agent(ScriptedDriver(asks(129)), tools=[weather_tool(ran)]).run("go").error.type == "max_tool_calls"
    try:
        set_default(max_tool_calls=200)
        assert Agent(ScriptedDriver(asks(129), text("ok")), tools=[weather_tool(ran)]).run("go").ok
    finally:
        set_default(max_tool_calls=128)
    assert len(ran) == 129


def test_a_react_turn_past_the_limit_runs_nothing() -> None:
    ran: list[str] = []
    reply = "".join(f'<tool_call id="c{i}">{{"name": "get_weather", "arguments": {{"city": "C{i}"}}}}</tool_call>'
                    for i in range(3))
    driver = ScriptedDriver(Script([text(reply).deltas[0]]), text("done"), tools=False)
    result = Agent(driver, tools=[weather_tool(ran)], react=True).run("go", RunOptions(max_tool_calls=2))
    assert ran == [] and result.error.type == "max_tool_calls" and "asked for 3 tool calls" in result.error.message


def test_arguments_past_the_size_limit_end_the_turn_where_they_pass_it() -> None:
    ran: list[str] = []
    piece = '"' + "x" * (MAX_ARGUMENT_CHARS // 4) + '"'
    driver = ScriptedDriver(calls(call("c0", "get_weather", '{"city": ', 0),
                                  *(call("c0", "", piece, 0) for _ in range(8))), text("done"))
    result = Agent(driver, tools=[weather_tool(ran)]).run("go")
    assert ran == [] and result.error.type == "tool_arguments"
    assert f"passed {MAX_ARGUMENT_CHARS:,} characters" in result.error.message


def test_arguments_nested_too_deep_are_the_calls_error_never_a_recursion_error() -> None:
    ran: list[str] = []
    deep = '{"city": ' + "[" * 100_000 + "]" * 100_000 + "}"
    shallow = '{"city": ' + "[" * (MAX_ARGUMENT_DEPTH - 1) + "]" * (MAX_ARGUMENT_DEPTH - 1) + "}"
    driver = ScriptedDriver(calls(call("c0", "get_weather", deep, 0), call("c1", "get_weather", shallow, 1)),
                            text("ok"))
    result = Agent(driver, tools=[weather_tool(ran)]).run("go")
    assert result.ok and ran == []  # the deep call refused; the shallow one fails the tool's schema (a list, not text)
    first, second = result.tool_calls
    assert first.output.type == "error" and f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in first.output.value
    assert "nest deeper" not in second.output.value


def test_a_tool_result_holding_a_secret_reaches_the_model_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "svc-token-0123456789")

    def read_config() -> str:
        """The deployment's config."""
        return 'password = "hunter22"\nurl = https://u:pw-987654321@h/x\ntoken svc-token-0123456789'

    driver = ScriptedDriver(calls(call("c0", "read_config", "{}", 0)), text("ok"))
    result = Agent(driver, tools=[read_config]).run("go")
    sent = json.dumps([m.model_dump(mode="json") for m in driver.stacks[1].messages])
    assert "hunter22" not in sent and "pw-987654321" not in sent and "svc-token-0123456789" not in sent
    assert result.tool_calls[0].output == TextArtifact(
        value='password = "[redacted]"\nurl = https://[redacted]@h/x\ntoken [redacted]')
    opted_out = ScriptedDriver(calls(call("c0", "read_config", "{}", 0)), text("ok"))
    Agent(opted_out, tools=[read_config]).run("go", RunOptions(redact_context=False))
    assert "hunter22" in json.dumps([m.model_dump(mode="json") for m in opted_out.stacks[1].messages])


def openai_tool_calls(n: int) -> Reply:
    """An OpenAI Chat stream of one turn asking for `n` tool calls, one chunk each, then its stop."""
    def chunk(delta: dict, finish: str | None = None) -> bytes:
        body = {"id": "x", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n".encode()

    pieces = [chunk({"role": "assistant"})]
    pieces += [chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]})
               for i in range(n)]
    return Reply(pieces=[*pieces, chunk({}, "tool_calls"), b"data: [DONE]\n\n"])


def test_a_turn_of_100000_tool_calls_stops_reading_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """It ran all of them: 58.9 s and 1,877 MB resident. Now the stream is closed at call 129,
    nothing runs, and memory stays flat."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-many-calls")
    ran: list[str] = []
    reply = openai_tool_calls(100_000)
    with StubServer(reply) as server:
        agent = Agent("openai:m", base_url=server.url, tools=[weather_tool(ran)])
        seen: list[str] = []
        tracemalloc.start()
        try:
            result = agent.run("weather everywhere?", on_event=lambda e: seen.append(e.type))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(server.requests) == 1
    assert ran == [] and result.error.type == "max_tool_calls" and "more than 128 tool calls" in result.error.message
    assert seen.count("tool_call_delta") == 128  # the 129th call ends it, unread further: the body was cut short
    assert not server.completed and server.pieces_sent < 100_000
    assert peak < 200 * 1024 * 1024, f"{peak / 1e6:.0f} MB"
