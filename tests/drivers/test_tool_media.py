"""Images and audio a tool returned, sent with its result (drivers/tool_media.py): each driver's first
turn replays a recorded tool-call stream, the tool's result (text and an image) goes back in the second
request, where the provider's API takes it; a model without vision, an image over the size limit, a type
a provider does not read and audio where none is taken each leave a note in the text instead."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ipyagent.core import ActionResultBlock, AudioBlock, ImageBlock, ModelCompleted, ToolAction
from ipyagent.drivers import create_driver
from ipyagent.drivers.tool_media import decoded_size, tool_media

from ..support.recordings import FIXTURES, reply_for, user_stack
from ..support.stub_server import Reply, StubServer

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"p" * 30).decode()
IMAGE = ImageBlock(mime_type="image/png", data=PNG)


def _ndjson(path: Path) -> Reply:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return Reply(headers={"Content-Type": "application/x-ndjson"}, pieces=[line.encode() + b"\n" for line in lines])


#: provider id, its recorded tool-call reply, a recorded text reply.
CASES = {
    "openai": ("openai:test-model", reply_for(FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"),
               reply_for(FIXTURES / "openai-chat" / "stream-text-include-usage.sse")),
    "anthropic": ("anthropic:claude-sonnet-4-5", reply_for(FIXTURES / "anthropic" / "stream-tool-use-fragmented.sse"),
                  reply_for(FIXTURES / "anthropic" / "stream-text.sse")),
    "gemini": ("gemini:gemini-2.5-flash", reply_for(FIXTURES / "gemini" / "stream-function-call.sse"),
               reply_for(FIXTURES / "gemini" / "stream-text.sse")),
    "gemini-3": ("gemini:gemini-3-pro-preview",
                 reply_for(FIXTURES / "gemini" / "stream-function-call-no-args-gemini3.sse"),
                 reply_for(FIXTURES / "gemini" / "stream-text.sse")),
    "openai-responses": ("openai-responses:test-model",
                         reply_for(FIXTURES / "openai-responses" / "stream-function-call.sse"),
                         reply_for(FIXTURES / "openai-responses" / "stream-text.sse")),
    "ollama": ("ollama:test-model", Reply(headers={"Content-Type": "application/json"}, pieces=[
        (FIXTURES / "ollama" / "chat-nonstream-tool-call-thinking-cloud.json").read_bytes()]),
               _ndjson(FIXTURES / "ollama" / "chat-stream-text.ndjson")),
}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, "sk-tool-media-test")


def second_request(case: str, media: list[Any], text: str = "the chart") -> tuple[dict[str, Any], ToolAction]:
    """Turn 1 replays the case's recorded tool call; its result (`text`, `media`) goes back in turn 2,
    whose request body is returned with the call."""
    provider, first_reply, text_reply = CASES[case]

    async def two_turns(url: str) -> ToolAction:
        base = f"{url}/v1" if provider.startswith("openai") else url
        driver = create_driver(provider, base_url=base)
        try:
            stack = user_stack("Draw it")
            first = [e async for e in driver.stream(stack)][-1]
            assert isinstance(first, ModelCompleted), first
            stack.messages.append(first.message)
            call = first.tool_calls[0]
            stack.add_message("tool", ActionResultBlock(action=call, text=text, media=media))
            last = [e async for e in driver.stream(stack)][-1]
            assert isinstance(last, ModelCompleted), last
            return call
        finally:
            await driver.close()

    with StubServer(first_reply, text_reply) as server:
        call = asyncio.run(two_turns(server.url))
    assert len(server.requests) == 2
    return server.requests[1]["body"], call


def test_anthropic_sends_the_image_inside_the_tool_result() -> None:
    body, call = second_request("anthropic", [IMAGE])
    [result] = [p for m in body["messages"] for p in m["content"] if p.get("type") == "tool_result"]
    assert result == {"type": "tool_result", "tool_use_id": call.tag, "is_error": False, "content": [
        {"type": "text", "text": "the chart"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}


def test_openai_responses_sends_the_image_in_the_function_call_output() -> None:
    body, call = second_request("openai-responses", [IMAGE])
    [output] = [i for i in body["input"] if i.get("type") == "function_call_output"]
    assert output == {"type": "function_call_output", "call_id": call.tag, "output": [
        {"type": "input_text", "text": "the chart"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]}


def test_gemini_3_sends_the_image_inside_the_function_response() -> None:
    body, call = second_request("gemini-3", [IMAGE])
    last = body["contents"][-1]
    assert last["role"] == "user"
    [part] = last["parts"]
    assert part["functionResponse"]["response"] == {"result": "the chart"}
    assert part["functionResponse"]["parts"] == [{"inlineData": {"mimeType": "image/png", "data": PNG}}]


def test_gemini_2_sends_the_image_after_the_function_response_naming_the_call() -> None:
    body, call = second_request("gemini", [IMAGE])
    parts = body["contents"][-1]["parts"]
    assert [next(iter(p)) for p in parts] == ["functionResponse", "text", "inlineData"]
    assert call.native_name in parts[1]["text"] and call.tag in parts[1]["text"]
    assert parts[2] == {"inlineData": {"mimeType": "image/png", "data": PNG}}


def test_openai_chat_sends_the_image_in_a_user_message_after_the_tool_messages() -> None:
    body, call = second_request("openai", [IMAGE])
    tool, after = body["messages"][-2:]
    assert tool == {"role": "tool", "tool_call_id": call.tag, "content": "the chart"}  # a tool message is text only
    assert after["role"] == "user"
    assert after["content"][0]["type"] == "text" and call.tag in after["content"][0]["text"]
    assert after["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


def test_ollama_sends_the_image_in_a_user_message_after_the_tool_messages() -> None:
    body, call = second_request("ollama", [IMAGE])
    tool, after = body["messages"][-2:]
    assert tool["role"] == "tool" and tool["content"] == "the chart"
    assert after["role"] == "user" and after["images"] == [PNG] and call.tag in after["content"]


@pytest.mark.parametrize("case", list(CASES))
def test_an_image_alone_gets_a_line_of_text_and_no_placeholder(case: str) -> None:
    """A result that is only an image is never sent as ``<image …>`` text, and its text is not empty."""
    body, _ = second_request(case, [IMAGE], text="")
    sent = json.dumps(body)
    assert PNG in sent and "<image" not in sent
    assert "the tool returned an image or audio, attached" in sent


def _driver(provider: str) -> Any:
    return create_driver(provider)


def _result(*media: Any) -> ActionResultBlock:
    return ActionResultBlock(action=ToolAction(tag="call_9", name="draw", input={}), text="done", media=list(media))


def test_an_image_over_the_providers_limit_is_left_out_with_a_note() -> None:
    big = ImageBlock(mime_type="image/png", data=base64.b64encode(b"x" * (5 * 1024 * 1024 + 1)).decode())
    sent, notes = tool_media(_driver("anthropic:claude-sonnet-4-5"), _result(big, IMAGE))
    assert sent == [IMAGE]
    assert notes == ["[image 1 (image/png, 5.0 MB) returned by the tool was not sent to you: over the 5.0 MB anthropic "
                     "takes in one image]"]
    sent, notes = tool_media(_driver("openai:gpt-4.1"), _result(big))  # OpenAI takes 20 MB
    assert sent == [big] and notes == []
    _, body = _driver("anthropic:claude-sonnet-4-5").build_request(_stack(_result(big)))
    [result] = [p for m in body["messages"] for p in m["content"] if p.get("type") == "tool_result"]
    assert result["content"] == "done\n\n" + notes_for("anthropic:claude-sonnet-4-5", big)[0]


def notes_for(provider: str, *media: Any) -> list[str]:
    return tool_media(_driver(provider), _result(*media))[1]


def _stack(result: ActionResultBlock) -> Any:
    from ipyagent.core import ActionCallBlock, Message

    stack = user_stack("go")
    stack.messages.append(Message(role="assistant", content=[ActionCallBlock(action=result.action)]))
    stack.add_message("tool", result)
    return stack


def test_a_model_without_vision_gets_a_note_not_the_image() -> None:
    notes = notes_for("openai-responses:o1-mini", IMAGE)
    assert notes and "takes no images" in notes[0] and "o1-mini" in notes[0]
    _, body = _driver("openai-responses:o1-mini").build_request(_stack(_result(IMAGE)))
    assert PNG not in json.dumps(body)
    assert body["input"][-1] == {"type": "function_call_output", "call_id": "call_9", "output": "done\n\n" + notes[0]}


def test_types_a_provider_does_not_read_and_audio_where_none_is_taken() -> None:
    gif = ImageBlock(mime_type="image/gif", data=PNG)
    wav = AudioBlock(mime_type="audio/wav", data=PNG)
    assert "takes no image/gif images" in notes_for("gemini:gemini-2.5-flash", gif)[0]
    assert notes_for("openai:gpt-4.1", gif) == []
    assert "takes no audio/wav audio" in notes_for("anthropic:claude-sonnet-4-5", wav)[0]
    sent, notes = tool_media(_driver("gemini:gemini-2.5-flash"), _result(wav))  # Gemini reads audio
    assert sent == [wav] and notes == []


def test_decoded_size_counts_padding() -> None:
    for raw in (b"", b"a", b"ab", b"abc", b"abcd"):
        assert decoded_size(ImageBlock(data=base64.b64encode(raw).decode())) == len(raw)
