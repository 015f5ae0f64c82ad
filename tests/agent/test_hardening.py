"""Faults found by trying to break ipyagent: each must end as a clear result, never a hang, a raise or a leak."""

from __future__ import annotations

import json
import sys

import pytest

from ipyagent import Agent
from ipyagent.core import ModelCompleted, ModelFailed
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

from ..support.recordings import collect
from ..support.stub_server import FIXTURES, Reply, StubServer, openai_text_reply

TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # calls get_weather(city, state)
PARALLEL = FIXTURES / "openai-chat" / "stream-tool-calls-parallel-two.sse"


def _chunks(path):
    return [json.loads(line[6:]) for line in path.read_text().splitlines() if line.startswith("data: {")]


def _reply(chunks, done=True):
    pieces = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    return Reply(pieces=pieces + ([b"data: [DONE]\n\n"] if done else []))


def test_a_tool_calling_sys_exit_is_a_failed_tool_not_a_dead_loop(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def get_weather(city: str, state: str = "") -> str:
        sys.exit(2)  # what argparse does on bad flags

    with StubServer(Reply.sse_file(TOOL_CALL), openai_text_reply("ok")) as server:
        agent = Agent("openai:m", base_url=server.url, tools=[get_weather])
        first = agent.run("weather?")
        second = agent.run("again?")  # the shared loop is still alive
    assert first.ok and second.ok
    assert first.tool_calls[0].output.exception_type == "SystemExit"


@pytest.mark.parametrize("change", [
    lambda c: {**c, "choices": "abc"},
    lambda c: {**c, "choices": [{**ch, "delta": {"content": 5}} for ch in c["choices"]]} if c["choices"] else c,
], ids=["choices-not-a-list", "content-not-text"])
def test_json_of_the_wrong_shape_is_a_model_failed_not_an_exception(change):
    """(Usage of the wrong shape is not a failed turn: test_hostile_streams, usage unknown.)"""
    chunks = _chunks(FIXTURES / "openai-chat" / "stream-text-include-usage.sse")
    chunks[2] = change(chunks[2])
    chunks[-1] = change(chunks[-1]) if "usage" in chunks[-1] else chunks[-1]
    with StubServer(_reply(chunks)) as server:
        events = collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key="sk-test"))
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "invalid_response"


def test_a_key_with_a_trailing_newline_is_stripped_and_never_shown(monkeypatch):
    secret = "mistral-key-0123456789"
    monkeypatch.setenv("MISTRAL_API_KEY", secret + "\n")
    body = json.dumps({"error": {"message": f"bad key {secret!r} and {json.dumps(secret + chr(10))}"}}).encode()
    with StubServer(Reply(status=401, headers={"Content-Type": "application/json"}, pieces=[body])) as server:
        result = Agent("mistral:small", base_url=server.url, api_key_env="MISTRAL_API_KEY").run("hi")
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    assert secret not in result.error.message and secret not in json.dumps(result.error.raw)


def test_an_error_object_inside_the_stream_is_redacted():
    secret = "custom-key-abcdefghij"
    chunks = [{"error": {"message": f"Incorrect API key provided: {secret}", "code": 401}}]
    with StubServer(_reply(chunks, done=False)) as server:
        events = collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key=secret))
    failed = events[-1]
    assert isinstance(failed, ModelFailed) and failed.error.type == "authentication"
    assert secret not in failed.error.message and secret not in json.dumps(failed.error.raw)


def test_a_password_in_the_base_url_is_redacted(monkeypatch):
    from ipyagent.core.redact import redact

    driver = OpenAIChatPromptDriver("m", base_url="http://admin:hunter2-pass@127.0.0.1:9/v1", api_key="k-1234")
    assert "hunter2" not in redact(f"could not connect to {driver.base_url}/chat/completions")
    assert "hunter2" not in repr(driver) and "hunter2" not in redact("pass: hunter2-pass")


def test_repeated_call_ids_each_get_their_own_result(monkeypatch):
    """ReAct models copy the prompt's id="c1"; results are tied by position when ids repeat."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    text = ('<tool_call id="c1">{"name": "add", "input": {"a": 1, "b": 2}}</tool_call> '
            '<tool_call id="c1">{"name": "add", "input": {"a": 5, "b": 7}}</tool_call>')

    def add(a: int, b: int) -> int:
        return a + b

    with StubServer(openai_text_reply(text), openai_text_reply("3 and 12")) as server:
        result = Agent("openai:m", base_url=server.url, tools=[add], react=True).run("sums?")
    assert [c.output.to_text() for c in result.tool_calls] == ["3", "12"]
    observation = server.requests[1]["body"]["messages"][-1]["content"]
    assert observation.index("\n3\n") < observation.index("\n12\n")


def test_parallel_calls_sent_without_distinct_indexes_stay_apart():
    """Some servers put every call at index 0; a new id there starts a new call."""
    chunks = _chunks(PARALLEL)
    for chunk in chunks:
        for choice in chunk["choices"]:
            for call in choice["delta"].get("tool_calls") or []:
                call["index"] = 0
    with StubServer(_reply(chunks)) as server:
        events = collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key="sk-test"))
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert [c.native_name for c in done.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert done.tool_calls[1].input == {"ticker": "AAPL", "exchange": "NASDAQ"}


@pytest.mark.parametrize("text", [
    "`<img src=x onerror=alert(1)>``",                      # a code span closed by a longer run
    "```x`\n<img src=x onerror=alert(1)>\n```",              # not a fence in CommonMark
    "> [a]: javascript:alert(1)\n\n[a]",                      # a reference definition in a quote
    "[click](JavaScript:alert(1)) <script>alert(1)</script>",
])
def test_markdown_made_inert_runs_nothing_whatever_the_renderer(text):
    """Markdown outputs (``%tools``) pass `inert`: rendered by a Markdown renderer that lets raw
    HTML through, nothing may run."""
    from markdown_it import MarkdownIt

    from ipyagent.notebook.render.transcript import inert

    html = MarkdownIt("commonmark", {"html": True}).render(inert(text))
    lowered = html.lower()
    assert "<img" not in lowered and "<script" not in lowered and 'href="javascript:' not in lowered


def test_a_huge_tool_result_is_not_saved_whole_in_the_notebook():
    from ipyagent.core.transcript import RESULT_CHARS, ToolCallPart

    part = ToolCallPart(id="c", name="fetch", result="x" * (5 * RESULT_CHARS))
    assert len(part.result) < RESULT_CHARS + 100 and part.result.endswith("more characters not saved)")


def test_the_run_store_masks_secrets_but_keeps_ordinary_data(monkeypatch):
    from ipyagent.core.redact import redact_data as scrub

    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok_0123456789abcdef")
    row = {"key": "user-42", "note": "sk-learn-pipeline-v2", "api_key": "anything",
           "text": "the token is tok_0123456789abcdef", "nested": [{"authorization": "Bearer x"}]}
    assert scrub(row) == {"key": "user-42", "note": "sk-learn-pipeline-v2", "api_key": "[redacted]",
                          "text": "the token is [redacted]", "nested": [{"authorization": "[redacted]"}]}


def test_bad_input_gets_a_short_clear_error(monkeypatch):
    from ipyagent.core import ConfigurationError
    from ipyagent.drivers import create_driver

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("openai:m", base_url="http://127.0.0.1:9/v1")
    for prompt in (None, "", "   "):
        with pytest.raises(ValueError, match="non-empty text"):
            agent.run(prompt)
    with pytest.raises(ConfigurationError, match="must start with http"):
        create_driver("openai:m", base_url="localhost:8000/v1")


def test_runs_of_one_agent_from_two_threads_take_turns(monkeypatch):
    """Both runs share the conversation: the second one's request carries the first one's turn."""
    import threading

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with StubServer(openai_text_reply("one", delay=0.05)) as server:
        agent = Agent("openai:m", base_url=server.url)
        threads = [threading.Thread(target=agent.run, args=(p,)) for p in ("first?", "second?")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert sorted(len(r["body"]["messages"]) for r in server.requests) == [1, 3]
    assert len(agent.messages) == 4
