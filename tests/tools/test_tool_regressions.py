"""Regression cases from Griptape's issue history (issue 3), each over real HTTP through the agent loop."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from ipyagent import Agent
from ipyagent.core import ToolNameError
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.tools import BaseTool, FunctionTool, activity

from ..support.stub_server import FIXTURES, Reply, StubServer, openai_text_reply

OPENAI = FIXTURES / "openai-chat"
COMPAT = FIXTURES / "openai-compatible"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def run(replies: list[Reply], tools: list, driver=None) -> tuple:
    with StubServer(*replies) as server:
        agent = (
            Agent(driver(server.url), tools=tools) if driver else Agent("openai:m", base_url=server.url, tools=tools)
        )
        result = agent.run("go")
    return result, server.requests


def test_no_argument_tool_with_an_empty_fragment_anthropic():
    calls = []

    def best_language_to_learn() -> str:
        """Pick one."""
        calls.append(1)
        return "Python"

    done = Reply(
        headers={"Content-Type": "text/event-stream"},
        pieces=[
            p + b"\n\n" for p in (FIXTURES / "anthropic" / "stream-text.sse").read_bytes().split(b"\n\n") if p.strip()
        ],
    )
    result, requests = run(
        [Reply.sse_file(FIXTURES / "anthropic" / "stream-tool-use-no-args.sse"), done],
        [best_language_to_learn],
        driver=lambda url: AnthropicPromptDriver("claude", base_url=url, api_key="sk-ant-test"),
    )
    assert result.ok and calls == [1]
    assert result.tool_calls[0].input == {}
    tool_result = requests[1]["body"]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["content"] == "Python"


def test_parallel_calls_with_empty_arguments_both_run_in_order():
    order = []

    def get_country() -> str:
        order.append("country")
        return "Mexico"

    def get_product_name() -> str:
        order.append("product")
        return "Pydantic AI"

    result, requests = run(
        [Reply.sse_file(OPENAI / "stream-tool-calls-parallel-empty-args.sse"), openai_text_reply("done")],
        [get_country, get_product_name],
    )
    assert result.ok and sorted(order) == ["country", "product"]
    tool_messages = [m for m in requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["Mexico", "Pydantic AI"]  # call order, each tied by its id
    assert [m["tool_call_id"] for m in tool_messages] == [c.tag for c in result.tool_calls]


def test_one_chunk_with_id_name_and_complete_arguments():
    def weather(latitude: str, longitude: str) -> str:
        return f"sunny at {latitude},{longitude}"

    result, requests = run(
        [Reply.sse_file(COMPAT / "mistral-stream-tool-call.sse"), openai_text_reply("ok")], [weather]
    )
    (call,) = result.tool_calls
    assert call.input == {"latitude": "52.5200", "longitude": "13.4050"}
    assert requests[1]["body"]["messages"][-1]["content"] == "sunny at 52.5200,13.4050"


def test_two_tool_calls_in_one_chunk():
    """The parallel-calls recording with both calls' fragments packed into one chunk."""
    lines = [json.loads(line[6:]) for line in (OPENAI / "stream-tool-calls-parallel-two.sse").read_text().splitlines()
             if line.startswith("data: {")]
    merged = dict(lines[0])
    fragments: dict[int, dict] = {}
    for chunk in lines:
        for choice in chunk["choices"]:
            for call in choice["delta"].get("tool_calls") or []:
                slot = fragments.setdefault(call["index"], {"index": call["index"], "function": {"arguments": ""}})
                slot.update({k: v for k, v in call.items() if k in ("id", "type")})
                slot["function"]["name"] = call["function"].get("name") or slot["function"].get("name")
                slot["function"]["arguments"] += call["function"].get("arguments") or ""
    merged["choices"] = [{"index": 0, "delta": {"tool_calls": list(fragments.values())}, "finish_reason": "tool_calls"}]
    reply = Reply(pieces=[f"data: {json.dumps(merged)}\n\n".encode(), b"data: [DONE]\n\n"])
    seen = []

    def GetWeatherArgs(city: str, country: str, units: str) -> str:  # noqa: N802 - the recorded name
        seen.append(city)
        return "12 C"

    def get_stock_price(ticker: str, exchange: str) -> str:
        seen.append(ticker)
        return "230"

    result, requests = run([reply, openai_text_reply("ok")], [GetWeatherArgs, get_stock_price])
    assert [c.native_name for c in result.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert sorted(seen) == ["AAPL", "Edinburgh"]
    assert [m["content"] for m in requests[1]["body"]["messages"] if m["role"] == "tool"] == ["12 C", "230"]


def test_a_hyphenated_tool_name_from_the_model_gets_an_error_result():
    raw = (COMPAT / "mistral-stream-tool-call.sse").read_text().replace('"name":"weather"', '"name":"web-search"')
    reply = Reply(pieces=[p.encode() + b"\n\n" for p in raw.split("\n\n") if p.strip()])

    def weather(latitude: str, longitude: str) -> str:
        raise AssertionError("must not run")

    result, requests = run([reply, openai_text_reply("ok")], [weather])
    assert result.ok
    tool_message = requests[1]["body"]["messages"][-1]
    assert "no tool 'web-search'" in tool_message["content"] and "available: weather" in tool_message["content"]
    assert (
        requests[1]["body"]["messages"][-2]["tool_calls"][0]["function"]["name"] == "web-search"
    )  # sent back unchanged


def test_a_hyphenated_tool_name_is_rejected_when_declared():
    def web_search(q: str) -> str:
        return q

    web_search.__name__ = "web-search"
    with pytest.raises(ToolNameError, match="letters, digits and underscores"):
        FunctionTool(web_search)

    class Web(BaseTool):
        @activity
        def search(self, q: str) -> str:
            return q

    with pytest.raises(ToolNameError, match="letters and digits only"):
        Web(name="web-tools")


def test_a_denied_activity_named_by_the_model_is_never_called():
    raw = (OPENAI / "stream-tool-call-single-fragmented.sse").read_text()  # calls get_weather
    called = []

    class Get(BaseTool):
        @activity
        def weather(self, city: str, state: str = "") -> str:
            called.append(city)
            return "sunny"

        @activity
        def time(self) -> str:
            return "noon"

    result, requests = run(
        [Reply(pieces=[p.encode() + b"\n\n" for p in raw.split("\n\n") if p.strip()]), openai_text_reply("ok")],
        [Get(denylist=["weather"])],
    )
    assert called == []
    content = requests[1]["body"]["messages"][-1]["content"]
    assert "no tool 'get_weather'" in content and "available: Get_time" in content
    assert [t["function"]["name"] for t in requests[0]["body"]["tools"]] == ["Get_time"]  # never offered either


class Location(BaseModel):
    city: str
    state: str = ""


def test_a_single_object_parameter_shows_its_fields_not_a_wrapper():
    seen = []

    def get_weather(location: Location) -> str:
        """Weather at a location."""
        seen.append(location)
        return "sunny"

    result, requests = run(
        [Reply.sse_file(OPENAI / "stream-tool-call-single-fragmented.sse"), openai_text_reply("ok")], [get_weather]
    )
    parameters = requests[0]["body"]["tools"][0]["function"]["parameters"]
    assert set(parameters["properties"]) == {"city", "state"} and parameters["required"] == ["city"]
    assert seen == [Location(city="San Francisco", state="CA")]
