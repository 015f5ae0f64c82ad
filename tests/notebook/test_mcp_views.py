"""An MCP server's progress, sampling requests and elicitations in the live view of a run (`WidgetView`,
its front end played by `FrontEnd`), against the MCP project's server-everything over stdio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import RunOptions, run_sync
from ipyagent.notebook.views.run_view import WidgetView
from ipyagent.tools.mcp import MCPServer

from ..support.live_front import FrontEnd
from ..support.mcp_servers import everything
from ..support.replies import tool_call_reply
from ..support.stub_server import StubServer, openai_text_reply


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-views")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def ev() -> Iterator[MCPServer]:
    server = MCPServer("ev", everything())
    yield server
    run_sync(server.aclose())


def live_run(model: StubServer, server: MCPServer, tool: str, answer: Any = None) -> tuple[Any, FrontEnd]:
    """Run an agent whose model calls `tool`, its events into a `WidgetView` whose front end said hello;
    `answer(front)`, awaited while the run goes on, plays the user."""
    view = WidgetView("openai:gpt-4.1")
    front = FrontEnd(view)
    agent = ipyagent.Agent("openai:gpt-4.1", base_url=f"{model.url}/v1", tools=[server.toolset([tool])])
    options = RunOptions(approve=view.request_approval, approve_sampling=view.request_sampling,
                         elicit=view.request_elicitation)

    async def main() -> Any:
        front.hello()
        run = asyncio.ensure_future(agent.arun("Go", options, on_event=view.feed))
        if answer is not None:
            await answer(front)
        try:
            return await run
        finally:
            await agent.aclose()

    return run_sync(main()), front


def test_the_card_shows_the_progress_of_a_long_running_operation_before_its_result(ev: MCPServer) -> None:
    call = ("call_long", "ev_trigger-long-running-operation", {"duration": 2, "steps": 4})
    with StubServer(tool_call_reply([call]), openai_text_reply("Done.")) as model:
        result, front = live_run(model, ev, "trigger-long-running-operation")
    assert result.ok, result.error
    [sid] = [sid for sid, s in front.segments.items() if s["kind"] == "tool"]
    seen, finished = [], False
    for message in front.frames:
        for op in message["ops"]:
            if op[0] == "tool" and op[1] == sid:
                if "result" in op[2]:
                    finished = True
                elif "progress" in op[2]:
                    assert not finished, "progress after the result"
                    seen.append((op[2]["progress"]["progress"], op[2]["progress"]["total"]))
    assert finished and len(seen) >= 3 and seen == sorted(seen) and {t for _, t in seen} == {4}
    assert seen[:3] == [(1, 4), (2, 4), (3, 4)]


def test_a_sampling_request_is_approved_in_the_card_with_its_message_edited(ev: MCPServer) -> None:
    async def approve(front: FrontEnd) -> None:
        await front.until(lambda: front.asks)
        [(sid, ask)] = front.asks.items()
        assert ask["kind"] == "sampling" and ask["server"] == "ev" and ask["system"] == "You are a helpful test server."
        asked = "Resource trigger-sampling-request context: six times seven?"
        assert ask["messages"] == [{"role": "user", "text": asked}]
        assert ask["max_tokens"] == 20 and ask["editable"] == ask["messages"][0]["text"]
        assert ask["arguments"] == {"prompt": "six times seven?", "maxTokens": 20}  # the card shows them meanwhile
        await front.until(lambda: front.status.get("ticking") == "approval")
        front.send(sid, type="approve", verdict=True, text="What is six times seven? Answer in words.")

    call = ("call_s", "ev_trigger-sampling-request", {"prompt": "six times seven?", "maxTokens": 20})
    with StubServer(tool_call_reply([call]), openai_text_reply("forty-two"), openai_text_reply("ok")) as model:
        result, front = live_run(model, ev, "trigger-sampling-request", approve)
    assert result.ok and len(model.requests) == 3
    edited = {"role": "user", "content": "What is six times seven? Answer in words."}
    assert model.requests[1]["body"]["messages"][-1] == edited
    [card] = [s["call"] for s in front.segments.values() if s["kind"] == "tool"]
    assert card["notes"][0].startswith("sampling request from ev answered by openai:gpt-4.1 (")
    assert card["notes"][0].endswith("out tokens): forty-two") and '"text": "forty-two"' in card["result"]
    assert not front.asks


def test_an_elicitation_form_is_filled_in_the_card_and_checked_before_it_is_sent(ev: MCPServer) -> None:
    async def fill(front: FrontEnd) -> None:
        await front.until(lambda: front.asks)
        [(sid, ask)] = front.asks.items()
        assert ask["kind"] == "elicitation" and ask["message"] == "Please provide inputs for the following fields:"
        await front.until(lambda: front.status.get("ticking") == "answer")  # the footer: "waiting for your answer"
        fields = {f["name"]: f for f in ask["fields"]}
        assert fields["name"]["required"] and fields["check"]["kind"] == "boolean"
        integer = {"kind": "integer", "minimum": 1, "maximum": 100, "default": 42}
        assert fields["integer"] == {**fields["integer"], **integer}
        assert fields["titledSingleSelectEnum"]["options"][0] == ["hero-1", "Superman"]
        assert fields["untitledMultipleSelectEnum"]["kind"] == "choices"
        front.send(sid, type="elicit", action="accept", content={"name": "", "integer": "many"})
        await front.until(lambda: front.asks.get(sid, {}).get("errors"))
        assert front.asks[sid]["errors"] == {"name": "required", "integer": "give a whole number"}
        front.send(sid, type="elicit", action="accept", content={"name": "Ada Lovelace", "integer": "7", "check": True,
                                                                 "untitledMultipleSelectEnum": ["Piano", "Drums"]})

    with StubServer(tool_call_reply([("call_e", "ev_trigger-elicitation-request", {})]),
                    openai_text_reply("ok")) as model:
        result, front = live_run(model, ev, "trigger-elicitation-request", fill)
    [card] = [s["call"] for s in front.segments.values() if s["kind"] == "tool"]
    assert "- Name: Ada Lovelace" in card["result"] and "- Favorite Integer: 7" in card["result"]
    assert '"untitledMultipleSelectEnum": [\n      "Piano",\n      "Drums"\n    ]' in card["result"]
    assert card["notes"] == ["ev asked you for input: you answered"]


def test_with_no_front_end_an_elicitation_is_declined_saying_why(ev: MCPServer, monkeypatch) -> None:
    """A run no browser shows (nbconvert, papermill, nbclient: no front end ever says hello) does
    not wait for an answer no one can give: after the grace the form is declined, and the card says why."""
    from ipyagent.notebook.views import asks

    monkeypatch.setattr(asks, "FRONT_END_GRACE_S", 0.0)
    view = WidgetView("openai:gpt-4.1")
    with StubServer(tool_call_reply([("call_e", "ev_trigger-elicitation-request", {})]),
                    openai_text_reply("ok")) as model:
        agent = ipyagent.Agent("openai:gpt-4.1", base_url=f"{model.url}/v1",
                               tools=[ev.toolset(["trigger-elicitation-request"])])
        options = RunOptions(approve=view.request_approval, elicit=view.request_elicitation)
        result = run_sync(agent.arun("Go", options, on_event=view.feed))
        run_sync(agent.aclose())
    [call] = result.tool_calls
    assert "declined" in str(call.output).lower()  # what the server answered its tool call with
    [segment] = [s for s in view.state.segments.values() if s.kind == "tool"]
    assert segment.notes == ["ev asked you for input: declined, no front end shows this cell (a run without a browser)"]


def test_a_question_waits_for_a_front_end_that_said_hello(monkeypatch) -> None:
    """The grace applies only before a hello: once a front end shows the view, a question waits
    for its answer (an approval here)."""
    from ipyagent.core import ToolAction
    from ipyagent.notebook.views import asks

    monkeypatch.setattr(asks, "FRONT_END_GRACE_S", 0.0)
    view = WidgetView("openai:gpt-4.1")
    front = FrontEnd(view)
    action = ToolAction(tag="call_1", name="add", input={"a": 1})

    async def main() -> tuple[bool, bool]:
        unseen = await view.request_approval(action)  # no front end: not run
        front.hello()
        asked = asyncio.ensure_future(view.request_approval(action))
        await front.until(lambda: front.asks)
        [sid] = front.asks
        front.send(sid, type="approve", verdict=True)
        return unseen, await asked

    assert run_sync(main()) == (False, True)
