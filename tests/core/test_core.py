"""Unit tests of the core IR: content blocks, Message, PromptStack, tool names, Usage, StopReason."""

from __future__ import annotations

import base64
import json
from datetime import date
from decimal import Decimal
from types import SimpleNamespace

import pydantic
import pytest

from ipyagent.core import (
    ActionArtifact,
    ActionCallBlock,
    ActionResultBlock,
    AudioArtifact,
    AudioBlock,
    BlobArtifact,
    BuiltinTool,
    ConfigurationError,
    DocumentBlock,
    ErrorArtifact,
    GenericArtifact,
    GenericBlock,
    ImageArtifact,
    ImageBlock,
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    InfoArtifact,
    JsonArtifact,
    ListArtifact,
    Message,
    MessageError,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    StopKind,
    StopReason,
    TableArtifact,
    TextArtifact,
    TextBlock,
    ToolAction,
    ToolCallDelta,
    ToolNameError,
    Usage,
    from_native_name,
    join_text,
    parse_arguments,
    to_native_name,
)
from ipyagent.core.artifacts import split_media
from ipyagent.core.content import UNNAMED_CALL, Citation
from ipyagent.core.messages import upgrade_status_keys, upgrade_usage_names
from ipyagent.core.redact import MASK, add_secret
from ipyagent.core.tool_action import MAX_NATIVE_NAME
from ipyagent.drivers.decode import lenient

PNG = b"\x89PNG\r\n\x1a\nfake-image-bytes"


# -- content blocks and Message ---------------------------------------------------------


def _all_blocks():
    call = ToolAction(tag="call_1", name="Calculator", path="add", input={"a": 1, "b": 2})
    return [
        TextBlock(text="hello"),
        ReasoningBlock(text="thinking...", signature="sig-abc", redacted=False),
        ImageBlock(mime_type="image/jpeg", data=base64.b64encode(PNG).decode()),
        ImageBlock(url="https://example.com/cat.png"),
        AudioBlock(mime_type="audio/mpeg", data="AAAA"),
        GenericBlock(value={"provider_thing": [1, 2, {"x": None}]}),
        ActionCallBlock(action=call, raw_arguments='{"a": 1, "b": 2}'),
        ActionResultBlock(action=call.model_copy(update={"output": "3"}), text="3", is_error=False),
    ]


def test_message_round_trips_every_block_type_through_json():
    blocks = _all_blocks()
    msg = Message(
        role="assistant", content=blocks, usage=Usage(input_tokens=5, output_tokens=7), metadata={"latency_s": 0.5}
    )
    data = json.loads(msg.model_dump_json())
    assert [b["type"] for b in data["content"]] == [
        "text", "reasoning", "image", "image", "audio", "generic", "action_call", "action_result",
    ]
    back = Message.model_validate(data)
    assert [type(b) for b in back.content] == [type(b) for b in blocks]
    assert back == msg
    assert Message.model_validate_json(msg.model_dump_json()) == msg


@pytest.mark.parametrize(("metadata", "status"), [
    ({"partial": True}, "partial"),  # a process killed mid-turn
    ({"partial": True, "failed": True}, "failed"),
    ({"failed": True}, "failed"),
    ({"partial": True, "interrupted": True}, "interrupted"),
    ({"partial": True, "failed": True, "interrupted": True}, "interrupted"),  # the run store's interrupted node
    ({"latency_s": 0.5}, "complete"),
])
def test_old_metadata_flags_become_the_message_status(metadata: dict, status: str) -> None:
    """Saved transcripts and run stores from before issue 27 said how whole a message was in its
    metadata; they load with the typed status, the flags out of the metadata, the rest kept."""
    message = Message.model_validate({"role": "assistant", "metadata": {**metadata, "latency_s": 0.5}})
    assert message.status == status and message.metadata == {"latency_s": 0.5} and message.error is None
    assert message.complete is (status == "complete")


def test_an_old_error_in_the_metadata_becomes_the_message_error() -> None:
    old = {"type": "overloaded", "code": None, "message": "busy", "retryable": True, "status": 529}
    message = Message.model_validate({"role": "assistant", "metadata": {"partial": True, "error": old}})
    assert message.status == "failed" and message.error == MessageError(**old) and message.metadata == {}
    given = Message.model_validate({"role": "assistant", "status": "interrupted", "metadata": {"failed": True}})
    assert given.status == "interrupted" and given.metadata == {}  # a status given outright wins


def test_legacy_flags_all_false_make_a_complete_message_and_leave_the_metadata() -> None:
    """Every old key present and false (a run store wrote all four): complete, none of them kept."""
    old = {"partial": False, "failed": False, "interrupted": False, "error": None, "latency_s": 0.5}
    upgraded = upgrade_status_keys({"role": "assistant", "metadata": old})
    assert upgraded == {"role": "assistant", "status": "complete", "metadata": {"latency_s": 0.5}}
    plain = {"role": "assistant", "metadata": {"latency_s": 0.5}}
    assert upgrade_status_keys(plain) is plain  # no old key: the data as it is, no status added


def test_an_error_given_outright_wins_over_the_metadata_s_and_one_without_a_type_is_dropped() -> None:
    given = {"type": "rate_limit", "code": None, "message": "slow down", "retryable": True, "status": 429}
    old = {"type": "overloaded", "code": None, "message": "busy", "retryable": True, "status": 529}
    message = Message.model_validate({"role": "assistant", "error": given, "metadata": {"error": old}})
    assert message.status == "failed" and message.error == MessageError(**given) and message.metadata == {}
    untyped = upgrade_status_keys({"role": "assistant", "metadata": {"error": {"message": "busy"}}})
    assert untyped == {"role": "assistant", "status": "failed", "metadata": {}}  # failed, with no error to keep


def test_a_failed_message_round_trips_with_its_error() -> None:
    error = ProviderError("rate_limit", "slow down", status=429)
    message = Message(role="assistant", status="failed", error=MessageError.of(error))
    assert message.error.model_dump() == error.to_dict()
    assert Message.model_validate_json(message.model_dump_json()) == message
    with pytest.raises(pydantic.ValidationError):
        Message(role="assistant", status="half")


def test_message_from_plain_dicts_dispatches_on_type():
    msg = Message.model_validate(
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "hmm"},
                {"type": "text", "text": "Hi "},
                {"type": "action_call", "action": {"tag": "t1", "name": "Search", "path": "web", "input": {"q": "x"}}},
                {"type": "text", "text": "there"},
            ],
        }
    )
    assert isinstance(msg.content[0], ReasoningBlock)
    assert isinstance(msg.content[2], ActionCallBlock)
    assert msg.text == "Hi there"
    assert msg.reasoning == "hmm"
    assert msg.tool_calls == [ToolAction(tag="t1", name="Search", path="web", input={"q": "x"})]
    assert msg.tool_results == []


def test_unknown_block_type_is_rejected():
    with pytest.raises(pydantic.ValidationError):
        Message.model_validate({"role": "user", "content": [{"type": "video", "url": "x"}]})
    with pytest.raises(pydantic.ValidationError):
        Message.model_validate({"role": "robot", "content": []})


# -- PromptStack reduction ------------------------------------------------------------


def test_add_messages_str_and_text_artifact():
    stack = PromptStack()
    s = stack.add_system_message("be brief")
    u = stack.add_user_message(TextArtifact(value="hi"))
    a = stack.add_assistant_message("hello")
    assert [m.role for m in stack.messages] == ["system", "user", "assistant"]
    assert s.content == [TextBlock(text="be brief")]
    assert u.content == [TextBlock(text="hi")]
    assert a.content == [TextBlock(text="hello")]
    assert stack.messages == [s, u, a]


def test_image_artifact_becomes_image_block():
    msg = PromptStack().add_user_message(ImageArtifact(value=PNG, mime_type="image/webp"))
    (block,) = msg.content
    assert isinstance(block, ImageBlock)
    assert block.mime_type == "image/webp"
    assert base64.b64decode(block.data) == PNG
    assert block.url is None


def test_audio_and_generic_artifacts_map_to_their_blocks():
    msg = PromptStack().add_user_message(
        [AudioArtifact(value=b"RIFF", mime_type="audio/wav"), GenericArtifact(value={"k": [1]})]
    )
    audio, generic = msg.content
    assert isinstance(audio, AudioBlock) and base64.b64decode(audio.data) == b"RIFF"
    assert isinstance(generic, GenericBlock) and generic.value == {"k": [1]}


def test_action_artifact_without_output_is_a_call():
    action = ToolAction(tag="c1", name="Calculator", path="add", input={"a": 1})
    msg = PromptStack().add_assistant_message(ActionArtifact(value=action))
    (block,) = msg.content
    assert isinstance(block, ActionCallBlock)
    assert block.action == action
    assert msg.tool_calls == [action]


def test_action_artifact_with_output_is_a_result():
    action = ToolAction(tag="c1", name="Calculator", path="add", input={"a": 1}, output=TextArtifact(value="42"))
    msg = PromptStack().add_user_message(ActionArtifact(value=action))
    (block,) = msg.content
    assert isinstance(block, ActionResultBlock)
    assert block.text == "42"
    assert block.is_error is False
    assert block.action.tag == "c1"
    assert msg.tool_results == [block]


def test_action_artifact_with_error_output_is_an_error_result():
    err = ErrorArtifact(value="division by zero", exception_type="ZeroDivisionError")
    action = ToolAction(tag="c2", name="Calculator", path="divide", input={"a": 1, "b": 0}, output=err)
    (block,) = PromptStack().add_user_message(ActionArtifact(value=action)).content
    assert isinstance(block, ActionResultBlock)
    assert block.is_error is True
    assert block.text == err.to_text()
    assert "ZeroDivisionError" in block.text and "division by zero" in block.text


def test_list_artifact_flattens_recursively():
    nested = ListArtifact(
        value=[
            TextArtifact(value="one"),
            ListArtifact(value=[ImageArtifact(value=PNG), ListArtifact(value=[InfoArtifact(value="deep")])]),
            TextArtifact(value="two"),
        ]
    )
    msg = PromptStack().add_user_message(nested)
    assert [type(b) for b in msg.content] == [TextBlock, ImageBlock, TextBlock, TextBlock]
    assert [b.text for b in msg.content if isinstance(b, TextBlock)] == ["one", "deep", "two"]


def test_other_artifacts_fall_back_to_text():
    info = InfoArtifact(value="the tool returned nothing")
    blob = BlobArtifact(value=b"\x00" * 10, mime_type="application/pdf")
    err = ErrorArtifact(value="boom")
    msg = PromptStack().add_user_message([info, blob, err])
    assert msg.content == [TextBlock(text=info.to_text()), TextBlock(text=blob.to_text()), TextBlock(text="boom")]
    assert "application/pdf" in msg.content[1].text and "10 bytes" in msg.content[1].text


def test_add_message_passes_a_message_through():
    stack = PromptStack()
    m = Message(role="user", content=[TextBlock(text="x")])
    assert stack.add_assistant_message(m) is m
    assert stack.messages == [m]


class Answer(pydantic.BaseModel):
    city: str
    temperature: float


def test_output_json_schema_from_pydantic_model():
    stack = PromptStack(output_schema=Answer)
    schema = stack.to_output_json_schema()
    assert schema == Answer.model_json_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"city", "temperature"}
    assert set(schema["required"]) == {"city", "temperature"}
    json.dumps(schema)  # plain JSON


def test_output_json_schema_from_dict_and_none():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert PromptStack(output_schema=schema).to_output_json_schema() == schema
    assert PromptStack().to_output_json_schema() is None


@pytest.mark.parametrize("bad", ["not a schema", 42, Answer(city="x", temperature=1.0), int])
def test_output_json_schema_bad_type(bad):
    with pytest.raises(TypeError, match=r"^output_schema must be a pydantic model class or a JSON Schema dict, not "
                                        f"{type(bad).__name__}$"):
        PromptStack(output_schema=bad).to_output_json_schema()


def test_a_result_keeps_its_media_with_their_types_and_a_plain_output_is_no_error() -> None:
    """An action's output with audio: the result's text and its media block, with the audio's MIME type;
    an output that is no artifact (no `type`) is its text, not an error; any other value is its str()."""
    from ipyagent.core.prompt_stack import to_blocks

    out = ListArtifact(value=[TextArtifact(value="heard"), AudioArtifact(value=b"ID3", mime_type="audio/mpeg")])
    (block,) = to_blocks(ActionArtifact(value=ToolAction(tag="c", name="listen", input={}, output=out)))
    assert (block.text, block.is_error) == ("heard", False)
    assert [(m.type, m.mime_type, m.data) for m in block.media] == [("audio", "audio/mpeg", "SUQz")]
    (plain,) = to_blocks(ActionArtifact(value=ToolAction(tag="p", name="echo", input={}, output="said")))
    assert (plain.text, plain.is_error) == ("said", False)
    assert to_blocks(42) == [TextBlock(text="42")]


# -- native tool names ------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool,activity",
    [("Calculator", "add"), ("Calculator", "add_numbers"), ("Web2", "search_v2"), ("T", "_private"), ("A", "1")],
)
def test_native_name_round_trip(tool, activity):
    native = to_native_name(tool, activity)
    assert native == f"{tool}_{activity}"
    assert from_native_name(native) == (tool, activity)
    assert ToolAction(tag="id", name=tool, path=activity).native_name == native
    # Off the wire the name stays whole: only the toolbox knows it is a BaseTool method.
    action = ToolAction.from_native("id", native, {})
    assert (action.name, action.path, action.native_name) == (native, None, native)


@pytest.mark.parametrize("tool", ["my_tool", "my-tool", "1Tool", "", "Tool!", "Tööl"])
def test_bad_tool_name(tool):
    with pytest.raises(ToolNameError, match="tool name"):
        to_native_name(tool, "run")


@pytest.mark.parametrize("activity", ["run-it", "run it", "", "run.it"])
def test_bad_activity_name(activity):
    with pytest.raises(ToolNameError, match="activity name"):
        to_native_name("Tool", activity)


def test_native_name_too_long():
    tool = "T" * 30
    ok = "a" * (MAX_NATIVE_NAME - len(tool) - 1)
    assert len(to_native_name(tool, ok)) == MAX_NATIVE_NAME == 64
    with pytest.raises(ToolNameError, match="65 characters"):
        to_native_name(tool, ok + "a")


def test_tool_name_error_is_a_value_error():
    assert issubclass(ToolNameError, ValueError)
    with pytest.raises(ToolNameError):
        from_native_name("")


def test_plain_function_name_maps_to_name_only():
    assert from_native_name("search") == ("search", None)
    assert from_native_name("search_") == ("search_", None)
    action = ToolAction.from_native("id", "GetWeatherArgs", {})
    assert action.path is None and action.native_name == "GetWeatherArgs"


def test_a_function_tool_keeps_its_own_name():
    """``word_count`` is the function ``word_count``, not tool ``word`` activity ``count``."""
    action = ToolAction.from_native("id", "word_count", {"text": "a b"})
    assert (action.name, action.path) == ("word_count", None)
    with pytest.raises(ToolNameError):
        ToolAction.from_native("id", "", {})


@pytest.mark.parametrize("native", ["_private", "web-search_query", "get_weather-now", "a.b_c", "__init__"])
def test_names_outside_our_form_round_trip_unchanged(native):
    """A model may call a function whose name is not ``Tool_activity`` (any declared
    ToolDefinition name, e.g. an MCP tool). It must come back as the same wire name, or
    the next request (which sends the call back in history) cannot be built."""
    action = ToolAction.from_native("id", native, {})
    assert action.native_name == native


# -- from_deltas ----------------------------------------------------------------------


def _d(call_id=None, name=None, arguments=""):
    return ToolCallDelta(0, call_id, name, arguments)


def test_action_call_from_deltas_joins_fragments():
    block = ActionCallBlock.from_deltas(
        [_d("call_1", "Calc_add", ""), _d(arguments='{"a": '), _d(arguments="1, "), _d(arguments='"b": 2}')]
    )
    assert block.action.tag == "call_1"
    assert (block.action.name, block.action.path) == ("Calc_add", None)  # resolved by the toolbox, not here
    assert block.action.input == {"a": 1, "b": 2}
    assert block.raw_arguments == '{"a": 1, "b": 2}'


def test_action_call_from_deltas_last_non_empty_id_and_name_win():
    block = ActionCallBlock.from_deltas(
        [_d("first", "Old_name", '{"x"'), _d("", "", ": 1"), _d("second", None, "}"), _d(None, "New_name")]
    )
    assert block.action.tag == "second"
    assert block.action.native_name == "New_name"
    assert block.action.input == {"x": 1}


@pytest.mark.parametrize("fragments", [[], [""], ["", ""], ["  "]])
def test_action_call_from_deltas_empty_arguments_mean_empty_dict(fragments):
    block = ActionCallBlock.from_deltas([_d("c", "lookup")] + [_d(arguments=f) for f in fragments])
    assert block.action.input == {}


@pytest.mark.parametrize("raw", ['{"a": 1', "not json", "[1, 2]", '"text"'])
def test_action_call_from_deltas_invalid_json(raw):
    """Arguments that are not a JSON object make a call that is not run, its error for the model (not an exception)."""
    half = len(raw) // 2
    block = ActionCallBlock.from_deltas([_d("c", "Calc_add", raw[:half]), _d(arguments=raw[half:])])
    assert repr(raw) in block.error and "'Calc_add'" in block.error and "(id 'c'" in block.error
    assert block.action.input == {} and block.raw_arguments == raw


def test_a_call_without_a_name_or_an_id_is_call_position_with_an_error_naming_no_tool() -> None:
    """Neither id nor name in any fragment: the id is ``call_<position>`` (1 unless given), the tool
    `UNNAMED_CALL`, and the error says which call and that it names no tool (no ``tool`` part)."""
    block = ActionCallBlock.from_deltas([_d(arguments='{"a": 1}')])
    assert (block.action.tag, block.action.name, block.action.input) == ("call_1", UNNAMED_CALL, {"a": 1})
    assert block.error == ("tool call 1 (id 'call_1') was not run: it names no tool; call the tool again with its "
                           "name and its arguments as one JSON object")
    broken = ActionCallBlock.from_deltas([_d(arguments="[1]")], position=3)
    assert broken.action.tag == "call_3" and broken.error.startswith(
        "tool call 3 (id 'call_3') was not run: it names no tool, and its arguments are JSON but not an object: '[1]';")


def test_a_call_keeps_the_last_signature_given_and_reads_fragments_without_one() -> None:
    signed = [ToolCallDelta(0, "c", "lookup", "{}", signature="s1"), ToolCallDelta(0, None, None, "", signature="s2"),
              ToolCallDelta(0, None, None, "")]
    assert ActionCallBlock.from_deltas(signed).signature == "s2"
    plain = SimpleNamespace(call_id="c", name="lookup", arguments="{}")  # a delta-like object with no signature
    block = ActionCallBlock.from_deltas([plain])
    assert block.signature is None and block.error is None and block.action.input == {}


def test_text_and_reasoning_from_deltas():
    parts = [SimpleNamespace(text="Hel"), SimpleNamespace(text="lo")]
    assert TextBlock.from_deltas(parts) == TextBlock(text="Hello")
    assert ReasoningBlock.from_deltas(parts).text == "Hello"


@pytest.mark.parametrize("cls", [ImageBlock, AudioBlock, ActionResultBlock, GenericBlock])
def test_unstreamable_blocks_refuse_from_deltas(cls):
    with pytest.raises(TypeError, match=cls.__name__):
        cls.from_deltas([SimpleNamespace(text="x")])


# -- Usage and StopReason ---------------------------------------------------------------


def test_usage_total_defaults_to_input_plus_output():
    assert Usage(input_tokens=3, output_tokens=4).total_tokens == 7
    assert Usage(input_tokens=3, output_tokens=4, total_tokens=10).total_tokens == 10  # the provider's figure wins
    assert Usage().total_tokens == 0
    u = Usage.model_validate_json(
        Usage(input_tokens=1, output_tokens=2, reasoning_tokens=1, raw={"x": 1}).model_dump_json()
    )
    assert (u.total_tokens, u.reasoning_tokens, u.raw) == (3, 1, {"x": 1})


def test_usages_add_field_by_field_and_drop_raw():
    a = Usage(
        input_tokens=10,
        output_tokens=2,
        total_tokens=13,
        cache_read_tokens=4,
        cache_write_tokens=1,
        reasoning_tokens=1,
        raw={"a": 1},
    )
    b = Usage(
        input_tokens=5, output_tokens=3, cache_read_tokens=2, cache_write_tokens=6, reasoning_tokens=2, raw={"b": 2}
    )
    total = a + b
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (
        15,
        5,
        21,
    )  # 13 (provider's) + 8 (computed)
    assert (total.cache_read_tokens, total.cache_write_tokens, total.reasoning_tokens) == (6, 7, 3)
    assert total.raw is None  # two providers' raw objects do not add
    assert (Usage() + b).model_dump(exclude={"raw"}) == b.model_dump(exclude={"raw"})
    assert sum([a, b], Usage()).input_tokens == 15
    with pytest.raises(TypeError):
        a + 1  # noqa: B018


def test_usage_saved_with_the_old_names_still_loads():
    old = {"input": 12, "output": 3, "total": 15, "cache_read": 8, "cache_write": 2, "reasoning": 1, "raw": {"x": 1}}
    u = Usage.model_validate(old)
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (12, 3, 15)
    assert (u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens, u.raw) == (8, 2, 1, {"x": 1})
    assert Usage.model_validate({"input": 1, "input_tokens": 7}).input_tokens == 7  # the new name wins
    # Only a dict is upgraded: a string that holds an old name, or None, is returned as it is.
    assert upgrade_usage_names("input") == "input" and upgrade_usage_names(None) is None
    assert set(Usage().model_dump()) == {"input_tokens", "output_tokens", "total_tokens", "cache_read_tokens",
                                         "cache_write_tokens", "reasoning_tokens", "raw", "server_tool_calls"}


def test_stop_reason_compares_with_strings():
    stop = StopReason(kind="tool_use", raw="tool_calls")
    assert stop == "tool_use"
    assert stop == StopKind.tool_use
    assert stop != "end_turn"
    assert not (stop == "tool_calls")  # the raw value is not the kind
    assert str(stop) == "tool_use"
    assert stop == StopReason(kind=StopKind.tool_use, raw="tool_calls")
    assert stop != StopReason(kind="end_turn", raw="stop")
    with pytest.raises(TypeError):
        hash(stop)
    with pytest.raises(pydantic.ValidationError):
        StopReason(kind="finished")


@pytest.mark.parametrize("start, end, kept", [(-5, -1, (None, None)), (-5, 10, (None, 10)), (8, 3, (None, None)),
                                              (2, -1, (2, None))])
def test_a_citation_offset_that_is_no_offset_is_left_out(start: int, end: int, kept: tuple) -> None:
    """Offsets ``-5, -1`` (a Responses annotation) were kept, and the cited text was Python's negative
    slice ('rlin' of '... Berlin.'); a span ending before it starts is none either (the whole block)."""
    cited = lenient(Citation, start=start, end=end, url="https://a.example")
    assert (cited.start, cited.end, cited.url) == (*kept, "https://a.example")
    assert Citation(start=0, end=0).end == 0 and Citation(start=3, end=9).start == 3  # a real span is kept


def test_each_artifact_s_text_is_what_the_model_reads() -> None:
    assert GenericArtifact(value={"a": "é", "d": Decimal("1.5")}).to_text() == '{"a": "\\u00e9", "d": "1.5"}'
    assert JsonArtifact(value={"a": "é", "d": Decimal("1.5")}).to_text() == '{"a": "é", "d": "1.5"}'
    table = TableArtifact(columns=["city"], value=[{"city": "Zürich", "on": date(2026, 1, 2)}])
    assert table.to_text() == '[{"city": "Zürich", "on": "2026-01-02"}]'
    call = ToolAction(tag="c1", name="weather", path="now", input={"city": "Oslo"})
    assert ActionArtifact(value=call).to_text() == '{"name": "weather_now", "input": {"city": "Oslo"}}'
    call.output = TextArtifact(value="-3 °C")
    assert ActionArtifact(value=call).to_text() == '{"name": "weather_now", "input": {"city": "Oslo"}} -> -3 °C'
    call.output = 42  # an output without to_text: its str
    assert ActionArtifact(value=call).to_text().endswith("}} -> 42")


def test_two_citations_are_one_source_by_url_else_by_document_else_title() -> None:
    assert Citation(url="https://a.example", document="d", title="t").source_key() == ("url", "https://a.example")
    assert Citation(document="d", title="t").source_key() == ("document", "d")
    assert Citation(title="t").source_key() == ("document", "t")
    assert Citation().source_key() == ("document", "")


def test_a_text_document_reads_as_its_name_then_its_text() -> None:
    named = DocumentBlock(mime_type="text/plain", name="notes.txt", text="one\ntwo")
    assert named.as_text() == "<document name='notes.txt'>\none\ntwo\n</document>"
    empty = DocumentBlock(mime_type="text/plain", name="empty.txt")
    assert empty.as_text() == "<document name='empty.txt'>\n\n</document>"
    assert DocumentBlock(mime_type="text/plain", text="bare").as_text() == "bare"
    assert DocumentBlock(mime_type="text/plain").as_text() == ""


def test_a_builtin_tool_is_one_of_the_known_names_with_its_options() -> None:
    search = BuiltinTool("web_search", allowed_domains=["python.org"], max_uses=2)
    assert (search.name, search.options) == ("web_search", {"allowed_domains": ["python.org"], "max_uses": 2})
    assert BuiltinTool("web_fetch", options={"max_uses": 1}, max_results=3).options == {"max_uses": 1, "max_results": 3}
    assert BuiltinTool("web_fetch", options={"max_uses": 1}, max_uses=5).options == {"max_uses": 5}  # named wins
    with pytest.raises(ValueError, match="unknown built-in tool 'web'; the built-in tools are web_search, "):
        BuiltinTool("web")


def test_a_builtin_tool_is_read_from_a_name_a_dict_or_itself() -> None:
    search = BuiltinTool("web_search")
    assert BuiltinTool.of(search) is search
    assert BuiltinTool.of(" code_execution ") == BuiltinTool("code_execution")
    assert BuiltinTool.of({"name": "file_search", "vector_store_ids": ["v"]}) == BuiltinTool(
        "file_search", vector_store_ids=["v"])
    with pytest.raises(ValueError):
        BuiltinTool.of({"name": "nope"})
    for bad in (42, {"name": 1}, {"tool": "web_search"}, None):
        with pytest.raises(TypeError, match=r"a built-in tool is a name \(web_search, web_fetch, .*\) or a Built"):
            BuiltinTool.of(bad)


def test_tool_call_arguments_are_a_json_object_within_the_limits() -> None:
    assert parse_arguments("") == {} and parse_arguments(" \n") == {}
    assert parse_arguments('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    with pytest.raises(ValueError, match=r"^its arguments are JSON but not an object: '\[1\]'$"):
        parse_arguments("[1]")
    with pytest.raises(ValueError, match=r"^its arguments are not valid JSON \(Expecting value\): '\{\"a\": '$"):
        parse_arguments('{"a": ')
    nested = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    assert parse_arguments('{"a": ' + nested[1:-1] + "}") is not None  # as deep as allowed
    with pytest.raises(ValueError, match=f"^its arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels: "):
        parse_arguments('{"a": ' + nested + "}")
    with pytest.raises(ValueError, match=f"^its arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels: "):
        parse_arguments('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")  # past what Python reads
    with pytest.raises(ValueError, match=r"^its arguments are 1,000,001 characters, more than the 1,000,000 a call"):
        parse_arguments(" " * (MAX_ARGUMENT_CHARS - 1) + "{}")
    assert parse_arguments(" " * (MAX_ARGUMENT_CHARS - 2) + "{}") == {}  # exactly the limit is allowed
    with pytest.raises(ValueError, match=r"^its arguments are JSON but not an object: '5'$"):
        parse_arguments("5")  # a scalar has no depth to walk


def test_broken_arguments_are_quoted_by_their_head() -> None:
    raw = "x" * 300
    with pytest.raises(ValueError) as caught:
        parse_arguments(raw)
    assert str(caught.value).endswith(f"{'x' * 200!r}… (300 characters)")
    with pytest.raises(ValueError) as caught:
        parse_arguments("x" * 200)
    assert str(caught.value).endswith(repr("x" * 200))


def test_streamed_surrogate_halves_are_joined_and_a_lone_half_replaced() -> None:
    assert join_text(["a", "\ud83d", "\ude00", "b"]) == "a\U0001f600b"
    assert join_text(["a\ud83d", "b"]) == "a\ufffdb"
    assert join_text(["plain ", "text"]) == "plain text" and join_text(["é"]) == "é"


def test_a_provider_error_is_one_redacted_line_and_its_raw_body_redacted_too() -> None:
    add_secret("sk-test-0123456789abcdef")
    error = ProviderError("server", "first line\n   second line \n\n sk-test-0123456789abcdef", code=500,
                          raw={"api_key": "x", "detail": "sk-test-0123456789abcdef"}, status=500)
    assert error.message == str(error) == "first line second line " + MASK and error.args == (error.message,)
    assert error.raw == {"api_key": MASK, "detail": MASK} and ProviderError("server", "m").raw is None
    assert ProviderError("server", "m", retryable=False).retryable is False  # given outright: kept
    assert ProviderError("invalid_request", "m", retryable=True).retryable is True
    assert ProviderError("rate_limit", "m", retry_after=2.5).retry_after == 2.5
    assert repr(error) == f"ProviderError(type='server', code=500, message={error.message!r})"
    assert error.to_dict() == {"type": "server", "code": 500, "message": error.message, "retryable": True,
                               "status": 500}
    assert ProviderError("server", "one  line ").message == "one  line "  # a single line is kept as it is
    setup = ConfigurationError("no API key: set OPENAI_API_KEY")
    assert (setup.type, setup.retryable, setup.message) == ("configuration", False, "no API key: set OPENAI_API_KEY")


def test_each_tool_name_error_says_what_to_do() -> None:
    with pytest.raises(ToolNameError, match="^activity name 'run it' of tool 'Tool' cannot be sent to a model: "
                                            "use letters, digits and underscores only$"):
        to_native_name("Tool", "run it")
    with pytest.raises(ToolNameError, match="^empty tool name$"):
        from_native_name("")
    with pytest.raises(ToolNameError, match="^empty tool name$"):
        ToolAction.from_native("id", "", {"a": 1})
    assert ToolAction.from_native("id", "word_count", {"text": "a b"}).input == {"text": "a b"}


def test_a_native_name_of_the_longest_length_still_splits_and_a_longer_one_does_not() -> None:
    longest = "T" * 30 + "_" + "a" * (MAX_NATIVE_NAME - 31)
    assert len(longest) == MAX_NATIVE_NAME and from_native_name(longest) == ("T" * 30, "a" * (MAX_NATIVE_NAME - 31))
    assert from_native_name(longest + "a") == (longest + "a", None)


def test_split_media_takes_media_out_and_leaves_what_only_a_card_shows_to_the_card() -> None:
    png = ImageArtifact(value=b"\x89PNG", mime_type="image/png")
    note = TextArtifact(value="card only", shown_only=True)
    result = ListArtifact(value=[TextArtifact(value="one"), png, note, TextArtifact(value=""),
                                 JsonArtifact(value={"é": 1})])
    assert split_media(result) == ('one\n\n{"é": 1}', [png])  # the model's view
    assert split_media(result, shown=True) == ('one\n\ncard only\n\n{"é": 1}', [png])  # a card's
    assert split_media(png, ("audio",)) == (png.to_text(), [])
    assert split_media(SimpleNamespace(value=1)) == ("namespace(value=1)", [])  # no type, no to_text: its str
    assert ListArtifact(value=[TextArtifact(value="a"), note, TextArtifact(value="b")]).to_text() == "a\n\nb"
    assert TableArtifact(value=[{"c": "é"}]).to_text() == '[{"c": "é"}]'


def test_usages_add_their_server_tool_calls_by_kind() -> None:
    a = Usage(server_tool_calls={"web_search": 2})
    b = Usage(server_tool_calls={"web_search": 1, "code_execution": 3})
    assert (a + b).server_tool_calls == {"web_search": 3, "code_execution": 3}
    assert (Usage() + b).server_tool_calls == {"web_search": 1, "code_execution": 3}
    assert a.server_tool_calls == {"web_search": 2}  # neither side changes


def test_a_message_error_keeps_the_provider_error_s_fields() -> None:
    error = ProviderError("rate_limit", "slow down", code="rate_limit_exceeded", status=429)
    assert MessageError.of(error).model_dump() == {"type": "rate_limit", "message": "slow down",
                                                   "code": "rate_limit_exceeded", "retryable": True, "status": 429}
