"""Every shipped cassette is in the exact wire format (issue 11): each streamed event of the
notebooks' cassettes validates against the official SDK's own event model (openai for Chat
Completions and Responses, anthropic for Messages), as installed by the test extras.

Gemini and Ollama have no SDK among the test extras; their cassettes are checked by replaying
them through the drivers (the notebook tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = sorted((ROOT / "notebooks").glob("*.cassette.jsonl"))


def _events(body: str) -> list[dict]:
    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in block.splitlines() if line.startswith("data:")]
        if data and data[0] != "[DONE]":
            events.append(json.loads("\n".join(data)))
    return events


def _validator(provider: str, url: str):
    from pydantic import TypeAdapter

    if provider == "anthropic":
        from anthropic.types import RawMessageStreamEvent

        union = TypeAdapter(RawMessageStreamEvent)
        # `ping` is part of the wire protocol but not of the SDK's event union (the SDK skips it).
        return lambda e: e == {"type": "ping"} or union.validate_python(e)
    if url.endswith("/responses"):
        from openai.types.responses import ResponseStreamEvent

        return TypeAdapter(ResponseStreamEvent).validate_python
    if url.endswith("/chat/completions"):
        from openai.types.chat import ChatCompletionChunk

        return ChatCompletionChunk.model_validate
    return None


def test_the_shipped_cassettes_are_covered():
    providers = {
        json.loads(line)["provider"] for path in CASSETTES for line in path.read_text().splitlines() if line.strip()
    }
    assert {"openai", "anthropic", "openai-responses"} <= providers


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: p.name)
def test_every_event_validates_against_the_official_sdk(path):
    checked = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        exchange = json.loads(line)
        validate = _validator(exchange["provider"], exchange["request"]["url"])
        if validate is None or exchange["response"]["status"] != 200:
            continue
        for event in _events(exchange["response"]["body"]):
            validate(event)
            checked += 1
    if path.name.startswith(
        ("providers-openai", "providers-anthropic", "quickstart", "compare-openai", "compare-anthropic")
    ):
        assert checked > 0
