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
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver

from ..support.recordings import check_shape
from ..support.toy_driver import Scripted, run_turn

LEVELS = 3000  # json.loads raises RecursionError near 1,000
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


def _turn(cls: Any, body: bytes) -> Any:
    driver = cls("m", api_key="k", transport=Scripted((200, {"content-type": cls.stream_types[0]}, body)))
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
