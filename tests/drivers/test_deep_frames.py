"""A tool call's arguments nested deeper than Python's JSON parser goes, inside a frame (Ollama, Gemini: the
arguments are JSON in the frame, not a string): the call gets the promised error ("nest deeper than 64
levels"), the turn completes (README: "never a RecursionError"). `decode.frame_json` reads such a frame.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.core import MAX_ARGUMENT_DEPTH, ActionCallBlock, ModelCompleted
from ipyagent.drivers.decode import FRAME_DEPTH, frame_json
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.recordings import check_shape
from ..support.toy_driver import Scripted, run_turn

#: Past what json.loads reads on every supported Python: 3.11 and 3.12 raise RecursionError near 1,000
#: levels, 3.13 (its own C stack limit) reads 3,000 whole and raises by 10,000.
LEVELS = 100_000
DEEP = '{"a": ' * LEVELS + "1" + "}" * LEVELS


def _depth(value: Any) -> int:
    level, depth = [value], 0
    while level:
        level = [v for item in level if isinstance(item, (dict, list))
                 for v in (item.values() if isinstance(item, dict) else item)]
        depth += 1
    return depth - 1


def test_a_frame_deeper_than_the_parser_goes_is_read_cut_at_frame_depth() -> None:
    """Each value deeper than `FRAME_DEPTH` reads as ``[]``; strings holding brackets are not counted;
    a frame read whole is exactly `json.loads`'s reading."""
    with pytest.raises(RecursionError):
        json.loads(DEEP)
    frame = '{"s": "{[{[", "deep": ' + DEEP + ', "after": [1, {"b": "]}"}]}'
    read = frame_json(frame)
    assert read["s"] == "{[{[" and read["after"] == [1, {"b": "]}"}]
    assert _depth(read) == FRAME_DEPTH and FRAME_DEPTH > 2 * MAX_ARGUMENT_DEPTH - 1
    node = read["deep"]
    for _ in range(FRAME_DEPTH - 2):
        node = node["a"]
    assert node == {"a": []}
    shallow = '{"a": [1, {"b": "x]"}], "c": null}'
    assert frame_json(shallow) == json.loads(shallow)
    with pytest.raises(ValueError):
        frame_json('{"a": ' * LEVELS + "1")  # never closed: not JSON, as json.loads says


def _call(end: Any) -> ActionCallBlock:
    assert isinstance(end, ModelCompleted), end
    calls = [b for b in end.message.content if isinstance(b, ActionCallBlock)]
    assert len(calls) == 1 and calls[0].action.name == "word_count"
    return calls[0]


def _turn(cls: Any, body: bytes, content_type: str | None = None) -> Any:
    headers = {"content-type": content_type or cls.stream_types[0]}
    driver = cls("m", api_key="k", transport=Scripted((200, headers, body)))
    return check_shape(run_turn(driver))


def _ollama(arguments: str) -> bytes:
    call = '{"function": {"name": "word_count", "arguments": ' + arguments + "}}"
    message = '{"role": "assistant", "content": "", "tool_calls": [' + call + "]}"
    first = '{"model": "m", "message": ' + message + ', "done": false}'
    last = {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
            "prompt_eval_count": 5, "eval_count": 3}
    return (first + "\n" + json.dumps(last) + "\n").encode()


def _gemini(part: str) -> bytes:
    chunk = '{"candidates": [{"content": {"role": "model", "parts": [' + part + ']}, "finishReason": "STOP"}]}'
    return f"data: {chunk}\n\n".encode()


@pytest.mark.parametrize(
    "cls, body",
    [
        (OllamaPromptDriver, _ollama(DEEP)),
        (GeminiPromptDriver, _gemini('{"functionCall": {"name": "word_count", "args": ' + DEEP + "}}")),
        (GeminiPromptDriver, _gemini('{"functionCall": {"name": "word_count", "willContinue": true}}')
         + _gemini('{"functionCall": {"partialArgs": [{"jsonPath": "$' + ".a" * 5000 + '", "numberValue": 1}]}}')),
    ],
    ids=["ollama", "gemini", "gemini-partial-args"],
)
def test_arguments_nested_thousands_deep_in_the_frame_give_the_call_its_error(cls: Any, body: bytes) -> None:
    """They failed the turn with "RecursionError: maximum recursion depth exceeded while decoding (or encoding)
    a JSON object"; now the call is refused with the error a string of arguments that deep gets."""
    call = _call(_turn(cls, body))
    assert call.error is not None and f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in call.error


@pytest.mark.parametrize("cls, body", [(OllamaPromptDriver, _ollama('{"a": {"b": [1, 2]}}')),
                                       (GeminiPromptDriver, _gemini('{"functionCall": {"name": "word_count", '
                                                                    '"args": {"a": {"b": [1, 2]}}}}'))],
                         ids=["ollama", "gemini"])
def test_arguments_of_a_usual_depth_pass_whole(cls: Any, body: bytes) -> None:
    call = _call(_turn(cls, body))
    assert call.error is None and call.action.input == {"a": {"b": [1, 2]}}


CALL_USE = '{"type": "tool_use", "id": "toolu_1", "name": "word_count", "input": ' + DEEP + "}"
WHOLE = {  # a whole JSON reply (a server that ignored ``stream: true``), read through `read_unlabelled`
    "anthropic": (AnthropicPromptDriver, '{"type": "message", "role": "assistant", "stop_reason": "tool_use", '
                  '"content": [' + CALL_USE + "]}"),
    "gemini": (GeminiPromptDriver, '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
               '{"name": "word_count", "args": ' + DEEP + '}}]}, "finishReason": "STOP"}]}'),
    "openai-chat": (OpenAIChatPromptDriver, '{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": '
                    '{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": '
                    '{"name": "word_count", "arguments": ' + DEEP + "}}]}}]}"),
}


@pytest.mark.parametrize("name", list(WHOLE))
def test_a_whole_reply_with_arguments_thousands_deep_gives_the_call_its_error(name: str) -> None:
    cls, body = WHOLE[name]
    call = _call(_turn(cls, body.encode(), "application/json"))
    assert call.error is not None and f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in call.error


def test_an_anthropic_call_opened_with_its_whole_input_thousands_deep_gets_its_error() -> None:
    start = '{"type": "content_block_start", "index": 0, "content_block": ' + CALL_USE + "}"
    events = [start, '{"type": "content_block_stop", "index": 0}',
              '{"type": "message_delta", "delta": {"stop_reason": "tool_use"}}', '{"type": "message_stop"}']
    call = _call(_turn(AnthropicPromptDriver, "".join(f"data: {e}\n\n" for e in events).encode()))
    assert call.error is not None and f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in call.error


@pytest.mark.parametrize("cls", [OpenAIChatPromptDriver, OpenAIResponsesPromptDriver])
def test_a_frame_with_a_field_thousands_deep_is_read(cls: Any) -> None:
    """Where arguments are text (OpenAI), a frame that deep can only be a field nobody reads: the reply goes on."""
    if cls is OpenAIChatPromptDriver:
        events = ['{"id": "c1", "x": ' + DEEP + ', "choices": [{"index": 0, "delta": {"content": "Hi"}}]}',
                  '{"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}', "[DONE]"]
    else:
        events = ['{"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}, "x": '
                  + DEEP + "}",
                  '{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hi"}',
                  '{"type": "response.completed", "response": {"status": "completed"}}']
    end = _turn(cls, "".join(f"data: {e}\n\n" for e in events).encode())
    assert isinstance(end, ModelCompleted) and end.message.text == "Hi", end


def test_an_anthropic_server_tool_input_thousands_deep_is_read() -> None:
    """A server tool's input streams as text, parsed whole at its block's end: that deep, it is kept cut."""
    events = [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": DEEP}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    ]
    end = _turn(AnthropicPromptDriver, "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode())
    assert isinstance(end, ModelCompleted) and end.message.text == "Hi", end
