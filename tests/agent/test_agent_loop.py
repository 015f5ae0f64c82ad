"""The agent loop over the stub server: model turn -> tool calls -> tool results -> next turn."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import AgentResult, run_sync
from ipyagent.core import ErrorArtifact, ModelCompleted, ModelFailed, TextArtifact, ToolCallCompleted

from ..support.recordings import Expected, expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer

TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"
PARALLEL = FIXTURES / "openai-chat" / "stream-tool-calls-parallel-two.sse"
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-agent-loop-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Recorder:
    """Tool functions that note their calls (and the thread they ran on)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def note(self, name: str, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append((name, kwargs))


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def weather_tool(rec: Recorder) -> Any:
    def get_weather(city: str, state: str) -> str:
        """Current weather.

        Args:
            city: City name.
            state: Two-letter state code.
        """
        rec.note("get_weather", city=city, state=state)
        return f"72F and sunny in {city}, {state}"

    return get_weather


def run_agent(agent: ipyagent.Agent, prompt: str, events: list[Any] | None = None) -> AgentResult:
    return run_sync(agent.arun(prompt, on_event=events.append if events is not None else None))


@pytest.fixture
def agents() -> Iterator[list[ipyagent.Agent]]:
    made: list[ipyagent.Agent] = []
    yield made
    for a in made:
        run_sync(a.aclose())


def make_agent(agents: list[ipyagent.Agent], server: StubServer, tools: list[Any], **kw: Any) -> ipyagent.Agent:
    agent = ipyagent.Agent("openai:m", base_url=server.url, tools=tools, **kw)
    agents.append(agent)
    return agent


def roles(messages: list[Any]) -> list[str]:
    return [m["role"] if isinstance(m, dict) else m.role for m in messages]


def check_usage(result: AgentResult, *recorded: Expected) -> None:
    """`result.usage` is the sum of the recordings' own usage objects."""
    assert result.usage.input_tokens == sum(e.usage["prompt_tokens"] for e in recorded)
    assert result.usage.output_tokens == sum(e.usage["completion_tokens"] for e in recorded)
    assert result.usage.total_tokens == sum(e.usage["total_tokens"] for e in recorded)


# -- one tool call, then text --------------------------------------------------------------------


def test_tool_call_then_text(agents: list[ipyagent.Agent], rec: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    import ipyagent.tools.toolbox as toolbox_module

    ticks = iter([40.0, 42.25])  # the toolbox's clock, read when the call starts and ends
    monkeypatch.setattr(toolbox_module, "time", type("Clock", (), {"monotonic": staticmethod(lambda: next(ticks))}))
    call_exp, text_exp = expected_from(TOOL_CALL), expected_from(TEXT)
    [call] = call_exp.tool_calls
    assert call["name"] == "get_weather"
    tool_output = f"72F and sunny in {call['input']['city']}, {call['input']['state']}"
    events: list[Any] = []
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [weather_tool(rec)])
        result = run_agent(agent, "What's the weather in SF?", events)

    # the tool ran once, with the recorded arguments
    assert rec.calls == [("get_weather", call["input"])]

    # first request offers the tool; second carries the call and its result
    assert len(server.requests) == 2
    first, second = (r["body"] for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city", "state"]
    assert roles(first["messages"]) == ["user"]
    assert roles(second["messages"]) == ["user", "assistant", "tool"]
    assistant, tool_msg = second["messages"][1], second["messages"][2]
    [wire_call] = assistant["tool_calls"]
    assert wire_call["id"] == call["id"]
    assert wire_call["type"] == "function"
    assert wire_call["function"]["name"] == "get_weather"
    assert json.loads(wire_call["function"]["arguments"]) == call["input"]
    assert tool_msg == {"role": "tool", "tool_call_id": call["id"], "content": tool_output}

    # the result
    assert result.ok and result.error is None
    assert result.text == text_exp.text
    assert result.stop_reason == "end_turn"
    assert roles(result.messages) == ["user", "assistant", "tool", "assistant"]
    assert result.messages[0].text == "What's the weather in SF?"
    [action] = result.tool_calls
    assert action.tag == call["id"] and action.native_name == "get_weather" and action.input == call["input"]
    assert action.output == TextArtifact(value=tool_output)
    [result_block] = result.messages[2].tool_results
    assert result_block.action.tag == call["id"] and result_block.text == tool_output and not result_block.is_error
    check_usage(result, call_exp, text_exp)

    # events: the tool call's completion, with its duration, between the two model turns
    completed = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert len(completed) == 1
    assert completed[0].action.tag == call["id"]
    assert completed[0].result == TextArtifact(value=tool_output)
    assert not completed[0].is_error
    assert completed[0].duration_s == 2.25
    kinds = [type(e) for e in events]
    model_done = [i for i, k in enumerate(kinds) if k is ModelCompleted]
    assert len(model_done) == 2
    assert model_done[0] < events.index(completed[0]) < model_done[1] == len(events) - 1
    assert not any(isinstance(e, ModelFailed) for e in events)


def test_conversation_keeps_the_whole_run(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [weather_tool(rec)])
        first = run_agent(agent, "Weather?")
        assert agent.messages == first.messages
        assert roles(agent.messages) == ["user", "assistant", "tool", "assistant"]
        second = run_agent(agent, "Thanks. And tomorrow?")  # the text reply repeats: no tool call

    assert second.ok and len(rec.calls) == 1
    assert len(server.requests) == 3
    body = server.requests[2]["body"]
    assert roles(body["messages"]) == ["user", "assistant", "tool", "assistant", "user"]
    assert body["messages"][0]["content"] == "Weather?"
    assert body["messages"][1]["tool_calls"][0]["id"] == call["id"]
    assert body["messages"][2]["tool_call_id"] == call["id"]
    assert body["messages"][3] == {"role": "assistant", "content": expected_from(TEXT).text}
    assert body["messages"][4]["content"] == "Thanks. And tomorrow?"
    assert roles(agent.messages) == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert roles(second.messages) == ["user", "assistant"]


# -- two calls in one turn ---------------------------------------------------------------------------


def test_parallel_tool_calls(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    exp = expected_from(PARALLEL)
    weather_call, stock_call = exp.tool_calls
    assert (weather_call["name"], stock_call["name"]) == ("GetWeatherArgs", "get_stock_price")

    stock_done = threading.Event()

    def GetWeatherArgs(city: str, country: str, units: str = "f") -> str:  # noqa: N802 - the recorded name
        # finishes after the second call, and must still come first (5 s: a guard, should that call never run)
        assert stock_done.wait(5), "get_stock_price never ran"
        rec.note("GetWeatherArgs", city=city, country=country, units=units)
        return f"weather:{city}/{country}/{units}"

    def get_stock_price(ticker: str, exchange: str) -> dict[str, Any]:
        rec.note("get_stock_price", ticker=ticker, exchange=exchange)
        stock_done.set()
        return {"ticker": ticker, "exchange": exchange, "price": 123.5}

    events: list[Any] = []
    with StubServer(Reply.sse_file(PARALLEL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [GetWeatherArgs, get_stock_price])
        result = run_agent(agent, "Weather in Edinburgh and AAPL price?", events)

    # both ran with the recorded arguments; the quick one finished first
    assert rec.calls == [("get_stock_price", stock_call["input"]), ("GetWeatherArgs", weather_call["input"])]
    weather_out = "weather:{city}/{country}/{units}".format(**weather_call["input"])

    # results in call order, each tied to its call by id
    tool_msgs = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [weather_call["id"], stock_call["id"]]
    assert tool_msgs[0]["content"] == weather_out
    assert json.loads(tool_msgs[1]["content"]) == {**stock_call["input"], "price": 123.5}
    assistant = server.requests[1]["body"]["messages"][1]
    assert [c["id"] for c in assistant["tool_calls"]] == [weather_call["id"], stock_call["id"]]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["GetWeatherArgs", "get_stock_price"]

    assert result.ok
    assert roles(result.messages) == ["user", "assistant", "tool", "assistant"]
    assert [a.tag for a in result.tool_calls] == [weather_call["id"], stock_call["id"]]
    assert result.tool_calls[0].output == TextArtifact(value=weather_out)
    assert [b.action.tag for b in result.messages[2].tool_results] == [weather_call["id"], stock_call["id"]]
    assert [e.action.tag for e in events if isinstance(e, ToolCallCompleted)] == [weather_call["id"], stock_call["id"]]
    check_usage(result, exp, expected_from(TEXT))


# -- failures ------------------------------------------------------------------------------------


def test_tool_that_raises_gives_the_model_an_error_result(agents: list[ipyagent.Agent]) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls

    def get_weather(city: str, state: str) -> str:
        raise ConnectionError(f"weather service unreachable for {city}")

    events: list[Any] = []
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [get_weather])
        result = run_agent(agent, "Weather?", events)

    assert result.ok and result.text == expected_from(TEXT).text
    [tool_msg] = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_msg["tool_call_id"] == call["id"]
    assert "ConnectionError" in tool_msg["content"]
    assert f"weather service unreachable for {call['input']['city']}" in tool_msg["content"]
    output = result.tool_calls[0].output
    assert isinstance(output, ErrorArtifact) and output.exception_type == "ConnectionError"
    assert result.messages[2].tool_results[0].is_error
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.is_error


def test_undeclared_tool_gets_an_error_naming_the_available_ones(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls

    def lookup_city(city: str) -> str:
        rec.note("lookup_city", city=city)
        return city

    def get_time(zone: str) -> str:
        rec.note("get_time", zone=zone)
        return zone

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [lookup_city, get_time])
        result = run_agent(agent, "Weather?")

    assert rec.calls == []
    assert result.ok
    [tool_msg] = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_msg["tool_call_id"] == call["id"]
    assert "get_weather" in tool_msg["content"]
    assert "lookup_city" in tool_msg["content"] and "get_time" in tool_msg["content"]
    assert isinstance(result.tool_calls[0].output, ErrorArtifact)


def test_max_steps_stops_with_an_error_keeping_the_tool_results(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    exp = expected_from(TOOL_CALL)
    [call] = exp.tool_calls
    events: list[Any] = []
    with StubServer(Reply.sse_file(TOOL_CALL)) as server:  # always asks for the tool again
        agent = make_agent(agents, server, [weather_tool(rec)], max_steps=2)
        result = run_agent(agent, "Weather?", events)

    assert len(server.requests) == 2
    assert rec.calls == [("get_weather", call["input"])] * 2
    assert not result.ok
    assert result.error is not None and result.error.type == "max_steps"
    assert "max_steps" in result.error.message and "2" in result.error.message
    assert result.stop_reason is None
    assert roles(result.messages) == ["user", "assistant", "tool", "assistant", "tool"]
    for tool_message in (result.messages[2], result.messages[4]):
        [block] = tool_message.tool_results
        assert block.action.tag == call["id"] and block.text.startswith("72F and sunny")
    assert len(result.tool_calls) == 2 and all(isinstance(a.output, TextArtifact) for a in result.tool_calls)
    assert result.message.tool_calls and result.message.role == "assistant"
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "max_steps"
    assert len([e for e in events if isinstance(e, ToolCallCompleted)]) == 2
    check_usage(result, exp, exp)  # two model turns, each billed once
    assert agent.messages == []  # a failed run does not join the conversation


def test_tool_call_cut_by_length_is_not_run(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    raw = TOOL_CALL.read_bytes()
    assert raw.count(b'"finish_reason":"tool_calls"') == 1
    truncated = raw.replace(b'"finish_reason":"tool_calls"', b'"finish_reason":"length"')
    exp = expected_from(TOOL_CALL)
    events: list[Any] = []
    with StubServer(Reply(pieces=[truncated]), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [weather_tool(rec)])
        result = run_agent(agent, "Weather?", events)

    assert rec.calls == []
    assert len(server.requests) == 1
    assert not result.ok and result.error is not None
    assert result.error.type == "invalid_response" and not result.error.retryable
    assert "tokens" in result.error.message
    assert not any(isinstance(e, ToolCallCompleted) for e in events)
    assert isinstance(events[-1], ModelFailed)
    assert roles(result.messages) == ["user", "assistant"]
    assert result.tool_calls[0].output is None
    check_usage(result, exp)  # one model turn, billed once
    assert agent.messages == []


# -- per-run options (RunOptions) --------------------------------------------------------------------


def test_run_options_apply_to_one_run_and_leave_the_agent_alone(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    """Tools, system prompt, max_steps and history are passed in, never patched onto the agent."""
    from ipyagent import RunOptions
    from ipyagent.core import Message, TextBlock

    history = [Message(role="user", content=[TextBlock(text="Earlier question")]),
               Message(role="assistant", content=[TextBlock(text="Earlier answer")])]
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [], system="Agent default.")
        options = RunOptions(tools=[weather_tool(rec)], system="Run system.", history=history, max_steps=3)
        result = run_sync(agent.arun("Weather?", options))
        plain = run_agent(agent, "Plain?")

    assert result.ok and rec.calls and len(server.requests) == 3
    first = server.requests[0]["body"]
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert first["messages"][0] == {"role": "system", "content": "Run system."}
    assert [m["content"] for m in first["messages"][1:4]] == ["Earlier question", "Earlier answer", "Weather?"]
    # the agent's own settings are untouched: the next plain run has no tools, its own system, no history
    third = server.requests[2]["body"]
    assert "tools" not in third and third["messages"][0] == {"role": "system", "content": "Agent default."}
    assert roles(third["messages"]) == ["system", "user"]
    assert agent.toolbox.names() == [] and agent.system == "Agent default." and agent.max_steps == 10
    # a run given a history leaves the agent's conversation alone; it says what it adds
    assert roles(result.new_messages) == ["user", "assistant", "tool", "assistant"]
    assert roles(agent.messages) == ["user", "assistant"] and agent.messages == plain.new_messages


def test_run_options_max_steps_and_keyword_shortcuts() -> None:
    from ipyagent import RunOptions

    with pytest.raises(ValueError, match="max_steps"):
        RunOptions(max_steps=0)
    options = RunOptions(system="s").merged(output_schema=dict, output_strategy=None)
    assert options.system == "s" and options.output_schema is dict and options.output_strategy is None
    assert RunOptions().merged() == RunOptions()


def test_more_turns_marks_every_model_turn_but_the_last(agents: list[ipyagent.Agent], rec: Recorder) -> None:
    events: list[Any] = []
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(agents, server, [weather_tool(rec)])
        result = run_agent(agent, "Weather?", events)
    completed = [e for e in events if isinstance(e, ModelCompleted)]
    assert [e.more_turns for e in completed] == [True, False]
    # no side channels: the event's metadata is the driver's figures, plain JSON, and not the message's own dict
    for event in completed:
        assert "run_messages" not in event.metadata and "run_continues" not in event.metadata
        assert event.metadata is not event.message.metadata
        json.dumps(event.metadata)
    assert result.metadata is not completed[-1].metadata


def test_a_function_tool_keeps_its_name_and_a_method_gets_tool_and_activity(agents: list[ipyagent.Agent]) -> None:
    from ipyagent.tools import BaseTool, activity

    class Weather(BaseTool):
        @activity
        def now(self, city: str, state: str) -> str:
            """Weather now."""
            return "61 F"

    def get_weather(city: str, state: str) -> str:
        """Weather now."""
        return "61 F"

    events: list[Any] = []
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        run_agent(make_agent(agents, server, [get_weather]), "Weather?", events)
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert (done.action.name, done.action.path) == ("get_weather", None)

    body = TOOL_CALL.read_text().replace('"get_weather"', '"Weather_now"')
    events = []
    with StubServer(Reply(pieces=[body.encode()]), Reply.sse_file(TEXT)) as server:
        run_agent(make_agent(agents, server, [Weather()]), "Weather?", events)
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert (done.action.name, done.action.path, done.action.native_name) == ("Weather", "now", "Weather_now")
    assert done.result == TextArtifact(value="61 F")


# -- approval of tool calls (the loop's refusal hook) -------------------------------------------------


class AsyncApprover:
    """An object whose __call__ is a coroutine: awaited on the loop like an async function."""

    def __init__(self, verdict: bool) -> None:
        self.verdict, self.asked = verdict, []

    async def __call__(self, action: Any) -> bool:
        self.asked.append(action.input)
        return self.verdict


def _approval_run(agents: list[ipyagent.Agent], approve: Any, needs_approval: bool = True) -> tuple[list[str], str]:
    """(the cities the tool ran for, the tool result the model got back) of one run."""
    from ipyagent.tools import FunctionTool

    ran: list[str] = []

    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        ran.append(city)
        return "61 F"

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        agent = make_agent(
            agents, server, [FunctionTool(get_weather, requires_approval=needs_approval)], approve=approve
        )
        assert run_agent(agent, "Weather?").ok
    return ran, server.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("verdict", [True, False])
def test_every_kind_of_approver_decides_whether_the_call_runs(agents: list[ipyagent.Agent], verdict: bool) -> None:
    async def async_approve(action: Any) -> bool:
        return verdict

    async def later() -> bool:
        return verdict

    expected = (["San Francisco"], "61 F") if verdict else ([], "denied by the user; the tool was not run")
    for approve in (lambda action: verdict, async_approve, AsyncApprover(verdict), lambda action: later()):
        assert _approval_run(agents, approve) == expected, approve


def test_no_approver_means_not_run_and_a_call_without_approval_is_never_asked(agents: list[ipyagent.Agent]) -> None:
    assert _approval_run(agents, None) == (
        [],
        "this tool needs approval and no one can approve it here; it was not run",
    )
    asked = AsyncApprover(False)
    assert _approval_run(agents, asked, needs_approval=False) == (["San Francisco"], "61 F") and asked.asked == []


def test_a_request_is_composed_without_a_default_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    """`AgentRun.compose` gives `PromptStack.model_construct` every field: pydantic calls a missing field's
    default factory through a signature inspection each time (most of a short run's composing)."""
    from pydantic.fields import FieldInfo

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = ipyagent.Agent("openai:m", system="Be brief.")

    def refused(self: FieldInfo, **_: Any) -> Any:
        raise AssertionError("a default was filled in")

    monkeypatch.setattr(FieldInfo, "get_default", refused)
    first, second = agent.prompt_stack("hi"), agent.prompt_stack("hi")
    assert [m.role for m in first.messages] == ["system", "user"] and first.tools == []
    assert first.messages is not second.messages and first.system_blocks is not second.system_blocks
