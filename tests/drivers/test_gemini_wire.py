"""Wire tests for the Gemini driver: recorded `streamGenerateContent?alt=sse` streams served
over real HTTP (tests/support/stub_server.py), recorded error bodies, request shapes.

Every expected value is read from the recording itself, with plain `json.loads` and the
rules of the Gemini API reference written out here, independently of the driver.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, Field

from ipyagent.core import (
    ActionCallBlock,
    ActionResultBlock,
    BlockDelta,
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
from ipyagent.drivers.aggregate import Aggregator as _Aggregator
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver, parse_response, to_gemini_schema

from ..support.recordings import check_shape, collect, sse_events, user_stack
from ..support.stub_server import FIXTURES, Reply, StubServer

DIR = FIXTURES / "gemini"
MODEL = "gemini-2.5-flash"
KEY = "AIzaSyTEST-not-a-real-key-0000"
STREAMS = sorted(DIR.glob("stream-*.sse")) + sorted(DIR.glob("stream-*.chunks.jsonl"))
NONSTREAM = sorted(DIR.glob("nonstream-*.json"))
ERRORS = sorted(p for p in DIR.glob("error-*.json") if not p.name.endswith(".http.json"))

# The Gemini API reference's enums, as this suite reads them (not imported from the driver).
FINISH_TO_KIND = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "RECITATION": "content_filter",
}
STATUS_TO_TYPE = {
    "INVALID_ARGUMENT": "invalid_request",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "CANCELLED": "cancelled",
}


# -- reading a recording without the driver -------------------------------------------


def payloads(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The JSON response objects of a recording, and a trailing bare error object if any."""
    if path.name.endswith(".chunks.jsonl"):
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()], None
    raw = path.read_text(encoding="utf-8")
    chunks = [json.loads(data) for _, data in sse_events(raw)]
    bare = "\n".join(line for line in raw.replace("\r\n", "\n").split("\n") if line and not line.startswith("data:"))
    return chunks, (json.loads(bare)["error"] if bare.strip() else None)


def reply(path: Path, **kw: Any) -> Reply:
    """Raw SSE files as recorded; chunk files wrapped as CRLF-framed `data:` events (the API's framing)."""
    if path.name.endswith(".chunks.jsonl"):
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return Reply(pieces=[f"data: {line}\r\n\r\n".encode() for line in lines], **kw)
    return Reply.sse_file(path, **kw)


def _partial_args(call_parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Arguments of a Vertex streamed call whose partialArgs all use ``$.<name>`` paths."""
    args: dict[str, Any] = {}
    for fc in call_parts:
        for pa in fc.get("partialArgs") or []:
            path = pa["jsonPath"]
            assert path.startswith("$.") and "." not in path[2:] and "[" not in path, path
            args[path[2:]] = args.get(path[2:], "") + pa["stringValue"]
    return args


class Expected:
    """What a recording says, candidate 0 only."""

    def __init__(self, chunks: list[dict[str, Any]], error: dict[str, Any] | None = None) -> None:
        self.text = self.reasoning = ""
        self.parts: list[dict[str, Any]] = []  # candidate 0's parts in order, as recorded
        self.usage = self.finish = self.block_reason = self.response_id = self.model = None
        self.error = error
        for chunk in chunks:
            if "error" in chunk:
                self.error = chunk["error"]
                break
            self.usage = chunk.get("usageMetadata") or self.usage
            self.response_id = chunk.get("responseId") or self.response_id
            self.model = chunk.get("modelVersion") or self.model
            if not chunk.get("candidates"):
                self.block_reason = (chunk.get("promptFeedback") or {}).get("blockReason") or self.block_reason
            for cand in chunk.get("candidates") or []:
                if cand.get("index", 0) != 0:
                    continue
                for part in (cand.get("content") or {}).get("parts") or []:
                    self.parts.append(part)
                    if "text" in part:
                        if part.get("thought"):
                            self.reasoning += part["text"]
                        else:
                            self.text += part["text"]
                self.finish = cand.get("finishReason") or self.finish

    @property
    def calls(self) -> list[dict[str, Any]]:
        """Whole calls: ``{name, args, signature}``; Vertex streamed calls assembled."""
        calls: list[dict[str, Any]] = []
        streamed: list[dict[str, Any]] | None = None
        for part in self.parts:
            fc = part.get("functionCall")
            if fc is None:
                continue
            if fc.get("name"):
                calls.append(
                    {"name": fc["name"], "args": fc.get("args", {}), "signature": part.get("thoughtSignature")}
                )
                streamed = [fc] if fc.get("willContinue") else None
            elif streamed is not None:
                streamed.append(fc)
                if not fc.get("willContinue"):
                    calls[-1]["args"] = _partial_args(streamed)
                    streamed = None
        return calls

    @property
    def text_signatures(self) -> list[str]:
        return [
            p["thoughtSignature"]
            for p in self.parts
            if "text" in p and not p.get("thought") and p.get("thoughtSignature")
        ]

    @property
    def stop_kind(self) -> str:
        if self.finish is None:
            return "content_filter" if self.block_reason else ("tool_use" if self.calls else "end_turn")
        kind = FINISH_TO_KIND[self.finish]
        return "tool_use" if kind == "end_turn" and self.calls else kind

    def model_parts(self) -> list[dict[str, Any]]:
        """The parts of this reply as one `Content` for the next turn, per the API's
        thought-signature rules: streamed text parts joined while no signature
        intervenes, a signature kept on the part it came on (an empty text part
        included), thought parts marked `thought`, each call whole."""
        out: list[dict[str, Any]] = []
        calls = iter(self.calls)
        for part in self.parts:
            fc = part.get("functionCall")
            if fc is not None:
                if fc.get("name"):
                    call = next(calls)
                    item: dict[str, Any] = {"functionCall": {"name": call["name"], "args": call["args"]}}
                    if call["signature"]:
                        item["thoughtSignature"] = call["signature"]
                    out.append(item)
                continue
            text, sig, thought = part["text"], part.get("thoughtSignature"), bool(part.get("thought"))
            last = out[-1] if out else None
            if thought:
                if last is not None and last.get("thought") and not (sig and "thoughtSignature" in last):
                    last["text"] += text
                    if sig:
                        last["thoughtSignature"] = sig
                else:
                    out.append({"text": text, "thought": True, **({"thoughtSignature": sig} if sig else {})})
            elif sig:
                out.append({"text": text, "thoughtSignature": sig})
            elif text:
                if last is not None and "text" in last and not last.get("thought"):
                    last["text"] += text
                else:
                    out.append({"text": text})
        return out


def expected(path: Path) -> Expected:
    chunks, error = payloads(path)
    return Expected(chunks, error)


def _run(path: Path, stack: PromptStack | None = None, **driver_kw: Any):
    with StubServer(reply(path)) as server:
        events = collect(
            GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY, **driver_kw),
            stack or user_stack("Say something"),
        )
    return server, events


def test_fixture_set_is_present():
    names = {p.name for p in STREAMS + NONSTREAM + ERRORS}
    assert len(STREAMS) == 10 and len(NONSTREAM) == 3 and len(ERRORS) == 4
    assert {"stream-error-mid-stream.mock.sse", "stream-vertex-partial-function-call-args-parallel.chunks.jsonl",
            "nonstream-parallel-function-calls.json", "error-429-resource-exhausted-retryinfo.json"} <= names
    # every file of the folder is covered by one of the lists above (sidecars by their body)
    covered = names | {p.name[: -len(".json")] + ".http.json" for p in ERRORS}
    assert {p.name for p in DIR.iterdir()} == covered


# -- recorded streams --------------------------------------------------------------------


@pytest.mark.parametrize("path", STREAMS, ids=[p.name for p in STREAMS])
def test_recorded_stream(path):
    exp = expected(path)
    server, events = _run(path)
    terminal = check_shape(events)
    deltas = events[1:-1]
    assert all(isinstance(d, (TextDelta, ReasoningDelta, ToolCallDelta, BlockDelta)) for d in deltas)
    # whole blocks are only the signature carriers of text parts, nothing to show
    assert all(isinstance(d.block, ReasoningBlock) and not d.block.text for d in deltas if isinstance(d, BlockDelta))

    # the request: path with ?alt=sse, key in the header and nowhere in the URL
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == f"/models/{MODEL}:streamGenerateContent?alt=sse"
    assert KEY not in req["path"] and "key=" not in req["path"]
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["x-goog-api-key"] == KEY
    assert "authorization" not in headers
    assert req["body"] == {"contents": [{"role": "user", "parts": [{"text": "Say something"}]}]}

    streamed_text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    streamed_reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    assert streamed_text == exp.text
    assert streamed_reasoning == exp.reasoning

    if exp.error is not None:
        assert isinstance(terminal, ModelFailed)
        assert terminal.error.type == STATUS_TO_TYPE[exp.error["status"]]
        assert exp.error["message"] in terminal.error.message
        assert terminal.error.raw == exp.error
        assert terminal.error.retryable is False
        assert exp.text, "an error recording should carry output before the error"
        assert terminal.partial.text == terminal.partial_text == exp.text
        assert terminal.partial.status == "failed"
        return

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    assert msg.text == exp.text and msg.reasoning == exp.reasoning

    # tool calls: whole args per call, each its own content index, ids unique, signatures on the call
    calls = exp.calls
    assert [c.native_name for c in terminal.tool_calls] == [c["name"] for c in calls]
    assert [c.input for c in terminal.tool_calls] == [c["args"] for c in calls]
    tags = [c.tag for c in terminal.tool_calls]
    assert len(set(tags)) == len(tags) and all(tags)
    blocks = [b for b in msg.content if isinstance(b, ActionCallBlock)]
    assert [b.signature for b in blocks] == [c["signature"] for c in calls]
    assert [json.loads(b.raw_arguments) for b in blocks] == [c["args"] for c in calls]
    by_index: dict[int, list[ToolCallDelta]] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            by_index.setdefault(d.index, []).append(d)
    assert len(by_index) == len(calls)
    assert [json.loads("".join(d.arguments for d in ds)) for ds in by_index.values()] == [c["args"] for c in calls]
    assert [next(d.call_id for d in ds if d.call_id) for ds in by_index.values()] == tags

    # signatures that came on text parts are kept (signature-only reasoning blocks)
    carriers = [b.signature for b in msg.content if isinstance(b, ReasoningBlock) and not b.text]
    assert carriers == exp.text_signatures

    # usage: the last usageMetadata
    if exp.usage is None:
        assert (terminal.usage.input_tokens, terminal.usage.output_tokens) == (0, 0)
    else:
        assert terminal.usage.input_tokens == exp.usage.get("promptTokenCount", 0)
        assert terminal.usage.output_tokens == exp.usage.get("candidatesTokenCount", 0)
        assert terminal.usage.total_tokens == exp.usage["totalTokenCount"]
        assert terminal.usage.reasoning_tokens == exp.usage.get("thoughtsTokenCount", 0)
        assert terminal.usage.cache_read_tokens == exp.usage.get("cachedContentTokenCount", 0)
        assert terminal.usage.raw == exp.usage
    assert msg.usage == terminal.usage

    assert terminal.stop_reason == exp.stop_kind
    assert terminal.stop_reason.raw == (exp.finish or exp.block_reason)
    assert terminal.metadata["request_id"] == exp.response_id
    assert terminal.metadata["model"] == (exp.model or MODEL)
    assert terminal.metadata["attempts"] == 1


def test_prompt_blocked_is_a_content_filter_stop():
    path = DIR / "stream-prompt-blocked-safety.mock.sse"
    exp = expected(path)
    assert exp.block_reason and not exp.parts
    _, events = _run(path)
    terminal = events[-1]
    assert isinstance(terminal, ModelCompleted)
    assert terminal.message.content == []
    assert terminal.stop_reason == "content_filter"
    assert terminal.stop_reason.raw == exp.block_reason


def test_stream_split_anywhere_parses_the_same():
    """CRLF framing cut at every 7th byte (a CR and its LF in different chunks)."""
    path = DIR / "stream-text.sse"
    raw = path.read_bytes()
    assert b"\r\n\r\n" in raw
    cuts = sorted(set(range(0, len(raw), 7)) | {i + 1 for i, byte in enumerate(raw) if byte == 13})
    pieces = [raw[a:b] for a, b in zip(cuts, cuts[1:] + [len(raw)]) if raw[a:b]]
    assert b"".join(pieces) == raw and any(p.endswith(b"\r") for p in pieces)
    exp = expected(path)
    with StubServer(Reply(pieces=pieces)) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.message.text == exp.text
    assert terminal.usage.raw == exp.usage


def test_in_stream_error_as_data_event():
    """The same error object sent as a `data:` payload is raised too, text kept."""
    path = DIR / "stream-error-mid-stream.mock.sse"
    chunks, error = payloads(path)
    pieces = [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks] + [
        f"data: {json.dumps({'error': error})}\r\n\r\n".encode()
    ]
    with StubServer(Reply(pieces=pieces)) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert error["message"] in terminal.error.message
    assert terminal.error.type == STATUS_TO_TYPE[error["status"]]
    assert terminal.partial.text == Expected(chunks).text


# -- the next turn: signatures back on the same parts -----------------------------------

ROUND_TRIP = [p for p in STREAMS if expected(p).error is None and expected(p).parts]


@pytest.mark.parametrize("path", ROUND_TRIP, ids=[p.name for p in ROUND_TRIP])
def test_reply_goes_back_unchanged_next_turn(path):
    exp = expected(path)
    _, events = _run(path)
    first = events[-1]
    assert isinstance(first, ModelCompleted)

    stack = user_stack("Say something")
    stack.add_message("assistant", first.message)
    results = [
        ActionResultBlock(action=call, text=f"result {n}", is_error=n == 1)
        for n, call in enumerate(first.tool_calls)
    ]
    if results:
        stack.add_message("tool", results)
    else:
        stack.add_user_message("And then?")
    with StubServer(reply(DIR / "stream-text.sse")) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY), stack)
    assert isinstance(events[-1], ModelCompleted)
    contents = server.requests[0]["body"]["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": "Say something"}]}
    assert contents[1] == {"role": "model", "parts": exp.model_parts()}
    # every signature of the recording is sent back, once
    sent = [p["thoughtSignature"] for p in contents[1]["parts"] if "thoughtSignature" in p]
    assert sent == [p["thoughtSignature"] for p in exp.parts if p.get("thoughtSignature")]
    if results:
        assert contents[2] == {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": c["name"], "response": {"error" if n == 1 else "result": f"result {n}"}}}
                for n, c in enumerate(exp.calls)
            ],
        }
    else:
        assert contents[2] == {"role": "user", "parts": [{"text": "And then?"}]}
    assert len(contents) == 3


# -- non-streaming bodies: through the same parser ---------------------------------------


@pytest.mark.parametrize("path", NONSTREAM, ids=[p.name for p in NONSTREAM])
def test_nonstream_body_through_the_stream_parser(path):
    body = json.loads(path.read_text())
    exp = Expected([body])
    deltas, meta = parse_response(body)
    agg = _Aggregator()
    for d in deltas:
        agg.add(d)
    msg = agg.message()
    assert msg.text == exp.text and msg.reasoning == exp.reasoning
    calls = exp.calls
    assert [c.native_name for c in msg.tool_calls] == [c["name"] for c in calls]
    assert [c.input for c in msg.tool_calls] == [c["args"] for c in calls]
    call_deltas = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert (
        len({d.index for d in call_deltas}) == len(call_deltas) == len(calls)
    )  # parallel calls: one delta, one index each
    assert [json.loads(d.arguments) for d in call_deltas] == [c["args"] for c in calls]
    assert [d.signature for d in call_deltas] == [c["signature"] for c in calls]
    assert len({d.call_id for d in call_deltas}) == len(calls)
    if exp.usage:
        assert (
            meta.usage.input_tokens,
            meta.usage.output_tokens,
            meta.usage.total_tokens,
            meta.usage.reasoning_tokens,
        ) == (
            exp.usage["promptTokenCount"],
            exp.usage["candidatesTokenCount"],
            exp.usage["totalTokenCount"],
            exp.usage.get("thoughtsTokenCount", 0),
        )
    else:
        assert meta.usage is None
    assert meta.stop_raw == exp.finish
    assert meta.stop_kind.value == exp.stop_kind
    assert meta.request_id == exp.response_id
    if "structured" in path.name:
        assert isinstance(json.loads(msg.text), list)  # the text is the JSON document


def test_parallel_calls_second_turn_keeps_the_one_signature():
    body = json.loads((DIR / "nonstream-parallel-function-calls.json").read_text())
    exp = Expected([body])
    assert [c["signature"] is not None for c in exp.calls] == [True, False]
    deltas, _ = parse_response(body)
    agg = _Aggregator()
    for d in deltas:
        agg.add(d)
    stack = user_stack("weather and a language?")
    stack.add_message("assistant", agg.message())
    _, sent = GeminiPromptDriver(MODEL, api_key=KEY).build_request(stack)
    assert sent["contents"][1] == {"role": "model", "parts": exp.model_parts()}


# -- errors ----------------------------------------------------------------------------


def _sidecar(body: Path) -> Path:
    return body.with_name(body.name[: -len(".json")] + ".http.json")


def _expected_type(error: dict[str, Any]) -> str:
    reasons = [d.get("reason") for d in error.get("details", []) if d.get("@type", "").endswith("ErrorInfo")]
    return "authentication" if "API_KEY_INVALID" in reasons else STATUS_TO_TYPE[error["status"]]


def _retry_info(error: dict[str, Any]) -> float | None:
    for d in error.get("details", []):
        if d.get("@type", "").endswith("RetryInfo"):
            assert d["retryDelay"].endswith("s")
            return float(d["retryDelay"][:-1])
    return None


@pytest.mark.parametrize("body", ERRORS, ids=[p.name for p in ERRORS])
def test_recorded_http_error(body):
    error = json.loads(body.read_text())["error"]
    status = json.loads(_sidecar(body).read_text())["status"]
    with StubServer(Reply.error_file(body, _sidecar(body))) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY, max_attempts=1))
    terminal = check_shape(events)
    assert len(events) == 2 and isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.status == status == error["code"]
    assert err.type == _expected_type(error)
    assert (
        " ".join(line.strip() for line in error["message"].splitlines() if line.strip()) in err.message
    )  # on one line
    assert "\n" not in err.message and err.raw == {"error": error}  # the body as sent
    assert err.retryable is (err.type in ("rate_limit", "overloaded", "server"))
    assert err.retry_after == _retry_info(error)
    assert len(server.requests) == 1
    if err.type == "authentication":
        assert status == 400  # Gemini reports a bad key as 400 INVALID_ARGUMENT
        assert err.code == "API_KEY_INVALID"


def test_retry_delay_in_the_body_is_honoured_then_success(no_sleep):
    body = DIR / "error-429-resource-exhausted-retryinfo.json"
    assert "retry-after" not in {k.lower() for k in json.loads(_sidecar(body).read_text())["headers"]}
    data = json.loads(body.read_text())
    wait = _retry_info(data["error"])  # the recorded 48 s, recorded instead of slept (`no_sleep`)
    error = Reply(status=429, headers={"Content-Type": "application/json"}, pieces=[json.dumps(data).encode()])
    text = DIR / "stream-text.sse"
    with StubServer(error, reply(text)) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY, max_retry_wait=60))
    assert len(server.requests) == 2
    assert no_sleep == [wait]  # the body's RetryInfo, not the backoff's own first wait (0.5-1.0 s)
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.metadata["retry_waits"] == [wait]
    assert terminal.message.text == expected(text).text


def test_retry_after_header_wins_over_the_body():
    body = DIR / "error-429-resource-exhausted-retryinfo.json"
    error = Reply(
        status=429, headers={"Content-Type": "application/json", "Retry-After-Ms": "100"}, pieces=[body.read_bytes()]
    )
    with StubServer(error, reply(DIR / "stream-text.sse")) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY))
    assert isinstance(events[-1], ModelCompleted)
    assert events[-1].metadata["retry_waits"] == [0.1]


@pytest.mark.parametrize(
    "status,code,etype",
    [(503, "UNAVAILABLE", "overloaded"), (500, "INTERNAL", "server"), (401, "UNAUTHENTICATED", "authentication")],
)
def test_status_strings(status, code, etype):
    data = {"error": {"code": status, "message": f"something {code.lower()}", "status": code}}
    err = GeminiPromptDriver(MODEL, api_key=KEY).error_from_response(
        status, httpx2.Headers(), json.dumps(data).encode()
    )
    assert (err.type, err.code, err.status) == (etype, code, status)
    assert data["error"]["message"] in err.message


def test_api_key_is_redacted_from_error_text():
    data = {"error": {"code": 400, "message": f"API key not valid: {KEY}", "status": "INVALID_ARGUMENT"}}
    with StubServer(
        Reply(status=400, headers={"Content-Type": "application/json"}, pieces=[json.dumps(data).encode()])
    ) as server:
        events = collect(GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY))
    assert KEY not in events[-1].error.message and "API key not valid" in events[-1].error.message


# -- request shape ---------------------------------------------------------------------


class Unit(BaseModel):
    name: str = Field(title="Unit name", default="celsius")


class WeatherArgs(BaseModel):
    """Weather query."""

    city: str = Field(description="City name")
    days: int | None = None
    unit: Unit


def _full_stack() -> PromptStack:
    stack = PromptStack()
    stack.tools.append(
        ToolDefinition(name="Weather_get", description="Get the weather", parameters=WeatherArgs.model_json_schema())
    )
    stack.tools.append(ToolDefinition(name="Clock_now", description="The time"))
    stack.add_system_message("be brief")
    stack.add_system_message("answer in French")
    stack.add_user_message([
        TextBlock(text="What is in this picture, and the weather in Paris?"),
        ImageBlock(mime_type="image/png", data="iVBORw0KGgo="),
        ImageBlock(mime_type="image/jpeg", url="https://example.com/cat.jpg"),
    ])
    call = ToolAction(
        tag="call_0_resp1", name="Weather", path="get", input={"city": "Paris", "unit": {"name": "celsius"}}
    )
    clock = ToolAction(tag="abc-123", name="Clock", path="now", input={})
    stack.add_assistant_message([
        TextBlock(text="A cat. Let me check."),
        ActionCallBlock(action=call, signature="c2lnLTE="),
        ActionCallBlock(action=clock),
    ])
    stack.add_message("tool", [
        ActionResultBlock(action=call.model_copy(update={"output": "sunny"}), text="sunny, 21 C"),
        ActionResultBlock(action=clock.model_copy(update={"output": "boom"}), text="clock broken", is_error=True),
    ])
    return stack


def _walk_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in _walk_keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _walk_keys(v)}
    return set()


def test_request_shape_with_tools_images_and_tool_history():
    stack = _full_stack()
    with StubServer(reply(DIR / "stream-function-call.sse")) as server:
        events = collect(
            GeminiPromptDriver(MODEL, base_url=server.url, api_key=KEY, provider_options={"temperature": 0.1}), stack
        )
    assert isinstance(events[-1], ModelCompleted)
    body = server.requests[0]["body"]
    assert body["systemInstruction"] == {"parts": [{"text": "be brief\n\nanswer in French"}]}
    assert body["generationConfig"] == {"temperature": 0.1}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is in this picture, and the weather in Paris?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"fileUri": "https://example.com/cat.jpg", "mimeType": "image/jpeg"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "A cat. Let me check."},
                # a made-up id stays home; Gemini's own (or another provider's) goes back
                {
                    "functionCall": {"name": "Weather_get", "args": {"city": "Paris", "unit": {"name": "celsius"}}},
                    "thoughtSignature": "c2lnLTE=",
                },
                {"functionCall": {"name": "Clock_now", "args": {}, "id": "abc-123"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "Weather_get", "response": {"result": "sunny, 21 C"}}},
                {"functionResponse": {"name": "Clock_now", "response": {"error": "clock broken"}, "id": "abc-123"}},
            ],
        },
    ]
    tools = body["tools"]
    assert len(tools) == 1 and list(tools[0]) == ["functionDeclarations"]
    weather, clock = tools[0]["functionDeclarations"]
    assert clock == {"name": "Clock_now", "description": "The time"}  # no parameters for an argument-less function
    assert weather["name"] == "Weather_get" and weather["description"] == "Get the weather"
    params = weather["parameters"]
    assert not _walk_keys(params) & {"additionalProperties", "$defs", "$ref", "title", "default"}
    assert params["type"] == "object" and params["required"] == ["city", "unit"]
    assert params["properties"]["city"] == {"type": "string", "description": "City name"}
    assert params["properties"]["days"] == {"type": "integer", "nullable": True}
    assert params["properties"]["unit"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
    }  # $ref inlined


def test_schema_dialect():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tags": {"type": "array", "items": {"type": ["string", "null"], "format": "email"}, "uniqueItems": True},
            "when": {"type": "string", "format": "date-time", "examples": ["2024-01-01T00:00:00Z"]},
            "kind": {"const": "a"},
            "shape": {
                "oneOf": [{"$ref": "#/$defs/Circle"}, {"type": "object", "properties": {"side": {"type": "number"}}}]
            },
            "node": {"$ref": "#/$defs/Node"},
        },
        "required": ["tags", "missing"],
        "$defs": {
            "Circle": {
                "title": "Circle",
                "type": "object",
                "properties": {"r": {"type": "number", "exclusiveMinimum": 0}},
            },
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
        },
    }
    out = to_gemini_schema(schema)
    assert out["required"] == ["tags"]
    assert out["properties"]["tags"] == {"type": "array", "items": {"type": "string", "nullable": True}}
    assert out["properties"]["when"] == {"type": "string", "format": "date-time"}
    assert out["properties"]["kind"] == {"type": "string", "enum": ["a"]}
    assert out["properties"]["shape"] == {"anyOf": [
        {"type": "object", "properties": {"r": {"type": "number"}}},
        {"type": "object", "properties": {"side": {"type": "number"}}},
    ]}
    # a recursive reference stops at one level
    assert out["properties"]["node"] == {"type": "object", "properties": {"child": {"type": "object"}}}
    assert not _walk_keys(out) & {
        "additionalProperties",
        "$defs",
        "$ref",
        "$schema",
        "title",
        "uniqueItems",
        "examples",
        "oneOf",
        "const",
    }
    assert "additionalProperties" in schema and "$defs" in schema  # the caller's schema is not modified


def test_structured_output_native_and_options():
    stack = user_stack()
    stack.output_schema = WeatherArgs
    driver = GeminiPromptDriver(
        MODEL,
        api_key=KEY,
        provider_options={
            "maxOutputTokens": 64,
            "thinkingConfig": {"thinkingBudget": 0},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        },
    )
    path, body = driver.build_request(stack)
    assert path == f"/models/{MODEL}:streamGenerateContent?alt=sse"
    assert body["generationConfig"] == {
        "maxOutputTokens": 64,
        "thinkingConfig": {"thinkingBudget": 0},
        "responseMimeType": "application/json",
        "responseJsonSchema": WeatherArgs.model_json_schema(),
    }
    assert body["safetySettings"] == driver.provider_options["safetySettings"]
    assert body["toolConfig"] == driver.provider_options["toolConfig"]


def test_structured_output_stream_parses_as_the_schema():
    path = DIR / "stream-structured-output-json.sse"
    exp = expected(path)

    class City(BaseModel):
        city: str
        country: str

    stack = user_stack("Where?")
    stack.output_schema = City
    server, events = _run(path, stack)
    assert server.requests[0]["body"]["generationConfig"]["responseJsonSchema"] == City.model_json_schema()
    assert City.model_validate_json(events[-1].message.text) == City.model_validate_json(exp.text)


def test_unknown_option_is_rejected():
    with pytest.raises(ProviderError) as info:
        GeminiPromptDriver(MODEL, api_key=KEY, provider_options={"max_tokens": 5})
    assert info.value.type == "invalid_request" and "maxOutputTokens" in info.value.message


def test_model_resource_name_and_default_base_url():
    driver = GeminiPromptDriver("models/gemini-2.5-pro", api_key=KEY)
    assert driver.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert driver.build_request(user_stack())[0] == "/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    assert driver.capabilities_for(MODEL).structured_output_native and driver.capabilities_for(MODEL).vision


# -- capabilities ----------------------------------------------------------------------


@pytest.mark.parametrize("what", ["tools", "output_schema"])
def test_gemma_cannot_take_tools_or_a_schema_and_nothing_is_sent(what):
    stack = user_stack()
    if what == "tools":
        stack.tools.append(ToolDefinition(name="Clock_now"))
    else:
        # Gemma has no JSON mode: asked for natively it fails (its default strategy is "rule").
        stack.output_schema, stack.output_strategy = WeatherArgs, "native"

    async def main(url):
        async with GeminiPromptDriver("gemma-3-27b-it", base_url=url, api_key=KEY) as d:
            return [e async for e in d.stream(stack)]

    with StubServer(reply(DIR / "stream-text.sse")) as server:
        with pytest.raises(ProviderError) as info:
            asyncio.run(main(server.url))
        assert server.requests == []
    assert info.value.type == "unsupported_capability"
    assert "gemma-3-27b-it" in info.value.message


def test_reasoning_signature_roundtrip_on_thought_parts():
    """A thought part's own signature goes back on the thought part (built by hand: no recording has one)."""
    msg = Message(role="assistant", content=[ReasoningBlock(text="hmm", signature="c2ln"), TextBlock(text="ok")])
    stack = user_stack()
    stack.add_message("assistant", msg)
    _, body = GeminiPromptDriver(MODEL, api_key=KEY).build_request(stack)
    assert body["contents"][1]["parts"] == [
        {"text": "hmm", "thought": True, "thoughtSignature": "c2ln"},
        {"text": "ok"},
    ]
