"""Replies a local server sends: each protocol's recorded text stream, an OpenAI Chat stream of
tool calls, and a reply that reflects the request's key back (for the redaction tests)."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from .stub_server import FIXTURES, Reply

#: The recorded tool-call stream `tool_call_reply` takes its chunk shape from.
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)

REPLIES = {
    "openai": lambda: Reply.sse_file(FIXTURES / "openai-chat" / "stream-text-include-usage.sse"),
    "openai-responses": lambda: Reply.sse_file(FIXTURES / "openai-responses" / "stream-text.sse"),
    "anthropic": lambda: Reply.sse_file(FIXTURES / "anthropic" / "stream-text.sse"),
    "gemini": lambda: Reply.sse_file(FIXTURES / "gemini" / "stream-text.sse"),
    "ollama": lambda: Reply(
        headers={"Content-Type": "application/x-ndjson"},
        pieces=[
            line + b"\n"
            for line in (FIXTURES / "ollama" / "chat-stream-text.ndjson").read_bytes().splitlines()
            if line.strip()
        ],
    ),
}


#: A model of each protocol that takes every setting its protocol has.
MODELS = {"openai": "gpt-oss-20b", "openai-responses": "gpt-oss-20b", "anthropic": "claude-sonnet-4-5",
          "gemini": "gemini-2.5-flash", "ollama": "qwen3"}


#: Providers served by another provider's protocol.
PROTOCOLS = {"mistral": "openai", "deepseek": "openai", "openrouter": "openai", "groq": "openai"}


def tool_call_reply(calls: list[tuple[str, str, dict[str, Any]]]) -> Reply:
    """An OpenAI Chat stream making `calls` (id, name, arguments), shaped like the recorded
    tool-call stream (its first chunk is the template)."""
    recorded = TOOL_CALL.read_text()
    first = json.loads(next(line[6:] for line in recorded.splitlines() if line.startswith("data: {")))
    base = {k: v for k, v in first.items() if k not in ("choices", "usage")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return (
            b"data: "
            + json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode()
            + b"\n\n"
        )

    pieces = [chunk({"role": "assistant", "content": None})]
    for i, (call_id, name, arguments) in enumerate(calls):
        text = json.dumps(arguments)
        pieces.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                    ]
                }
            )
        )
        pieces += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": text[j : j + 7]}}]})
            for j in range(0, len(text), 7)
        ]
    pieces.append(chunk({}, "tool_calls"))
    return Reply(pieces=pieces + [b"data: [DONE]\n\n"])


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    data = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def reflect(request: dict) -> Reply:
    """Echo the Authorization header (and its base64, and the URL-encoded secret in it) back:
    as an error body for model ``err``; else in text split into small deltas, plus a tool call
    carrying it on the first turn."""
    header = request["headers"].get("Authorization", "")
    secret = header.split(" ", 1)[-1]
    echo = (f"header {header} b64 {base64.b64encode(header.encode()).decode()} "
            f"b64-secret {base64.b64encode(secret.encode()).decode()} url {quote(secret, safe='')} end")
    if request["body"]["model"] == "err":
        body = json.dumps({"error": {"message": f"bad credentials: {echo}", "type": "invalid_request_error"}})
        return Reply(status=400, headers={"Content-Type": "application/json"}, pieces=[body.encode()])
    pieces = [chat_chunk({"role": "assistant", "content": ""})]
    pieces += [chat_chunk({"content": echo[i:i + 5]}) for i in range(0, len(echo), 5)]
    if not any(m.get("role") == "tool" for m in request["body"]["messages"]):
        call = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "echo", "arguments": json.dumps({"text": echo})},
        }
        pieces += [chat_chunk({"tool_calls": [call]}), chat_chunk({}, "tool_calls")]
    else:
        pieces.append(chat_chunk({}, "stop"))
    return Reply(pieces=pieces + [b"data: [DONE]\n\n"])
