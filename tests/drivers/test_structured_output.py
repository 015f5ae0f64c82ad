"""Structured output: native / tool / rule strategies over real HTTP, strict schemas, validation and one retry.

Replies are the recorded structured-output streams of each provider (and recorded
tool-call streams whose tool is renamed ``final_result`` for the tool strategy);
expected outputs are parsed from those recordings in the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from pydantic import BaseModel, ConfigDict, Field

from ipyagent import Agent
from ipyagent.core import PromptStack, ProviderError
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver
from ipyagent.drivers.structured import NotStrictError, to_strict_json_schema

from ..support.recordings import expected_from, recording_events
from ..support.stub_server import FIXTURES, Reply, StubServer

OPENAI_JSON = FIXTURES / "openai-chat" / "stream-structured-output-json-schema.sse"
OPENAI_TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
OPENAI_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)
GEMINI_JSON = FIXTURES / "gemini" / "stream-structured-output-json.sse"
GEMINI_CALL = FIXTURES / "gemini" / "stream-function-call.sse"  # weather(latitude, longitude)
ANTHROPIC_JSON = FIXTURES / "anthropic" / "stream-structured-output-json.chunks.jsonl"
ANTHROPIC_CALL = FIXTURES / "anthropic" / "stream-tool-use-fragmented.sse"  # get_weather(location, units)
ANTHROPIC_NO_ARGS = FIXTURES / "anthropic" / "stream-tool-use-no-args.sse"  # best_language_to_learn()
OLLAMA_JSON = FIXTURES / "ollama" / "chat-stream-format-json.ndjson"
KEY = "sk-structured-test"


# -- output models shaped like the recorded replies -------------------------------------------


class Weather(BaseModel):
    city: str
    temperature: int
    units: str


class CityCountry(BaseModel):
    city: str
    country: str


class Answer(BaseModel):
    answer: str


class Location(BaseModel):
    location: str
    units: str = "c"


class Character(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    name: str
    kind: str = Field(alias="class")
    description: str


class Party(BaseModel):
    characters: list[Character]


class Node(BaseModel):
    """A tree node: refers to itself."""

    name: str
    children: list["Node"] = []
    parent: "Node | None" = Field(None, description="the parent node")


class Tree(BaseModel):
    root: Node = Field(description="the root")
    depth: int = 3


# -- reading the recordings ---------------------------------------------------------------------


def anthropic_text(path: Path) -> str:
    return "".join(json.loads(d).get("delta", {}).get("text", "") for _, d in recording_events(path))


def anthropic_call_input(path: Path) -> dict[str, Any]:
    raw = "".join(json.loads(d).get("delta", {}).get("partial_json", "") for _, d in recording_events(path))
    return json.loads(raw) if raw.strip() else {}


def gemini_text(path: Path) -> str:
    return "".join(p.get("text", "") for _, d in recording_events(path)
                   for c in json.loads(d).get("candidates", []) for p in c.get("content", {}).get("parts", []))


def ollama_text(path: Path) -> str:
    return "".join(json.loads(line)["message"]["content"] for line in path.read_text().splitlines() if line.strip())


def anthropic_reply(path: Path) -> Reply:
    """A payload-only Anthropic recording with its event names (each equals the payload's `type`)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return Reply(pieces=[f"event: {json.loads(line)['type']}\ndata: {line}\n\n".encode() for line in lines])


def ollama_reply(path: Path) -> Reply:
    lines = [line + "\n" for line in path.read_text().splitlines() if line.strip()]
    return Reply(headers={"Content-Type": "application/x-ndjson"}, pieces=[line.encode() for line in lines])


def as_output_tool(reply: Reply, name: str) -> Reply:
    """A recorded tool-call stream whose tool is renamed to the output tool."""
    pieces = [
        p.replace(f'"name":"{name}"'.encode(), b'"name":"final_result"').replace(
            f'"name": "{name}"'.encode(), b'"name": "final_result"'
        )
        for p in reply.pieces
    ]
    assert pieces != reply.pieces, f"no call of {name} in the recording"
    return Reply(status=reply.status, headers=reply.headers, pieces=pieces)


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


# -- strict schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [Node, Tree, Weather, Party])
def test_strict_schema_follows_openai_rules_and_recursive_models_terminate(model):
    original = model.model_json_schema()
    before = json.dumps(original, sort_keys=True)
    strict = to_strict_json_schema(original)
    assert json.dumps(original, sort_keys=True) == before  # the input is not changed
    assert strict["type"] == "object" and "$ref" not in strict  # a $ref root (Node) is inlined once
    for node in walk(strict):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        if "$ref" in node:
            assert len(node) == 1, node  # no sibling keywords beside a reference
            prefix, _, name = node["$ref"].rpartition("/")
            assert prefix == "#/$defs" and name in strict["$defs"]
        assert "default" not in node or isinstance(node.get("properties"), dict) and "default" in node["properties"]
    # Recursion survives as references, and descriptions beside them are kept.
    if model is Node:
        assert strict["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
        assert strict["properties"]["parent"]["description"] == "the parent node"
    if model is Tree:
        assert strict["properties"]["root"] == {"anyOf": [{"$ref": "#/$defs/Node"}], "description": "the root"}


def test_a_free_form_dict_cannot_be_strict_and_goes_non_strict():
    class Loose(BaseModel):
        tags: dict[str, int]

    with pytest.raises(NotStrictError, match="extra properties"):
        to_strict_json_schema(Loose.model_json_schema())
    stack = PromptStack(output_schema=Loose)
    stack.add_user_message("hi")
    _, body = OpenAIChatPromptDriver("gpt-4.1-mini", api_key=KEY).build_request(stack)
    assert body["response_format"]["json_schema"] == {
        "name": "Loose",
        "schema": Loose.model_json_schema(),
        "strict": False,
    }


# -- the strategy of each driver, and the requests it builds --------------------------------------


def _drivers(url: str) -> dict[str, Any]:
    return {
        "openai": OpenAIChatPromptDriver("gpt-4.1-mini", base_url=url, api_key=KEY),
        "openai-responses": OpenAIResponsesPromptDriver("gpt-4.1-mini", base_url=url, api_key=KEY),
        "gemini": GeminiPromptDriver("gemini-2.5-flash", base_url=url, api_key=KEY),
        "gemma": GeminiPromptDriver("gemma-3-27b-it", base_url=url, api_key=KEY),
        "ollama": OllamaPromptDriver("llama3.2", base_url=url),
        "anthropic": AnthropicPromptDriver("claude-sonnet-4-5", base_url=url, api_key=KEY),
    }


def test_default_strategy_follows_capabilities():
    for name, driver in _drivers("http://127.0.0.1:9").items():
        caps = driver.capabilities_for(driver.model)
        expected = "native" if caps.structured_output_native else "tool" if caps.tools else "rule"
        assert driver.default_output_strategy() == expected, name
        assert driver.output_strategy(PromptStack(output_schema=Weather)) == expected
        assert driver.output_strategy(PromptStack()) is None
    assert (
        _drivers("http://127.0.0.1:9")["anthropic"].default_output_strategy() == "tool"
    )  # no JSON mode in the Messages API
    assert _drivers("http://127.0.0.1:9")["gemma"].default_output_strategy() == "rule"  # no JSON mode, no tools


#: Where each protocol puts a native schema, its tools, and its system text, in the request body.
NATIVE = {
    "openai": lambda b: b.get("response_format", {}).get("json_schema", {}).get("schema"),
    "openai-responses": lambda b: b.get("text", {}).get("format", {}).get("schema"),
    "gemini": lambda b: b.get("generationConfig", {}).get("responseJsonSchema"),
    "ollama": lambda b: b.get("format"),
    "anthropic": lambda b: None,
}
TOOL_NAMES = {
    "openai": lambda b: [t["function"]["name"] for t in b.get("tools", [])],
    "openai-responses": lambda b: [t["name"] for t in b.get("tools", [])],
    "gemini": lambda b: [d["name"] for t in b.get("tools", []) for d in t["functionDeclarations"]],
    "ollama": lambda b: [t["function"]["name"] for t in b.get("tools", [])],
    "anthropic": lambda b: [t["name"] for t in b.get("tools", [])],
}
SYSTEM = {
    "openai": lambda b: " ".join(m["content"] for m in b["messages"] if m["role"] == "system"),
    "openai-responses": lambda b: b.get("instructions", ""),
    "gemini": lambda b: " ".join(p["text"] for p in b.get("systemInstruction", {}).get("parts", [])),
    "ollama": lambda b: " ".join(m["content"] for m in b["messages"] if m["role"] == "system"),
    "anthropic": lambda b: b.get("system", ""),
}
FORCED = {
    "openai": lambda b: b["tool_choice"] == {"type": "function", "function": {"name": "final_result"}},
    "openai-responses": lambda b: b["tool_choice"] == {"type": "function", "name": "final_result"},
    "gemini": lambda b: (
        b["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["final_result"]}}
    ),
    "ollama": lambda b: "tool_choice" not in b,  # Ollama has no tool choice: the tool is offered, not forced
    "anthropic": lambda b: b["tool_choice"] == {"type": "tool", "name": "final_result"},
}


@pytest.mark.parametrize("provider", list(NATIVE))
@pytest.mark.parametrize("strategy", ["native", "tool", "rule"])
def test_each_strategy_builds_its_request(provider, strategy):
    stack = PromptStack(output_schema=Weather, output_strategy=strategy)
    stack.add_system_message("Be brief.")
    stack.add_user_message("Weather in San Francisco?")
    with StubServer(Reply(status=500, pieces=[b"{}"])) as server:
        driver = _drivers(server.url)[provider]
        driver.max_attempts = 1
        try:
            events = _collect(driver, stack)
        except ProviderError as exc:  # refused before sending
            assert provider == "anthropic" and strategy == "native"
            assert exc.type == "unsupported_capability" and server.requests == []
            return
        assert events  # the request went out (the 500 reply does not matter here)
        body = server.requests[0]["body"]
    schema = json.dumps(Weather.model_json_schema())
    native = NATIVE[provider](body)
    if strategy == "native":
        strict = provider.startswith("openai")
        assert native == (to_strict_json_schema(Weather.model_json_schema()) if strict else Weather.model_json_schema())
        assert "final_result" not in TOOL_NAMES[provider](body)
    else:
        assert native is None
    if strategy == "tool":
        assert TOOL_NAMES[provider](body) == ["final_result"] and FORCED[provider](body)
    else:
        assert "final_result" not in TOOL_NAMES[provider](body)
    system = SYSTEM[provider](body)
    assert "Be brief." in system
    assert (schema in system) == (strategy == "rule")


def _collect(driver: Any, stack: PromptStack) -> list[Any]:
    import asyncio

    async def main() -> list[Any]:
        try:
            return [e async for e in driver.stream(stack)]
        finally:
            await driver.close()

    return asyncio.run(main())


def test_an_unknown_strategy_is_refused_before_sending():
    with pytest.raises(ValueError, match="'native', 'tool' or 'rule'"):
        PromptStack(output_schema=Weather, output_strategy="json")
    with StubServer(Reply.sse_file(OPENAI_JSON)) as server:
        result = Agent(_drivers(server.url)["openai"]).run("hi", output_schema=Weather, output_strategy="json")
    assert server.requests == []
    assert result.error.type == "invalid_request" and "not one of native, tool, rule" in result.error.message


# -- each strategy over real HTTP, through the agent ------------------------------------------------


@pytest.mark.parametrize("provider, model, reply, text", [
    ("openai", Weather, Reply.sse_file(OPENAI_JSON), expected_from(OPENAI_JSON).text),
    ("gemini", CityCountry, Reply.sse_file(GEMINI_JSON), gemini_text(GEMINI_JSON)),
    ("ollama", Answer, ollama_reply(OLLAMA_JSON), ollama_text(OLLAMA_JSON)),
], ids=["openai", "gemini", "ollama"])
def test_native_strategy_gives_a_validated_instance(provider, model, reply, text):
    with StubServer(reply) as server:
        agent = Agent(_drivers(server.url)[provider])
        result = agent.run("Answer in JSON.", output_schema=model)
    assert result.ok, result.error
    assert result.output == model.model_validate(json.loads(text))
    assert NATIVE[provider](server.requests[0]["body"]) is not None
    assert agent.messages[-1].text == text  # the conversation keeps the reply as it came


def test_tool_strategy_takes_the_call_as_the_answer_and_keeps_a_valid_history():
    called = anthropic_call_input(ANTHROPIC_CALL)
    with StubServer(
        as_output_tool(Reply.sse_file(ANTHROPIC_CALL), "get_weather"), anthropic_reply(ANTHROPIC_JSON)
    ) as server:
        agent = Agent(_drivers(server.url)["anthropic"])
        result = agent.run("Where and in which units?", output_schema=Location)
        assert result.ok, result.error
        assert result.output == Location.model_validate(called)
        assert len(server.requests) == 1  # the output tool is never run, so no second turn
        assert [c.native_name for c in result.tool_calls] == ["final_result"]
        assert result.tool_calls[0].output.to_text() == "accepted as the final result"
        # The next turn (no schema, no output tool declared) sends the answer as text, not a dangling tool_use.
        agent.run("Thanks.")
    history = server.requests[1]["body"]["messages"]
    assert history[1] == {"role": "assistant", "content": [{"type": "text", "text": json.dumps(called)}]}
    assert "tools" not in server.requests[1]["body"]


def test_the_view_ends_on_an_accepted_output_call_and_not_on_an_invalid_reply():
    import io

    from ipyagent.notebook.views.run_view import TextView

    out = io.StringIO()
    view = TextView("anthropic:claude-sonnet-4-5", stream=out)
    with StubServer(as_output_tool(Reply.sse_file(ANTHROPIC_NO_ARGS), "best_language_to_learn"),
                    as_output_tool(Reply.sse_file(ANTHROPIC_CALL), "get_weather")) as server:
        result = Agent(_drivers(server.url)["anthropic"]).run("Where?", output_schema=Location, on_event=view.feed)
    assert result.ok and view.state.done is not None and view.state.turn == 2
    text = out.getvalue()
    assert (
        text.count("[error final_result") == 1
        and text.count("[result final_result, 0.00 s] accepted as the final result") == 1
    )
    footer = text.rstrip().rsplit("\n", 1)[-1]
    assert "2 model turns" in footer and "streaming" not in footer and "failed" not in footer


def test_openai_and_gemini_tool_strategy_over_http():
    for provider, path, name, expected in [
        ("openai", OPENAI_CALL, "get_weather", expected_from(OPENAI_CALL).tool_calls[0]["input"]),
        (
            "gemini",
            GEMINI_CALL,
            "weather",
            next(
                p["functionCall"]["args"]
                for _, d in recording_events(GEMINI_CALL)
                for c in json.loads(d)["candidates"]
                for p in c["content"]["parts"]
                if "functionCall" in p
            ),
        ),
    ]:
        with StubServer(as_output_tool(Reply.sse_file(path), name)) as server:
            result = Agent(_drivers(server.url)[provider]).run("Where?", output_strategy="tool", output_schema=dict(
                title="Where", type="object", properties={k: {"type": "string"} for k in expected}))
        assert result.ok, (provider, result.error)
        assert result.output == expected  # a JSON Schema dict gives the parsed JSON
        assert FORCED[provider](server.requests[0]["body"])


def test_rule_strategy_reads_json_from_text():
    text = anthropic_text(ANTHROPIC_JSON)
    with StubServer(anthropic_reply(ANTHROPIC_JSON)) as server:
        result = Agent(_drivers(server.url)["anthropic"]).run(
            "Three characters.", output_schema=Party, output_strategy="rule"
        )
    assert result.ok, result.error
    assert result.output == Party.model_validate(json.loads(text))
    body = server.requests[0]["body"]
    assert "tools" not in body and json.dumps(Party.model_json_schema()) in body["system"]


# -- validation failures: one retry with the error shown, then a clear error ------------------------


def test_invalid_text_is_sent_back_once_with_the_error_then_accepted():
    with StubServer(Reply.sse_file(OPENAI_TEXT), Reply.sse_file(OPENAI_JSON)) as server:
        agent = Agent(_drivers(server.url)["openai"])
        result = agent.run("Weather?", output_schema=Weather)
    assert result.ok, result.error
    assert result.output == Weather.model_validate_json(expected_from(OPENAI_JSON).text)
    assert len(server.requests) == 2
    second = server.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": expected_from(OPENAI_TEXT).text}
    assert second[-1]["role"] == "user" and "not JSON" in second[-1]["content"]
    usage = [expected_from(p).usage for p in (OPENAI_TEXT, OPENAI_JSON)]
    assert result.usage.input_tokens == sum(u["prompt_tokens"] for u in usage)  # both turns billed


def test_invalid_tool_input_gets_an_error_result_then_a_new_call():
    with StubServer(as_output_tool(Reply.sse_file(ANTHROPIC_NO_ARGS), "best_language_to_learn"),
                    as_output_tool(Reply.sse_file(ANTHROPIC_CALL), "get_weather")) as server:
        agent = Agent(_drivers(server.url)["anthropic"])
        result = agent.run("Where?", output_schema=Location)
    assert result.ok, result.error
    assert result.output == Location.model_validate(anthropic_call_input(ANTHROPIC_CALL))
    first_call = next(json.loads(d)["content_block"]["id"] for _, d in recording_events(ANTHROPIC_NO_ARGS)
                      if json.loads(d).get("type") == "content_block_start")
    last = server.requests[1]["body"]["messages"][-1]
    (block,) = last["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == first_call and block["is_error"] is True
    assert "location" in json.dumps(block["content"]) and "Field required" in json.dumps(block["content"])


def test_a_second_invalid_reply_is_reported_as_invalid_output():
    with StubServer(Reply.sse_file(OPENAI_TEXT)) as server:
        agent = Agent(_drivers(server.url)["openai"])
        result = agent.run("Weather?", output_schema=Weather)
    assert len(server.requests) == 2  # asked once more, not forever
    assert not result.ok and result.output is None
    assert result.error.type == "invalid_output" and "Weather" in result.error.message
    assert result.text == expected_from(OPENAI_TEXT).text  # the last reply stays visible
    assert agent.messages == []  # a failed run does not join the conversation


# -- %%agent --schema ------------------------------------------------------------------------------


def test_agent_magic_binds_the_validated_instance(ip, capsys):
    with StubServer(Reply.sse_file(OPENAI_JSON)) as server:
        ip.run_line_magic("provider", f"openai:gpt-4o --base-url {server.url}")
        ip.user_ns["Weather"] = Weather
        ip.run_cell_magic("agent", "--schema Weather -o w", "Weather in San Francisco?")
    w = ip.user_ns["w"]
    assert w.output == Weather.model_validate_json(expected_from(OPENAI_JSON).text)
    assert server.requests[0]["body"]["response_format"]["json_schema"]["name"] == "Weather"
    capsys.readouterr()


def test_agent_magic_schema_must_be_a_model(ip):
    ip.user_ns["nothing"] = 3
    with pytest.raises(UsageError, match="define a pydantic model"):
        ip.run_cell_magic("agent", "--schema nothing", "hi")
    with pytest.raises(UsageError, match="not defined"):
        ip.run_cell_magic("agent", "--schema Missing", "hi")
    with pytest.raises(UsageError, match="goes with --schema"):
        ip.run_cell_magic("agent", "--strategy tool", "hi")


def test_history_keeps_real_tool_pairs_and_turns_output_calls_into_text():
    from ipyagent.agent import structured
    from ipyagent.core import ActionCallBlock, ActionResultBlock, Message, TextBlock, ToolAction

    real = ToolAction.from_native("c1", "Clock_now", {})
    sibling = ToolAction.from_native("c2", "Clock_now", {})
    out1 = ToolAction.from_native("c3", "final_result", {"location": 5})
    out2 = ToolAction.from_native("c4", "final_result", {"location": "Paris"})
    turn1 = Message(role="assistant", content=[ActionCallBlock(action=real)])
    result1 = Message(role="tool", content=[ActionResultBlock(action=real, text="12:00")])
    turn2 = Message(role="assistant", content=[ActionCallBlock(action=sibling), ActionCallBlock(action=out1)])
    fix = structured.correction(turn2, "location: Input should be a valid string")
    turn3 = Message(role="assistant", content=[ActionCallBlock(action=out2)])
    assert [(b.action.tag, b.is_error) for b in fix.tool_results] == [("c2", True), ("c3", True)]  # every call answered
    history = structured.for_conversation([turn1, result1, turn2, fix, turn3])
    assert history[:2] == [turn1, result1]  # a real call and its result stay a pair
    assert history[2].content == [TextBlock(text='{"location": 5}')]  # the sibling call (never run) is gone
    assert history[3].role == "user" and "valid string" in history[3].text
    assert history[4].content == [TextBlock(text='{"location": "Paris"}')]
    assert not any(m.tool_calls or m.tool_results for m in history[2:])
