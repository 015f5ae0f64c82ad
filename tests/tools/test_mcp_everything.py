"""ipyagent as an MCP client of the MCP project's reference servers (npm, pinned, installed by ``make
install`` into build/mcp-servers): ``server-everything`` over stdio and over streamable HTTP on
127.0.0.1, and ``server-filesystem``; a scripted model server makes each tool call and records the
requests that follow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import run_sync
from ipyagent.core import ImageArtifact, ToolCallCompleted
from ipyagent.tools.mcp import MCPServer

from ..support.mcp_servers import everything, everything_http, filesystem
from ..support.replies import tool_call_reply
from ..support.stub_server import StubServer, openai_text_reply


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-everything")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def servers() -> Iterator[list[MCPServer]]:
    made: list[MCPServer] = []
    yield made
    for server in made:
        run_sync(server.aclose())


@pytest.fixture(params=["stdio", "streamable-http"])
def ev(request: pytest.FixtureRequest, servers: list[MCPServer]) -> Iterator[MCPServer]:
    """server-everything as MCP server ``ev``, over stdio or streamable HTTP on 127.0.0.1."""
    if request.param == "stdio":
        server = MCPServer("ev", everything())
        servers.append(server)
        yield server
        return
    with everything_http() as url:
        server = MCPServer("ev", url=url)
        servers.append(server)
        yield server
        run_sync(server.aclose())  # before the HTTP server stops


def run_agent(model_url: str, tools: list[Any], prompt: str = "Go", **kw: Any) -> tuple[Any, list[Any]]:
    agent = ipyagent.Agent("openai:gpt-4.1", base_url=f"{model_url}/v1", tools=tools, **kw)
    events: list[Any] = []
    try:
        return run_sync(agent.arun(prompt, on_event=events.append)), events
    finally:
        run_sync(agent.aclose())


def test_tiny_image_goes_to_the_model_as_an_image_part(ev: MCPServer) -> None:
    """get-tiny-image returns text, an image, text: the card's result holds the PNG, and the next
    request holds it as an image part (Chat Completions: a user message after the tool message,
    naming the call), never as ``<image …>`` text."""
    reply = tool_call_reply([("call_img", "ev_get-tiny-image", {})])
    with StubServer(reply, openai_text_reply("The MCP logo.")) as model:
        result, events = run_agent(model.url, [ev.toolset(["get-tiny-image"])])
    assert result.ok, result.error
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    [image] = [a for a in card.result.value if isinstance(a, ImageArtifact)]
    assert image.mime_type == "image/png" and image.value.startswith(b"\x89PNG")
    messages = model.requests[1]["body"]["messages"]
    tool, after = messages[-2:]
    assert tool == {"role": "tool", "tool_call_id": "call_img",
                    "content": "Here's the image you requested:\n\nThe image above is the MCP logo."}
    assert after["role"] == "user" and "call_img" in after["content"][0]["text"]
    assert after["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image.base64}"}}
    assert "<image" not in json.dumps(model.requests[1]["body"])


def test_a_file_read_by_server_filesystem_reaches_the_model_once(tmp_path: Path, servers: list[MCPServer]) -> None:
    """read_text_file returns the file as text and again as ``structuredContent`` ``{"content": …}``:
    the next request holds the text once."""
    text = "".join(f"line {n:05d} of the notes, with some words to fill it\n" for n in range(200))
    assert len(text) >= 10_000
    notes = tmp_path / "notes.txt"
    notes.write_text(text)
    fs = MCPServer("fs", filesystem(tmp_path))
    servers.append(fs)
    with StubServer(tool_call_reply([("call_read", "fs_read_text_file", {"path": str(notes)})]),
                    openai_text_reply("Read it.")) as model:
        result, events = run_agent(model.url, [fs.toolset(["read_text_file"])])
    assert result.ok, result.error
    body = json.dumps(model.requests[1]["body"])
    assert body.count("line 00100 of the notes") == 1
    [tool] = [m for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert tool["content"] == text
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert card.result.value[-1].name == "structuredContent" and card.result.value[-1].shown_only  # the card shows both
