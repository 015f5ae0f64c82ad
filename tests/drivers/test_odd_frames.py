"""Odd and hostile frames, read by each protocol's decoder (DESIGN.md "drivers"): what a break-in
pass found, one decision a test. Decoders are fed frames directly (their contract, `StreamDecoder`);
the base's check of each delta's text fields runs through whole turns in test_driver_turn.py."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace
from typing import Any

import pytest

from ipyagent.core import ActionCallBlock, ProviderError, TextDelta, ToolCallDelta, redact_head
from ipyagent.core.redact import add_secret
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver, MessagesDecoder
from ipyagent.drivers.decode import LineFramer
from ipyagent.drivers.protocols.gemini.response import _set_path
from ipyagent.drivers.protocols.gemini.stream import GeminiDecoder
from ipyagent.drivers.protocols.ollama import OllamaDecoder
from ipyagent.drivers.protocols.openai_responses_stream import ResponsesDecoder


def _element(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def _texts(deltas: Any) -> list[str]:
    return [d.text for d in deltas if isinstance(d, TextDelta)]


# -- lines framing -------------------------------------------------------------------------------


def test_a_byte_order_mark_is_dropped_where_the_text_starts_and_nowhere_else() -> None:
    framer = LineFramer()
    assert framer.feed("") == [] and framer.feed('\ufeff{"a": 1}\n\ufeffx\n') == ['{"a": 1}', "\ufeffx"]
    assert framer.feed("\ufeffy\n") == ["\ufeffy"]  # a later piece keeps it: it is text there


def test_the_last_line_in_pieces_is_given_whole() -> None:
    framer = LineFramer()
    assert framer.feed("ab") == [] and framer.feed("cd") == [] and framer.flush() == ["abcd"]


def test_a_line_in_many_pieces_is_joined_once_whole() -> None:
    framer, pieces = LineFramer(), ["x" * 7] * 1000
    assert [framer.feed(piece) for piece in pieces] == [[]] * 1000
    assert framer.feed("y\nz") == ["x" * 7000 + "y"] and framer.flush() == ["z"] and framer.flush() == []


# -- Gemini: JSON written over lines (the array framing) --------------------------------------------


def _pretty_array(*elements: dict[str, Any]) -> list[str]:
    """How streamGenerateContent without alt=sse writes: "[{", indented lines, "}", "," and "]"."""
    lines: list[str] = []
    for n, element in enumerate(elements):
        body = json.dumps(element, indent=2).split("\n")
        lines += (["[" + body[0]] if n == 0 else [",", body[0]]) + body[1:]
    return [*lines, "]"]


def test_a_gemini_json_array_streams_each_element_at_its_last_line() -> None:
    decoder = GeminiDecoder("gemini")
    lines = _pretty_array(_element("Hel"), _element("lo", "STOP"))
    out = [_texts(decoder.feed(line)) for line in lines]
    first_close = lines.index("}")  # element 0's last line: its text comes there, before element 1 is sent
    assert out[first_close] == ["Hel"] and sum(out[:first_close], []) == []
    assert sum(out, []) == ["Hel", "lo"] and decoder.finish() == [] and decoder.meta.stop_raw == "STOP"


def test_a_gemini_array_on_one_line_and_brackets_inside_strings() -> None:
    decoder = GeminiDecoder("gemini")
    assert _texts(decoder.feed(json.dumps([_element("a ] } ["), _element('"}]"', "STOP")]))) == ["a ] } [", '"}]"']
    opened = GeminiDecoder("gemini")  # a "}" inside a string does not close the value
    assert opened.feed('{"candidates": [{"content": {"parts": [{"text": "}"}]}}]') == ()
    assert _texts(opened.feed("}")) == ["}"]


def test_a_gemini_error_object_after_array_elements_is_the_stream_s_error() -> None:
    decoder = GeminiDecoder("gemini")
    for line in ["[" + json.dumps(_element("Hi")), ","]:
        decoder.feed(line)
    with pytest.raises(ProviderError) as caught:
        decoder.feed(json.dumps({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}))
    assert (caught.value.type, caught.value.status, caught.value.message) == (
        "overloaded",
        503,
        "gemini stream error: overloaded",
    )


def test_a_gemini_stream_that_ends_inside_a_json_value_fails() -> None:
    decoder = GeminiDecoder("gemini")
    decoder.feed('[{"candidates": [')
    with pytest.raises(ProviderError, match="or the stream ended inside one") as caught:
        decoder.finish()
    assert caught.value.type == "invalid_response"


def test_a_balanced_line_that_is_not_json_is_ignored_in_an_sse_stream_and_fails_outside_one() -> None:
    sse = GeminiDecoder("gemini")
    sse.feed("data: " + json.dumps(_element("Hello", "STOP")))
    assert _texts(sse.feed("")) == ["Hello"]
    assert sse.feed("{keep-alive}") == () and sse.feed("[DONE]") == () and sse.finish() == []
    unbalanced = GeminiDecoder("gemini")  # a "{" never closed: a field too, once the stream is SSE
    unbalanced.feed("data: " + json.dumps(_element("Hi", "STOP")))
    assert unbalanced.feed("{") == () and _texts(unbalanced.feed("")) == ["Hi"] and unbalanced.finish() == []
    bare = GeminiDecoder("gemini")
    with pytest.raises(ProviderError, match="not SSE or JSON: '{keep-alive}'"):
        bare.feed("{keep-alive}")


def test_gemini_partial_arguments_fill_a_list_in_order_and_refuse_a_jump() -> None:
    args: dict[str, Any] = {}
    _set_path(args, "$.a[0]", "x", append=False)
    _set_path(args, "$.a[1].b", 2, append=False)
    _set_path(args, "$.a[1].b", 3, append=False)
    assert args == {"a": ["x", {"b": 3}]}
    with pytest.raises(ValueError, match="item 3 of a list of 2, out of order"):
        _set_path(args, "$.a[3]", "y", append=False)
    with pytest.raises(ValueError, match="item 10000000 of a list of 0"):
        _set_path({}, "$.b[10000000].c", 1, append=False)


def test_gemini_arguments_that_are_not_an_object_give_the_call_its_error() -> None:
    decoder = GeminiDecoder("gemini")
    call = {
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": ["x"]}}]}, "finishReason": "STOP"}]
    }
    [delta] = decoder.feed(json.dumps(call))
    assert isinstance(delta, ToolCallDelta) and delta.arguments == '["x"]'
    block = ActionCallBlock.from_deltas([delta])
    assert block.error is not None and block.action.input == {}
    none = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f"}}]}, "finishReason": "STOP"}]}
    assert GeminiDecoder("gemini").feed(json.dumps(none))[0].arguments == "{}"  # no args: no arguments


# -- stop events, done flags -----------------------------------------------------------------------


def _sse(data: Any, event: str = "") -> SimpleNamespace:
    return SimpleNamespace(data=json.dumps(data), event=event)


def test_anthropic_s_message_stop_ends_the_reply() -> None:
    decoder = MessagesDecoder(AnthropicPromptDriver("claude-x", api_key="k"))
    assert (
        decoder.feed(
            _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}})
        )
        == ()
    )
    assert not decoder.done
    assert decoder.feed(_sse({"type": "message_stop"})) == () and decoder.done


@pytest.mark.parametrize("kind", ["response.completed", "response.incomplete"])
def test_responses_last_event_ends_the_reply(kind: str) -> None:
    decoder = ResponsesDecoder("openai")
    decoder.feed(_sse({"type": "response.created", "response": {"id": "r1"}}))
    assert not decoder.done
    decoder.feed(_sse({"type": kind, "response": {"id": "r1", "status": kind.split(".")[1], "output": []}}))
    assert decoder.done


def test_ollama_s_done_is_a_boolean_and_the_string_false_is_not_the_end() -> None:
    decoder = OllamaDecoder("ollama", itertools.count(1))
    decoder.feed(json.dumps({"message": {"role": "assistant", "content": "Hel"}, "done": "false"}))
    assert not decoder.done
    decoder.feed(json.dumps({"message": {"role": "assistant", "content": "lo"}, "done": True, "done_reason": "stop"}))
    assert decoder.done


# -- calls, errors, quotes ----------------------------------------------------------------------


def test_a_call_without_an_id_is_given_one_by_its_place_among_the_reply_s_calls() -> None:
    first = ActionCallBlock.from_deltas([ToolCallDelta(0, None, "f", "{}")], 1)
    second = ActionCallBlock.from_deltas([ToolCallDelta(1, "", "f", "{}")], 2)
    kept = ActionCallBlock.from_deltas([ToolCallDelta(2, "c9", "f", "{}")], 3)
    assert (first.action.tag, second.action.tag, kept.action.tag) == ("call_1", "call_2", "c9")


def test_an_error_message_is_one_line() -> None:
    error = ProviderError("server", "upstream said:\n  line one\r\n\n  line two\u2028three")
    assert error.message == "upstream said: line one line two three" and str(error) == error.message
    assert ProviderError("server", "a  b").message == "a  b"  # one line already: unchanged


def test_a_quote_redacts_before_it_cuts() -> None:
    key = "sk-hostile-" + "k" * 30
    add_secret(key)
    text = "x" * 190 + key + " tail"
    assert redact_head(text) == ("x" * 190 + "[redacted] tail")[:200] and "sk-host" not in redact_head(text)
    assert redact_head("short") == "short" and redact_head("y" * 500, 10) == "y" * 10
