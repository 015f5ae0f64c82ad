"""Non-stream and variant replies (issue 11): a 200 with one JSON body (a proxy ignoring
``stream: true``) is read as that provider's non-streaming response; a body that is neither
stream nor JSON is an error naming its content type and head; list-typed ``delta.content``
(Mistral's reasoning models); an incomplete Responses reply."""

from __future__ import annotations

import asyncio
import ast
import json

import pytest

from ipyagent import Agent
from ipyagent.core import ModelCompleted, ModelFailed, ReasoningBlock, StopKind
from ipyagent.core.redact import add_secret
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.stub_server import FIXTURES, Reply, StubServer

JSON = {"Content-Type": "application/json"}


def _events(driver, body: bytes, headers: dict[str, str] = JSON) -> list:
    with StubServer(Reply(headers=headers, pieces=[body])) as server:
        driver.base_url = server.url

        async def collect():
            try:
                return [e async for e in driver.stream(Agent(driver).prompt_stack("hi"))]
            finally:
                await driver.close()

        return asyncio.run(collect())


def _completed(driver, path) -> ModelCompleted:
    events = _events(driver, path.read_bytes())
    assert isinstance(events[-1], ModelCompleted), events[-1]
    return events[-1]


@pytest.mark.parametrize(
    "name", ["nonstream-text.json", "nonstream-tool-call.json", "nonstream-structured-output-json-schema.json"]
)
def test_openai_chat_reads_a_whole_completion(name):
    data = json.loads((FIXTURES / "openai-chat" / name).read_text())
    done = _completed(OpenAIChatPromptDriver("m", api_key="k"), FIXTURES / "openai-chat" / name)
    message = data["choices"][0]["message"]
    assert done.message.text == (message.get("content") or "")
    assert [(c.name, c.input) for c in done.message.tool_calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or ()]
    assert done.stop_reason.raw == data["choices"][0]["finish_reason"]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (
        data["usage"]["prompt_tokens"],
        data["usage"]["completion_tokens"],
    )


@pytest.mark.parametrize("name", ["nonstream-text.json", "nonstream-parallel-tool-use.json", "nonstream-thinking.json"])
def test_anthropic_reads_a_whole_message(name):
    data = json.loads((FIXTURES / "anthropic" / name).read_text())
    done = _completed(AnthropicPromptDriver("claude-x", api_key="k"), FIXTURES / "anthropic" / name)
    blocks = data["content"]
    assert done.message.text == "".join(b["text"] for b in blocks if b["type"] == "text")
    assert [(c.tag, c.name, c.input) for c in done.message.tool_calls] == [
        (b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    thinking = [b for b in done.message.content if isinstance(b, ReasoningBlock)]
    assert [(t.text, t.signature) for t in thinking] == [
        (b["thinking"], b["signature"]) for b in blocks if b["type"] == "thinking"
    ]
    assert done.stop_reason.raw == data["stop_reason"]
    assert done.usage.output_tokens == data["usage"]["output_tokens"]


@pytest.mark.parametrize("name", ["nonstream-text.json", "nonstream-parallel-function-calls.json"])
def test_gemini_reads_a_whole_response(name):
    data = json.loads((FIXTURES / "gemini" / name).read_text())
    done = _completed(GeminiPromptDriver("gemini-x", api_key="k"), FIXTURES / "gemini" / name)
    parts = data["candidates"][0]["content"]["parts"]
    assert done.message.text == "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    assert [(c.name, c.input) for c in done.message.tool_calls] == [
        (p["functionCall"]["name"], p["functionCall"].get("args") or {}) for p in parts if "functionCall" in p]
    assert done.stop_reason.raw == data["candidates"][0]["finishReason"]


@pytest.mark.parametrize(
    "name", ["chat-nonstream-tool-call-thinking-cloud.json", "chat-nonstream-multiple-tool-calls.edited.json"]
)
def test_ollama_reads_a_whole_chat_response(name):
    data = json.loads((FIXTURES / "ollama" / name).read_text())
    done = _completed(OllamaPromptDriver("llama", api_key=None), FIXTURES / "ollama" / name)
    message = data["message"]
    assert done.message.text == message.get("content", "")
    assert [(c.name, c.input) for c in done.message.tool_calls] == [
        (c["function"]["name"], c["function"].get("arguments") or {}) for c in message.get("tool_calls") or ()]
    assert done.usage.output_tokens == data["eval_count"]


def test_a_body_neither_stream_nor_json_names_its_type_and_head_redacted():
    add_secret("html-page-secret-42")
    page = b"<html><body>Bad gateway html-page-secret-42 " + b"x" * 500 + b"</body></html>"
    for driver in (OpenAIChatPromptDriver("m", api_key="k"), AnthropicPromptDriver("c", api_key="k")):
        failed = _events(driver, page, {"Content-Type": "text/html; charset=utf-8"})[-1]
        assert isinstance(failed, ModelFailed) and failed.error.type == "invalid_response"
        message = failed.error.message
        assert "answered HTTP 200 (content type 'text/html')" in message and "html-page-secret-42" not in message
        quoted = message.split("not its stream: ", 1)[1]
        assert quoted.startswith("'<html><body>Bad gateway [redacted] xxx") and quoted.endswith("…'")
        assert len(ast.literal_eval(quoted)) == 300  # the first 300 characters, the last one "…"


def test_a_stream_labelled_json_still_streams():
    sse = (FIXTURES / "openai-chat" / "stream-text-include-usage.sse").read_bytes()
    events = _events(OpenAIChatPromptDriver("m", api_key="k"), sse)
    assert isinstance(events[-1], ModelCompleted) and sum(e.type == "text_delta" for e in events) > 3


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    return (
        b"data: "
        + json.dumps(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "magistral",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        ).encode()
        + b"\n\n"
    )


def test_list_typed_content_is_read_as_text_and_reasoning():
    """Mistral's reasoning models stream ``content`` as typed parts, thinking first."""
    body = b"".join(
        [
            chat_chunk(
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Let me "}]}],
                }
            ),
            chat_chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "think."}]}]}),
            chat_chunk({"content": [{"type": "text", "text": "The answer "}]}),
            chat_chunk({"content": "is 4."}, None),
            chat_chunk({}, "stop"),
            b"data: [DONE]\n\n",
        ]
    )
    done = _events(OpenAIChatPromptDriver("magistral", api_key="k"), body, {"Content-Type": "text/event-stream"})[-1]
    assert isinstance(done, ModelCompleted)
    assert done.message.text == "The answer is 4."
    assert [b.text for b in done.message.content if isinstance(b, ReasoningBlock)] == ["Let me think."]


@pytest.mark.parametrize(
    "reason, kind", [("max_output_tokens", StopKind.max_tokens), ("content_filter", StopKind.content_filter)]
)
def test_an_incomplete_responses_reply_maps_its_reason(reason, kind):
    response = {"id": "resp_1", "object": "response", "status": "incomplete", "model": "gpt-x",
                "incomplete_details": {"reason": reason},
                "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "incomplete",
                            "content": [{"type": "output_text", "text": "Partial", "annotations": []}]}],
                "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}}
    delta = {
        "type": "response.output_text.delta",
        "item_id": "m1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Partial",
    }
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                    for e in (delta, {"type": "response.completed", "response": response}))
    done = _events(OpenAIResponsesPromptDriver("gpt-x", api_key="k"), body, {"Content-Type": "text/event-stream"})[-1]
    assert isinstance(done, ModelCompleted) and done.message.text == "Partial"
    assert done.stop_reason.kind is kind
