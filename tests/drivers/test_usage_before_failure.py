"""Usage a provider sent before its stream failed is the failed turn's usage (`StreamDecoder`: "a usage that
arrives in the same frame as an error still counts"): the tokens were billed, so the run's cost and budgets
count them. Each driver notes a usage block as it arrives, never only at the stream's end, which a failure skips.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.core import ModelFailed
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver

from ..support.recordings import check_shape
from ..support.stub_server import FIXTURES
from ..support.toy_driver import Scripted, run_turn

GEMINI_FIRST = json.loads(
    (FIXTURES / "gemini" / "stream-text.sse").read_text().split("\n\n")[0].removeprefix("data: ")
)
GEMINI_ERROR = {"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}


def _failed(cls: Any, body: bytes) -> ModelFailed:
    driver = cls("m", api_key="k-usage", transport=Scripted((200, {"content-type": cls.stream_types[0]}, body)),
                 max_attempts=1)
    end = check_shape(run_turn(driver))
    assert isinstance(end, ModelFailed), end
    return end


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events)


@pytest.mark.parametrize(
    "then",
    [
        GEMINI_ERROR,  # the stream's own error, the next frame
        {**GEMINI_FIRST, "candidates": [{"content": {"parts": [{"text": 5}]}}]},  # a later frame unreadable
        {**GEMINI_FIRST, "candidates": [None]},  # unreadable, its usage in the same frame
    ],
    ids=["error", "unreadable-text", "unreadable-candidate"],
)
def test_gemini_usage_received_counts_when_the_stream_then_fails(then: dict[str, Any]) -> None:
    """Real Gemini streams carry ``usageMetadata`` on every chunk; it was read only at the stream's
    end, so a turn that failed after the first chunk cost 0 tokens."""
    end = _failed(GeminiPromptDriver, _sse(GEMINI_FIRST, then))
    assert end.partial.text == "The"
    assert end.partial.usage.input_tokens == GEMINI_FIRST["usageMetadata"]["promptTokenCount"] == 15


def test_ollama_counts_in_an_unreadable_final_object_count() -> None:
    """The counts ride on the ``done`` object; its message was read first, so one that could not be read
    (a tool call that is no object) lost them."""
    first = {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    last = {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [None]}, "done": True,
            "done_reason": "stop", "prompt_eval_count": 16, "eval_count": 22}
    end = _failed(OllamaPromptDriver, f"{json.dumps(first)}\n{json.dumps(last)}\n".encode())
    assert end.partial.text == "Hi" and (end.partial.usage.input_tokens, end.partial.usage.output_tokens) == (16, 22)


def test_anthropic_counts_in_an_unreadable_message_delta_count() -> None:
    """message_delta's cumulative counts were read after its ``delta``; a ``delta`` of another shape lost them."""
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 15}}}
    text = [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}]
    delta = {"type": "message_delta", "delta": ["end_turn"], "usage": {"output_tokens": 9}}
    end = _failed(AnthropicPromptDriver, _sse(start, *text, delta))
    assert end.partial.text == "Hi" and (end.partial.usage.input_tokens, end.partial.usage.output_tokens) == (15, 9)


def test_gemini_reads_the_usage_when_the_turn_reads_its_facts_not_each_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a usage block costs about 10 µs (as much as the rest of a chunk's decoding) and Gemini sends
    one on every chunk: only the last one received is read, when the turn asks for the stream's facts."""
    from ipyagent.drivers.protocols.gemini import stream

    reads: list[Any] = []
    real = stream.read_usage
    monkeypatch.setattr(stream, "read_usage", lambda read, raw, **kw: reads.append(raw) or real(read, raw, **kw))
    decoder = stream.GeminiDecoder("gemini")
    chunks = [{**GEMINI_FIRST, "usageMetadata": {"promptTokenCount": 15, "candidatesTokenCount": n}} for n in range(9)]
    for chunk in chunks:
        decoder.feed(f"data: {json.dumps(chunk)}")
        decoder.feed("")
    assert reads == []
    assert decoder.meta.usage is not None and decoder.meta.usage.output_tokens == 8
    assert reads == [chunks[-1]["usageMetadata"]]
