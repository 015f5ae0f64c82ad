"""Wire tests for the OpenAI Responses driver: recorded streams served over real HTTP.

Every expected value is read from the recording itself (plain `json.loads` of
each event, below), never typed in.
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
    ImageBlock,
    Message,
    ModelCompleted,
    ModelFailed,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    TextArtifact,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallDelta,
    ToolDefinition,
)
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver
from ipyagent.drivers.protocols.openai_responses_stream import (
    ResponsesDecoder,
    response_object_events,
    usage_from_responses,
)

from ..support.recordings import check_shape, collect, recording_events, status_type, user_stack
from ..support.stub_server import FIXTURES, Reply, StubServer

MODEL = "test-model"
DIR = FIXTURES / "openai-responses"
STREAMS = sorted(DIR.glob("stream-*.sse")) + sorted(DIR.glob("stream-*.chunks.jsonl"))
ERROR_BODIES = sorted(p for p in DIR.glob("error-*.json") if not p.name.endswith(".http.json"))
NONSTREAM = sorted(DIR.glob("nonstream-*.json"))
#: Item type -> content block type in our message.
ITEM_BLOCK = {"reasoning": "reasoning", "function_call": "action_call"}


# -- reading a recording, independently of the driver ---------------------------------------


def events_of(path: Path) -> list[dict[str, Any]]:
    """The JSON events of a recording, in order (`*.chunks.jsonl` lines or SSE data)."""
    return [json.loads(data) for _, data in recording_events(path) if data != "[DONE]"]


def responses_reply(path: Path, *, event_names: bool = True, **kw: Any) -> Reply:
    """The recording as the API sends it: one SSE event a piece, no [DONE].

    `*.chunks.jsonl` lost its `event:` lines when it was stored (SOURCES.md); they are
    put back from each payload's `type`, as the Responses API names its events.
    """
    if path.suffix == ".sse":
        return Reply.sse_file(path, **kw)
    pieces = []
    for line in (ln for ln in path.read_text().splitlines() if ln.strip()):
        name = json.loads(line)["type"]
        pieces.append((f"event: {name}\n" if event_names else "").encode() + f"data: {line}\n\n".encode())
    return Reply(pieces=pieces, **kw)


def altered_reply(events: list[dict[str, Any]]) -> Reply:
    """Events (altered in memory only) as a named-event SSE body."""
    return Reply(pieces=[f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events])


@dataclass
class Expected:
    """What a recorded Responses stream says."""

    text_deltas: str = ""
    reasoning_parts: dict[int, dict[int, str]] = field(default_factory=dict)  # output index -> summary index -> text
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)  # output index -> call_id/name/deltas/done
    done_items: dict[int, dict[str, Any]] = field(default_factory=dict)
    block_types: list[str] = field(default_factory=list)
    created: dict[str, Any] | None = None
    final: dict[str, Any] | None = None  # the response of response.completed / incomplete
    error: dict[str, Any] | None = None
    failed: dict[str, Any] | None = None

    @property
    def reasoning(self) -> str:
        return "".join(
            "\n\n".join(parts[k] for k in sorted(parts)) for _, parts in sorted(self.reasoning_parts.items())
        )

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        out = []
        for oi in sorted(self.calls):
            c = self.calls[oi]
            raw = c["deltas"] or c["done"]
            out.append(
                {
                    "call_id": c["call_id"],
                    "name": c["name"],
                    "raw": raw,
                    "input": json.loads(raw) if raw.strip() else {},
                    "item_id": c["item_id"],
                }
            )
        return out


def expected_from(path: Path) -> Expected:
    exp = Expected()
    for ev in events_of(path):
        kind = ev["type"]
        if kind == "response.created":
            exp.created = ev["response"]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            exp.text_deltas += ev["delta"]
        elif kind == "response.reasoning_summary_text.delta":
            parts = exp.reasoning_parts.setdefault(ev["output_index"], {})
            parts[ev["summary_index"]] = parts.get(ev["summary_index"], "") + ev["delta"]
        elif kind == "response.output_item.added":
            item = ev["item"]
            if item["type"] == "function_call":
                exp.calls[ev["output_index"]] = {
                    "call_id": item["call_id"],
                    "name": item["name"],
                    "deltas": "",
                    "done": "",
                    "item_id": item["id"],
                }
            if item["type"] in ITEM_BLOCK:
                exp.block_types.append(ITEM_BLOCK[item["type"]])
        elif kind == "response.content_part.added":
            exp.block_types.append("text")
        elif kind == "response.function_call_arguments.delta":
            exp.calls[ev["output_index"]]["deltas"] += ev["delta"]
        elif kind == "response.output_item.done":
            exp.done_items[ev["output_index"]] = ev["item"]
            if ev["item"]["type"] == "function_call":
                exp.calls[ev["output_index"]]["done"] = ev["item"]["arguments"]
        elif kind in ("response.completed", "response.incomplete"):
            exp.final = ev["response"]
        elif kind == "error":
            exp.error = ev.get("error") or ev
        elif kind == "response.failed":
            exp.failed = ev["response"]
    return exp


def run_driver(reply: Reply, stack: PromptStack | None = None, **kw: Any) -> tuple[StubServer, list[Any]]:
    with StubServer(reply) as server:
        driver = OpenAIResponsesPromptDriver(MODEL, base_url=server.url, api_key="sk-test", **kw)
        events = collect(driver, stack or user_stack("Say something"))
    return server, events


# -- every recording -----------------------------------------------------------------------


def test_fixture_set_is_present():
    names = {p.name for p in STREAMS}
    assert {"stream-text.sse", "stream-function-call.sse", "stream-reasoning-summary.sse",
            "stream-reasoning-then-function-call.sse", "stream-error-insufficient-quota.chunks.jsonl"} <= names
    assert len(ERROR_BODIES) == 4 and len(NONSTREAM) == 2


@pytest.mark.parametrize("path", STREAMS, ids=[p.name for p in STREAMS])
def test_recorded_stream(path):
    exp = expected_from(path)
    server, events = run_driver(responses_reply(path))
    terminal = check_shape(events)
    deltas = events[1:-1]

    # what was sent
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/responses"
    assert req["body"] == {
        "model": MODEL,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say something"}]}],
        "stream": True,
    }
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test"

    streamed_text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    streamed_reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    assert streamed_text == exp.text_deltas
    assert streamed_reasoning == exp.reasoning

    if exp.error is not None:
        assert exp.failed is not None  # the recording also ends in response.failed
        assert isinstance(terminal, ModelFailed)
        err = terminal.error
        assert err.code == exp.error["code"] == exp.failed["error"]["code"]
        assert err.message == exp.error["message"]
        assert err.type == "rate_limit"  # insufficient_quota: OpenAI's 429 family
        assert err.retryable is False  # a quota is not fixed by retrying ...
        assert terminal.metadata["attempts"] == 1  # ... so it was not retried
        assert terminal.partial.content == []
        return

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    # text: the deltas, and the same as each finished message item says
    done_text = "".join(
        part.get("text") or part.get("refusal") or ""
        for _, item in sorted(exp.done_items.items()) if item["type"] == "message" for part in item["content"]
    )
    assert msg.text == exp.text_deltas == done_text
    # reasoning: the summary parts of each item, a blank line between parts
    done_reasoning = "".join(
        "\n\n".join(s["text"] for s in item["summary"])
        for _, item in sorted(exp.done_items.items())
        if item["type"] == "reasoning"
    )
    assert msg.reasoning == exp.reasoning == done_reasoning
    # blocks in the order the items were opened on the wire
    assert [b.type for b in msg.content] == exp.block_types

    # reasoning signatures keep what the API needs to take the item back
    reasoning_items = [item for _, item in sorted(exp.done_items.items()) if item["type"] == "reasoning"]
    reasoning_blocks = [b for b in msg.content if isinstance(b, ReasoningBlock)]
    assert len(reasoning_blocks) == len(reasoning_items)
    for block, item in zip(reasoning_blocks, reasoning_items):
        kept = json.loads(block.signature)
        assert kept["type"] == "reasoning" and kept["id"] == item["id"]
        assert kept["summary"] == item["summary"]
        assert kept.get("encrypted_content") == item.get("encrypted_content")
        assert item.get("encrypted_content")  # both recordings asked for it

    # calls: id, name (mapped both ways), parsed arguments, item id as signature
    calls = terminal.tool_calls
    assert len(calls) == len(exp.tool_calls)
    call_blocks = [b for b in msg.content if isinstance(b, ActionCallBlock)]
    for got, block, want in zip(calls, call_blocks, exp.tool_calls):
        assert got.tag == want["call_id"]
        assert got.native_name == want["name"]
        assert (got.name, got.path) == (want["name"], None)
        assert got.input == want["input"] and isinstance(got.input, dict)
        assert block.raw_arguments == want["raw"]
        assert json.loads(block.signature) == {"id": want["item_id"]}
    for oi, c in exp.calls.items():
        assert c["deltas"] == c["done"]  # the recording's deltas add up to its final arguments
    shown = "".join(d.arguments for d in deltas if isinstance(d, ToolCallDelta))
    assert shown == "".join(w["raw"] for w in exp.tool_calls)

    # usage, stop reason, ids
    usage = exp.final["usage"]
    u = terminal.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["total_tokens"],
    )
    assert u.cache_read_tokens == usage["input_tokens_details"]["cached_tokens"]
    assert u.reasoning_tokens == usage["output_tokens_details"]["reasoning_tokens"]
    assert u.raw == usage
    assert msg.usage == u
    assert terminal.stop_reason.raw == exp.final["status"] == "completed"
    assert terminal.stop_reason == ("tool_use" if exp.calls else "end_turn")
    assert terminal.metadata["request_id"] == exp.created["id"] == exp.final["id"]
    assert terminal.metadata["model"] == exp.final["model"]
    assert terminal.metadata["attempts"] == 1


def test_error_stream_without_event_names_and_with_done():
    """The payload-only form (no `event:` lines) and a trailing [DONE] parse the same."""
    path = DIR / "stream-error-insufficient-quota.chunks.jsonl"
    exp = expected_from(path)
    server, events = run_driver(Reply.chunks_file(path))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.code == exp.error["code"]
    assert terminal.error.message == exp.error["message"]
    assert len(server.requests) == 1


def test_response_failed_alone_raises_its_error():
    """Without the `error` event, `response.failed` carries the error."""
    path = DIR / "stream-error-insufficient-quota.chunks.jsonl"
    events = [e for e in events_of(path) if e["type"] != "error"]
    failed = events[-1]["response"]["error"]
    _, got = run_driver(altered_reply(events))
    terminal = check_shape(got)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.code == failed["code"]
    assert terminal.error.message == failed["message"]
    assert terminal.error.retryable is False


def test_server_error_in_stream_is_retried_before_any_delta():
    """A `response.failed` with server_error before anything was shown: the base retries."""
    path = DIR / "stream-text.sse"
    exp = expected_from(path)
    events = [e for e in events_of(path) if e["type"] in ("response.created", "response.in_progress")]
    failed = json.loads(json.dumps(events[-1]))
    failed["type"] = "response.failed"
    failed["response"]["status"] = "failed"
    failed["response"]["error"] = {
        "code": "server_error",
        "message": "The server had an error while processing your request.",
    }
    with StubServer(altered_reply(events + [failed]), responses_reply(path)) as server:
        got = collect(OpenAIResponsesPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.01))
    assert len(server.requests) == 2
    terminal = check_shape(got)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.message.text == exp.text_deltas
    assert terminal.metadata["attempts"] == 2
    assert "The server had an error" in terminal.metadata["last_error"]


# -- completion details, from recordings altered in memory --------------------------------


def _with_incomplete(path: Path, reason: str, keep: Any = None) -> list[dict[str, Any]]:
    """The recording with its response.completed turned into response.incomplete."""
    out = []
    for ev in events_of(path):
        if keep is not None and not keep(ev):
            continue
        if ev["type"] == "response.completed":
            ev["type"] = "response.incomplete"
            ev["response"]["status"] = "incomplete"
            ev["response"]["incomplete_details"] = {"reason": reason}
        out.append(ev)
    return out


@pytest.mark.parametrize("reason, kind", [("max_output_tokens", "max_tokens"), ("content_filter", "content_filter")])
def test_incomplete_maps_its_reason(reason, kind):
    path = DIR / "stream-text.sse"
    exp = expected_from(path)
    _, events = run_driver(altered_reply(_with_incomplete(path, reason)))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == kind
    assert terminal.stop_reason.raw == reason
    assert terminal.message.text == exp.text_deltas
    assert terminal.usage.output_tokens == exp.final["usage"]["output_tokens"]


def test_incomplete_inside_a_call_reports_the_partial_call():
    """max_output_tokens hit while the arguments stream: the cut call is reported, not broken."""
    path = DIR / "stream-function-call.sse"
    exp = expected_from(path)
    seen = {"n": 0}

    def keep(ev):
        if ev["type"] == "response.function_call_arguments.delta":
            seen["n"] += 1
            return seen["n"] <= 2
        return ev["type"] not in ("response.function_call_arguments.done", "response.output_item.done")

    events = _with_incomplete(path, "max_output_tokens", keep)
    sent = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    _, got = run_driver(altered_reply(events))
    terminal = check_shape(got)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == "max_tokens"
    assert terminal.tool_calls == []
    (partial,) = terminal.metadata["partial_tool_calls"]
    assert partial == {"id": exp.tool_calls[0]["call_id"], "name": exp.tool_calls[0]["name"], "raw_arguments": sent}


def test_output_item_done_fills_what_no_delta_carried():
    """No text or argument deltas at all: the finished items give the text and the arguments."""
    text_path, call_path = DIR / "stream-text.sse", DIR / "stream-function-call.sse"
    skip = (
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    )
    for path in (text_path, call_path):
        exp = expected_from(path)
        _, events = run_driver(altered_reply([e for e in events_of(path) if e["type"] not in skip]))
        terminal = check_shape(events)
        assert isinstance(terminal, ModelCompleted)
        assert terminal.message.text == "".join(
            p["text"] for i in exp.done_items.values() if i["type"] == "message" for p in i["content"]
        )
        assert [(c.tag, c.native_name, c.input) for c in terminal.tool_calls] == [
            (c["call_id"], c["name"], json.loads(c["done"])) for c in exp.calls.values()
        ]
        assert terminal.stop_reason == ("tool_use" if exp.calls else "end_turn")


def test_arguments_done_alone_fills_the_arguments():
    path = DIR / "stream-function-call.sse"
    exp = expected_from(path)
    events = [
        e
        for e in events_of(path)
        if e["type"] not in ("response.function_call_arguments.delta", "response.output_item.done")
    ]
    _, got = run_driver(altered_reply(events))
    terminal = check_shape(got)
    assert [c.input for c in terminal.tool_calls] == [c["input"] for c in exp.tool_calls]


def test_refusal_is_text():
    """A refusal part streams as `response.refusal.delta`; its text is the reply's text."""
    path = DIR / "stream-text.sse"
    events = []
    for ev in events_of(path):
        if ev["type"] == "response.output_text.delta":
            ev["type"] = "response.refusal.delta"
        if ev["type"] == "response.output_item.done":
            ev["item"]["content"] = [{"type": "refusal", "refusal": p["text"]} for p in ev["item"]["content"]]
        events.append(ev)
    exp = expected_from(path)
    _, got = run_driver(altered_reply(events))
    terminal = check_shape(got)
    assert terminal.message.text == exp.text_deltas
    assert [d.text for d in got[1:-1]] == [e["delta"] for e in events if e["type"] == "response.refusal.delta"]


# -- errors over HTTP --------------------------------------------------------------------------


def _status_of(body_path: Path) -> tuple[int, Path | None]:
    sidecar = body_path.with_name(body_path.name[: -len(".json")] + ".http.json")
    if sidecar.exists():
        return json.loads(sidecar.read_text())["status"], sidecar
    assert body_path.name == "error-insufficient-quota.json"
    return 429, None  # SOURCES.md: status not stored; OpenAI sends it as HTTP 429


@pytest.mark.parametrize("body_path", ERROR_BODIES, ids=[p.name for p in ERROR_BODIES])
def test_recorded_http_error(body_path):
    status, sidecar = _status_of(body_path)
    body = json.loads(body_path.read_text())
    with StubServer(Reply.error_file(body_path, sidecar, status=status)) as server:
        events = collect(
            OpenAIResponsesPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.01)
        )
    terminal = check_shape(events)
    assert len(events) == 2
    assert isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.status == status
    assert err.type == status_type(status)
    assert err.code == body["error"]["code"]
    assert body["error"]["message"] in err.message
    assert err.raw == body
    # nothing here is worth a retry: 4xx, and a 429 for an exhausted quota
    assert err.retryable is False
    assert len(server.requests) == 1


# -- non-streaming Response objects ------------------------------------------------------------


@pytest.mark.parametrize("path", NONSTREAM, ids=[p.name for p in NONSTREAM])
def test_whole_response_object(path):
    """A 200 JSON body (a gateway that ignored `stream`) goes through the same item handling."""
    data = json.loads(path.read_text())
    with StubServer(Reply(headers={"Content-Type": "application/json"}, pieces=[path.read_bytes()])) as server:
        events = collect(OpenAIResponsesPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    output = data["output"]
    assert [b.type for b in msg.content] == [
        ITEM_BLOCK.get(item["type"], "text")
        for item in output
        for _ in (item.get("content") if item["type"] == "message" else [item])
    ]
    assert msg.text == "".join(p["text"] for i in output if i["type"] == "message" for p in i["content"])
    calls = [i for i in output if i["type"] == "function_call"]
    assert [(c.tag, c.native_name, c.input) for c in terminal.tool_calls] == [
        (c["call_id"], c["name"], json.loads(c["arguments"])) for c in calls
    ]
    reasoning = [i for i in output if i["type"] == "reasoning"]
    assert [json.loads(b.signature)["id"] for b in msg.content if isinstance(b, ReasoningBlock)] == [
        r["id"] for r in reasoning
    ]
    assert terminal.usage.input_tokens == data["usage"]["input_tokens"]
    assert terminal.usage.reasoning_tokens == data["usage"]["output_tokens_details"]["reasoning_tokens"]
    assert terminal.stop_reason == ("tool_use" if calls else "end_turn")
    assert terminal.metadata["request_id"] == data["id"]


def test_whole_response_helpers_match_the_stream():
    """`response_object_events` on the final Response of a recorded stream gives the same
    deltas' content as the stream itself."""
    path = DIR / "stream-reasoning-then-function-call.sse"
    exp = expected_from(path)
    decoder = ResponsesDecoder("openai")
    items = [x for ev in response_object_events(exp.final) for x in decoder.handle(ev)]
    calls = [x for x in items if isinstance(x, ToolCallDelta)]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        (c["call_id"], c["name"], c["raw"]) for c in exp.tool_calls
    ]
    assert usage_from_responses(exp.final["usage"]).total_tokens == exp.final["usage"]["total_tokens"]


# -- request shape -------------------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n0000").decode()


def _conversation() -> PromptStack:
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
    stack.add_user_message([TextArtifact(value="What is 2 + 3? And this?"), ImageBlock(mime_type="image/png", data=PNG),
                            ImageBlock(url="https://example.com/cat.jpg")])
    call = ToolAction(tag="call_1", name="Calculator", path="add", input={"a": 2, "b": 3})
    bad = ToolAction(tag="call_2", name="Calculator", path="add", input={"a": "x"})
    stack.add_assistant_message(
        [TextArtifact(value="Let me add."), ActionCallBlock(action=call), ActionCallBlock(action=bad)]
    )
    stack.add_message("tool", Message(role="tool", content=[
        ActionResultBlock(action=call, text="5"),
        ActionResultBlock(action=bad, text="ValidationError: a is not a number", is_error=True),
    ]))
    stack.add_system_message("answer in English")
    return stack


def test_request_body_shape():
    stack = _conversation()
    path = DIR / "stream-text.sse"
    server, events = run_driver(responses_reply(path), stack, provider_options={"temperature": 0.2, "store": False})
    assert isinstance(events[-1], ModelCompleted)
    body = server.requests[0]["body"]
    assert list(body) == ["model", "instructions", "input", "tools", "stream", "temperature", "store"]
    assert body["instructions"] == "be brief\n\nanswer in English"
    assert body["tools"] == [{
        "type": "function", "name": "Calculator_add", "description": "Add two numbers",
        "parameters": stack.tools[0].parameters, "strict": False,
    }]
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is 2 + 3? And this?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
                {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "Let me add."}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "Calculator_add",
            "arguments": json.dumps({"a": 2, "b": 3}),
        },
        {"type": "function_call", "call_id": "call_2", "name": "Calculator_add", "arguments": json.dumps({"a": "x"})},
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
        {"type": "function_call_output", "call_id": "call_2", "output": "Error: ValidationError: a is not a number"},
    ]
    for item in body["input"]:
        if item.get("type") == "function_call":
            assert isinstance(item["arguments"], str)
    assert body["stream"] is True and body["temperature"] == 0.2 and body["store"] is False


def _second_turn(first: Path | Reply, **kw: Any) -> tuple[ModelCompleted, dict[str, Any]]:
    """Run `first`, answer its tool calls, send the next request; return the first result and
    the body of the second request."""
    stack = user_stack("Weather in Berlin?")
    stack.tools.append(ToolDefinition(name="weather", description="Weather at a place"))
    reply = first if isinstance(first, Reply) else responses_reply(first)
    with StubServer(reply, responses_reply(DIR / "stream-text.sse")) as server:

        async def main():
            async with OpenAIResponsesPromptDriver(MODEL, base_url=server.url, api_key="sk-test", **kw) as d:
                one = await d.run(stack)
                stack.add_assistant_message(one.message)
                stack.add_message("tool", Message(role="tool", content=[
                    ActionResultBlock(action=c, text="15 C") for c in one.tool_calls
                ]))
                await d.run(stack)
                return one

        one = asyncio.run(main())
    assert len(server.requests) == 2
    return one, server.requests[1]["body"]


def test_second_turn_sends_reasoning_with_its_call():
    path = DIR / "stream-reasoning-then-function-call.sse"
    exp = expected_from(path)
    one, body = _second_turn(path)
    reasoning = next(i for i in exp.done_items.values() if i["type"] == "reasoning")
    (call,) = exp.tool_calls
    assert one.stop_reason == "tool_use"
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Berlin?"}]},
        {
            "type": "reasoning",
            "id": reasoning["id"],
            "summary": reasoning["summary"],
            "encrypted_content": reasoning["encrypted_content"],
        },
        {
            "type": "function_call",
            "call_id": call["call_id"],
            "name": call["name"],
            "arguments": json.dumps(call["input"]),
            "id": call["item_id"],
        },
        {"type": "function_call_output", "call_id": call["call_id"], "output": "15 C"},
    ]


def test_second_turn_parallel_calls_after_reasoning_keep_their_ids():
    """Reasoning, then two calls (the non-streamed recording): all go back, in order, paired by id."""
    path = DIR / "nonstream-parallel-function-calls.json"
    output = json.loads(path.read_text())["output"]
    one, body = _second_turn(Reply(headers={"Content-Type": "application/json"}, pieces=[path.read_bytes()]))
    assert len(one.tool_calls) == 2
    expected = []
    for item in output:
        if item["type"] == "reasoning":
            expected.append(
                {
                    "type": "reasoning",
                    "id": item["id"],
                    "summary": item["summary"],
                    "encrypted_content": item["encrypted_content"],
                }
            )
        else:
            expected.append({"type": "function_call", "call_id": item["call_id"], "name": item["name"],
                             "arguments": json.dumps(json.loads(item["arguments"])), "id": item["id"]})
    expected += [
        {"type": "function_call_output", "call_id": i["call_id"], "output": "15 C"}
        for i in output
        if i["type"] == "function_call"
    ]
    assert body["input"][1:] == expected


def test_second_turn_without_reasoning_sends_no_item_ids():
    path = DIR / "stream-function-call.sse"
    (call,) = expected_from(path).tool_calls
    _, body = _second_turn(path)
    assert body["input"][1:] == [
        {
            "type": "function_call",
            "call_id": call["call_id"],
            "name": call["name"],
            "arguments": json.dumps(call["input"]),
        },
        {"type": "function_call_output", "call_id": call["call_id"], "output": "15 C"},
    ]


def test_reasoning_before_a_text_answer_is_not_sent_back():
    """The API pairs reasoning with the next item by id; a message id is not kept, so the
    reasoning of a plain answer stays out (the model does not need it on later turns)."""
    path = DIR / "stream-reasoning-summary.sse"
    exp = expected_from(path)
    stack = user_stack("How do I cross the street?")
    _, events = run_driver(responses_reply(path), stack)
    stack.add_assistant_message(events[-1].message)
    stack.add_user_message("Thanks")
    _, body = OpenAIResponsesPromptDriver(MODEL, api_key="sk-test").build_request(stack)
    assert [i.get("type", i.get("role")) for i in body["input"]] == ["user", "assistant", "user"]
    assert body["input"][1] == {"role": "assistant", "content": [{"type": "output_text", "text": exp.text_deltas}]}


def _history_with_reasoning(signature: str | None) -> PromptStack:
    stack = user_stack("q")
    call = ToolAction(tag="call_9", name="lookup", input={"q": "x"})
    stack.add_assistant_message([
        ReasoningBlock(text="thinking", signature=signature),
        ActionCallBlock(action=call, signature=json.dumps({"id": "fc_9"})),
    ])
    stack.add_message("tool", ActionResultBlock(action=call, text="found"))
    return stack


@pytest.mark.parametrize("store, sent", [(None, True), (True, True), (False, False)])
def test_reasoning_without_encrypted_content_needs_store(store, sent):
    """With `store: false` the API cannot look a reasoning item up by id: without its
    encrypted content it stays out, and so does the call's item id."""
    sig = json.dumps({"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "thinking"}]})
    options = {} if store is None else {"store": store}
    _, body = OpenAIResponsesPromptDriver(MODEL, api_key="sk-test", provider_options=options).build_request(
        _history_with_reasoning(sig)
    )
    kinds = [i.get("type", i.get("role")) for i in body["input"]]
    call = next(i for i in body["input"] if i.get("type") == "function_call")
    if sent:
        assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
        assert body["input"][1] == json.loads(sig)
        assert call["id"] == "fc_9"
    else:
        assert kinds == ["user", "function_call", "function_call_output"]
        assert "id" not in call


@pytest.mark.parametrize("signature", [None, "EqQBCkgIAR...anthropic-signature", json.dumps({"id": "x"})])
def test_foreign_reasoning_is_not_sent(signature):
    _, body = OpenAIResponsesPromptDriver(MODEL, api_key="sk-test").build_request(_history_with_reasoning(signature))
    assert [i.get("type", i.get("role")) for i in body["input"]] == ["user", "function_call", "function_call_output"]
    assert "id" not in body["input"][1]


def test_output_schema_becomes_text_format_and_text_options_merge():
    stack = user_stack()
    stack.output_schema = {"title": "City Info", "type": "object", "properties": {"city": {"type": "string"}}}
    driver = OpenAIResponsesPromptDriver(MODEL, api_key="sk-test", provider_options={
        "text": {"verbosity": "low"}, "reasoning": {"effort": "low", "summary": "auto"}, "max_output_tokens": 50,
    })
    path, body = driver.build_request(stack)
    assert path == "/responses"
    strict = {**stack.output_schema, "required": ["city"], "additionalProperties": False}
    assert body["text"] == {
        "verbosity": "low",
        "format": {"type": "json_schema", "name": "City_Info", "schema": strict, "strict": True},
    }
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["max_output_tokens"] == 50
    assert "instructions" not in body and "tools" not in body


def test_unknown_option_is_rejected():
    with pytest.raises(ProviderError) as info:
        OpenAIResponsesPromptDriver(MODEL, api_key="sk-test", provider_options={"max_tokens": 5})
    assert info.value.type == "invalid_request"
    assert "max_output_tokens" in info.value.message  # the known keys are listed


@pytest.mark.parametrize("model, what", [("o3-mini-2025-01-31", "image"), ("o1-mini", "tools")])
def test_model_without_the_capability_fails_before_sending(model, what):
    stack = user_stack()
    if what == "image":
        stack.add_user_message(ImageBlock(data=PNG))
    else:
        stack.tools.append(ToolDefinition(name="lookup"))
    with StubServer(responses_reply(DIR / "stream-text.sse")) as server:

        async def main():
            async with OpenAIResponsesPromptDriver(model, base_url=server.url, api_key="sk-test") as d:
                return [e async for e in d.stream(stack)]

        with pytest.raises(ProviderError) as info:
            asyncio.run(main())
        assert server.requests == []
    assert info.value.type == "unsupported_capability"
    assert info.value.code == ("vision" if what == "image" else "tools")
    # the same request is fine for a model that has it
    assert OpenAIResponsesPromptDriver("gpt-4.1-mini", api_key="k").check_capabilities(stack) is None


def test_block_order_follows_the_items_not_the_deltas():
    """Blocks follow the order the items were opened in, even when an item's deltas come
    late: here the reasoning summary (and the reasoning item's end) are moved after the
    message has begun, in memory."""
    path = DIR / "stream-reasoning-summary.sse"
    events = events_of(path)

    def is_reasoning_tail(e):
        return e["type"].startswith("response.reasoning_summary") or (
            e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning")

    late = [e for e in events if is_reasoning_tail(e)]
    rest = [e for e in events if not is_reasoning_tail(e)]
    at = next(n for n, e in enumerate(rest) if e["type"] == "response.output_text.delta")
    moved = rest[:at + 2] + late + rest[at + 2:]  # after the message's first two text deltas
    assert moved.index(late[0]) > next(n for n, e in enumerate(moved) if e["type"] == "response.output_text.delta")
    exp = expected_from(path)
    _, got = run_driver(altered_reply(moved))
    terminal = check_shape(got)
    assert [b.type for b in terminal.message.content] == ["reasoning", "text"]
    assert terminal.message.reasoning == exp.reasoning
    assert terminal.message.text == exp.text_deltas
    assert isinstance(terminal.message.content[1], TextBlock)


def test_cache_token_details_are_mapped():
    """The recordings bill no cached tokens; the usage of one is altered in memory to have some."""
    path = DIR / "stream-text.sse"
    events = events_of(path)
    usage = events[-1]["response"]["usage"]
    usage["input_tokens_details"] = {"cached_tokens": usage["input_tokens"] - 1, "cache_write_tokens": 1}
    _, got = run_driver(altered_reply(events))
    terminal = check_shape(got)
    assert terminal.usage.cache_read_tokens == usage["input_tokens"] - 1
    assert terminal.usage.cache_write_tokens == 1
    assert terminal.usage.input_tokens == usage["input_tokens"]
