"""A stop reason that is not text (a broken proxy's list or object) ends the reply, its JSON kept as the raw
reason, as OpenAI Chat already does (`decode.reason_text`): Gemini's ``finishReason``, Ollama's ``done_reason``
and Responses' ``incomplete_details.reason`` failed the turn with "TypeError: unhashable type: 'list'"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.core import ModelCompleted, StopKind
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.recordings import check_shape
from ..support.toy_driver import Scripted, run_turn


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events)


def _gemini(reason: Any) -> bytes:
    return _sse({"candidates": [{"content": {"parts": [{"text": "Hi"}]}, "finishReason": reason}]})


def _ollama(reason: Any) -> bytes:
    done = {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": True, "done_reason": reason}
    return (json.dumps(done) + "\n").encode()


def _responses(reason: Any) -> bytes:
    return _sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hi"},
        {"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": reason}}},
    )


@pytest.mark.parametrize("reason", [["STOP"], {"why": 1}], ids=["list", "object"])
@pytest.mark.parametrize(
    "cls, body",
    [(GeminiPromptDriver, _gemini), (OllamaPromptDriver, _ollama), (OpenAIResponsesPromptDriver, _responses)],
    ids=["gemini", "ollama", "responses"],
)
def test_a_stop_reason_that_is_not_text_ends_the_reply_as_its_json(cls: Any, body: Any, reason: Any) -> None:
    driver = cls("m", api_key="k", transport=Scripted((200, {"content-type": cls.stream_types[0]}, body(reason))))
    end = check_shape(run_turn(driver))
    assert isinstance(end, ModelCompleted), end
    assert end.message.text == "Hi" and end.stop_reason.raw == json.dumps(reason)
    assert end.stop_reason.kind is StopKind.end_turn
