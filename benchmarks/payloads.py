"""The prepared streams of the decode benchmark, stretched from real recordings.

Each keeps the head and tail events of a recording in ``shared/fixtures/providers``
as they are, and repeats its delta event with the recorded text pieces in turn,
so the bytes have the provider's real shape and size per event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from common import FIXTURES


@dataclass
class Payload:
    """`body`: the bytes served; `protocol`: ``openai`` or ``anthropic``; `text` / `arguments`:
    the final message a correct client must end with."""

    name: str
    protocol: str
    body: bytes
    deltas: int
    text: str = ""
    arguments: dict[str, Any] | None = None


def _sse_data(path: str) -> list[Any]:
    """The JSON payloads (or ``[DONE]``) of a recorded SSE file, in order."""
    out: list[Any] = []
    for line in (FIXTURES / path).read_text().splitlines():
        if line.startswith("data: "):
            data = line[6:].strip()
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _data_line(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()


def _pieces() -> list[str]:
    """The content pieces of the recorded OpenAI text stream (tokens as the API sends them)."""
    return [c["choices"][0]["delta"]["content"] for c in _sse_data("openai-chat/stream-text-include-usage.sse")
            if isinstance(c, dict) and c.get("choices") and c["choices"][0]["delta"].get("content")]


def openai_text(n: int) -> Payload:
    """Chat Completions text stream of `n` content chunks (``stream-text-include-usage.sse``)."""
    recorded = _sse_data("openai-chat/stream-text-include-usage.sse")
    head, template = recorded[0], recorded[1]
    finish, usage = recorded[-3], recorded[-2]
    pieces = _pieces()
    texts = [pieces[i % len(pieces)] for i in range(n)]
    chunks = [_data_line(head)]
    for text in texts:
        template["choices"][0]["delta"] = {"content": text}
        chunks.append(_data_line(template))
    usage = {
        **usage,
        "usage": {**usage["usage"], "completion_tokens": n, "total_tokens": usage["usage"]["prompt_tokens"] + n},
    }
    chunks += [_data_line(finish), _data_line(usage), b"data: [DONE]\n\n"]
    return Payload(f"openai-text-{n}", "openai", b"".join(chunks), n, text="".join(texts))


def openai_tool(n: int) -> Payload:
    """One tool call whose arguments arrive in `n` fragments (``stream-tool-call-long-args-many-fragments.sse``)."""
    recorded = _sse_data("openai-chat/stream-tool-call-long-args-many-fragments.sse")
    head, template = recorded[0], recorded[1]
    finish, usage = recorded[-3], recorded[-2]
    pieces = _pieces()
    arguments = {"answers": [{"n": i, "text": "".join(pieces[j % len(pieces)] for j in range(i, i + 6)).strip()}
                             for i in range(n // 5)]}
    raw = json.dumps(arguments)
    size = len(raw) / n
    fragments = [raw[round(i * size):round((i + 1) * size)] for i in range(n)]
    chunks = [_data_line(head)]
    for fragment in fragments:
        template["choices"][0]["delta"] = {"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}
        chunks.append(_data_line(template))
    chunks += [_data_line(finish), _data_line(usage), b"data: [DONE]\n\n"]
    return Payload(f"openai-tool-{n}", "openai", b"".join(chunks), n, arguments=arguments)


def anthropic_text(n: int) -> Payload:
    """Messages text stream of `n` ``text_delta`` events (``anthropic/stream-text.sse``)."""
    events: list[tuple[str, Any]] = []
    name = None
    for line in (FIXTURES / "anthropic" / "stream-text.sse").read_text().splitlines():
        if line.startswith("event: "):
            name = line[7:].strip()
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    pieces = _pieces()
    texts = [pieces[i % len(pieces)] for i in range(n)]
    deltas = [i for i, (kind, _) in enumerate(events) if kind == "content_block_delta"]
    template = events[deltas[0]][1]
    out = [_data_line(data, kind) for kind, data in events[:deltas[0]]]
    for text in texts:
        template["delta"] = {"type": "text_delta", "text": text}
        out.append(_data_line(template, "content_block_delta"))
    for kind, data in events[deltas[-1] + 1:]:
        if kind == "message_delta":
            data = {**data, "usage": {**data["usage"], "output_tokens": n}}
        out.append(_data_line(data, kind))
    return Payload(f"anthropic-text-{n}", "anthropic", b"".join(out), n, text="".join(texts))


def all_payloads(quick: bool) -> list[Payload]:
    """The four streams of the benchmark (tiny ones with `quick`)."""
    if quick:
        return [openai_text(50), openai_text(200), openai_tool(40), anthropic_text(50)]
    return [openai_text(5_000), openai_text(20_000), openai_tool(2_000), anthropic_text(5_000)]
