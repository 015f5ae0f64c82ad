"""One test per decision that a mutation once flipped unnoticed (issue 12): the aggregator's
rules, OpenAI Chat's mappings, and the retry rules of DESIGN.md ("drivers").

Each test fails when its decision flips. Retry tests use a fake sleep (no waiting)."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import time
from typing import Any

import httpx2
import pytest
from tenacity import RetryCallState

from ipyagent.core import (
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    ReasoningDelta,
    StopKind,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ipyagent.drivers import Aggregator, StreamMeta
from ipyagent.drivers.aggregate import merge_meta
from ipyagent.drivers.base import parse_retry_after
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_chat_stream import _error_from_object, usage_from_openai
from ipyagent.drivers.structured import schema_name

from ..support.finalizer import left_to_the_loop
from ..support.recordings import decode_body

# -- the aggregator ------------------------------------------------------------------------------


def test_reasoning_signature_is_the_last_one_given() -> None:
    agg = Aggregator()
    for delta in (ReasoningDelta(0, "a", "sig-1"), ReasoningDelta(0, "b"), ReasoningDelta(0, "c", "sig-2")):
        agg.add(delta)
    [block] = agg.message().content
    assert block.text == "abc" and block.signature == "sig-2"


def test_a_dropped_call_keeps_its_last_id_and_name() -> None:
    agg = Aggregator()
    for delta in (ToolCallDelta(0, "call_a", "first", '{"x": '), ToolCallDelta(0, "call_b", "second", "1,")):
        agg.add(delta)
    dropped: list[dict[str, Any]] = []
    assert agg.message(dropped=dropped).content == []
    assert dropped == [{"id": "call_b", "name": "second", "raw_arguments": '{"x": 1,'}]
    [kept] = agg.message().content  # without `dropped`: kept, its error for the model
    assert (kept.action.tag, kept.action.name, kept.action.input) == ("call_b", "second", {}) and kept.error is not None
    anonymous = Aggregator()  # a fragment cut before any id or name arrived
    anonymous.add(ToolCallDelta(0, None, None, '{"x": '))
    dropped = []
    assert anonymous.message(dropped=dropped).content == []
    assert dropped == [{"id": None, "name": None, "raw_arguments": '{"x": '}]


def test_a_call_that_cannot_run_says_which_call_and_what_is_wrong() -> None:
    agg = Aggregator()
    for delta in (
        ToolCallDelta(0, "c1", "ok", '{"a": 1}'),
        TextDelta(1, "and"),
        ToolCallDelta(2, "c2", "listy", "[1, 2]"),
        ToolCallDelta(3, "c3", None, "{}"),
        ToolCallDelta(4, "c4", None, "{"),
        ToolCallDelta(5, "c5", "big", "{" + "x" * 500),
    ):
        agg.add(delta)
    blocks = agg.message().content
    assert [b.type for b in blocks] == [
        "action_call",
        "text",
        "action_call",
        "action_call",
        "action_call",
        "action_call",
    ]
    calls = [b for b in blocks if b.type == "action_call"]
    assert calls[0].error is None and calls[0].action.input == {"a": 1}
    assert (
        calls[1].error
        == "tool call 2 (id 'c2', tool 'listy') was not run: its arguments are JSON but not an object: '[1, 2]'; "
        "call the tool again with its name and its arguments as one JSON object"
    )
    assert calls[2].error == "tool call 3 (id 'c3') was not run: it names no tool; " \
        "call the tool again with its name and its arguments as one JSON object"
    assert calls[2].action.name == "invalid_tool_call" and calls[2].action.input == {}
    assert calls[3].error.startswith(
        "tool call 4 (id 'c4') was not run: it names no tool, and its arguments are not valid JSON ("
    )
    head = "{" + "x" * 199
    assert (
        f"its arguments are not valid JSON (Expecting property name enclosed in double quotes): {head!r}… (501 "
        "characters); "
        in calls[4].error
    )  # a short head of them, not the whole text
    assert calls[4].raw_arguments == "{" + "x" * 500  # kept whole in the block


def test_text_is_kept_as_strings_and_other_deltas_as_they_came() -> None:
    """A long answer's text deltas are not kept as objects (the garbage collector would walk each
    of them for as long as the reply is kept); the message is the same."""
    agg = Aggregator()
    assert not agg and agg.partial() is None
    for delta in (ReasoningDelta(0, "hm"), TextDelta(1, "Hel"), TextDelta(2, "x"), TextDelta(1, "lo")):
        agg.add(delta)
    assert agg and agg.texts == {1: ["Hel", "lo"], 2: ["x"]} and agg.others == [ReasoningDelta(0, "hm")]
    assert [(b.type, b.text) for b in agg.message().content] == [("reasoning", "hm"), ("text", "Hello"), ("text", "x")]
    agg.clear()
    assert not agg and agg.message().content == []


def test_a_content_index_holding_text_and_another_kind_forms_no_message() -> None:
    agg = Aggregator()
    for delta in (TextDelta(0, "a"), ToolCallDelta(0, "c", "f", "{}")):
        agg.add(delta)
    with pytest.raises(ValueError, match="content block 0 holds text and ToolCallDelta deltas"):
        agg.message()


def test_a_text_delta_of_a_subclass_is_kept_as_it_came_and_still_read_as_text() -> None:
    class Marked(TextDelta):
        pass

    agg = Aggregator()
    agg.add(Marked(0, "a"))
    agg.add(Marked(0, "b"))
    assert agg.texts == {} and [b.text for b in agg.message().content] == ["ab"]


def test_surrogate_halves_split_across_deltas_are_joined() -> None:
    agg = Aggregator()
    for piece in ("ok \ud83d", "\ude00 and a lone \ud83d"):
        agg.add(TextDelta(0, piece))
    assert agg.message().text == "ok \U0001f600 and a lone \ufffd"


def test_an_unreadable_usage_replaces_a_read_one_and_later_facts_keep_it() -> None:
    meta = StreamMeta(usage=Usage(input_tokens=3))
    merge_meta(meta, StreamMeta(usage_error="input_tokens is 1.5"))
    assert meta.usage is None and meta.usage_error == "input_tokens is 1.5"
    merge_meta(meta, StreamMeta(stop_raw="stop"))  # another fact: the error stays
    assert meta.usage is None and meta.usage_error == "input_tokens is 1.5"
    merge_meta(meta, StreamMeta(usage=Usage(input_tokens=4)))  # a usage read later replaces it
    assert meta.usage == Usage(input_tokens=4) and meta.usage_error is None


def test_merge_meta_copies_falsy_values_but_not_none() -> None:
    meta = StreamMeta(stop_raw="length", request_id="req-1", model="m")
    merge_meta(meta, StreamMeta(stop_raw="", request_id=None, model=""))
    assert (meta.stop_raw, meta.request_id, meta.model) == ("", "req-1", "")


# -- OpenAI Chat -----------------------------------------------------------------------------------


def test_usage_reads_deepseek_cache_hits_and_reasoning_tokens() -> None:
    deepseek = usage_from_openai({"prompt_tokens": 100, "completion_tokens": 20, "prompt_cache_hit_tokens": 64,
                                  "completion_tokens_details": {"reasoning_tokens": 7}})
    assert (deepseek.cache_read_tokens, deepseek.reasoning_tokens) == (64, 7)
    openai = usage_from_openai(
        {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}}
    )
    assert (openai.cache_read_tokens, openai.reasoning_tokens) == (3, 0)


@pytest.mark.parametrize("error, etype", [
    ({"type": "rate_limit_error", "message": "slow down"}, "rate_limit"),
    ({"code": "ratelimited", "message": "slow down"}, "rate_limit"),
    ({"type": "overloaded_error", "message": "busy"}, "overloaded"),
    ({"type": "invalid_api_key"}, "authentication"),
    ({"type": "invalid_request_error"}, "invalid_request"),
    ({"code": 503, "message": "down"}, "server"),
    ({"code": 429, "message": "slow"}, "rate_limit"),
    ({"type": "mystery"}, "server"),
    ({"status_code": 429, "message": "slow"}, "rate_limit"),
    ({"status_code": 502, "type": "rate_limit_error"}, "server"),  # a 5xx status wins over the words
    ({"status_code": 400, "type": "rate_limit_error"}, "invalid_request"),  # so does a known status
    ({"status_code": 500, "type": "invalid_request_error"}, "server"),  # 500 is the first 5xx
])
def test_in_stream_error_types(error: dict[str, Any], etype: str) -> None:
    assert _error_from_object(error).type == etype


def test_in_stream_error_keeps_message_code_and_status() -> None:
    error = _error_from_object({"code": "busy_now", "message": "try later", "status_code": 503})
    assert (error.message, error.code, error.status, error.raw["code"]) == ("try later", "busy_now", 503, "busy_now")
    assert _error_from_object({"code": 429}).status == 429
    bare = _error_from_object("socket closed")
    assert (bare.type, bare.message, bare.raw) == ("server", "stream error: socket closed", "socket closed")
    assert _error_from_object({"code": "rate_limit_exceeded"}).status is None  # a word is no status


def _chat(**kw: Any) -> OpenAIChatPromptDriver:
    return OpenAIChatPromptDriver("gpt-4.1-mini", api_key="sk-test-decisions", **kw)


def test_error_body_overloaded_and_openrouters_upstream_message() -> None:
    driver = _chat()
    code, message, etype = driver.parse_error_body(503, {"error": {"type": "overloaded_error", "message": "busy"}})
    assert etype == "overloaded" and message == "busy"
    body = {
        "error": {
            "code": 429,
            "message": "Provider returned error",
            "metadata": {"raw": "anthropic: rate limited upstream"},
        }
    }
    assert driver.parse_error_body(429, body)[1] == "Provider returned error: anthropic: rate limited upstream"
    same = {"error": {"message": "rate limited upstream", "metadata": {"raw": "rate limited upstream"}}}
    assert driver.parse_error_body(429, same)[1] == "rate limited upstream"  # not repeated


def test_error_body_code_falls_back_to_type_and_message_to_top_level_fields() -> None:
    driver = _chat()
    assert driver.parse_error_body(400, {"error": {"type": "invalid_request_error", "message": "bad"}})[:2] == \
        ("invalid_request_error", "bad")
    assert (
        driver.parse_error_body(400, {"error": {"code": "bad_model", "type": "invalid_request_error"}})[0]
        == "bad_model"
    )
    assert driver.parse_error_body(422, {"message": "field required"})[1] == "field required"  # vLLM, LiteLLM
    assert driver.parse_error_body(422, {"detail": "not found", "message": "other"})[1] == "not found"  # FastAPI first
    assert driver.parse_error_body(400, {"error": {"message": "m", "metadata": "not an object"}})[1] == "m"


def test_openrouters_upstream_message_is_cut_to_300_characters() -> None:
    body = {"error": {"message": "Provider returned error", "metadata": {"raw": "x" * 299 + "yz"}}}
    assert _chat().parse_error_body(502, body)[1] == "Provider returned error: " + "x" * 299 + "y"


def test_usage_keeps_the_provider_s_total_and_absent_counts_are_zero() -> None:
    assert usage_from_openai({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 20}).total_tokens == 20
    empty = usage_from_openai({})
    assert (empty.input_tokens, empty.output_tokens, empty.total_tokens, empty.cache_read_tokens) == (0, 0, 0, 0)


def test_a_text_chunk_reads_the_same_whatever_else_it_carries() -> None:
    """A chunk of text alone takes a short path; with a role, a finish reason or a refusal beside
    it, the same text comes out, in the same block, then what else it said."""
    from ipyagent.drivers.protocols.openai_chat_stream import ChatDecoder

    decoder = ChatDecoder("openai")

    def read(choice: dict[str, Any]) -> list[Any]:
        return list(decoder.feed(_event({"choices": [choice]})))

    assert read({"delta": {"content": ""}}) == []
    assert read({"delta": {"reasoning_content": "hm"}}) == [ReasoningDelta(0, "hm")]
    assert read({"delta": {"content": "a"}}) == [TextDelta(1, "a")]
    assert read({"delta": {"role": "assistant", "content": "b"}}) == [TextDelta(1, "b")]
    assert read({"delta": {"content": "c", "refusal": "no"}}) == [TextDelta(1, "c"), TextDelta(1, "no")]
    assert read({"delta": {"content": None}}) == [] and decoder.meta.stop_kind is None
    assert decoder.finished is False
    assert read({"delta": {"content": "d"}, "finish_reason": "length"}) == [TextDelta(1, "d")]
    assert (decoder.meta.stop_raw, decoder.meta.stop_kind) == ("length", StopKind.max_tokens) and decoder.finished
    other = ChatDecoder("openai")  # the long way first, then the short one: still one block
    assert list(other.feed(_event({"choices": [{"delta": {"role": "assistant", "content": "x"}}]}))) == [
        TextDelta(0, "x")
    ]
    assert list(other.feed(_event({"choices": [{"delta": {"content": "y"}}]}))) == [TextDelta(0, "y")]


def test_the_usual_chunk_is_read_without_the_general_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Most chunks are one piece of text of choice 0: read on a short path (the stream decode
    benchmark's 1.3x target), which anything else in the chunk leaves for the general reader."""
    from ipyagent.drivers.protocols.openai_chat_stream import ChatDecoder

    general: list[dict[str, Any]] = []
    real = ChatDecoder._read_all
    monkeypatch.setattr(
        ChatDecoder, "_read_all", lambda self, choice, delta: general.append(delta) or real(self, choice, delta)
    )
    decoder = ChatDecoder("openai")
    for choice in ({"index": 0, "delta": {"content": "a"}, "finish_reason": None}, {"delta": {"content": "b"}},
                   {"delta": {"content": ""}, "logprobs": None}):
        decoder.feed(_event({"id": "c", "choices": [choice], "usage": None}))
    assert general == []
    for choice in (
        {"delta": {"content": "c"}, "finish_reason": "stop"},
        {"delta": {"role": "assistant", "content": "d"}},
        {"delta": {"refusal": "e"}},
        {"delta": {"content": [{"type": "text", "text": "f"}]}},
        {"delta": {}},
    ):
        decoder.feed(_event({"choices": [choice]}))
    assert general == [{"content": "c"}, {"role": "assistant", "content": "d"}, {"refusal": "e"},
                       {"content": [{"type": "text", "text": "f"}]}, {}]


def test_a_chunk_with_several_choices_gives_choice_0_wherever_it_stands() -> None:
    from ipyagent.drivers.protocols.openai_chat_stream import ChatDecoder

    decoder = ChatDecoder("openai")
    chunk = {"choices": [{"index": 2, "delta": {"content": "two"}}, {"delta": {"content": "zero"}},
                         {"index": 1, "delta": {"content": "one"}}]}
    assert list(decoder.feed(_event(chunk))) == [TextDelta(0, "zero")]
    only_other = {"choices": [{"index": 1, "delta": {"content": "one"}}]}
    assert list(decoder.feed(_event(only_other))) == []


def _calls_from(*tool_calls: dict[str, Any]) -> list[tuple[str | None, str | None, Any]]:
    """(id, name, arguments) of the calls a stream's ``tool_calls`` fragments add up to, one chunk each."""
    from ipyagent.drivers.protocols.openai_chat_stream import ChatDecoder

    decoder, agg = ChatDecoder("openai"), Aggregator()
    for call in tool_calls:
        for item in decoder.feed(_event({"choices": [{"delta": {"tool_calls": [call]}}]})):
            agg.add(item)
    return [(a.tag, a.name, a.input) for a in agg.message().tool_calls]


def test_interleaved_call_fragments_join_their_own_call_by_index() -> None:
    assert _calls_from(
        {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}},
        {"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y":'}},
        {"index": 0, "id": "a", "function": {"arguments": '{"x":'}},  # some servers repeat the id on every fragment
        {"index": 1, "id": "b", "function": {"arguments": " 2}"}},
        {"index": 0, "function": {"arguments": " 1}"}},
    ) == [("a", "f", {"x": 1}), ("b", "g", {"y": 2})]


def test_a_new_id_at_the_same_index_is_a_new_call_and_a_missing_index_is_0() -> None:
    # Gemini's OpenAI-compatible API sends parallel calls without distinct indexes.
    assert _calls_from(
        {"id": "c1", "function": {"name": "f", "arguments": '{"n": 1}'}},
        {"index": 0, "id": "c2", "function": {"name": "f", "arguments": '{"n": 2}'}},
        {"index": 0, "id": "c3", "function": {"name": "f", "arguments": '{"n":'}},
        {"function": {"arguments": " 3}"}},
        {"index": 1, "id": "d1", "function": {"name": "g", "arguments": "{}"}},
        {"index": 1, "id": "d2", "function": {"name": "g", "arguments": "{"}},
        {"index": 1, "id": "d2", "function": {"arguments": "}"}},  # the id repeated: still d2
    ) == [("c1", "f", {"n": 1}), ("c2", "f", {"n": 2}), ("c3", "f", {"n": 3}), ("d1", "g", {}), ("d2", "g", {})]


def test_an_id_arriving_after_the_call_s_first_fragment_is_the_same_call() -> None:
    assert _calls_from({"index": 0, "function": {"name": "f", "arguments": ""}},
                       {"index": 0, "id": "late", "function": {"arguments": "{}"}}) == [("late", "f", {})]


def _event(chunk: Any, event: str = "message") -> httpx2.ServerSentEvent:
    return httpx2.ServerSentEvent(event=event, data=json.dumps(chunk))


def _streamed(*events: str, content_type: str | None = "text/event-stream") -> tuple[list[Any], StreamMeta]:
    """(deltas, stream facts) OpenAI Chat's decoder reads in a body of whole SSE events (each ending
    in a blank line)."""
    return decode_body(_chat(), "".join(events), content_type)


def chat_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **fields: Any) -> str:
    choice = {"delta": delta or {}, "finish_reason": finish}
    return "data: " + json.dumps({"choices": [choice], **fields}) + "\n\n"


def test_a_stream_labelled_otherwise_or_not_at_all_is_read_as_sse() -> None:
    for content_type in ("application/json", "text/plain; charset=utf-8", None):
        items = _streamed(chat_chunk({"content": "hi"}), "data: [DONE]\n\n", content_type=content_type)
        assert items == ([TextDelta(0, "hi")], StreamMeta(stop_raw="[DONE]"))


def test_blank_and_non_object_lines_are_skipped_and_the_choice_index_defaults_to_0() -> None:
    items = _streamed(
        chat_chunk({"content": "a"}),
        "data: \n\n",
        "data: 1\n\n",
        "data: [1, 2]\n\n",
        "data: " + json.dumps({"choices": [{"index": 1, "delta": {"content": "other"}}]}) + "\n\n",
        chat_chunk({"content": "b"}, "weird"),
        "data: [DONE]\n\n",
        chat_chunk({"content": "after the end"}),
    )
    assert items == ([TextDelta(0, "a"), TextDelta(0, "b")], StreamMeta(stop_raw="weird", stop_kind=StopKind.end_turn))


def test_reasoning_text_and_refusal_keep_one_block_each_across_chunks() -> None:
    items = _streamed(
        chat_chunk({"reasoning_content": "think "}),
        chat_chunk({"content": [{"type": "thinking", "thinking": "more"}, {"type": "text", "text": "No"}]}),
        chat_chunk({"refusal": ", sorry"}),
        chat_chunk(finish="stop"),
    )
    assert items == (
        [ReasoningDelta(0, "think "), ReasoningDelta(0, "more"), TextDelta(1, "No"), TextDelta(1, ", sorry")],
        StreamMeta(stop_raw="stop", stop_kind=StopKind.end_turn),
    )


def test_the_usage_chunk_gives_request_id_and_model() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    deltas, meta = _streamed(
        "data: " + json.dumps({"id": "cmpl-9", "model": "m-1", "choices": [], "usage": usage}) + "\n\n"
    )
    assert deltas == [] and meta == StreamMeta(usage=usage_from_openai(usage), request_id="cmpl-9", model="m-1")
    _, bare = _streamed("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n")
    assert bare == StreamMeta(usage=usage_from_openai(usage))


def test_an_error_event_is_raised_whatever_its_data_holds() -> None:
    for data, etype, message in (('{"message": "boom", "type": "server_error"}', "server", "boom"),
                                 ('{"error": {"message": "slow", "type": "rate_limit_error"}}', "rate_limit", "slow"),
                                 ('"overloaded"', "server", "stream error: overloaded")):
        with pytest.raises(ProviderError) as error:
            _streamed(chat_chunk({"content": "a"}), f"event: error\ndata: {data}\n\n", chat_chunk({"content": "b"}))
        assert (error.value.type, error.value.message) == (etype, message)


def test_content_parts_reads_text_and_thinking_parts_only() -> None:
    from ipyagent.drivers.protocols.openai_chat_stream import content_parts

    assert content_parts(
        [
            "junk",
            {"type": "image_url", "text": "a caption"},
            {"type": "text", "text": "a"},
            {"type": "reasoning", "reasoning": "r"},
            {"type": "thinking", "text": "t"},
            {"type": "thinking", "thinking": [{"type": "text", "text": "x"}, {"type": "other"}, {"text": "y"}]},
        ]
    ) == [("text", "a"), ("reasoning", "r"), ("reasoning", "t"), ("reasoning", "xy")]
    with pytest.raises(TypeError, match="^content is a dict, not text or a list of parts$"):
        content_parts({"text": "a"})


@pytest.mark.parametrize("setting", [{"temperature": 0.2}, {"top_p": 0.9}, {"stop": ["END"]}])
def test_an_openai_reasoning_model_refuses_each_sampling_setting(setting: dict[str, Any]) -> None:
    from ipyagent.core import ModelSettings

    stack = PromptStack(settings=ModelSettings(**setting))
    stack.add_user_message("hi")
    with pytest.raises(ProviderError) as error:
        OpenAIChatPromptDriver("o3-mini", api_key="k").settings_fields(stack)
    [name] = setting
    assert error.value.type == "unsupported_capability" and error.value.code == name
    assert error.value.message.endswith(f"the setting {name}: OpenAI reasoning models take no sampling settings; "
                                        "remove it or choose another model")
    assert _chat().settings_fields(stack)[name] == setting[name]  # others take it


def _settings_stack(**settings: Any) -> PromptStack:
    from ipyagent.core import ModelSettings

    stack = PromptStack(settings=ModelSettings(**settings))
    stack.add_user_message("hi")
    return stack


def test_openai_and_azure_take_at_most_4_stop_sequences_other_servers_more() -> None:
    four, five = _settings_stack(stop=list("abcd")), _settings_stack(stop=list("abcde"))
    assert _chat().settings_fields(four)["stop"] == list("abcd")
    for provider in ("openai", "azure-openai"):
        with pytest.raises(ProviderError) as error:
            _chat(provider=provider).settings_fields(five)
        assert error.value.code == "stop" and "the setting stop: at most 4 stop sequences;" in error.value.message
    assert _chat(provider="groq").settings_fields(five)["stop"] == list("abcde")


def test_a_thinking_budget_is_refused_but_0_on_a_model_that_does_not_reason() -> None:
    assert "reasoning_effort" not in _chat().settings_fields(
        _settings_stack(reasoning=0)
    )  # gpt-4.1-mini: nothing to turn off
    for model, budget in (("gpt-4.1-mini", 1024), ("o3-mini", 0), ("o3-mini", 1)):
        with pytest.raises(ProviderError) as error:
            OpenAIChatPromptDriver(model, api_key="k").settings_fields(_settings_stack(reasoning=budget))
        assert error.value.code == "reasoning"
        assert "Chat Completions takes an effort (low, medium, high), not a budget in tokens;" in error.value.message


def test_prompt_caching_cannot_be_turned_off() -> None:
    with pytest.raises(ProviderError) as error:
        _chat().settings_fields(_settings_stack(cache=False))
    assert (
        error.value.code == "cache"
        and "the setting cache: prompt caching is automatic and cannot be turned off;" in error.value.message
    )
    assert "cache" not in _chat().settings_fields(_settings_stack(cache=True))


def test_extra_body_options_go_into_the_body_itself() -> None:
    stack = PromptStack()
    stack.add_user_message("hi")
    _, body = _chat(provider_options={"extra_body": {"top_k": 5}, "user": "u-1"}).build_request(stack)
    assert body["top_k"] == 5 and body["user"] == "u-1" and "extra_body" not in body


def test_a_tool_choice_option_contradicting_the_tool_output_strategy_is_refused() -> None:
    stack = PromptStack()
    stack.add_user_message("hi")
    stack.output_schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    stack.output_strategy = "tool"
    assert _chat().build_request(stack)[1]["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}
    with pytest.raises(ProviderError) as error:
        _chat(provider_options={"tool_choice": "auto"}).build_request(stack)
    assert error.value.type == "invalid_request" and error.value.retryable is False and error.value.message == (
        "provider option tool_choice contradicts the tool output strategy, which forces a call to its output tool; "
        "drop one of them")


def test_the_tool_output_strategy_sends_its_tool_strict_when_the_schema_allows() -> None:
    from ipyagent.core import ToolDefinition
    from ipyagent.drivers.structured import OUTPUT_TOOL_DESCRIPTION, strict_or_none

    for schema, strict in (({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, True),
                           ({"type": "object", "additionalProperties": {"type": "integer"}}, False)):
        stack = PromptStack(tools=[ToolDefinition(name="other", description="d", parameters={"type": "object"})])
        stack.add_user_message("hi")
        stack.output_schema, stack.output_strategy = schema, "tool"
        assert (strict_or_none(schema) is not None) is strict
        _, body = _chat().build_request(stack)
        assert body["tools"][-1] == {
            "type": "function",
            "function": {
                "name": "final_result",
                "description": OUTPUT_TOOL_DESCRIPTION,
                "parameters": strict_or_none(schema) or schema,
                "strict": strict,
            },
        }
        assert body["tool_choice"] == "required"  # other tools too: some call, the output tool's in the end


def test_a_setting_given_again_in_extra_body_with_another_value_is_a_conflict() -> None:
    from ipyagent.core import ModelSettings

    stack = PromptStack(settings=ModelSettings(temperature=0.2))
    stack.add_user_message("hi")
    with pytest.raises(
        ProviderError, match=r"^temperature is set both by a setting \(0.2\) and by provider_options \(0.5\)"
    ):
        _chat(provider_options={"extra_body": {"temperature": 0.5}}).build_request(stack)


def test_a_tool_message_is_only_its_results_and_documents_go_as_file_or_text_parts() -> None:
    from ipyagent.core import ActionResultBlock, DocumentBlock, ToolAction

    action = ToolAction(tag="c1", name="f", input={})
    assert _chat()._messages(Message(role="tool", content=[ActionResultBlock(action=action, text="r")])) == \
        [{"role": "tool", "tool_call_id": "c1", "content": "r"}]
    assert _chat()._messages(Message(role="user", content=[TextBlock(text="a"), TextBlock(text="b")])) == \
        [{"role": "user", "content": "ab"}]  # text blocks only: one string
    pdf, text = DocumentBlock(data="JVBERi0="), DocumentBlock(mime_type="text/plain", text="notes", name="n.txt")
    [wire] = _chat()._messages(Message(role="user", content=[TextBlock(text="read"), pdf, text]))
    assert wire["content"] == [
        {"type": "text", "text": "read"},
        {"type": "file", "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
        {"type": "text", "text": "\n\n<document name='n.txt'>\nnotes\n</document>"}]


def test_system_blocks_go_as_one_system_message_and_none_without_text() -> None:
    from ipyagent.core import SystemBlock
    from ipyagent.drivers.protocols.openai_chat_request import system_message

    stack = PromptStack()
    stack.system_blocks = [SystemBlock(text="Be brief."), SystemBlock(text=""), SystemBlock(text="Say why.")]
    assert system_message(stack) == [{"role": "system", "content": "Be brief.\n\nSay why."}]
    stack.system_blocks = [SystemBlock(text="")]
    assert system_message(stack) == []
    assert system_message(PromptStack()) == []


def test_a_message_holding_only_tool_results_sends_only_them() -> None:
    from ipyagent.core import ActionResultBlock, ToolAction

    result = ActionResultBlock(action=ToolAction(tag="c1", name="f", input={}), text="r")
    assert _chat()._messages(Message(role="user", content=[result])) == [
        {"role": "tool", "tool_call_id": "c1", "content": "r"}
    ]
    assert _chat()._messages(Message(role="user", content=[])) == [{"role": "user", "content": ""}]


def test_a_model_that_does_not_reason_keeps_vision_documents_and_json_mode() -> None:
    from ipyagent.drivers.base import Capabilities

    assert _chat().capabilities_for("gpt-4o") == Capabilities(
        vision=True, structured_output_native=True, reasoning=False, documents=True
    )
    assert _chat().capabilities_for("o3") == OpenAIChatPromptDriver.capabilities


def test_the_request_asks_for_an_event_stream() -> None:
    assert _chat().headers()["Accept"] == "text/event-stream"


def _whole(data: dict[str, Any]) -> list[Any]:
    """A whole reply's deltas, then the stream facts it gave (a `StreamMeta`)."""
    decoder = _chat().decoder()
    return [*decoder.whole(data), decoder.meta]


def test_a_whole_completion_gives_choice_0_as_the_stream_would() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    message = {
        "reasoning_content": "think ",
        "content": [{"type": "thinking", "thinking": "more"}, {"type": "text", "text": "Hi"}],
        "refusal": " no",
        "tool_calls": [
            {"id": "c1", "function": {"name": "f", "arguments": {"x": 1}}},
            {"function": {"arguments": None}},
        ],
    }
    data = {"id": "cmpl-1", "model": "m-2024", "usage": usage,
            "choices": ["junk", {"index": 1, "message": {"content": "another choice"}},
                        {"index": 0, "finish_reason": "length", "message": message}]}
    assert _whole(data) == [
        ReasoningDelta(0, "think "), ReasoningDelta(0, "more"),  # one reasoning block, then one text block
        TextDelta(1, "Hi"), TextDelta(1, " no"),
        ToolCallDelta(2, "c1", "f", '{"x": 1}'), ToolCallDelta(3, None, None, ""),
        StreamMeta(usage=usage_from_openai(usage), request_id="cmpl-1", model="m-2024", stop_raw="length",
                   stop_kind=StopKind.max_tokens),
    ]


def test_a_whole_completion_s_defaults_index_reasoning_key_and_stop_reason() -> None:
    calls = {
        "choices": [
            {"message": {"reasoning": "r", "tool_calls": [{"id": "c", "function": {"name": "g", "arguments": "{}"}}]}}
        ]
    }
    assert _whole(calls) == [ReasoningDelta(0, "r"), ToolCallDelta(1, "c", "g", "{}"),
                             StreamMeta(stop_raw="tool_calls", stop_kind=StopKind.tool_use)]  # no usage: no meta
    assert _whole({"usage": {"prompt_tokens": 1}, "choices": [{"message": {"content": "x"}}]})[-1] == \
        StreamMeta(usage=usage_from_openai({"prompt_tokens": 1}), stop_raw="stop", stop_kind=StopKind.end_turn)
    assert _whole({"choices": [{"message": {"content": "x"}}]})[-1] == StreamMeta(
        stop_raw="stop", stop_kind=StopKind.end_turn
    )
    assert _whole({"choices": [{"finish_reason": "odd", "message": {}}]})[-1].stop_kind is StopKind.end_turn


def test_a_whole_reply_with_an_error_or_without_choice_0_fails() -> None:
    with pytest.raises(ProviderError) as error:
        _whole({"error": {"type": "rate_limit_error", "message": "slow down"}})
    assert (error.value.type, error.value.message) == ("rate_limit", "slow down")
    data = {"choices": [{"index": 1, "message": {"content": "y" * 300}}]}
    with pytest.raises(ProviderError) as error:
        _whole(data)
    assert error.value.type == "invalid_response" and not error.value.retryable
    assert error.value.message == f"openai sent a JSON reply without choices: {json.dumps(data)[:200]!r}"


def test_assistant_message_without_text_sends_null_content_and_tool_results_come_first() -> None:
    from ipyagent.core import ActionResultBlock, ToolAction

    driver = _chat()
    assert driver._messages(Message(role="assistant")) == [
        {"role": "assistant", "content": ""}
    ]  # some servers reject null
    action = ToolAction(tag="c1", name="get_weather", input={"city": "Oslo"})
    mixed = Message(role="user", content=[TextBlock(text="and now?"), ActionResultBlock(action=action, text="61 F")])
    wire = driver._messages(mixed)
    assert [m["role"] for m in wire] == ["tool", "user"]  # a result answers its call before any new text
    assert wire[0] == {"role": "tool", "tool_call_id": "c1", "content": "61 F"}
    assert wire[1] == {"role": "user", "content": "and now?"}


def test_schema_names_are_cut_to_64_characters_and_cleaned() -> None:
    assert schema_name({"title": "x" * 80}) == "x" * 64
    assert schema_name({"title": "My Schema!"}) == "My_Schema_"
    assert schema_name({}) == "output"


def test_image_urls_are_sent_as_urls_and_bytes_as_data_urls() -> None:
    driver = _chat()
    url = ImageBlock(url="https://example.com/cat.png", mime_type="image/png")
    inline = ImageBlock(data="iVBORw0KGgo=", mime_type="image/png")
    [message] = driver._messages(Message(role="user", content=[TextBlock(text="look"), url, inline]))
    parts = message["content"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert parts[2] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


# -- retry rules (DESIGN.md "drivers") ---------------------------------------------------------------


class Scripted(httpx2.AsyncBaseTransport):
    """Answers each request with the next (status, headers, body); counts the requests."""

    def __init__(self, *replies: tuple[int, dict[str, str], bytes]) -> None:
        self.replies, self.calls = list(replies), 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, body = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return httpx2.Response(status, headers=headers, content=body)


OK = (200, {"content-type": "text/event-stream"},
      b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
      b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def _error(status: int, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return (
        status,
        {"content-type": "application/json", **(headers or {})},
        json.dumps({"error": {"message": f"HTTP {status}"}}).encode(),
    )


async def _turn(driver: OpenAIChatPromptDriver) -> list[Any]:
    stack = PromptStack()
    stack.add_user_message("hi")
    try:
        return [e async for e in driver.stream(stack)]
    finally:
        await driver.close()


def _events(driver: OpenAIChatPromptDriver) -> list[Any]:
    return asyncio.run(_turn(driver))


@pytest.mark.parametrize(
    "status, etype", [(408, "timeout"), (429, "rate_limit"), (500, "server"), (503, "server"), (529, "overloaded")]
)
def test_retried_statuses(no_sleep: list[float], status: int, etype: str) -> None:
    transport = Scripted(_error(status), OK)
    events = _events(_chat(transport=transport, max_attempts=3))
    assert events[-1].type == "model_completed" and transport.calls == 2
    assert events[-1].metadata["attempts"] == 2 and len(no_sleep) == 1
    failed = _events(_chat(transport=Scripted(_error(status)), max_attempts=1))
    assert failed[-1].error.type == etype


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_not_retried_statuses(no_sleep: list[float], status: int) -> None:
    transport = Scripted(_error(status), OK)
    events = _events(_chat(transport=transport, max_attempts=3))
    assert events[-1].type == "model_failed" and transport.calls == 1 and no_sleep == []
    assert "gave up" not in events[-1].error.message


def test_retry_after_is_honoured_up_to_max_retry_wait_and_reported_beyond(no_sleep: list[float]) -> None:
    at_limit = Scripted(_error(429, {"retry-after": "30"}), OK)
    events = _events(_chat(transport=at_limit, max_attempts=2, max_retry_wait=30))
    assert events[-1].type == "model_completed" and no_sleep == [30]
    beyond = Scripted(_error(429, {"retry-after": "31"}), OK)
    events = _events(_chat(transport=beyond, max_attempts=3, max_retry_wait=30))
    assert events[-1].type == "model_failed" and beyond.calls == 1 and no_sleep == [30]
    assert events[-1].error.retry_after == 31


def test_gave_up_names_the_attempts_only_after_retrying(no_sleep: list[float]) -> None:
    events = _events(_chat(transport=Scripted(_error(503)), max_attempts=3))
    assert events[-1].error.message.endswith("(gave up after 3 attempts)") and len(no_sleep) == 2
    once = _events(_chat(transport=Scripted(_error(503)), max_attempts=1))
    assert "gave up" not in once[-1].error.message


def test_each_retry_is_announced_before_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `RetryScheduled` comes out of the stream before the wait it announces, with the
    failed try's status, the wait and the attempt that follows."""
    import ipyagent.drivers.turn

    log: list[Any] = []

    async def fake_sleep(seconds: float) -> None:
        log.append(("sleep", seconds))

    monkeypatch.setattr(ipyagent.drivers.turn, "retry_sleep", fake_sleep)
    driver = _chat(transport=Scripted(_error(429, {"retry-after": "2"}), _error(503), OK), max_attempts=3)
    stack = PromptStack()
    stack.add_user_message("hi")

    async def main() -> None:
        try:
            async for event in driver.stream(stack):
                log.append(event)
        finally:
            await driver.close()

    asyncio.run(main())
    kinds = [e[0] if isinstance(e, tuple) else e.type for e in log]
    assert kinds == [
        "model_started",
        "retry_scheduled",
        "sleep",
        "retry_scheduled",
        "sleep",
        "text_delta",
        "model_completed",
    ]
    first, second = log[1], log[3]
    assert first.text == "retrying 2/3 in 2.0 s · 429 rate limit" and log[2] == ("sleep", 2.0)
    assert (second.attempt, second.max_attempts, second.error.status) == (3, 3, 503)
    assert 1.0 <= second.wait_s <= 1.5 and log[4] == ("sleep", second.wait_s)  # 0.5 s doubled, plus jitter
    assert second.text == f"retrying 3/3 in {second.wait_s:.1f} s · 503 server error"
    assert log[-1].metadata["retry_waits"] == [2.0, second.wait_s]


def _cyclic_garbage(run: Any) -> list[Any]:
    """What `run()` leaves that only the garbage collector frees (reference cycles)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_a_turn_leaves_nothing_for_the_garbage_collector(no_sleep: list[float]) -> None:
    """A first try that succeeds builds no retry machinery (tenacity's retrier is a reference
    cycle): the turn and its response are freed when the turn ends, not at the next collection
    (an evaluation keeps ~50 turns in flight and runs thousands). After a retry, the opened
    response is still not kept (the failed try's error may be, with its traceback)."""
    from ipyagent.drivers.turn import Opened, Sent

    kept = (Sent, Opened, httpx2.Response, httpx2.Request, TextDelta)
    ok = _cyclic_garbage(lambda: _events(_chat(transport=Scripted(OK))))
    assert not [o for o in ok if isinstance(o, kept)]
    retried = _cyclic_garbage(lambda: _events(_chat(transport=Scripted(_error(429), OK), max_attempts=2)))
    assert no_sleep and not [
        o for o in retried if isinstance(o, Opened) or isinstance(o, httpx2.Response) and o.status_code == 200
    ]


@pytest.mark.parametrize(
    "replies",
    [
        [OK],
        [_error(429), OK],
        [(200, OK[1], b"data: {oops\n\n" + OK[2])],
        [(200, OK[1], OK[2].split(b"\n\n")[0] + b"\n\ndata: {oops\n\n" + OK[2])],
        [_error(400)],
    ],
    ids=["completed", "retried", "unreadable-first-event", "unreadable-later-event", "failed"],
)
def test_a_turn_closes_every_iterator_it_opens(no_sleep: list[float], replies: list[Any]) -> None:
    """However the turn ends, the iterators over its body (the frames, the text, the bytes) are
    closed by the turn, not left to the event loop's finalizer (a task each, later, holding the
    response until it runs)."""
    assert left_to_the_loop(lambda: _turn(_chat(transport=Scripted(*replies), max_attempts=2))) == []


def test_a_driver_dropped_without_close_has_its_client_closed_on_its_loop() -> None:
    """``Agent(...).run(...)`` in a cell drops its driver without `close`: its client (its pooled
    connections) is closed on the loop it connected on, not left to the garbage collector."""
    async def main() -> tuple[bool, bool]:
        driver = _chat(transport=Scripted(OK))
        stack = PromptStack()
        stack.add_user_message("hi")
        [_ async for _ in driver.stream(stack)]
        client = driver._client
        assert client is not None
        del driver
        gc.collect()
        open_when_dropped = not client.is_closed
        for _ in range(3):  # the closing is scheduled on the loop, then runs
            await asyncio.sleep(0)
        return open_when_dropped, client.is_closed

    assert asyncio.run(main()) == (True, True)


def test_no_retry_no_notice(no_sleep: list[float]) -> None:
    events = _events(_chat(transport=Scripted(_error(400), OK), max_attempts=3))
    assert [e.type for e in events] == ["model_started", "model_failed"]
    gave_up = _events(_chat(transport=Scripted(_error(503)), max_attempts=2))
    assert [e.type for e in gave_up] == ["model_started", "retry_scheduled", "model_failed"]


@pytest.mark.parametrize("error, wait, text", [
    (ProviderError("rate_limit", "slow down", status=429), 2.0, "retrying 2/3 in 2.0 s · 429 rate limit"),
    (ProviderError("overloaded", "busy", status=529), 1.26, "retrying 2/3 in 1.3 s · 529 overloaded"),
    (ProviderError("server", "oops", status=500), 0.5, "retrying 2/3 in 0.5 s · 500 server error"),
    (ProviderError("connection", "refused"), 0.74, "retrying 2/3 in 0.7 s · connection error"),
    (ProviderError("timeout", "read timed out"), 8.0, "retrying 2/3 in 8.0 s · timed out"),
])
def test_retry_notice_text(error: ProviderError, wait: float, text: str) -> None:
    from ipyagent.core import RetryScheduled

    assert RetryScheduled(2, 3, wait, error).text == text


def test_backoff_grows_exponentially_within_max_retry_wait() -> None:
    driver = _chat(max_retry_wait=5.0)

    def wait(attempt: int) -> float:
        state = RetryCallState(None, None, (), {})
        state.attempt_number = attempt
        return driver._wait(state)

    assert 0.5 <= wait(1) <= 1.0  # 0.5 s, plus up to 0.5 s of jitter
    assert 2.0 <= wait(3) <= 2.5
    assert wait(6) == 5.0  # 16 s, capped by max_retry_wait


def test_retry_after_as_seconds_milliseconds_and_an_http_date() -> None:
    assert parse_retry_after(httpx2.Headers({"retry-after": "7"})) == 7.0
    assert parse_retry_after(httpx2.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 110 <= parse_retry_after(httpx2.Headers({"retry-after": when})) <= 121
    assert parse_retry_after(httpx2.Headers({"retry-after": "soon"})) is None


def test_timeouts_are_typed_timeout_and_other_transport_errors_connection() -> None:
    driver = _chat()
    assert driver._transport_error(httpx2.ReadTimeout("slow"), "http://h").type == "timeout"
    assert driver._transport_error(httpx2.ConnectError("refused"), "http://h").type == "connection"
    assert driver._transport_error(httpx2.RemoteProtocolError("eof"), "http://h").type == "connection"
    assert ProviderError("timeout", "x").retryable and ProviderError("connection", "x").retryable


def test_a_stream_line_that_is_not_json_fails_the_turn_and_quotes_the_line(no_sleep: list[float]) -> None:
    bad = (200, {"content-type": "text/event-stream"},
           b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: {"choices": [oops\n\n')
    transport = Scripted(bad)
    events = _events(_chat(transport=transport, max_attempts=3))
    assert events[-1].type == "model_failed" and events[-1].error.type == "invalid_response"
    assert events[-1].error.message.startswith("""openai sent a stream line that is not JSON: '{"choices": [oops'""")
    assert transport.calls == 1 and events[-1].partial.text == "hi"


def test_stop_kind_of_a_cut_stream_is_missing() -> None:
    assert StreamMeta().stop_kind is None and StopKind.max_tokens.value == "max_tokens"


# -- one partial-message builder (threads, run store, interrupted runs) ------------------------------


def test_a_stopped_reply_keeps_reasoning_text_and_complete_tool_calls() -> None:
    from ipyagent.core import ActionCallBlock, ReasoningBlock, TextDelta
    from ipyagent.drivers import Aggregator

    deltas = [ReasoningDelta(0, "think", "sig"), TextDelta(1, "Hel"), TextDelta(1, "lo"),
              ToolCallDelta(2, "c1", "get_weather", '{"city": "Oslo"}'), ToolCallDelta(3, "c2", "get_time", '{"tz": ')]
    aggregator = Aggregator()
    assert aggregator.partial() is None
    for delta in deltas:
        aggregator.add(delta)
    message = aggregator.partial("interrupted")
    assert [type(b) for b in message.content] == [ReasoningBlock, type(message.content[1]), ActionCallBlock]
    assert message.reasoning == "think" and message.content[0].signature == "sig" and message.text == "Hello"
    assert message.tool_calls[0].input == {"city": "Oslo"}
    assert message.status == "interrupted" and message.error is None
    assert message.metadata["partial_tool_calls"] == [{"id": "c2", "name": "get_time", "raw_arguments": '{"tz": '}]



# A user's fork of a process that runs threads (the pricing thread) is the case under test:
# Python 3.12+ warns about any such fork.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_prices_are_looked_up_in_a_forked_child_too() -> None:
    """The pricing thread does not survive a fork; the child gets its own instead of waiting forever."""
    import os

    from ipyagent.drivers import http

    assert http._pricing_executor().submit(lambda: 1).result() == 1  # the parent's thread is running
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a lookup comes back
        code = 1
        try:
            code = 0 if http._pricing_executor().submit(lambda: 7).result(timeout=30) == 7 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
