"""Tools from MCP servers: real servers over stdio (the reference `mcp-server-time`, and our SDK-written
test server) and over streamable HTTP on 127.0.0.1, driven by a scripted model server."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest

import ipyagent
from ipyagent.agent import run_sync
from ipyagent.core import (
    ArtifactStored,
    AudioArtifact,
    BlobArtifact,
    ErrorArtifact,
    ImageArtifact,
    InfoArtifact,
    JsonArtifact,
    ListArtifact,
    PromptStack,
    TextArtifact,
    ToolCallCompleted,
)
from ipyagent.memory import TaskMemory
from ipyagent.tools import as_tool
from ipyagent.tools.mcp import MCPServer, MCPServerError, MCPToolset
from ipyagent.tools.mcp_content import input_schema, native_names, result_artifact

from ..support.processes import children, gone
from ..support.stub_server import StubServer, openai_text_reply
from ..support.mcp_servers import TEST_SERVER, pid_in, wrapped_server, TIME_SERVER, received
from ..support.replies import tool_call_reply
from ..support.waiting import wait_until

HERE = Path(__file__).parent
NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make(servers: list[MCPServer], name: str, command: list[str] | None = None, **kw: Any) -> MCPServer:
    server = MCPServer(name, command, env={"MCP_TEST_RECORD": _env("MCP_TEST_RECORD")} if command else None, **kw)
    servers.append(server)
    return server


def _env(name: str) -> str:
    import os

    return os.environ.get(name, "")


def run_agent(server_url: str, tools: list[Any], prompt: str = "Go", **kw: Any) -> tuple[Any, list[Any]]:
    agent = ipyagent.Agent("openai:m", base_url=f"{server_url}/v1", tools=tools, **kw)
    events: list[Any] = []
    try:
        return run_sync(agent.arun(prompt, on_event=events.append)), events
    finally:
        run_sync(agent.aclose())


def tool_message(model: StubServer, n: int, call_id: str) -> str:
    [content] = [
        m["content"]
        for m in model.requests[n]["body"]["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    ]
    return content


# -- names, schemas, content (no server) ----------------------------------------------------


def test_native_names_are_prefixed_unique_and_within_provider_rules() -> None:
    long = "a" * 80
    names = native_names("srv", ["echo", "get.weather-now", "get_weather_now", long, long + "b", "x/y z"])
    assert names["echo"] == "srv_echo"
    assert names["get.weather-now"] == "srv_get_weather-now"
    assert names["get_weather_now"] == "srv_get_weather_now"
    assert names["x/y z"] == "srv_x_y_z"
    assert len(set(names.values())) == len(names)
    assert all(NAME_RULE.match(n) for n in names.values())
    assert names[long] != names[long + "b"] and len(names[long]) == 64
    # a second cleaned name that would collide gets its own hash, stable across calls
    again = native_names("srv", ["a.b", "a_b"])
    assert again["a.b"] == "srv_a_b" and again["a_b"] != "srv_a_b" and NAME_RULE.match(again["a_b"])
    assert native_names("srv", ["a.b", "a_b"]) == again


@pytest.mark.parametrize("name", ["", "1abc", "has space", "dot.ted", "x" * 33, "über"])
def test_bad_server_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must start with a letter"):
        MCPServer(name, ["true"])


@pytest.mark.parametrize("kw, message", [
    ({}, "either command"),
    ({"command": ["x"], "url": "http://127.0.0.1:1/mcp"}, "either command"),
    ({"url": "ftp://host/mcp"}, "must start with http"),
    ({"command": ["x"], "transport": "sse"}, "does not go with a command"),
    ({"url": "http://127.0.0.1:1/mcp", "transport": "stdio"}, "does not go with a URL"),
])
def test_bad_server_arguments_are_one_clear_error(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPServer("s", **kw)


def test_secrets_of_a_server_go_to_the_one_redactor() -> None:
    from ipyagent.core.redact import redact

    server = MCPServer(
        "web",
        url="https://alice:pa55word99@host.example/mcp?api_key=abc123def456&team=x",
        headers={"Authorization": "Bearer t0k-4567890", "X-Api-Key": "hdr-key-7654321", "X-Team": "platform-a"},
    )
    stdio = MCPServer(
        "cli", ["srv", "--token", "cli-tok-1234567"], env={"SERVICE_TOKEN": "env-tok-1234567", "MODE": "fast-mode"}
    )
    shown = f"{server.target} {server!r} {stdio.target} {stdio!r}"
    assert "pa55word99" not in shown and "abc123def456" not in shown and "team=x" in shown
    leaked = "Bearer t0k-4567890 hdr-key-7654321 env-tok-1234567"
    assert redact(leaked).count("[redacted]") == 3 and "t0k-4567890" not in redact(leaked)
    assert redact("platform-a fast-mode") == "platform-a fast-mode"


def test_input_schema_is_an_object_with_properties() -> None:
    bare = mcp_types.Tool(name="t", input_schema={"type": "object"})
    assert input_schema(bare) == {"type": "object", "properties": {}}
    full = mcp_types.Tool(
        name="t",
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
        },
    )
    assert input_schema(full) == {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_mcp_tool_schemas_pass_the_same_provider_checks_as_cell_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema with what Gemini's subset rejects ($schema, additionalProperties, title, $ref) is
    rewritten by the Gemini driver exactly as a cell tool's is; OpenAI Chat gets it as it is."""
    from ipyagent.drivers import create_driver

    monkeypatch.setenv("GEMINI_API_KEY", "k")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "title": "Args",
              "additionalProperties": False, "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
              "properties": {"city": {"type": "string", "title": "City"}, "unit": {"$ref": "#/$defs/Unit"}},
              "required": ["city"]}
    server = MCPServer("wx", ["true"])
    server.tools = {"get": mcp_types.Tool(name="get", description="Weather.", input_schema=schema)}
    server.names = native_names("wx", ["get"])
    stack = PromptStack(tools=MCPToolset(server).tool_definitions())
    stack.add_user_message("hi")
    _, gemini = create_driver("gemini:gemini-2.5-flash").build_request(stack)
    [declaration] = gemini["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "wx_get"
    assert declaration["parameters"] == {"type": "object", "properties": {"city": {"type": "string"}, "unit": {
        "type": "string", "enum": ["c", "f"]}}, "required": ["city"]}
    _, chat = create_driver("openai:m").build_request(stack)
    assert chat["tools"][0]["function"]["parameters"] == input_schema(server.tools["get"])


PNG = base64.b64encode(b"\x89PNG fake").decode()


@pytest.mark.parametrize(
    "content, expected",
    [
        ([mcp_types.TextContent(type="text", text="hello")], TextArtifact(value="hello")),
        (
            [mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png")],
            ImageArtifact(value=b"\x89PNG fake", mime_type="image/png"),
        ),
        (
            [mcp_types.AudioContent(type="audio", data=PNG, mime_type="audio/mpeg")],
            AudioArtifact(value=b"\x89PNG fake", mime_type="audio/mpeg"),
        ),
        (
            [
                mcp_types.EmbeddedResource(
                    type="resource",
                    resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="A", mime_type="text/plain"),
                )
            ],
            TextArtifact(value="A", name="file:///a.txt"),
        ),
        (
            [
                mcp_types.EmbeddedResource(
                    type="resource",
                    resource=mcp_types.BlobResourceContents(uri="file:///b.png", blob=PNG, mime_type="image/png"),
                )
            ],
            ImageArtifact(value=b"\x89PNG fake", mime_type="image/png", name="file:///b.png"),
        ),
        (
            [
                mcp_types.EmbeddedResource(
                    type="resource", resource=mcp_types.BlobResourceContents(uri="file:///c.bin", blob=PNG)
                )
            ],
            BlobArtifact(value=b"\x89PNG fake", name="file:///c.bin"),
        ),
        ([], InfoArtifact(value="the tool ran and returned nothing")),
    ],
    ids=["text", "image", "audio", "resource-text", "resource-image", "resource-blob", "empty"],
)
def test_mcp_content_becomes_artifacts(content: list[Any], expected: Any) -> None:
    assert result_artifact(mcp_types.CallToolResult(content=content)) == expected


def test_resource_links_and_several_blocks_become_a_list() -> None:
    link = mcp_types.ResourceLink(type="resource_link", uri="file:///r.csv", name="r.csv", mime_type="text/csv")
    out = result_artifact(mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="see"), link]))
    assert isinstance(out, ListArtifact)
    assert out.value[0] == TextArtifact(value="see")
    assert out.value[1].type == "info" and "file:///r.csv" in out.value[1].value and "text/csv" in out.value[1].value


def test_structured_content_is_json_and_never_said_twice() -> None:
    """A ``structuredContent`` that only wraps a text block (its JSON, or an object of one field that is
    the text) is kept for the card but not for the model (`shown_only`); other JSON goes first, for both."""
    data = {"timezone": "Europe/Paris", "is_dst": False}
    text = json.dumps(data, indent=2)
    repeated = result_artifact(mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                                        structured_content=data))
    assert repeated == ListArtifact(value=[TextArtifact(value=text),
                                           JsonArtifact(value=data, name="structuredContent", shown_only=True)])
    assert repeated.to_text() == text
    # server-filesystem's read_text_file: {"content": text}
    filesystem = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="a file\n")],
                                          structured_content={"content": "a file\n"})
    out = result_artifact(filesystem)
    assert out.to_text() == "a file\n"
    assert out.value[-1] == JsonArtifact(value={"content": "a file\n"}, name="structuredContent", shown_only=True)
    # the Python SDK wraps a plain return value as {"result": value}: the text already says it, nothing to show
    for wrapper, said in (({"result": "hi"}, "hi"), ({"result": 42}, "42")):
        out = result_artifact(mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=said)],
                                                       structured_content=wrapper))
        assert out == TextArtifact(value=said)
    other = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="a summary")], structured_content=data
    )
    assert result_artifact(other) == ListArtifact(
        value=[JsonArtifact(value=data, name="structuredContent"), TextArtifact(value="a summary")]
    )
    # an object of more fields says more than its text: not a wrapper
    more = {"content": "x", "size": 1}
    out = result_artifact(mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x")],
                                                   structured_content=more))
    assert not out.value[0].shown_only and json.loads(out.to_text().split("\n\n")[0]) == more


def test_is_error_is_an_error_result() -> None:
    out = result_artifact(
        mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="no such city")], is_error=True)
    )
    assert isinstance(out, ErrorArtifact) and out.value == "no such city"


# -- the reference server over stdio, called by a model ---------------------------------------


def test_reference_time_server_called_by_a_model(servers: list[MCPServer]) -> None:
    """The model calls time_get_current_time; mcp-server-time gets the model's arguments (its answer
    names the zone it was asked about); the result goes back with the model's call id."""
    time_server = make(servers, "time", TIME_SERVER)
    calls = [("call_paris_1", "time_get_current_time", {"timezone": "Europe/Paris"}),
             ("call_tokyo_2", "time_get_current_time", {"timezone": "Asia/Tokyo"})]
    with StubServer(tool_call_reply(calls), openai_text_reply("It is evening in Paris.")) as model:
        result, events = run_agent(model.url, [time_server], "What time is it in Paris and Tokyo?")
    assert result.ok and result.text == "It is evening in Paris."
    offered = [t["function"]["name"] for t in model.requests[0]["body"]["tools"]]
    assert offered == ["time_get_current_time", "time_convert_time"]
    assert all(NAME_RULE.match(n) for n in offered)
    for call_id, _, arguments in calls:
        answer = json.loads(tool_message(model, 1, call_id))
        assert answer["timezone"] == arguments["timezone"] and answer["datetime"]
    cards = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert [c.action.native_name for c in cards] == ["time_get_current_time"] * 2
    assert all(isinstance(c.result.value[-1], JsonArtifact) and c.result.value[-1].shown_only for c in cards)


def test_reference_server_error_goes_back_as_an_error_result(servers: list[MCPServer]) -> None:
    time_server = make(servers, "time", TIME_SERVER)
    with StubServer(tool_call_reply([("call_bad", "time_get_current_time", {"timezone": "Mars/Olympus"})]),
                    openai_text_reply("Sorry.")) as model:
        result, events = run_agent(model.url, [time_server])
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert card.is_error and "Mars/Olympus" in card.result.value
    assert "Mars/Olympus" in tool_message(model, 1, "call_bad")


# -- our SDK-written server over stdio: content, Task Memory, approval, restart ------------------


def test_image_result_is_an_image_artifact(servers: list[MCPServer], record: Path) -> None:
    test = make(servers, "test", TEST_SERVER)
    with StubServer(tool_call_reply([("call_img", "test_picture", {})]), openai_text_reply("A red square.")) as model:
        result, events = run_agent(model.url, [test.toolset(["picture"])])
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert isinstance(card.result, ImageArtifact) and card.result.mime_type == "image/png"
    assert card.result.value.startswith(b"\x89PNG\r\n\x1a\n")
    assert [t["function"]["name"] for t in model.requests[0]["body"]["tools"]] == ["test_picture"]
    assert result.tool_calls[0].output is card.result


def test_big_results_of_an_off_prompt_server_go_to_task_memory(servers: list[MCPServer], record: Path) -> None:
    test = make(servers, "test", TEST_SERVER, off_prompt=True)
    memory = TaskMemory()
    with StubServer(tool_call_reply([("call_big", "test_big", {"n": 20000})]), openai_text_reply("Stored.")) as model:
        result, events = run_agent(model.url, [test.toolset(["big"])], memory=memory)
    offered = [t["function"]["name"] for t in model.requests[0]["body"]["tools"]]
    assert offered[0] == "test_big" and "TaskMemory_read" in offered  # the reader comes with an off-prompt server
    [stored] = [e for e in events if isinstance(e, ArtifactStored)]
    assert stored.call_id == "call_big" and stored.size == {"chars": 20000}
    assert "x" * 100 not in json.dumps(model.requests[1]["body"])
    assert stored.namespace in tool_message(model, 1, "call_big")
    assert memory.entry(stored.namespace).artifact == TextArtifact(value="x" * 20000)


@pytest.mark.parametrize("verdict", [True, False])
def test_approval_is_asked_before_every_call(servers: list[MCPServer], record: Path, verdict: bool) -> None:
    test = make(servers, "test", TEST_SERVER, requires_approval=True)
    asked: list[str] = []

    def approve(action: Any) -> bool:
        asked.append(f"{action.native_name} {action.input}")
        return verdict

    with StubServer(
        tool_call_reply([("call_e", "test_echo", {"text": "hi", "times": 2})]), openai_text_reply("ok")
    ) as model:
        run_agent(model.url, [test.toolset(["echo"])], approve=approve)
    assert asked == ["test_echo {'text': 'hi', 'times': 2}"]
    if verdict:
        assert received(record) == [{"tool": "echo", "arguments": {"text": "hi", "times": 2}}]
        assert tool_message(model, 1, "call_e") == "hi hi"
    else:
        assert received(record) == []
        assert "denied" in tool_message(model, 1, "call_e")


def test_a_server_that_dies_is_restarted_once_and_the_card_says_so(servers: list[MCPServer], record: Path) -> None:
    test = make(servers, "test", TEST_SERVER)
    run_sync(test.start())
    [first] = children(TEST_SERVER[1])
    crashed = run_sync(test.call("crash", {}))
    assert isinstance(crashed, ErrorArtifact) and "stopped during the call" in crashed.value
    assert gone(first)
    again = run_sync(test.call("echo", {"text": "back"}))
    assert isinstance(again, ListArtifact)
    note, answer = again.value
    assert note.type == "info" and "restarted" in note.value and answer == TextArtifact(value="back")
    [second] = children(TEST_SERVER[1])
    assert second != first and test.restarts == 1
    # it dies again before any call succeeds: reported, not restarted a second time
    run_sync(test.call("crash", {}))
    run_sync(test.call("crash", {}))  # restarted once (the first call after a death), crashes again
    final = run_sync(test.call("echo", {"text": "x"}))
    assert isinstance(final, ErrorArtifact) and "stopped again after a restart" in final.value
    assert test.state == "failed" and children(TEST_SERVER[1]) == []


def test_a_run_after_the_server_died_restarts_it_in_the_call_and_says_so(
    servers: list[MCPServer], record: Path
) -> None:
    test = make(servers, "test", TEST_SERVER)
    run_sync(test.start())
    run_sync(test.call("crash", {}))
    with StubServer(tool_call_reply([("call_r", "test_echo", {"text": "again"})]), openai_text_reply("ok")) as model:
        result, events = run_agent(model.url, [test.toolset(["echo"])])
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert "restarted" in card.result.value[0].value and card.result.value[1] == TextArtifact(value="again")
    assert tool_message(model, 1, "call_r").endswith("again") and "restarted" in tool_message(model, 1, "call_r")


def test_the_run_deadline_cancels_a_slow_mcp_call(servers: list[MCPServer], record: Path) -> None:
    """Past the run's deadline the pending MCP call is cancelled (the server gets notifications/cancelled)
    and the run ends as ``timeout``."""
    test = make(servers, "test", TEST_SERVER)
    run_sync(test.start())  # started before the clock runs: the deadline is for the call
    with StubServer(tool_call_reply([("call_s", "test_slow", {"seconds": 60})]), openai_text_reply("never")) as model:
        result, _ = run_agent(model.url, [test.toolset(["slow"])], timeout=3)
    assert result.error is not None and result.error.type == "timeout"
    assert len(model.requests) == 1
    wait_until(lambda: len(received(record)) >= 2, 5)
    assert received(record) == [{"tool": "slow", "arguments": {"seconds": 60}}, {"cancelled": "slow"}]
    assert isinstance(run_sync(test.call("echo", {"text": "still here"})), TextArtifact)  # the server goes on


def test_an_unknown_tool_call_is_an_error_result(servers: list[MCPServer]) -> None:
    test = make(servers, "test", TEST_SERVER)
    out = run_sync(test.call("nope", {}))
    assert isinstance(out, ErrorArtifact) and "has no tool 'nope'" in out.value and "echo" in out.value


def test_a_dotted_mcp_name_round_trips(servers: list[MCPServer], record: Path) -> None:
    test = make(servers, "test", TEST_SERVER)
    with StubServer(
        tool_call_reply([("call_w", "test_get_weather-now", {"city": "Oslo"})]), openai_text_reply("ok")
    ) as model:
        _, events = run_agent(model.url, [test])
    assert "sunny in Oslo" in tool_message(model, 1, "call_w")
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert (card.action.name, card.action.path) == ("test_get_weather-now", None)  # server_tool, kept whole


def test_stderr_goes_to_the_log_not_to_our_streams(servers: list[MCPServer], capfd: pytest.CaptureFixture[str]) -> None:
    test = make(servers, "test", TEST_SERVER)
    run_sync(test.start())
    run_sync(test.call("fail", {}))
    out, err = capfd.readouterr()
    assert "ipyagent test server starting" in test.log()
    assert "ipyagent test server starting" not in out + err and "broke on purpose" not in out + err


def test_a_server_that_cannot_start_fails_the_run_with_one_line(servers: list[MCPServer]) -> None:
    broken = make(servers, "broken", [sys.executable, "-c", "import sys; sys.exit(2)"])
    with StubServer(openai_text_reply("never")) as model:
        result, _ = run_agent(model.url, [broken])
    assert result.error.type == "tool_unavailable" and "exited during start-up" in result.error.message
    assert "\n" not in result.error.message and model.requests == []


def test_as_tool_and_toolset_pick_tools(servers: list[MCPServer]) -> None:
    test = make(servers, "test", TEST_SERVER)
    assert isinstance(as_tool(test), MCPToolset)
    one = test.toolset(["echo"])
    run_sync(one.prepare())
    assert [d.name for d in one.tool_definitions()] == ["test_echo"]
    with pytest.raises(MCPServerError, match="has no tool 'nope'"):
        run_sync(test.toolset(["nope"]).prepare())


# -- streamable HTTP: an SDK server on 127.0.0.1 ------------------------------------------------


@pytest.fixture(params=["streamable-http", "sse"])
def http_server(request: pytest.FixtureRequest, record: Path) -> Iterator[dict[str, Any]]:
    """tests/support/mcp_server.py over streamable HTTP or SSE (uvicorn in a thread, port 0); notes request headers."""
    import asyncio

    import uvicorn

    from ..support import mcp_server

    seen: list[dict[str, str]] = []
    transport = request.param
    app = mcp_server.server.streamable_http_app() if transport == "streamable-http" else mcp_server.server.sse_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    config = uvicorn.Config(recording, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(400):
        if server.started:
            started.set()
            break
        started.wait(0.025)
    assert server.started, "the MCP HTTP server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    path = "/mcp" if transport == "streamable-http" else "/sse"
    yield {"url": f"http://127.0.0.1:{port}{path}", "headers": seen, "transport": transport}
    server.should_exit = True
    thread.join(timeout=10)


def test_http_server_called_by_a_model(http_server: dict[str, Any], servers: list[MCPServer], record: Path) -> None:
    web = make(servers, "web", url=http_server["url"], transport=http_server["transport"],
               headers={"Authorization": "Bearer tok-123", "X-Team": "a"})
    with StubServer(tool_call_reply([("call_h1", "web_echo", {"text": "over http", "times": 1})]),
                    openai_text_reply("It said it.")) as model:
        result, _ = run_agent(model.url, [web.toolset(["echo"])])
    assert result.ok
    assert received(record) == [{"tool": "echo", "arguments": {"text": "over http", "times": 1}}]
    assert tool_message(model, 1, "call_h1") == "over http"
    assert http_server["headers"] and all(h.get("authorization") == "Bearer tok-123" and h.get("x-team") == "a"
                                          for h in http_server["headers"])


def test_a_url_that_refuses_is_one_line(servers: list[MCPServer]) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = make(servers, "gone", url=f"http://127.0.0.1:{port}/mcp")
    with pytest.raises(MCPServerError) as caught:
        run_sync(refused.start())
    message = str(caught.value)
    assert "cannot connect" in message and "\n" not in message and refused.state == "failed"


# -- process groups: no process outlives its server ------------------------------------------


def test_closing_a_server_ends_its_whole_process_group(servers: list[MCPServer], tmp_path: Path) -> None:
    """A ``sh -c`` wrapper exits as soon as its server does (stdin closed): the SDK then kills
    nothing, and the wrapper's other child would be left; ipyagent ends the group."""
    test = make(servers, "fam", wrapped_server(tmp_path / "child.pid"))
    run_sync(test.start())
    child, leader = pid_in(tmp_path / "child.pid"), test.processes.leader
    assert leader is not None and os.getpgid(child) == leader == os.getsid(child)  # its own session and group
    assert test.left_processes == []
    run_sync(test.aclose())
    assert gone(leader, timeout=0) and gone(child, timeout=0)  # ended by the time aclose returns


def test_closing_ends_the_group_even_when_the_leader_ignores_sigterm(servers: list[MCPServer], tmp_path: Path) -> None:
    """SIGTERM first, SIGKILL after the grace for what is left."""
    from ipyagent.tools import process_group

    ignoring = tmp_path / "ignore.py"
    ignoring.write_text("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                        "open(sys.argv[1], 'w').write('up')\ntime.sleep(600)\n")
    processes = process_group.ServerProcesses("x")
    proc = subprocess.Popen([sys.executable, str(ignoring), str(tmp_path / "up")], start_new_session=True,
                            env={**os.environ, **processes.environment({})})
    try:
        assert wait_until(lambda: (tmp_path / "up").exists() or proc.poll() is not None) and proc.poll() is None
        processes.leader = proc.pid
        terms: list[int] = []
        real_signal = processes.signal
        processes.signal = lambda signum: terms.append(signum) or real_signal(signum)  # type: ignore[method-assign]
        assert processes.end(grace=0.2) == []
        assert terms == [signal.SIGTERM, signal.SIGKILL] and proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        proc.kill()


def test_a_process_that_left_the_group_is_reported_by_pid(servers: list[MCPServer], tmp_path: Path) -> None:
    test = make(servers, "escapee", wrapped_server(tmp_path / "child.pid", leave_group=True))
    run_sync(test.start())
    child = pid_in(tmp_path / "child.pid")
    try:
        assert os.getsid(child) == child != test.processes.leader  # its own session: out of the group
        assert test.left_processes == [child]
        run_sync(test.aclose())
        assert not gone(child, timeout=0)  # not signalled: it is outside the group ...
        assert test.left_processes == [child] and f"outside its process group: {child}" in test.log()  # ... but said
    finally:
        os.kill(child, signal.SIGKILL)
    assert gone(child) and test.left_processes == []


def test_interpreter_exit_ends_every_group_at_once(servers: list[MCPServer], tmp_path: Path) -> None:
    from ipyagent.tools import mcp as mcp_module

    first = make(servers, "one", wrapped_server(tmp_path / "one.pid"))
    second = make(servers, "two", wrapped_server(tmp_path / "two.pid"))
    run_sync(first.start())
    run_sync(second.start())
    pids = [pid_in(tmp_path / "one.pid"), pid_in(tmp_path / "two.pid"), first.processes.leader, second.processes.leader]
    log_dir = mcp_module.log_dir()
    try:
        mcp_module.close_all_at_exit()
        assert all(gone(pid, timeout=0) for pid in pids)
    finally:
        log_dir.mkdir(exist_ok=True)  # the other tests of this process keep logging there


# -- what a server prints is shown redacted --------------------------------------------------

LEAK = "sk-live-" + "Q" * 24


def test_a_failing_servers_start_error_and_log_hold_no_key(servers: list[MCPServer]) -> None:
    script = f'echo "starting with $SERVICE_TOKEN and {LEAK}" >&2; printf "\\033]52;c;aGk=\\007bye\\n" >&2; exit 3'
    bad = MCPServer("leaky", ["sh", "-c", script], env={"SERVICE_TOKEN": "tok-0123456789abcdef"})
    servers.append(bad)
    with pytest.raises(MCPServerError) as raised:
        run_sync(bad.start())
    message = str(raised.value)
    assert "exited during start-up" in message and "its last log line" in message
    log = bad.log()
    for shown in (message, bad.last_error or "", log):
        assert LEAK not in shown and "tok-0123456789abcdef" not in shown
    assert "starting with [redacted] and [redacted]" in log
