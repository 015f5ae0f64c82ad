"""A turn the provider pauses in its own tool loop goes on: Anthropic's ``pause_turn`` ("Server
tools", "The server-side loop and pause_turn": send the paused response back as it is, with the
same tools and no added user message, and the turn continues)."""

from __future__ import annotations

import ipyagent
from ipyagent.agent.loop_thread import run_sync

from ..support.server_tool_streams import anthropic_web_search, sse, web_search_citation
from ..support.stub_server import Reply, StubServer

UEFA = ("https://www.uefa.com/euro2024/news/final", "Spain crowned champions")
BBC = ("https://www.bbc.co.uk/sport/football/euro-final", "Euro 2024 final")


def _reply(events: list[dict]) -> Reply:
    return Reply(pieces=[p + b"\n\n" for p in sse(events).split(b"\n\n") if p.strip()])


def test_a_paused_turn_is_sent_back_as_it_is_and_goes_on():
    paused = anthropic_web_search("claude-sonnet-5-5", "euro 2024 winner", [UEFA], [], stop="pause_turn")
    answer = [("Spain won Euro 2024.", [web_search_citation(BBC[0], BBC[1], "Spain beat England 2-1")])]
    resumed = anthropic_web_search("claude-sonnet-5-5", "euro 2024 final score", [BBC], answer, call_id="srvtoolu_2")
    with StubServer(_reply(paused), _reply(resumed)) as server:
        agent = ipyagent.Agent("anthropic:claude-sonnet-5-5", base_url=server.url, builtin_tools=["web_search"])
        try:
            result = agent.run("Who won Euro 2024?")
        finally:
            run_sync(agent.aclose())
    assert result.error is None and result.stop_reason.kind == "end_turn"
    first, second = (r["body"] for r in server.requests)
    assert second["tools"] == first["tools"]
    # the paused reply goes back whole as the last message: no user message is added after it
    assert [m["role"] for m in second["messages"]] == ["user", "assistant"]
    assert [b["type"] for b in second["messages"][1]["content"]] == ["server_tool_use", "web_search_tool_result"]
    assert second["messages"][1]["content"][1] == paused[5]["content_block"]
    assert result.text == "Spain won Euro 2024."
    assert [c.id for c in result.server_tool_calls] == ["srvtoolu_1", "srvtoolu_2"]
    assert [(c.url, c.text) for c in result.citations] == [(BBC[0], "Spain won Euro 2024.")]
    assert result.usage.server_tool_calls == {"web_search": 2}


def test_a_turn_still_paused_at_max_steps_keeps_what_it_found():
    paused = anthropic_web_search("claude-sonnet-5-5", "euro 2024 winner", [UEFA], [], stop="pause_turn")
    with StubServer(_reply(paused), _reply(paused)) as server:
        agent = ipyagent.Agent("anthropic:claude-sonnet-5-5", base_url=server.url, builtin_tools=["web_search"],
                               max_steps=2)
        try:
            result = agent.run("Who won Euro 2024?")
        finally:
            run_sync(agent.aclose())
    assert len(server.requests) == 2
    assert result.error is not None and result.error.type == "max_steps"
    assert [type(b).__name__ for b in result.message.content] == ["ServerToolCallBlock", "ServerToolResultBlock"]
