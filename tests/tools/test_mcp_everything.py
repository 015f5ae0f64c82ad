"""ipyagent as an MCP client of the MCP project's reference servers (npm, pinned, installed by ``make
install`` into build/mcp-servers): ``server-everything`` over stdio and over streamable HTTP on
127.0.0.1, and ``server-filesystem``; a scripted model server makes each tool call and records the
requests that follow."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import RunOptions, run_sync
from ipyagent.core import (
    ElicitationAnswer,
    ElicitationRequest,
    ImageArtifact,
    ModelCompleted,
    SamplingCompleted,
    SamplingRequest,
    SamplingVerdict,
    ToolCallCompleted,
    ToolCallProgress,
    form_fields,
)
from ipyagent.tools.mcp import MCPServer

from ..support.mcp_servers import everything, everything_http, filesystem
from ..support.replies import tool_call_reply
from ..support.stub_server import StubServer, openai_text_reply
from ..support.waiting import wait_until


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-everything")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


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


def run_agent(model_url: str, tools: list[Any], prompt: str = "Go", **options: Any) -> tuple[Any, list[Any]]:
    """Run `prompt` with `tools` on the scripted model; `options` are the run's (`RunOptions`)."""
    agent = ipyagent.Agent("openai:gpt-4.1", base_url=f"{model_url}/v1", tools=tools)
    events: list[Any] = []
    try:
        return run_sync(agent.arun(prompt, RunOptions(**options), on_event=events.append)), events
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
    fs = MCPServer("fs", filesystem(tmp_path), roots=[tmp_path])  # its allowed folders become the roots given
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


def _result_text(events: list[Any]) -> str:
    [card] = [e for e in events if isinstance(e, ToolCallCompleted)]
    return card.result.to_text()


def test_long_running_operation_reports_progress_before_its_result(ev: MCPServer) -> None:
    """Every call sends a progressToken: the server's 4 progress notifications come as
    `ToolCallProgress` events of the call, each of total 4, before its result."""
    call = ("call_long", "ev_trigger-long-running-operation", {"duration": 1, "steps": 4})
    with StubServer(tool_call_reply([call]), openai_text_reply("Done.")) as model:
        result, events = run_agent(model.url, [ev.toolset(["trigger-long-running-operation"])])
    assert result.ok, result.error
    kinds = [e.type for e in events if e.type in ("tool_call_progress", "tool_call_completed")]
    assert kinds == ["tool_call_progress"] * 4 + ["tool_call_completed"]
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    assert [(p.progress, p.total) for p in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert all(p.action.tag == "call_long" for p in progress)


@pytest.mark.parametrize("approved", [True, False])
def test_a_sampling_request_goes_to_the_runs_model_once_approved(ev: MCPServer, approved: bool) -> None:
    """trigger-sampling-request: approved, the model server receives the server's request (its system
    prompt, its message, its max tokens) and the tool's result holds the answer, whose tokens count in
    the run; denied, the server is told so, no request is sent, and the run goes on."""
    asked: list[SamplingRequest] = []

    async def approve(request: SamplingRequest) -> SamplingVerdict:
        asked.append(request)
        return SamplingVerdict(approved)

    call = ("call_s", "ev_trigger-sampling-request", {"prompt": "What is six times seven?", "maxTokens": 20})
    answer = [openai_text_reply("forty-two")] if approved else []
    replies = [tool_call_reply([call]), *answer, openai_text_reply("ok")]
    with StubServer(*replies) as model:
        result, events = run_agent(model.url, [ev.toolset(["trigger-sampling-request"])], approve_sampling=approve)
    assert result.ok and result.text == "ok"
    [request] = asked
    assert request.server == "ev" and request.action.tag == "call_s" and request.max_tokens == 20
    assert request.messages[0].text == "Resource trigger-sampling-request context: What is six times seven?"
    text = _result_text(events)
    [sampled] = [e for e in events if isinstance(e, SamplingCompleted)]
    if approved:
        assert len(model.requests) == 3
        sent = model.requests[1]["body"]
        asked = "Resource trigger-sampling-request context: What is six times seven?"
        assert sent["messages"] == [{"role": "system", "content": "You are a helpful test server."},
                                    {"role": "user", "content": asked}]
        assert sent["max_completion_tokens"] == 20 and not sent.get("tools")
        assert '"text": "forty-two"' in text and '"model": "openai:gpt-4.1"' in text
        assert sampled.error is None and sampled.text == "forty-two" and sampled.usage.total_tokens > 0
        assert result.usage.input_tokens == sum(
            e.usage.input_tokens for e in events if isinstance(e, (ModelCompleted, SamplingCompleted)))
    else:
        assert len(model.requests) == 2
        assert "sampling refused: denied by the user" in text
        assert sampled.error == "denied by the user"


def test_sampling_without_an_approver_or_over_the_cap_is_refused(ev: MCPServer) -> None:
    call = ("call_s", "ev_trigger-sampling-request", {"prompt": "hi"})
    with StubServer(tool_call_reply([call]), openai_text_reply("ok")) as model:
        _, events = run_agent(model.url, [ev.toolset(["trigger-sampling-request"])])
    assert "no one can approve it here" in _result_text(events) and len(model.requests) == 2

    async def approve(request: SamplingRequest) -> SamplingVerdict:
        return SamplingVerdict(True)

    with StubServer(tool_call_reply([call]), openai_text_reply("ok")) as model:
        _, events = run_agent(model.url, [ev.toolset(["trigger-sampling-request"])], approve_sampling=approve,
                              max_sampling=0)
    assert "its cap (max_sampling)" in _result_text(events) and len(model.requests) == 2


@pytest.mark.parametrize("action", ["accept", "decline"])
def test_an_elicitation_is_answered_by_the_user(ev: MCPServer, action: str) -> None:
    """trigger-elicitation-request: the form's schema reaches the user; accepted, the tool's result holds
    the values given; declined, the server gets the decline."""
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        given = {"name": "Ada Lovelace", "check": True, "integer": 7}
        return ElicitationAnswer(action, given if action == "accept" else None)

    with StubServer(tool_call_reply([("call_e", "ev_trigger-elicitation-request", {})]),
                    openai_text_reply("ok")) as model:
        _, events = run_agent(model.url, [ev.toolset(["trigger-elicitation-request"])], elicit=elicit)
    [request] = asked
    assert request.mode == "form" and request.schema["required"] == ["name"] and request.action.tag == "call_e"
    assert [f.name for f in form_fields(request.schema)][:3] == ["name", "check", "firstLine"]
    text = _result_text(events)
    if action == "accept":
        assert "- Name: Ada Lovelace" in text and "- Agreed to terms: true" in text and "- Favorite Integer: 7" in text
    else:
        assert "User declined to provide the requested information" in text


@pytest.mark.parametrize("action", ["accept", "decline"])
def test_a_url_elicitation_shows_the_link_and_waits_for_the_user(ev: MCPServer, action: str) -> None:
    """trigger-url-elicitation (URL mode): the user gets the link and the server's id for it, not a form;
    done (accept) or declined, the server hears which."""
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer(action)

    arguments = {"url": "https://example.com/connect", "message": "Connect your account"}
    with StubServer(tool_call_reply([("call_u", "ev_trigger-url-elicitation", arguments)]),
                    openai_text_reply("ok")) as model:
        _, events = run_agent(model.url, [ev.toolset(["trigger-url-elicitation"])], elicit=elicit)
    [request] = asked
    assert (request.mode, request.url, request.schema) == ("url", "https://example.com/connect", None)
    assert request.message == "Connect your account" and request.elicitation_id and request.action.tag == "call_u"
    text = _result_text(events)
    expected = "User completed the URL elicitation flow" if action == "accept" else "User declined to open the URL"
    assert expected in text


def test_an_elicitation_nobody_answers_in_time_is_declined(servers: list[MCPServer]) -> None:
    ev = MCPServer("ev", everything(), elicitation_timeout=0.2)
    servers.append(ev)
    never = asyncio.Event()

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        await never.wait()
        raise AssertionError("not reached")

    with StubServer(tool_call_reply([("call_e", "ev_trigger-elicitation-request", {})]),
                    openai_text_reply("ok")) as model:
        result, events = run_agent(model.url, [ev.toolset(["trigger-elicitation-request"])], elicit=elicit)
    assert result.ok and "User declined" in _result_text(events)


def test_the_roots_list_is_the_roots_given(tmp_path: Path, servers: list[MCPServer]) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "docs").mkdir()
    ev = MCPServer("ev", everything(), roots=[tmp_path / "data", tmp_path / "docs"])
    servers.append(ev)
    text = run_sync(ev.call("get-roots-list", {})).to_text()
    assert "Current MCP Roots (2 total)" in text
    for folder in ("data", "docs"):
        assert f"URI: {(tmp_path / folder).resolve().as_uri()}" in text
    run_sync(ev.set_roots([tmp_path / "docs"]))  # notifications/roots/list_changed: the server asks again
    asked_again = lambda: "(1 total)" in run_sync(ev.call("get-roots-list", {})).to_text()  # noqa: E731
    wait_until(asked_again, 10, every=0.05)
    text = run_sync(ev.call("get-roots-list", {})).to_text()
    assert "Current MCP Roots (1 total)" in text and "data" not in text.split("Roots (1 total)")[1].split("Note:")[0]


def test_a_stdio_servers_default_root_is_its_working_folder(tmp_path: Path, servers: list[MCPServer]) -> None:
    ev = MCPServer("ev", everything(), cwd=tmp_path)
    servers.append(ev)
    assert f"URI: {tmp_path.resolve().as_uri()}" in run_sync(ev.call("get-roots-list", {})).to_text()
    assert MCPServer("web", url="http://127.0.0.1:1/mcp").requests.roots == []
