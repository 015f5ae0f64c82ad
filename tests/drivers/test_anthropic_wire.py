"""Wire tests for the Anthropic Messages driver: real recorded streams served over HTTP.

Every expected value is read from the recording itself by `expected_from` below
(plain `json.loads`, independent of the driver), or, in the differential test,
from what the official `anthropic` SDK accumulates from the same bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

from ipyagent.core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    BlockDelta,
    GenericBlock,
    ImageBlock,
    ModelCompleted,
    ModelFailed,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallDelta,
    ToolDefinition,
)
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver, block_deltas, stop_kind, usage_from_anthropic
from ipyagent.drivers.aggregate import Aggregator as _Aggregator

from ..support.recordings import check_shape, collect, sse_events, user_stack
from ..support.stub_server import FIXTURES, Reply, StubServer

MODEL = "claude-test"
KEY = "sk-ant-test"
DIR = FIXTURES / "anthropic"
STREAMS = sorted(DIR.glob("*.sse")) + sorted(DIR.glob("*.chunks.jsonl"))
NONSTREAM = sorted(DIR.glob("nonstream-*.json"))
ERRORS = sorted(p for p in DIR.glob("error-*.json") if not p.name.endswith(".http.json"))

#: "Handling stop reasons": stop_reason -> StopKind value.
DOC_STOP = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "end_turn",
}
#: "Errors": error.type -> (HTTP status, ProviderError.type).
DOC_ERRORS = {
    "invalid_request_error": (400, "invalid_request"),
    "authentication_error": (401, "authentication"),
    "permission_error": (403, "permission"),
    "not_found_error": (404, "not_found"),
    "request_too_large": (413, "invalid_request"),
    "rate_limit_error": (429, "rate_limit"),
    "api_error": (500, "server"),
    "overloaded_error": (529, "overloaded"),
}
#: The documented in-stream error body ("Streaming Messages", error events).
OVERLOADED_EVENT = (
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
)


# -- reading a recording without the driver ----------------------------------------------


def recording_events(path: Path) -> list[tuple[str | None, str]]:
    if path.name.endswith(".chunks.jsonl"):
        return [(json.loads(line)["type"], line) for line in path.read_text().splitlines() if line.strip()]
    return sse_events(path.read_text(encoding="utf-8"))


def reply_for(path: Path, **kw: Any) -> Reply:
    """Raw SSE as recorded; a payload-only recording wrapped with its event names
    (Anthropic's event name always equals the payload's `type`)."""
    if path.name.endswith(".chunks.jsonl"):
        return Reply(
            pieces=[f"event: {name}\ndata: {data}\n\n".encode() for name, data in recording_events(path)], **kw
        )
    return Reply.sse_file(path, **kw)


@dataclass
class Expected:
    """What a recorded Messages stream says, block by block (wire index order)."""

    message_id: str | None = None
    model: str | None = None
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    error: dict[str, Any] | None = None

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [self.blocks[i] for i in sorted(self.blocks) if self.blocks[i]["type"] in types]

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.of_type("text"))

    @property
    def reasoning(self) -> str:
        return "".join(b["thinking"] for b in self.of_type("thinking"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Complete tool_use blocks, input parsed ("" -> {})."""
        out = []
        for b in self.of_type("tool_use"):
            try:
                value = json.loads(b["_json"]) if b["_json"] else b["input"]
            except ValueError:
                continue
            out.append({"id": b["id"], "name": b["name"], "input": value, "raw": b["_json"]})
        return out

    @property
    def broken_tool_calls(self) -> list[dict[str, Any]]:
        out = []
        for b in self.of_type("tool_use"):
            try:
                json.loads(b["_json"] or "{}")
            except ValueError:
                out.append({"id": b["id"], "name": b["name"], "raw_arguments": b["_json"]})
        return out

    def wire_blocks(self) -> list[dict[str, Any]]:
        """The assistant content as the API documents it for the next request."""
        out = []
        for i in sorted(self.blocks):
            b = self.blocks[i]
            kind = b["type"]
            if kind == "text":
                if b["text"]:
                    out.append({"type": "text", "text": b["text"]})
            elif kind == "thinking":
                out.append({"type": "thinking", "thinking": b["thinking"], "signature": b["signature"]})
            elif kind == "redacted_thinking":
                out.append({"type": "redacted_thinking", "data": b["data"]})
            elif kind == "tool_use":
                out.append(
                    {
                        "type": "tool_use",
                        "id": b["id"],
                        "name": b["name"],
                        "input": json.loads(b["_json"]) if b["_json"] else b["input"],
                    }
                )
            else:
                out.append(self.passthrough(b))
        return out

    @staticmethod
    def passthrough(b: dict[str, Any]) -> dict[str, Any]:
        block = {k: v for k, v in b.items() if k != "_json"}
        if b["_json"]:
            block["input"] = json.loads(b["_json"])
        return block

    def core_types(self) -> list[str]:
        kinds = {"text": "text", "thinking": "reasoning", "redacted_thinking": "reasoning", "tool_use": "action_call",
                 "server_tool_use": "server_tool_call", "bash_code_execution_tool_result": "server_tool_result",
                 "web_search_tool_result": "server_tool_result"}
        out = []
        for i in sorted(self.blocks):
            b = self.blocks[i]
            if b["type"] == "text" and not b["text"]:
                continue
            if b in self.of_type("tool_use") and not any(c["id"] == b["id"] for c in self.tool_calls):
                continue
            out.append(kinds.get(b["type"], "generic"))
        return out


def expected_from(events: list[tuple[str | None, str]]) -> Expected:
    exp = Expected()
    for name, data in events:
        payload = json.loads(data)
        kind = payload.get("type")
        if name == "error" or kind == "error":
            exp.error = payload["error"]
            break
        if kind == "message_start":
            exp.message_id, exp.model = payload["message"]["id"], payload["message"]["model"]
            exp.usage = dict(payload["message"]["usage"])
        elif kind == "content_block_start":
            exp.blocks[payload["index"]] = {**payload["content_block"], "_json": ""}
        elif kind == "content_block_delta":
            block, delta = exp.blocks[payload["index"]], payload["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                block["_json"] += delta["partial_json"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
        elif kind == "content_block_stop":
            exp.stopped.add(payload["index"])
        elif kind == "message_delta":
            exp.stop_reason = payload["delta"].get("stop_reason") or exp.stop_reason
            exp.usage.update({k: v for k, v in (payload.get("usage") or {}).items() if v is not None})
    return exp


def run_stream(*replies: Reply, stack: PromptStack | None = None, **kw: Any) -> tuple[StubServer, list[Any]]:
    with StubServer(*replies) as server:
        events = collect(
            AnthropicPromptDriver(MODEL, base_url=server.url, api_key=KEY, **kw), stack or user_stack("Say something")
        )
    return server, events


def test_fixture_set_is_present():
    names = {p.name for p in DIR.iterdir()}
    covered = {p.name for p in STREAMS + NONSTREAM + ERRORS}
    sidecars = {p.name for p in DIR.glob("*.http.json")}
    assert names == covered | sidecars  # every recording gets a test below
    assert {
        "stream-max-tokens-inside-tool-use.sse",
        "stream-redacted-thinking.sse",
        "stream-server-tool-code-execution.sse",
    } <= covered
    assert len(STREAMS) == 9 and len(NONSTREAM) == 3 and len(ERRORS) == 5


# -- every recorded stream --------------------------------------------------------------


@pytest.mark.parametrize("path", STREAMS, ids=[p.name for p in STREAMS])
def test_recorded_stream(path):
    exp = expected_from(recording_events(path))
    server, events = run_stream(reply_for(path))
    terminal = check_shape(events)
    deltas = events[1:-1]
    assert all(isinstance(d, (TextDelta, ReasoningDelta, ToolCallDelta, BlockDelta, ServerToolDelta)) for d in deltas)

    # what the server was asked
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/messages"
    assert req["body"] == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say something"}]}],
        "stream": True,
    }
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers

    # what was shown while streaming
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == exp.text
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == exp.reasoning
    fragments: dict[int, str] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            fragments[d.index] = fragments.get(d.index, "") + d.arguments
    assert sorted(fragments.values()) == sorted(b["_json"] for b in exp.of_type("tool_use"))

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    assert msg.role == "assistant"
    assert [b.type for b in msg.content] == exp.core_types()
    assert msg.text == exp.text
    assert msg.reasoning == exp.reasoning

    # thinking keeps its signature; redacted thinking keeps its opaque data
    reasoning = [b for b in msg.content if isinstance(b, ReasoningBlock)]
    want = [
        (b["thinking"], b["signature"], False) if b["type"] == "thinking" else ("", b["data"], True)
        for b in exp.of_type("thinking", "redacted_thinking")
    ]
    assert [(b.text, b.signature, b.redacted) for b in reasoning] == want

    # tool calls: ids, names, parsed input
    calls = terminal.tool_calls
    assert [(c.tag, c.native_name, c.input) for c in calls] == [
        (w["id"], w["name"], w["input"]) for w in exp.tool_calls
    ]
    for call, want_call in zip(calls, exp.tool_calls):
        assert (call.name, call.path) == (want_call["name"], None)
    # server tool blocks are kept whole (to go back as they came), their streamed input parsed
    kept = [b.raw for b in msg.content if isinstance(b, (ServerToolCallBlock, ServerToolResultBlock))]
    assert kept == [exp.passthrough(b) for b in exp.of_type(*_other_types(exp))]
    assert not any(isinstance(b, GenericBlock) for b in msg.content)

    # usage (message_start, then message_delta's cumulative counts), stop reason, ids
    usage = terminal.usage
    assert usage.output_tokens == exp.usage["output_tokens"]
    assert usage.cache_read_tokens == exp.usage.get("cache_read_input_tokens", 0)
    assert usage.cache_write_tokens == exp.usage.get("cache_creation_input_tokens", 0)
    assert usage.input_tokens == exp.usage["input_tokens"] + usage.cache_read_tokens + usage.cache_write_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.raw == exp.usage
    assert msg.usage == usage
    assert terminal.stop_reason == DOC_STOP[exp.stop_reason]
    assert terminal.stop_reason.raw == exp.stop_reason
    assert terminal.metadata["request_id"] == exp.message_id
    assert terminal.metadata["model"] == exp.model
    assert terminal.metadata["attempts"] == 1

    if exp.broken_tool_calls:
        # cut off by max_tokens inside a tool_use block: reported, not broken
        assert terminal.stop_reason == "max_tokens"
        assert terminal.metadata["partial_tool_calls"] == exp.broken_tool_calls
    else:
        assert "partial_tool_calls" not in terminal.metadata


def _other_types(exp: Expected) -> list[str]:
    return sorted({b["type"] for b in exp.blocks.values()} - {"text", "thinking", "redacted_thinking", "tool_use"})


def test_max_tokens_inside_tool_use_recording_is_what_it_claims():
    """Guards the test above: this recording really ends inside an open tool_use block."""
    exp = expected_from(recording_events(DIR / "stream-max-tokens-inside-tool-use.sse"))
    assert exp.stop_reason == "max_tokens"
    open_blocks = set(exp.blocks) - exp.stopped
    assert [exp.blocks[i]["type"] for i in open_blocks] == ["tool_use"]
    assert len(exp.broken_tool_calls) == 1 and exp.text


def test_pings_and_whitespace_padding_are_tolerated():
    """stream-text.sse has a ping between deltas and padded data lines; its sidecar's headers are served too."""
    path = DIR / "stream-text.sse"
    raw = path.read_text()
    assert "event: ping" in raw and "        }" in raw
    headers = json.loads((DIR / "stream-text.http.json").read_text())["headers"]
    exp = expected_from(recording_events(path))
    served = {k: v for k, v in headers.items() if k.lower() in ("content-type", "request-id", "cache-control")}
    _, events = run_stream(reply_for(path, headers=served))
    assert isinstance(events[-1], ModelCompleted)
    assert events[-1].message.text == exp.text


# -- errors inside the stream -----------------------------------------------------------


def _pieces_until(path: Path, event_type: str) -> list[bytes]:
    """The recording's pieces before the first event of `event_type`."""
    pieces = reply_for(path).pieces
    for n, piece in enumerate(pieces):
        if sse_events(piece.decode())[0][0] == event_type:
            return pieces[:n]
    raise AssertionError(f"no {event_type} in {path.name}")


def test_overloaded_error_mid_stream_keeps_partial_output():
    path = DIR / "stream-text-then-tool-use.sse"
    head = _pieces_until(path, "message_delta")
    exp = expected_from(sse_events(b"".join(head).decode()))
    assert exp.text and exp.tool_calls
    server, events = run_stream(Reply(pieces=head + [OVERLOADED_EVENT]), Reply.sse_file(path), max_retry_wait=0.01)
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.type == "overloaded" and err.retryable is True
    assert err.code == "overloaded_error"
    assert "Overloaded" in err.message
    assert len(server.requests) == 1  # deltas were shown: no retry
    assert terminal.partial.text == terminal.partial_text == exp.text
    assert [(c.tag, c.input) for c in terminal.partial.tool_calls] == [(c["id"], c["input"]) for c in exp.tool_calls]
    assert terminal.partial.status == "failed"
    assert terminal.partial.error.type == "overloaded"


def test_overloaded_error_before_any_delta_is_retried():
    path = DIR / "stream-text.sse"
    head = _pieces_until(path, "content_block_start")  # message_start only
    exp = expected_from(recording_events(path))
    server, events = run_stream(Reply(pieces=head + [OVERLOADED_EVENT]), Reply.sse_file(path), max_retry_wait=0.01)
    assert len(server.requests) == 2
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == exp.text
    assert terminal.metadata["attempts"] == 2
    assert "Overloaded" in terminal.metadata["last_error"]


def test_cache_usage_from_message_start_survives_message_delta():
    """Cache counts arrive in message_start; a message_delta that does not repeat them
    (this recording's only carries output_tokens) leaves them as they were.
    The recording is altered in memory only: cache counts set in message_start."""
    path = DIR / "stream-text-then-tool-use.sse"
    pieces, events = [], []
    for name, data in recording_events(path):
        payload = json.loads(data)
        if payload["type"] == "message_start":
            payload["message"]["usage"].update(cache_read_input_tokens=1200, cache_creation_input_tokens=340)
        if payload["type"] == "message_delta":
            assert set(payload["usage"]) == {"output_tokens"}
        events.append((name, json.dumps(payload)))
        pieces.append(f"event: {name}\ndata: {events[-1][1]}\n\n".encode())
    exp = expected_from(events)
    _, got = run_stream(Reply(pieces=pieces))
    usage = got[-1].usage
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (1200, 340)
    assert usage.input_tokens == exp.usage["input_tokens"] + 1200 + 340  # input is the whole prompt
    assert usage.output_tokens == exp.usage["output_tokens"]
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


@pytest.mark.parametrize("stop_reason", sorted(DOC_STOP))
def test_stop_reason_mapping(stop_reason):
    path = DIR / "stream-text.sse"
    pieces = []
    for name, data in recording_events(path):
        payload = json.loads(data)
        if payload["type"] == "message_delta":
            payload["delta"]["stop_reason"] = stop_reason  # altered in memory only
        pieces.append(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
    _, events = run_stream(Reply(pieces=pieces))
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert terminal.stop_reason == DOC_STOP[stop_reason]
    assert terminal.stop_reason.raw == stop_reason
    assert stop_kind(stop_reason) == DOC_STOP[stop_reason]


# -- HTTP error bodies ------------------------------------------------------------------


@pytest.mark.parametrize("body_path", ERRORS, ids=[p.name for p in ERRORS])
def test_recorded_http_error(body_path):
    sidecar = body_path.with_name(body_path.name[: -len(".json")] + ".http.json")
    status = json.loads(sidecar.read_text())["status"]
    body = json.loads(body_path.read_text())
    doc_status, doc_type = DOC_ERRORS[body["error"]["type"]]
    assert status == doc_status
    server, events = run_stream(Reply.error_file(body_path, sidecar), max_attempts=1)
    terminal = check_shape(events)
    assert len(events) == 2 and isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.type == doc_type
    assert err.status == status
    assert err.code == body["error"]["type"]
    assert body["error"]["message"] in err.message
    assert err.raw == body
    assert err.retryable is (status == 429)
    assert len(server.requests) == 1


@pytest.mark.parametrize("error_type", sorted(DOC_ERRORS))
def test_documented_error_types(error_type):
    status, doc_type = DOC_ERRORS[error_type]
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": f"about {error_type}"}}).encode()
    err = AnthropicPromptDriver(MODEL, api_key=KEY).error_from_response(status, httpx2.Headers({}), body)
    assert (err.type, err.code, err.status) == (doc_type, error_type, status)
    assert f"about {error_type}" in err.message
    assert err.retryable is (status in (429, 500, 529))


def test_529_overloaded_is_retried_then_completes():
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
    path = DIR / "stream-text.sse"
    exp = expected_from(recording_events(path))
    overloaded = Reply(status=529, headers={"Content-Type": "application/json"}, pieces=[body])
    server, events = run_stream(overloaded, Reply.sse_file(path), max_retry_wait=0.01)
    assert len(server.requests) == 2
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.message.text == exp.text
    assert "Overloaded" in terminal.metadata["last_error"]


# -- non-streaming bodies, through the helpers the stream uses ----------------------------


@pytest.mark.parametrize("path", NONSTREAM, ids=[p.name for p in NONSTREAM])
def test_nonstream_body_maps_through_stream_helpers(path):
    """There is no non-streaming path: a whole content block (as in content_block_start
    or a non-streaming `content`) goes through `block_deltas`, usage through
    `usage_from_anthropic`, the stop reason through `stop_kind`."""
    body = json.loads(path.read_text())
    agg = _Aggregator()
    for i, block in enumerate(body["content"]):
        for delta in block_deltas(i, block):
            agg.add(delta)
    msg = agg.message()
    content = body["content"]
    assert msg.text == "".join(b["text"] for b in content if b["type"] == "text")
    assert msg.reasoning == "".join(b["thinking"] for b in content if b["type"] == "thinking")
    assert [b.signature for b in msg.content if isinstance(b, ReasoningBlock)] == [
        b["signature"] for b in content if b["type"] == "thinking"
    ]
    assert [(c.tag, c.native_name, c.input) for c in msg.tool_calls] == [
        (b["id"], b["name"], b["input"]) for b in content if b["type"] == "tool_use"
    ]
    assert len(msg.content) == len(content)
    usage = usage_from_anthropic(body["usage"])
    raw = body["usage"]
    assert (usage.input_tokens, usage.output_tokens) == (
        raw["input_tokens"] + raw["cache_read_input_tokens"] + raw["cache_creation_input_tokens"],
        raw["output_tokens"],
    )
    assert usage.reasoning_tokens == (raw.get("output_tokens_details") or {}).get("thinking_tokens", 0)
    assert stop_kind(body["stop_reason"]) == DOC_STOP[body["stop_reason"]]


def test_nonstream_thinking_reports_thinking_tokens():
    body = json.loads((DIR / "nonstream-thinking.json").read_text())
    tokens = body["usage"]["output_tokens_details"]["thinking_tokens"]
    assert tokens > 0 and usage_from_anthropic(body["usage"]).reasoning_tokens == tokens


# -- the request --------------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
WEATHER = ToolDefinition(
    name="Weather_current",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _full_stack() -> PromptStack:
    stack = PromptStack(tools=[WEATHER, ToolDefinition(name="Clock_now")])
    stack.add_system_message("You are terse.")
    stack.add_user_message(
        [
            TextBlock(text="What is in this picture, and the weather?"),
            ImageBlock(mime_type="image/png", data=PNG),
            ImageBlock(url="https://example.com/cat.jpg"),
        ]
    )
    ok = ToolAction(tag="toolu_a", name="Weather", path="current", input={"city": "Paris"})
    bad = ToolAction(tag="toolu_b", name="Clock", path="now", input={})
    stack.add_assistant_message(
        [TextBlock(text="Let me check."), ActionCallBlock(action=ok), ActionCallBlock(action=bad)]
    )
    stack.add_message(
        "tool",
        [
            ActionResultBlock(action=ok, text="18 C, sunny"),
            ActionResultBlock(action=bad, text="clock is broken", is_error=True),
        ],
    )
    stack.add_system_message("Answer in English.")
    return stack


def test_request_shape():
    path = DIR / "stream-text.sse"
    with StubServer(reply_for(path)) as server:
        events = collect(AnthropicPromptDriver(MODEL, base_url=server.url, api_key=KEY), _full_stack())
    assert isinstance(events[-1], ModelCompleted)
    assert server.requests[0]["path"] == "/messages"
    assert server.requests[0]["body"] == {
        "model": MODEL,
        "max_tokens": 4096,
        "stream": True,
        "system": "You are terse.\n\nAnswer in English.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_a", "name": "Weather_current", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "Clock_now", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18 C, sunny", "is_error": False},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "clock is broken", "is_error": True},
                ],
            },
        ],
        "tools": [
            {
                "name": "Weather_current",
                "description": "Current weather for a city",
                "input_schema": WEATHER.parameters,
            },
            {"name": "Clock_now", "input_schema": {"type": "object", "properties": {}}},
        ],
    }


ROUND_TRIPS = [
    "stream-text-then-tool-use.sse",
    "stream-thinking.sse",
    "stream-redacted-thinking.sse",
    "stream-server-tool-code-execution.sse",
    "stream-tool-use-fragmented.sse",
]


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_second_turn_sends_the_reply_back(name):
    """The reply (text, tool_use, thinking with signature, redacted thinking, server
    tool blocks) goes back in the next request exactly as the API documents it, and
    the tool results follow in one user message."""
    path = DIR / name
    exp = expected_from(recording_events(path))

    async def main(url):
        stack = user_stack("Go on")
        async with AnthropicPromptDriver(MODEL, base_url=url, api_key=KEY) as driver:
            first = await driver.run(stack)
            stack.messages.append(first.message)
            results = [ActionResultBlock(action=c, text=f"result of {c.tag}") for c in first.tool_calls]
            if results:
                stack.add_message("tool", results)
            stack.add_user_message("and now?")
            await driver.run(stack)
        return first

    with StubServer(reply_for(path), reply_for(DIR / "stream-text.sse")) as server:
        first = asyncio.run(main(server.url))
    assert len(server.requests) == 2
    messages = server.requests[1]["body"]["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "Go on"}]}
    assert messages[1] == {"role": "assistant", "content": exp.wire_blocks()}
    tail = [
        {"type": "tool_result", "tool_use_id": c["id"], "content": f"result of {c['id']}", "is_error": False}
        for c in exp.tool_calls
    ]
    assert messages[2] == {"role": "user", "content": tail + [{"type": "text", "text": "and now?"}]}
    assert len(messages) == 3
    assert [c.tag for c in first.tool_calls] == [c["id"] for c in exp.tool_calls]


def test_roles_alternate_and_system_messages_are_joined():
    stack = PromptStack()
    stack.add_system_message("one")
    stack.add_user_message("a")
    stack.add_system_message("two")
    stack.add_user_message("b")
    stack.add_assistant_message("c")
    stack.add_assistant_message([ReasoningBlock(text="no signature: from another provider"), TextBlock(text="d")])
    stack.add_user_message("")  # empty text blocks are not sent
    stack.add_system_message("three")
    _, body = AnthropicPromptDriver(MODEL, api_key=KEY).build_request(stack)
    assert body["system"] == "one\n\ntwo\n\nthree"
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}]},
    ]


def test_tool_results_come_first_in_their_user_message():
    call = ToolAction(tag="toolu_x", name="Clock", path="now")
    stack = PromptStack()
    stack.add_user_message("time?")
    stack.add_assistant_message(ActionCallBlock(action=call))
    stack.add_user_message("hurry")  # a user remark before the result arrives
    stack.add_message("tool", ActionResultBlock(action=call, text="noon"))
    stack.add_message("tool", ActionResultBlock(action=call.model_copy(update={"tag": "toolu_y"}), text="still noon"))
    _, body = AnthropicPromptDriver(MODEL, api_key=KEY).build_request(stack)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [p["type"] for p in body["messages"][2]["content"]] == ["tool_result", "tool_result", "text"]
    assert [p.get("tool_use_id") for p in body["messages"][2]["content"]] == ["toolu_x", "toolu_y", None]


class City(BaseModel):
    """A city and its country."""

    name: str
    country: str


def test_structured_output_rides_on_a_forced_tool():
    stack = user_stack("Capital of France?")
    stack.tools.append(WEATHER)
    stack.output_schema = City
    with StubServer(reply_for(DIR / "stream-text.sse")) as server:
        events = collect(AnthropicPromptDriver(MODEL, base_url=server.url, api_key=KEY), stack)
    assert isinstance(events[-1], ModelCompleted)
    body = server.requests[0]["body"]
    assert body["tools"][0]["name"] == "Weather_current"
    assert body["tools"][1] == {
        "name": "final_result",
        "description": "A city and its country.",
        "input_schema": City.model_json_schema(),
    }
    # With other tools the model may call them first: any tool, the output one in the end.
    assert body["tool_choice"] == {"type": "any"}
    alone = user_stack("Capital of France?")
    alone.output_schema = City
    _, body = AnthropicPromptDriver(MODEL, api_key=KEY).build_request(alone)
    assert body["tool_choice"] == {"type": "tool", "name": "final_result"}


def test_provider_options_go_into_the_body():
    options = {
        "max_tokens": 1024,
        "temperature": 0.2,
        "top_k": 5,
        "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "metadata": {"user_id": "u1"},
    }
    _, body = AnthropicPromptDriver(MODEL, api_key=KEY, provider_options=options).build_request(user_stack())
    for key, value in options.items():
        assert body[key] == value
    with pytest.raises(ProviderError) as info:
        AnthropicPromptDriver(MODEL, api_key=KEY, provider_options={"max_completion_tokens": 10})
    assert info.value.type == "invalid_request" and "max_tokens" in info.value.message


def _fails_before_sending(stack: PromptStack, **kw: Any) -> ProviderError:
    with StubServer(reply_for(DIR / "stream-text.sse")) as server:

        async def main():
            async with AnthropicPromptDriver(MODEL, base_url=server.url, api_key=KEY, **kw) as driver:
                return [e async for e in driver.stream(stack)]

        with pytest.raises(ProviderError) as info:
            asyncio.run(main())
        assert server.requests == []
    assert info.value.retryable is False
    return info.value


def test_thinking_with_structured_output_fails_before_sending():
    """The API refuses extended thinking with a forced tool_choice, which the tool strategy needs."""
    stack = user_stack()
    stack.output_schema = City
    err = _fails_before_sending(stack, provider_options={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    assert err.type == "unsupported_capability"
    assert "thinking" in err.message and MODEL in err.message


def test_unservable_content_fails_before_sending():
    stack = user_stack()
    stack.messages[0].content.append(AudioBlock(data="AAAA"))
    assert _fails_before_sending(stack).type == "unsupported_capability"
    stack = user_stack()
    stack.output_schema = {"type": "array", "items": {"type": "string"}}
    assert _fails_before_sending(stack).type == "unsupported_capability"


# -- differential: the official SDK on the same bytes ----------------------------------------


@pytest.mark.parametrize("path", STREAMS, ids=[p.name for p in STREAMS])
def test_same_result_as_the_official_sdk(path):
    anthropic = pytest.importorskip("anthropic")

    async def sdk(url):
        client = anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0)
        try:
            async with client.messages.stream(
                model=MODEL, max_tokens=4096, messages=[{"role": "user", "content": "Say something"}]
            ) as s:
                return await s.get_final_message()
        finally:
            await client.close()

    with StubServer(reply_for(path)) as server:
        final = asyncio.run(sdk(server.url))
    _, events = run_stream(reply_for(path))
    ours = events[-1]
    assert isinstance(ours, ModelCompleted)

    assert ours.message.text == "".join(b.text for b in final.content if b.type == "text")
    assert ours.message.reasoning == "".join(b.thinking for b in final.content if b.type == "thinking")
    assert [(b.text, b.signature, b.redacted) for b in ours.message.content if isinstance(b, ReasoningBlock)] == [
        (b.thinking, b.signature, False) if b.type == "thinking" else ("", b.data, True)
        for b in final.content
        if b.type in ("thinking", "redacted_thinking")
    ]
    sdk_calls = [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]
    our_calls = [(c.tag, c.native_name, c.input) for c in ours.tool_calls]
    if ours.stop_reason == "max_tokens" and "partial_tool_calls" in ours.metadata:
        # the SDK keeps a partially parsed input; we report the call as partial instead
        partial = ours.metadata["partial_tool_calls"]
        assert our_calls + [(p["id"], p["name"]) for p in partial] == [
            c if i < len(our_calls) else c[:2] for i, c in enumerate(sdk_calls)
        ]
    else:
        assert our_calls == sdk_calls
    other = [b.to_dict() for b in final.content if b.type not in ("text", "thinking", "redacted_thinking", "tool_use")]
    kept = [b.raw for b in ours.message.content if isinstance(b, (ServerToolCallBlock, ServerToolResultBlock))]
    assert kept == other  # server tool blocks, kept whole as the SDK has them
    sdk_usage = final.usage
    cached = (sdk_usage.cache_read_input_tokens or 0) + (sdk_usage.cache_creation_input_tokens or 0)
    assert (ours.usage.input_tokens, ours.usage.output_tokens) == (
        sdk_usage.input_tokens + cached,
        sdk_usage.output_tokens,
    )
    assert ours.stop_reason.raw == final.stop_reason
    assert ours.stop_reason == DOC_STOP[final.stop_reason]
    assert ours.metadata["request_id"] == final.id
    assert ours.metadata["model"] == final.model
