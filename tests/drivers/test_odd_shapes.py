"""A Gemini chunk or an Ollama object of another shape (``"candidates": "x"``, ``"message": []``) fails the turn
with one line quoting it (redacted), as OpenAI Chat's does, not with Python's words ("AttributeError: 'str'
object has no attribute 'get'"); the text and the usage received so far are kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.core import ModelFailed
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver

from ..support.recordings import check_shape
from ..support.toy_driver import Scripted, run_turn

SECRET = "sk-proj-SHAPELEAK0123456789abcdefghij"
USAGE = {"promptTokenCount": 5, "candidatesTokenCount": 3}


def _failed(cls: Any, body: bytes) -> ModelFailed:
    driver = cls("m", api_key="k", transport=Scripted((200, {"content-type": cls.stream_types[0]}, body)))
    end = check_shape(run_turn(driver))
    assert isinstance(end, ModelFailed), end
    return end


@pytest.mark.parametrize("odd", [{"candidates": SECRET}, {"candidates": [{"content": {"parts": SECRET}}]}],
                         ids=["candidates", "parts"])
def test_a_gemini_chunk_of_another_shape_is_quoted(odd: dict[str, Any]) -> None:
    first = {"candidates": [{"content": {"parts": [{"text": "Hi "}]}}], "usageMetadata": USAGE}
    end = _failed(GeminiPromptDriver, b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in (first, odd)))
    assert end.error.type == "invalid_response" and end.partial.text == "Hi " and end.partial.usage.input_tokens == 5
    message = end.error.message
    assert message.startswith("gemini sent a chunk of a shape the Gemini API does not have (") and "\n" not in message
    assert '"candidates"' in message and SECRET not in message


@pytest.mark.parametrize("odd", [{"message": [SECRET]}, {"message": {"tool_calls": SECRET}}], ids=["message", "calls"])
def test_an_ollama_object_of_another_shape_is_quoted(odd: dict[str, Any]) -> None:
    first = {"model": "m", "message": {"role": "assistant", "content": "Hi "}, "done": False}
    end = _failed(OllamaPromptDriver, f"{json.dumps(first)}\n{json.dumps({'model': 'm', **odd})}\n".encode())
    assert end.error.type == "invalid_response" and end.partial.text == "Hi "
    message = end.error.message
    assert message.startswith("ollama sent an object of a shape Ollama's stream does not have (")
    assert "\n" not in message
    assert '"message"' in message and SECRET not in message
