"""Wire tests: real recorded Chat Completions streams, served over HTTP, through the driver.

Every expected value is read from the recording itself (tests/support/recordings.py).
"""

from __future__ import annotations

import json

import pytest

from ipyagent.core import (
    ActionCallBlock,
    ActionResultBlock,
    ModelCompleted,
    ModelFailed,
    PromptStack,
    ReasoningDelta,
    TextArtifact,
    TextDelta,
    ToolAction,
    ToolCallDelta,
    ToolDefinition,
)
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

from ..support.recordings import (
    FINISH_TO_KIND,
    FIXTURES,
    check_shape,
    collect,
    expected_from,
    recording_events,
    reply_for,
    stream_files,
    user_stack,
)
from ..support.stub_server import Reply, StubServer

MODEL = "test-model"
FILES = stream_files()


def test_fixture_set_is_present():
    names = {p.name for p in FILES}
    # The error recordings this suite promises to cover must exist, or the parametrization is silently thinner.
    assert "groq-stream-error-event-tool-use-failed.sse" in names
    assert "openrouter-stream-error-chunk-with-comments.sse" in names
    # one of them bills before it fails, so the usage kept on a failed turn is checked on real data
    assert (
        expected_from(FIXTURES / "openai-compatible" / "openrouter-stream-error-chunk-with-comments.sse").usage
        is not None
    )
    assert len(FILES) >= 15


def _run(path, **reply_kw):
    with StubServer(reply_for(path, **reply_kw)) as server:
        driver = OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test")
        events = collect(driver, user_stack("Say something"))
    return server, events


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_recorded_stream(path):
    exp = expected_from(path)
    server, events = _run(path)
    terminal = check_shape(events)
    deltas = events[1:-1]
    assert all(isinstance(d, (TextDelta, ReasoningDelta, ToolCallDelta)) for d in deltas)

    # what the server was asked
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/chat/completions"
    assert req["body"]["stream"] is True
    assert req["body"]["stream_options"] == {"include_usage": True}
    assert req["body"]["model"] == MODEL
    assert req["body"]["messages"] == [{"role": "user", "content": "Say something"}]
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test"

    streamed_text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    streamed_reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    assert streamed_text == exp.text
    assert streamed_reasoning == exp.reasoning

    if exp.error is not None:
        assert isinstance(terminal, ModelFailed)
        status = exp.error.get("status_code") or exp.error.get("code")
        assert status == 400  # both recorded in-stream errors are 400s
        assert terminal.error.type == "invalid_request"
        assert exp.error["message"] in terminal.error.message
        assert terminal.error.retryable is False
        # what arrived before the error is kept
        assert terminal.partial.text == exp.text
        assert terminal.partial.reasoning == exp.reasoning
        assert terminal.partial_text == exp.text
        assert terminal.partial.status == "failed"
        assert (exp.reasoning or exp.text), "an error recording should carry output before the error"
        # usage billed before the error (OpenRouter's error chunk carries it) stays on the partial
        if exp.usage is None:
            assert terminal.partial.usage is None
        else:
            assert (terminal.partial.usage.input_tokens, terminal.partial.usage.output_tokens) == (
                exp.usage["prompt_tokens"], exp.usage["completion_tokens"])
            assert terminal.partial.usage.raw == exp.usage and "cost" in terminal.metadata
        return

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    assert msg.role == "assistant"
    assert msg.text == streamed_text == exp.text
    assert msg.reasoning == exp.reasoning

    # tool calls: ids, names, parsed arguments, and the name mapping both ways
    calls = terminal.tool_calls
    assert len(calls) == len(exp.tool_calls)
    for got, want in zip(calls, exp.tool_calls):
        assert got.tag == want["id"]
        assert got.input == want["input"]
        assert isinstance(got.input, dict)
        assert (got.name, got.path) == (want["name"], None)
        assert got.native_name == want["name"]
    call_blocks = [b for b in msg.content if isinstance(b, ActionCallBlock)]
    assert [b.raw_arguments for b in call_blocks] == [w["raw"] for w in exp.tool_calls]
    # the fragments shown while streaming add up to the same argument text, per call
    by_index: dict[int, str] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            by_index[d.index] = by_index.get(d.index, "") + d.arguments
    assert sorted(by_index.values()) == sorted(w["raw"] for w in exp.tool_calls)

    # usage and stop reason
    if exp.usage is None:
        assert (terminal.usage.input_tokens, terminal.usage.output_tokens) == (0, 0)
    else:
        assert terminal.usage.input_tokens == exp.usage["prompt_tokens"]
        assert terminal.usage.output_tokens == exp.usage["completion_tokens"]
        assert terminal.usage.raw == exp.usage
    assert msg.usage == terminal.usage
    assert terminal.stop_reason == exp.stop_kind
    assert terminal.stop_reason.raw == exp.finish_reason
    assert terminal.metadata["attempts"] == 1
    assert terminal.metadata["replayed"] is False


@pytest.mark.parametrize(
    "name",
    ["stream-text-include-usage.sse", "stream-tool-call-single-fragmented.sse"],
)
def test_wrong_content_type_still_parses(name):
    path = FIXTURES / "openai-chat" / name
    exp = expected_from(path)
    server, events = _run(path, headers={"Content-Type": "application/json"})
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == exp.text
    assert [c.input for c in terminal.tool_calls] == [c["input"] for c in exp.tool_calls]
    assert terminal.stop_reason == exp.stop_kind


def test_block_order_follows_arrival():
    """Text that arrives before a tool call comes first in the message."""
    path = FIXTURES / "openai-compatible" / "anthropic-openai-compat-tool-call.sse"
    exp = expected_from(path)
    assert exp.text and exp.calls
    _, events = _run(path)
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert [b.type for b in terminal.message.content] == ["text", "action_call"]


def test_tools_and_tool_history_are_translated():
    path = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
    stack = PromptStack()
    stack.tools.append(
        ToolDefinition(
            name="Calculator_add",
            description="Add two numbers",
            parameters={
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        )
    )
    stack.add_system_message("be brief")
    stack.add_user_message(TextArtifact(value="What is 2 + 3?"))
    call = ToolAction(tag="call_1", name="Calculator", path="add", input={"a": 2, "b": 3})
    stack.add_assistant_message([TextArtifact(value="Let me add."), ActionCallBlock(action=call)])
    done = call.model_copy(update={"output": TextArtifact(value="5")})
    stack.add_message("tool", ActionResultBlock(action=done, text="5"))

    with StubServer(reply_for(path)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"), stack)
    assert isinstance(events[-1], ModelCompleted)
    body = server.requests[0]["body"]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Calculator_add",
                "description": "Add two numbers",
                "parameters": stack.tools[0].parameters,
            },
        }
    ]
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1] == {"role": "user", "content": "What is 2 + 3?"}
    assistant = messages[2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me add."
    assert len(assistant["tool_calls"]) == 1
    tc = assistant["tool_calls"][0]
    assert tc["id"] == "call_1" and tc["type"] == "function"
    assert tc["function"]["name"] == "Calculator_add"
    assert isinstance(tc["function"]["arguments"], str)
    assert json.loads(tc["function"]["arguments"]) == {"a": 2, "b": 3}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    assert len(messages) == 4


def test_assistant_tool_call_without_text_sends_null_content():
    stack = PromptStack()
    stack.add_user_message("hi")
    stack.add_assistant_message(ActionCallBlock(action=ToolAction(tag="c9", name="lookup", input={})))
    driver = OpenAIChatPromptDriver(MODEL, base_url="http://127.0.0.1:9", api_key="sk-test")
    _, body = driver.build_request(stack)
    assistant = body["messages"][1]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["function"] == {"name": "lookup", "arguments": "{}"}


def test_output_schema_becomes_response_format():
    stack = user_stack()
    stack.output_schema = {"title": "City Info", "type": "object", "properties": {"city": {"type": "string"}}}
    driver = OpenAIChatPromptDriver(MODEL, api_key="sk-test", provider_options={"temperature": 0.2})
    path, body = driver.build_request(stack)
    assert path == "/chat/completions"
    assert body["response_format"]["type"] == "json_schema"
    # Sent strict: the same schema with every property required and no extra ones.
    assert body["response_format"]["json_schema"]["schema"] == {
        **stack.output_schema,
        "required": ["city"],
        "additionalProperties": False,
    }
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["name"] == "City_Info"
    assert body["temperature"] == 0.2


def test_second_choice_is_ignored():
    """n=3 recording: only choice 0 makes the reply; the other choices' text is not mixed in."""
    path = FIXTURES / "openai-chat" / "stream-n3-interleaved-choices.sse"
    exp = expected_from(path)
    all_text = ""
    for _, data in recording_events(path):
        if data != "[DONE]":
            for ch in json.loads(data).get("choices") or []:
                all_text += (ch.get("delta") or {}).get("content") or ""
    assert len(all_text) > len(exp.text) > 0
    _, events = _run(path)
    assert events[-1].message.text == exp.text


def test_tool_calls_without_finish_reason_stop_as_tool_use():
    """Some servers end a tool-call stream without a finish_reason: the stop kind is
    still tool_use. The recording is altered in memory only (finish_reason removed)."""
    path = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"
    exp = expected_from(path)
    assert exp.finish_reason == "tool_calls" and exp.calls

    def no_finish(chunk):
        for ch in chunk.get("choices") or []:
            ch["finish_reason"] = None
        return chunk

    with StubServer(_altered(path, no_finish)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == "tool_use"
    assert terminal.stop_reason.raw == "[DONE]"  # the only end signal that arrived
    assert [c.input for c in terminal.tool_calls] == [c["input"] for c in exp.tool_calls]


def test_a_stream_cut_before_any_end_signal_is_not_passed_off_as_done():
    """No finish_reason and no [DONE]: the connection closed early (or a proxy answered):
    a failure with the partial text kept, not a successful short answer."""
    path = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
    exp = expected_from(path)
    pieces = [p for p in _altered(path, lambda c: c).pieces[:6]]
    with StubServer(Reply(pieces=pieces)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed) and terminal.error.type == "invalid_response"
    sent = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert sent and exp.text.startswith(sent) and terminal.partial.text == sent
    with StubServer(
        Reply(headers={"Content-Type": "text/html"}, pieces=[b"<html><body>502 Bad Gateway</body></html>"])
    ) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "invalid_response"


@pytest.mark.parametrize("native", ["web-search_query", "_private", "get_weather-now"])
def test_received_tool_call_name_goes_back_unchanged(native):
    """A call the model made to any declared function name is sent back in history
    under that same name (the next turn of an agent loop)."""
    stack = user_stack()
    stack.add_assistant_message(ActionCallBlock(action=ToolAction.from_native("call_7", native, {"q": "x"})))
    _, body = OpenAIChatPromptDriver(MODEL, api_key="sk-test").build_request(stack)
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == native


def _altered(path, change):
    """The recording's data payloads as SSE pieces, each chunk passed through `change`
    (in memory only; the fixture files are never modified or copied)."""
    pieces = []
    for _, data in recording_events(path):
        if data != "[DONE]":
            data = json.dumps(change(json.loads(data)))
        pieces.append(f"data: {data}\n\n".encode())
    return Reply(pieces=pieces)


def test_groq_usage_only_under_x_groq():
    path = FIXTURES / "openai-compatible" / "groq-stream-tool-call.chunks.jsonl"
    exp = expected_from(path)
    assert exp.usage

    def drop_top_level_usage(chunk):
        chunk.pop("usage", None)
        return chunk

    with StubServer(_altered(path, drop_top_level_usage)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    assert isinstance(events[-1], ModelCompleted)
    assert events[-1].usage.input_tokens == exp.usage["prompt_tokens"]
    assert events[-1].usage.output_tokens == exp.usage["completion_tokens"]


@pytest.mark.parametrize("finish", ["stop", "length", "content_filter"])
def test_finish_reason_mapping(finish):
    path = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
    assert expected_from(path).finish_reason == "stop"

    def set_finish(chunk):
        for ch in chunk.get("choices") or []:
            if ch.get("finish_reason"):
                ch["finish_reason"] = finish
        return chunk

    with StubServer(_altered(path, set_finish)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == FINISH_TO_KIND[finish]
    assert terminal.stop_reason.raw == finish
