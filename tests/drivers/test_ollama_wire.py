"""Wire tests: recorded Ollama `/api/chat` NDJSON streams, served over HTTP, through the driver.

Every expected value is read from the recording itself with plain `json.loads`
(`_expected` below), never typed in.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipyagent.core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    ImageBlock,
    Message,
    ModelCompleted,
    ModelFailed,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallDelta,
    ToolDefinition,
)
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver

from ..support.recordings import check_shape, collect, user_stack
from ..support.stub_server import FIXTURES, Reply, StubServer

DIR = FIXTURES / "ollama"
MODEL = "test-model"
STREAMS = sorted(DIR.glob("*.ndjson"))
NONSTREAM = sorted(DIR.glob("chat-nonstream-*.json"))
TOOLS_ERROR = DIR / "error-400-model-does-not-support-tools.json"
TEXT = DIR / "chat-stream-text.ndjson"
THINKING = DIR / "chat-stream-thinking-cloud.ndjson"
FORMAT_JSON = DIR / "chat-stream-format-json.ndjson"
GENERATE_ERROR = DIR / "generate-stream-error-mid-stream.docs-example.ndjson"
CLOUD_TOOL = DIR / "chat-nonstream-tool-call-thinking-cloud.json"
MULTI_TOOLS = DIR / "chat-nonstream-multiple-tool-calls.edited.json"

# -- reading a recording without the driver ---------------------------------------------


def _objects(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of an NDJSON recording, or the one object of a JSON body."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sidecar(path: Path) -> Path:
    stem = path.name.rsplit(".", 1)[0]
    return path.with_name(stem + ".http.json")


def _content_type(path: Path) -> str:
    sidecar = _sidecar(path)
    if sidecar.exists():
        return json.loads(sidecar.read_text())["headers"]["Content-Type"]
    return "application/x-ndjson" if path.suffix == ".ndjson" else "application/json"


def _reply(path: Path, objects: list[dict[str, Any]] | None = None, **kw: Any) -> Reply:
    """One NDJSON line a piece, with the Content-Type of the `.http.json` sidecar.
    `objects` replaces the recorded lines (an altered copy, in memory only)."""
    if objects is None:
        pieces = [line.encode() + b"\n" for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        pieces = [json.dumps(o).encode() + b"\n" for o in objects]
    return Reply(headers={"Content-Type": _content_type(path)}, pieces=pieces, **kw)


@dataclass
class Expected:
    text: str = ""
    reasoning: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)  # id (or None), name, input
    final: dict[str, Any] | None = None
    error: str | None = None

    @property
    def stop_kind(self) -> str:
        reason = self.final.get("done_reason") if self.final else None
        if reason == "length":
            return "max_tokens"
        return "tool_use" if self.calls else "end_turn"


def _expected(objects: list[dict[str, Any]]) -> Expected:
    exp = Expected()
    for obj in objects:
        if "error" in obj:
            exp.error = obj["error"]
            break
        msg = obj.get("message") or {}
        exp.reasoning += msg.get("thinking") or obj.get("thinking") or ""
        exp.text += msg.get("content") or obj.get("response") or ""
        for call in msg.get("tool_calls") or []:
            fn = call["function"]
            exp.calls.append({"id": call.get("id"), "name": fn["name"], "input": fn.get("arguments") or {}})
        if obj.get("done"):
            exp.final = obj
    return exp


def _run(reply: Reply, stack: PromptStack | None = None, **driver_kw: Any) -> tuple[StubServer, list[Any]]:
    with StubServer(reply) as server:
        driver = OllamaPromptDriver(MODEL, base_url=server.url, **driver_kw)
        events = collect(driver, stack or user_stack("Say something"))
    return server, events


# -- the fixture set --------------------------------------------------------------------


def test_every_fixture_file_is_covered():
    """Each file of the folder is a stream, a non-streaming body, a sidecar or the error
    body, and each kind has a test below; nothing new slips in untested."""
    names = {p.name for p in DIR.iterdir()}
    covered = {p.name for p in STREAMS + NONSTREAM} | {TOOLS_ERROR.name}
    sidecars = {n for n in names if n.endswith(".http.json")}
    assert names == covered | sidecars
    assert {_sidecar(TEXT).name, _sidecar(THINKING).name} == sidecars
    assert len(STREAMS) == 4 and len(NONSTREAM) == 2


# -- recorded streams -------------------------------------------------------------------


@pytest.mark.parametrize("path", STREAMS + NONSTREAM, ids=[p.name for p in STREAMS + NONSTREAM])
def test_recorded_response(path):
    """NDJSON streams as recorded; non-streaming bodies (one final object) as a one-line stream."""
    objects = _objects(path)
    exp = _expected(objects)
    server, events = _run(_reply(path))
    terminal = check_shape(events)
    deltas = events[1:-1]
    assert all(isinstance(d, (TextDelta, ReasoningDelta, ToolCallDelta)) for d in deltas)

    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/api/chat"
    assert req["body"] == {"model": MODEL, "messages": [{"role": "user", "content": "Say something"}], "stream": True}
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert "authorization" not in headers  # local Ollama: no key, no header

    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == exp.text
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == exp.reasoning

    if exp.error is not None:
        assert path == GENERATE_ERROR
        assert isinstance(terminal, ModelFailed)
        assert terminal.error.type == "server"
        assert exp.error in terminal.error.message
        assert terminal.error.raw == exp.error
        assert exp.text and terminal.partial.text == terminal.partial_text == exp.text
        assert terminal.partial.status == "failed"
        assert terminal.metadata["attempts"] == 1  # output was shown: never retried
        return

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    assert msg.text == exp.text
    assert msg.reasoning == exp.reasoning
    # blocks in arrival order: thinking comes first in every recording that has it
    kinds = [b.type for b in msg.content]
    assert kinds == (["reasoning"] if exp.reasoning else []) + (["text"] if exp.text else []) + ["action_call"] * len(
        exp.calls
    )

    # tool calls: whole calls, object arguments sent as JSON text, ids kept or generated
    tool_deltas = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert len(tool_deltas) == len(exp.calls) == len(terminal.tool_calls)
    for n, (got, delta, want) in enumerate(zip(terminal.tool_calls, tool_deltas, exp.calls)):
        assert got.tag == delta.call_id == (want["id"] or f"call_{n}")
        assert got.input == want["input"] and isinstance(got.input, dict)
        assert json.loads(delta.arguments) == want["input"]
        assert (got.name, got.path) == (want["name"], None)
        assert got.native_name == want["name"]
    assert len({c.tag for c in terminal.tool_calls}) == len(exp.calls)

    # usage from the final object, timing fields kept raw
    final = exp.final
    assert final is not None
    assert terminal.usage.input_tokens == final["prompt_eval_count"]
    assert terminal.usage.output_tokens == final["eval_count"]
    assert terminal.usage.total_tokens == final["prompt_eval_count"] + final["eval_count"]
    assert terminal.usage.raw == {k: v for k, v in final.items() if k.endswith(("_count", "_duration"))}
    assert terminal.usage.raw["total_duration"] == final["total_duration"]
    assert msg.usage == terminal.usage
    # done_reason is "stop" even after tool calls: tool_use is inferred from the calls
    assert final["done_reason"] == "stop"
    assert terminal.stop_reason == exp.stop_kind
    assert terminal.stop_reason.raw == final["done_reason"]
    assert terminal.metadata["model"] == final["model"]
    assert terminal.metadata["attempts"] == 1


def test_nonstream_tool_calls_parse():
    """The two non-streaming bodies: every tool call, one without arguments, ids generated
    where the server sent none and kept where it did."""
    multi = _expected(_objects(MULTI_TOOLS))
    assert len(multi.calls) >= 2 and all(c["id"] is None for c in multi.calls)
    assert any("arguments" not in c["function"] for c in _objects(MULTI_TOOLS)[0]["message"]["tool_calls"])
    _, events = _run(_reply(MULTI_TOOLS))
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == "tool_use"
    assert [c.input for c in terminal.tool_calls] == [c["input"] for c in multi.calls]
    assert [c.native_name for c in terminal.tool_calls] == [c["name"] for c in multi.calls]
    assert [c.tag for c in terminal.tool_calls] == [f"call_{n}" for n in range(len(multi.calls))]

    cloud = _expected(_objects(CLOUD_TOOL))
    assert cloud.calls[0]["id"] and cloud.reasoning
    _, events = _run(_reply(CLOUD_TOOL))
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert [c.tag for c in terminal.tool_calls] == [c["id"] for c in cloud.calls]
    assert terminal.message.reasoning == cloud.reasoning
    assert terminal.stop_reason == "tool_use"


def test_generated_ids_do_not_repeat_across_turns():
    """Old servers send no ids; two replies through one driver never reuse one."""
    n = len(_expected(_objects(MULTI_TOOLS)).calls)

    async def two_turns(url):
        driver = OllamaPromptDriver(MODEL, base_url=url)
        try:
            first = [e async for e in driver.stream(user_stack())][-1]
            second = [e async for e in driver.stream(user_stack())][-1]
        finally:
            await driver.close()
        return first, second

    with StubServer(_reply(MULTI_TOOLS)) as server:
        first, second = asyncio.run(two_turns(server.url))
    tags = [c.tag for c in first.tool_calls] + [c.tag for c in second.tool_calls]
    assert len(tags) == 2 * n == len(set(tags))


def test_lines_split_across_http_chunks_and_blank_lines():
    """NDJSON framing is by line, not by HTTP chunk: the recording cut into 7-byte pieces,
    with blank lines and CRLF endings mixed in, gives the same reply."""
    objects = _objects(TEXT)
    exp = _expected(objects)
    body = b"".join(json.dumps(o).encode() + (b"\r\n\n" if i % 3 == 0 else b"\n") for i, o in enumerate(objects))
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    _, events = _run(Reply(headers={"Content-Type": _content_type(TEXT)}, pieces=pieces))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == exp.text
    assert terminal.usage.output_tokens == exp.final["eval_count"]


def test_a_line_is_cut_only_at_cr_or_lf_not_at_other_unicode_line_breaks():
    """Go's JSON encoder escapes U+2028 and U+2029 but not NEL (U+0085), and a server may
    escape none: a line of NDJSON ends at CR or LF only, not where ``str.splitlines`` (and
    httpx's ``aiter_lines``) would cut it, which broke the line in two: 'not JSON'."""
    objects = _objects(TEXT)
    text = "one\u0085two\u2028three\u2029four\x1cfive"
    objects[0]["message"]["content"] = text
    body = b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objects)
    assert "\u0085".encode() in body and "\u2028".encode() in body
    _, events = _run(Reply(headers={"Content-Type": _content_type(TEXT)}, pieces=[body]))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == _expected(objects).text and text in terminal.message.text


@pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/json", "text/plain"])
def test_any_content_type_parses(content_type):
    exp = _expected(_objects(THINKING))
    reply = _reply(THINKING)
    reply.headers = {"Content-Type": content_type}
    _, events = _run(reply)
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert (terminal.message.reasoning, terminal.message.text) == (exp.reasoning, exp.text)


def test_done_reason_length_is_max_tokens():
    objects = _objects(TEXT)
    assert objects[-1]["done_reason"] == "stop"
    objects[-1]["done_reason"] = "length"
    _, events = _run(_reply(TEXT, objects))
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == "max_tokens"
    assert terminal.stop_reason.raw == "length"


def test_stream_ending_without_final_object_fails_with_partial_text():
    objects = _objects(TEXT)[:-1]
    exp = _expected(objects)
    assert exp.final is None and exp.text
    server, events = _run(_reply(TEXT, objects))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "invalid_response"
    assert "done" in terminal.error.message
    assert terminal.partial_text == exp.text
    assert len(server.requests) == 1


def test_output_schema_is_sent_as_format_and_the_reply_is_json():
    exp = _expected(_objects(FORMAT_JSON))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    stack = user_stack("How much?")
    stack.output_schema = schema
    server, events = _run(_reply(FORMAT_JSON), stack)
    assert server.requests[0]["body"]["format"] == schema
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert json.loads(terminal.message.text) == json.loads(exp.text)


def test_provider_options_go_into_the_body():
    opts = {"options": {"temperature": 0.1, "num_ctx": 8192}, "keep_alive": "5m", "think": True, "format": "json"}
    _, body = OllamaPromptDriver(MODEL, provider_options=opts).build_request(user_stack())
    for key, value in opts.items():
        assert body[key] == value
    with pytest.raises(ProviderError) as info:
        OllamaPromptDriver(MODEL, provider_options={"temperature": 0.1})
    assert info.value.type == "invalid_request" and "options" in info.value.message
    with pytest.raises(ProviderError) as info:
        OllamaPromptDriver(MODEL, provider_options={"options": 0.1}).build_request(user_stack())
    assert info.value.type == "invalid_request"
    stack = user_stack()
    stack.output_schema = {"type": "object"}
    with pytest.raises(ProviderError) as info:
        OllamaPromptDriver(MODEL, provider_options={"format": "json"}).build_request(stack)
    assert info.value.type == "invalid_request"


def test_defaults_and_api_key_header():
    driver = OllamaPromptDriver(MODEL)
    assert driver.base_url == "http://localhost:11434"
    assert driver.protocol == "ollama"
    assert driver.build_request(user_stack())[0] == "/api/chat"
    caps = driver.capabilities_for(MODEL)
    assert caps.vision and caps.structured_output_native and caps.reasoning
    exp = _expected(_objects(THINKING))
    server, events = _run(_reply(THINKING), api_key="ollama-cloud-key")
    assert server.requests[0]["headers"]["Authorization"] == "Bearer ollama-cloud-key"
    assert events[-1].message.text == exp.text


# -- errors -----------------------------------------------------------------------------


def test_recorded_400_model_does_not_support_tools():
    body = json.loads(TOOLS_ERROR.read_text())
    stack = user_stack("Weather in Boston?")
    stack.tools.append(
        ToolDefinition(name="getWeather", parameters={"type": "object", "properties": {"location": {"type": "string"}}})
    )
    assert not _sidecar(TOOLS_ERROR).exists()  # SOURCES.md: HTTP 400
    server, events = _run(Reply.error_file(TOOLS_ERROR, status=400), stack)
    terminal = check_shape(events)
    assert len(events) == 2
    assert isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.type == "unsupported_capability"
    assert err.code == "tools"
    assert err.status == 400
    assert err.retryable is False
    assert body["error"] in err.message
    assert err.raw == body
    assert len(server.requests) == 1
    assert server.requests[0]["body"]["tools"][0]["function"]["name"] == "getWeather"


def test_error_line_before_any_output_is_classified_and_not_retried():
    """The same error text as a line of a 200 stream (status already sent)."""
    body = json.loads(TOOLS_ERROR.read_text())
    reply = Reply(headers={"Content-Type": "application/x-ndjson"}, pieces=[json.dumps(body).encode() + b"\n"])
    server, events = _run(reply, max_retry_wait=0.01)
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "unsupported_capability"
    assert terminal.error.retryable is False
    assert body["error"] in terminal.error.message
    assert len(server.requests) == 1


def test_404_model_not_found():
    body = {"error": f"model '{MODEL}' not found"}
    reply = Reply(status=404, headers={"Content-Type": "application/json"}, pieces=[json.dumps(body).encode()])
    server, events = _run(reply)
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "not_found"
    assert terminal.error.retryable is False
    assert body["error"] in terminal.error.message
    assert len(server.requests) == 1


# -- request shape ----------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot-really-a-png").decode()
WEATHER = ToolDefinition(
    name="Weather_get_current",
    description="Current weather for a place",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)


def _conversation() -> PromptStack:
    stack = PromptStack()
    stack.tools.append(WEATHER)
    stack.add_system_message("be brief")
    stack.add_user_message([TextBlock(text="Weather here and in Paris?"), ImageBlock(mime_type="image/png", data=PNG)])
    boston = ToolAction(tag="call_a", name="Weather", path="get_current", input={"location": "Boston"})
    paris = ToolAction(tag="call_b", name="Weather", path="get_current", input={"location": "Paris"})
    stack.add_assistant_message(
        [TextBlock(text="Checking."), ActionCallBlock(action=boston), ActionCallBlock(action=paris)]
    )
    stack.add_message(
        "tool",
        Message(
            role="tool",
            content=[
                ActionResultBlock(action=boston, text="12 C, rain"),
                ActionResultBlock(action=paris, text="service unavailable", is_error=True),
            ],
        ),
    )
    return stack


def test_request_shape_for_a_whole_conversation():
    stack = _conversation()
    server, events = _run(_reply(TEXT), stack)
    assert isinstance(events[-1], ModelCompleted)
    body = server.requests[0]["body"]
    assert body["model"] == MODEL and body["stream"] is True
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": WEATHER.name, "description": WEATHER.description, "parameters": WEATHER.parameters},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Weather here and in Paris?", "images": [PNG]},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_a", "function": {"name": "Weather_get_current", "arguments": {"location": "Boston"}}},
                {"id": "call_b", "function": {"name": "Weather_get_current", "arguments": {"location": "Paris"}}},
            ],
        },
        {"role": "tool", "content": "12 C, rain", "tool_name": "Weather_get_current", "tool_call_id": "call_a"},
        {
            "role": "tool",
            "content": "Error: service unavailable",
            "tool_name": "Weather_get_current",
            "tool_call_id": "call_b",
        },
    ]
    assert "format" not in body and "options" not in body


def test_second_turn_after_a_recorded_tool_call():
    """Turn 1 replays the cloud tool-call reply; its message and a tool result go back
    in turn 2: thinking kept, the call with its id and object arguments, the result by name."""
    exp = _expected(_objects(CLOUD_TOOL))
    stack = user_stack("Weather in San Francisco?")
    stack.tools.append(ToolDefinition(name=exp.calls[0]["name"]))
    with StubServer(_reply(CLOUD_TOOL), _reply(TEXT)) as server:

        async def two_turns():
            driver = OllamaPromptDriver(MODEL, base_url=server.url)
            try:
                first = [e async for e in driver.stream(stack)][-1]
                assert isinstance(first, ModelCompleted)
                stack.messages.append(first.message)
                call = first.tool_calls[0]
                stack.add_message("tool", ActionResultBlock(action=call, text="18 C, fog"))
                return [e async for e in driver.stream(stack)][-1]
            finally:
                await driver.close()

        second = asyncio.run(two_turns())
    assert isinstance(second, ModelCompleted)
    assert len(server.requests) == 2
    sent = server.requests[1]["body"]["messages"]
    assert sent[0] == {"role": "user", "content": "Weather in San Francisco?"}
    assert sent[1] == {
        "role": "assistant",
        "content": exp.text,
        "thinking": exp.reasoning,
        "tool_calls": [{"id": c["id"], "function": {"name": c["name"], "arguments": c["input"]}} for c in exp.calls],
    }
    assert sent[2] == {
        "role": "tool",
        "content": "18 C, fog",
        "tool_name": exp.calls[0]["name"],
        "tool_call_id": exp.calls[0]["id"],
    }
    assert len(sent) == 3


def test_data_url_image_is_sent_as_base64():
    stack = PromptStack()
    stack.add_user_message([TextBlock(text="what is this"), ImageBlock(url=f"data:image/png;base64,{PNG}")])
    _, body = OllamaPromptDriver(MODEL).build_request(stack)
    assert body["messages"][0]["images"] == [PNG]


def test_reasoning_block_history_is_thinking():
    stack = user_stack()
    stack.add_assistant_message([ReasoningBlock(text="hmm"), TextBlock(text="ok")])
    _, body = OllamaPromptDriver(MODEL).build_request(stack)
    assert body["messages"][1] == {"role": "assistant", "content": "ok", "thinking": "hmm"}


# -- capabilities: fail before sending --------------------------------------------------


@pytest.mark.parametrize(
    "block, code",
    [
        (ImageBlock(url="https://example.com/cat.png"), "image_url"),
        (AudioBlock(data=base64.b64encode(b"RIFF").decode()), "audio"),
    ],
    ids=["image-url", "audio"],
)
def test_unservable_content_fails_before_sending(block, code):
    stack = PromptStack()
    stack.add_user_message([TextBlock(text="look"), block])
    with StubServer(_reply(TEXT)) as server:
        driver = OllamaPromptDriver(MODEL, base_url=server.url)
        with pytest.raises(ProviderError) as info:
            collect(driver, stack)
        assert server.requests == []
    assert info.value.type == "unsupported_capability"
    assert info.value.code == code
    assert info.value.retryable is False
