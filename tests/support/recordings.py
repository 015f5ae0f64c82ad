"""Test helpers: read a recorded OpenAI-style stream independently of the driver, and
run a driver to completion.

The expected values of the wire tests come from here, computed from the recording
itself with plain `json.loads`, so no test types in what a recording says.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipyagent.core import ModelCompleted, ModelFailed, ModelStarted, PromptStack

from .stub_server import FIXTURES, Reply

#: finish_reason -> StopKind value, as the Chat Completions reference defines them.
FINISH_TO_KIND = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "content_filter",
}

#: HTTP status -> ProviderError.type (DESIGN.md "ProviderError").
STATUS_TO_TYPE = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    429: "rate_limit",
}


def status_type(status: int) -> str:
    return "server" if status >= 500 else STATUS_TO_TYPE[status]


def sse_events(raw: str) -> list[tuple[str | None, str]]:
    """(event name, data) for each event of a raw SSE body (comments skipped, CRLF ok)."""
    raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    events = []
    for block in raw.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
        if data:
            events.append((name, "\n".join(data)))
    return events


def recording_events(path: Path) -> list[tuple[str | None, str]]:
    if path.name.endswith(".chunks.jsonl"):
        return [(None, line) for line in path.read_text().splitlines() if line.strip()]
    return sse_events(path.read_text(encoding="utf-8"))


def reply_for(path: Path, **kw: Any) -> Reply:
    if path.name.endswith(".chunks.jsonl"):
        return Reply.chunks_file(path, **kw)
    return Reply.sse_file(path, **kw)


@dataclass
class Expected:
    """What a recorded Chat Completions stream says, read without the driver."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)  # wire index -> id/name/arguments
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    error: dict[str, Any] | None = None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """In order of first appearance, arguments parsed (empty -> {})."""
        return [
            {
                "id": c["id"],
                "name": c["name"],
                "input": json.loads(c["arguments"]) if c["arguments"].strip() else {},
                "raw": c["arguments"],
            }
            for c in self.calls.values()
        ]

    @property
    def stop_kind(self) -> str:
        if self.finish_reason is None:
            return "tool_use" if self.calls else "end_turn"
        return FINISH_TO_KIND[self.finish_reason]


def expected_from(path: Path) -> Expected:
    exp = Expected()
    for name, data in recording_events(path):
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if name == "error":
            exp.error = chunk.get("error", chunk)
            break
        usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage")
        if usage:  # an error chunk may carry the usage billed so far (OpenRouter)
            exp.usage = usage
        if chunk.get("error"):
            exp.error = chunk["error"]
            break
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            exp.reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            exp.text += (delta.get("content") or "") + (delta.get("refusal") or "")
            for call in delta.get("tool_calls") or []:
                slot = exp.calls.setdefault(call.get("index", 0), {"id": "", "name": "", "arguments": ""})
                fn = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                exp.finish_reason = choice["finish_reason"]
    return exp


def stream_files() -> list[Path]:
    files = []
    for folder in ("openai-chat", "openai-compatible"):
        d = FIXTURES / folder
        files += sorted(d.glob("*.sse")) + sorted(d.glob("*.chunks.jsonl"))
    return files


def error_body_files() -> list[Path]:
    files = []
    for folder in ("openai-chat", "openai-compatible"):
        d = FIXTURES / folder
        found = set(d.glob("error-*.json")) | set(d.glob("*-error-*.json"))
        files += sorted(p for p in found if not p.name.endswith(".http.json"))
    return files


def user_stack(text: str = "Hello") -> PromptStack:
    stack = PromptStack()
    stack.add_user_message(text)
    return stack


async def collect_async(driver: Any, stack: PromptStack) -> list[Any]:
    try:
        return [event async for event in driver.stream(stack)]
    finally:
        await driver.close()


def collect(driver: Any, stack: PromptStack | None = None) -> list[Any]:
    """All events of one `driver.stream()`, then close the driver."""
    return asyncio.run(collect_async(driver, stack or user_stack()))


def check_shape(events: list[Any]) -> Any:
    """ModelStarted, deltas..., exactly one terminal event; returns the terminal event."""
    assert isinstance(events[0], ModelStarted)
    terminal = [e for e in events if isinstance(e, (ModelCompleted, ModelFailed))]
    assert len(terminal) == 1 and events[-1] is terminal[0]
    assert not any(isinstance(e, ModelStarted) for e in events[1:])
    return terminal[0]


def decode_body(
    driver: Any, body: str | bytes, content_type: str | None = "text/event-stream"
) -> tuple[list[Any], Any]:
    """(the deltas, the stream's facts: a `StreamMeta`) that `driver`'s decoder reads in one 2xx
    reply's `body`, cut into frames as the driver's base cuts it (`frames`); an error raises."""
    import httpx2

    headers = {"content-type": content_type} if content_type else {}
    response = httpx2.Response(200, headers=headers, content=body.encode() if isinstance(body, str) else body,
                               request=httpx2.Request("POST", "http://h/v1"))
    decoder = driver.decoder()

    async def main() -> list[Any]:
        deltas: list[Any] = []
        async for frame in driver.frames(response):
            deltas.extend(decoder.feed(frame))
            if decoder.done:
                break
        return deltas + list(decoder.finish())

    return asyncio.run(main()), decoder.meta
