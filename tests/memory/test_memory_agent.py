"""Off-prompt tools in the agent loop, over a local server replaying recorded tool-call streams:
the output goes to Task Memory and never into a request; the model gets the reference, and
a TaskMemory tool to read it; errors are never stored off-prompt."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import AgentResult, run_sync
from ipyagent.core import ArtifactStored, ErrorArtifact, InfoArtifact, TableArtifact, TextArtifact, ToolCallCompleted
from ipyagent.memory import TaskMemory, task_memory
from ipyagent.tools import BaseTool, FunctionTool, activity
from ipyagent.tools.builtin import TaskMemoryTool

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.replies import tool_call_reply

TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)
PARALLEL = FIXTURES / "openai-chat" / "stream-tool-calls-parallel-two.sse"  # GetWeatherArgs + get_stock_price
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"

# A long page with one line that matters: the whole of it must never reach a request.
FILLER = [f"Line {n}: nothing of note happens in this part of the report, {n * 7} words on." for n in range(3000)]
FILLER[2222] = "Line 2222: the needle is hidden exactly here."
PAGE = "\n".join(FILLER)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-memory-agent-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def agents() -> Iterator[list[ipyagent.Agent]]:
    made: list[ipyagent.Agent] = []
    yield made
    for a in made:
        run_sync(a.aclose())


def run(agents: list[ipyagent.Agent], server: StubServer, tools: list[Any], prompt: str = "Weather?",
        **kw: Any) -> tuple[AgentResult, list[Any]]:
    agent = ipyagent.Agent("openai:m", base_url=server.url, tools=tools, **kw)
    agents.append(agent)
    events: list[Any] = []
    return run_sync(agent.arun(prompt, on_event=events.append)), events


def bodies(server: StubServer) -> list[str]:
    return [json.dumps(r["body"]) for r in server.requests]


def tool_messages(server: StubServer, n: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[n]["body"]["messages"] if m["role"] == "tool"}


def test_off_prompt_output_never_reaches_a_request(agents: list[ipyagent.Agent]) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    memory = TaskMemory()

    def get_weather(city: str, state: str) -> str:
        """Weather report."""
        return PAGE

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, events = run(agents, server, [FunctionTool(get_weather, off_prompt=True)], memory=memory)

    assert result.ok and result.text == expected_from(TEXT).text
    assert len(server.requests) == 2
    for body in bodies(server):
        assert "needle" not in body and FILLER[5] not in body
    # the model got the reference instead, tied to the recorded call id
    content = tool_messages(server, 1)[call["id"]]
    ref = json.loads(content)
    assert ref["stored_off_prompt"] is True and ref["memory"] == memory.name
    assert (ref["tool"], ref["activity"], ref["artifact_type"]) == ("get_weather", "get_weather", "text")
    assert ref["size"] == {"chars": len(PAGE)}
    assert memory[ref["namespace"]] == TextArtifact(value=PAGE)
    assert memory.entry(ref["namespace"]).call_id == call["id"]
    # the TaskMemory tool was added, in both requests
    for request in server.requests:
        names = [t["function"]["name"] for t in request["body"]["tools"]]
        assert names[0] == "get_weather" and {
            f"TaskMemory_{a}" for a in ("list", "read", "search", "summarize", "query")
        } <= set(names)
    # the view hears of the stored artifact, then of the call's completion with the reference
    [stored] = [e for e in events if isinstance(e, ArtifactStored)]
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert events.index(stored) < events.index(done)
    assert (stored.namespace, stored.call_id, stored.kind, stored.size) == (
        ref["namespace"],
        call["id"],
        "text",
        ref["size"],
    )
    assert stored.artifact.value == PAGE
    assert isinstance(done.result, InfoArtifact) and done.result.value == content and not done.is_error
    assert result.tool_calls[0].output.value == content


def test_off_prompt_per_activity_keeps_a_table(agents: list[ipyagent.Agent]) -> None:
    exp = expected_from(PARALLEL)
    weather_call, stock_call = exp.tool_calls
    rows = [{"day": d, "ticker": "X", "close": 100 + d} for d in range(500)]

    def GetWeatherArgs(city: str, country: str, units: str = "f") -> str:  # noqa: N802 - the recorded name
        return f"weather:{city}"

    @activity(config={"off_prompt": True})
    def get_stock_price(ticker: str, exchange: str) -> list[dict[str, Any]]:
        """Price history."""
        return rows

    memory = TaskMemory()
    with StubServer(Reply.sse_file(PARALLEL), Reply.sse_file(TEXT)) as server:
        result, events = run(agents, server, [GetWeatherArgs, get_stock_price], memory=memory)

    assert result.ok
    results = tool_messages(server, 1)
    assert results[weather_call["id"]] == f"weather:{weather_call['input']['city']}"  # on-prompt as before
    ref = json.loads(results[stock_call["id"]])
    assert (
        ref["artifact_type"] == "table"
        and ref["size"] == {"rows": 500, "columns": 3}
        and ref["columns"] == ["day", "ticker", "close"]
    )
    assert memory[ref["namespace"]] == TableArtifact(columns=["day", "ticker", "close"], value=rows)
    assert all('"close": 599' not in b and '"close":599' not in b for b in bodies(server))
    assert [e.namespace for e in events if isinstance(e, ArtifactStored)] == [ref["namespace"]]


def test_off_prompt_error_reaches_the_model(agents: list[ipyagent.Agent]) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    memory = TaskMemory()

    def get_weather(city: str, state: str) -> str:
        raise TimeoutError(f"the weather service did not answer for {city}")

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, events = run(agents, server, [FunctionTool(get_weather, off_prompt=True)], memory=memory)

    content = tool_messages(server, 1)[call["id"]]
    assert "TimeoutError" in content and f"did not answer for {call['input']['city']}" in content
    assert "stored_off_prompt" not in content
    assert len(memory) == 0 and not any(isinstance(e, ArtifactStored) for e in events)
    assert isinstance(result.tool_calls[0].output, ErrorArtifact)
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.is_error


def test_output_memory_sends_an_activity_to_given_memories(agents: list[ipyagent.Agent]) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    archive, scratch, default = TaskMemory("Archive"), TaskMemory("Scratch"), TaskMemory()

    class Weather(BaseTool):
        @activity
        def report(self, city: str) -> str:
            """Report."""
            return PAGE

    # the recorded call is named get_weather: a FunctionTool with output_memory serves it
    def get_weather(city: str, state: str) -> str:
        """Weather."""
        return PAGE

    with pytest.raises(ValueError, match="output_memory"):
        Weather(output_memory={"nope": [archive]})
    tool = FunctionTool(get_weather, output_memory={"get_weather": [archive, scratch]})
    assert tool.is_off_prompt("get_weather")
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, events = run(agents, server, [tool], memory=default)

    ref = json.loads(tool_messages(server, 1)[call["id"]])
    assert ref["memory"] == "Archive"
    assert archive[ref["namespace"]].value == PAGE and scratch[ref["namespace"]].value == PAGE and len(default) == 0
    assert [e.memory for e in events if isinstance(e, ArtifactStored)] == ["Archive", "Scratch"]
    assert all("needle" not in b for b in bodies(server))


def test_model_reads_what_it_needs_through_the_memory_tool(
    agents: list[ipyagent.Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turn 1 (recorded) calls the off-prompt tool; turn 2 searches its output for the needle;
    only the passage found goes to turn 3."""
    monkeypatch.setattr(task_memory, "_counter", itertools.count(1))
    namespace = "get_weather-1"

    def get_weather(city: str, state: str) -> str:
        """Weather report."""
        return PAGE

    search = tool_call_reply(
        [("call_search_1", "TaskMemory_search", {"query": "needle", "namespace": namespace, "limit": 1})]
    )
    with StubServer(Reply.sse_file(TOOL_CALL), search, Reply.sse_file(TEXT)) as server:
        result, _ = run(agents, server, [FunctionTool(get_weather, off_prompt=True)], memory=TaskMemory())

    assert result.ok and len(server.requests) == 3
    assert json.loads(next(iter(tool_messages(server, 1).values())))["namespace"] == namespace
    [hit] = json.loads(tool_messages(server, 2)["call_search_1"])
    assert "the needle is hidden exactly here" in hit["passage"]
    assert PAGE[hit["position"]["offset"]:hit["position"]["end"]] == hit["passage"]
    assert len(bodies(server)[2]) < len(PAGE) // 10  # a passage, not the page
    assert FILLER[5] not in bodies(server)[2]


def test_no_off_prompt_tool_no_memory_tool(agents: list[ipyagent.Agent]) -> None:
    def get_weather(city: str, state: str) -> str:
        return "sunny"

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, events = run(agents, server, [get_weather])
    assert result.ok
    assert [t["function"]["name"] for t in server.requests[0]["body"]["tools"]] == ["get_weather"]
    assert not any(isinstance(e, ArtifactStored) for e in events)
    assert not any(isinstance(t, TaskMemoryTool) for t in agents[0].toolbox.tools)
