"""Reading a structured output back from a reply (agent/structured.py), each rule on its own:
where the JSON is found, what a validation error tells the model, what goes back after an
invalid reply, and what of an output turn stays in the conversation."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ipyagent.agent import structured
from ipyagent.core import ActionCallBlock, ActionResultBlock, Message, TextBlock, ToolAction


class Item(BaseModel):
    name: str
    price: float


class Order(BaseModel):
    items: list[Item]


def call(tag: str, name: str, value: dict | None = None) -> ToolAction:
    return ToolAction.from_native(tag, name, value or {})


def reply(*blocks) -> Message:
    return Message(
        role="assistant",
        content=[ActionCallBlock(action=b) if isinstance(b, ToolAction) else TextBlock(text=b) for b in blocks],
    )


# --- where the JSON is found -------------------------------------------------------------

@pytest.mark.parametrize(
    "text, value",
    [
        ('  {"a": 1}\n', {"a": 1}),  # the whole text, stripped
        ("```json\n42\n```", 42),  # a fenced value that is neither object nor array
        ('```\n"hi"```', "hi"),  # a fence with no language, closed on the value's line
        ('{"a": 1} is the answer', {"a": 1}),  # an object at the very start, prose after
        ('[1, 2] is the answer', [1, 2]),
        ('Here: {"a": {"b": 1}}.', {"a": {"b": 1}}),  # from the first "{" to the last "}"
        ('Here: [[1], [2]].', [[1], [2]]),  # from the first "[" to the last "]"
        ('Here: {"a": [1]}.', {"a": [1]}),  # the last closer of either kind
        ('Here: [{"a": 1}].', [{"a": 1}]),  # the first opener of either kind
        ('[1] then {', [1]),  # an opener after the last closer does not hide the span before it
        ('```json\n{"a": 1}\n``` and more', {"a": 1}),  # not a whole-text fence: the span is read
    ],
)
def test_the_json_value_is_found_in_the_reply(text, value):
    assert structured.parse_json(text) == value


def test_an_empty_reply_says_so():
    for text in ("", " \n\t"):
        with pytest.raises(ValueError) as info:
            structured.parse_json(text)
        assert str(info.value) == "the reply is empty; it must be a JSON value"


def test_a_reply_without_json_is_quoted_up_to_120_characters():
    text = "no JSON here " + "x" * 200
    with pytest.raises(ValueError) as info:
        structured.parse_json("  " + text)
    assert str(info.value) == f"the reply is not JSON: {text[:120]!r}"
    with pytest.raises(ValueError, match=r"^the reply is not JSON: 'a \{b\} c'$"):
        structured.parse_json("a {b} c")  # a span that is not JSON either


# --- validation --------------------------------------------------------------------------

def test_a_model_schema_gives_an_instance_and_a_dict_schema_the_data_as_it_is():
    assert structured.validate(Item, {"name": "tea", "price": "2.5"}) == Item(name="tea", price=2.5)
    data = {"anything": [1]}
    assert structured.validate({"title": "Order", "type": "object"}, data) is data


def test_each_validation_problem_is_one_part_with_its_location():
    with pytest.raises(ValueError) as info:
        structured.validate(Order, {"items": [{"name": "tea"}, {"name": 3, "price": 1}]})
    assert str(info.value) == ("the output does not match Order: items.0.price: Field required; "
                               "items.1.name: Input should be a valid string")
    with pytest.raises(ValueError) as info:
        structured.validate(Order, [1])
    assert (
        str(info.value)
        == "the output does not match Order: (root): Input should be a valid dictionary or instance of Order"
    )


def test_the_output_is_read_from_the_output_call_else_from_the_text():
    ok = reply(
        '{"name": "not this", "price": 0}',
        call("c1", "Clock_now"),
        call("c2", "final_result", {"name": "tea", "price": 2}),
    )
    assert structured.output_call(ok).tag == "c2"
    assert structured.read_output(ok, Item) == (Item(name="tea", price=2.0), None)
    assert structured.read_output(reply('{"name": "tea", "price": 2}'), Item) == (Item(name="tea", price=2.0), None)
    assert structured.output_call(reply("text", call("c1", "Clock_now"))) is None
    assert structured.read_output(reply(""), Item) == (None, "the reply is empty; it must be a JSON value")
    value, error = structured.read_output(reply(call("c3", "final_result", {"name": "tea"})), Item)
    assert (value, error) == (None, "the output does not match Item: price: Field required")


def test_an_output_call_with_unreadable_arguments_is_told_that_error_and_only_its_own() -> None:
    broken = ActionCallBlock(
        action=call("c2", "final_result"), raw_arguments='{"name": ', error="its arguments are not valid JSON"
    )
    assert structured.read_output(Message(role="assistant", content=[broken]), Item) == (
        None,
        "its arguments are not valid JSON",
    )
    other = ActionCallBlock(action=call("c1", "Clock_now"), raw_arguments="[", error="another call's error")
    fine = ActionCallBlock(action=call("c2", "final_result", {"name": "tea", "price": 2}))
    assert structured.read_output(Message(role="assistant", content=[other, fine]), Item) == (
        Item(name="tea", price=2.0),
        None,
    )


@pytest.mark.parametrize(
    "schema, name",
    [(Item, "Item"), ({"title": "Order form"}, "Order form"), ({"title": 7}, "7"), ({"title": ""}, "the output schema"),
     ({"type": "object"}, "the output schema"), (None, "the output schema")],
)
def test_the_schema_is_named_by_its_class_or_title(schema, name):
    assert structured.schema_name(schema) == name


# --- what goes back after an invalid reply ---------------------------------------------

def test_an_invalid_output_call_gets_an_error_result_and_its_siblings_are_not_run():
    sibling, output = call("c1", "Clock_now"), call("c2", "final_result", {"name": "tea"})
    fix = structured.correction(reply("thinking", sibling, output), "price: Field required")
    assert fix.role == "tool"
    assert [(b.action.tag, b.text, b.is_error) for b in fix.content] == [
        ("c1", "not run: the final result was given in the same turn", True),
        ("c2", "price: Field required. Call final_result again with corrected input.", True),
    ]


def test_an_invalid_text_reply_gets_a_user_message():
    fix = structured.correction(reply("not json", call("c1", "Clock_now")), "the reply is not JSON: 'not json'")
    assert fix.role == "user"
    assert fix.content == [TextBlock(text="Your reply could not be used: the reply is not JSON: 'not json'. "
                                          "Reply again with only the corrected JSON.")]


# --- what stays in the conversation -------------------------------------------------------

def test_a_turn_without_output_calls_stays_the_same_objects():
    real = call("c1", "Clock_now")
    turn, result, answer = (
        reply("let me see", real),
        Message(role="tool", content=[ActionResultBlock(action=real, text="12:00")]),
        reply("noon"),
    )
    history = structured.for_conversation([turn, result, answer])
    assert len(history) == 3 and all(a is b for a, b in zip(history, [turn, result, answer]))


def test_an_output_call_becomes_its_json_text_and_its_error_result_user_text():
    output = call("c1", "final_result", {"name": "tea"})
    turn, fix = reply(output), structured.correction(reply(output), "price: Field required")
    first, second = structured.for_conversation([turn, fix])
    assert (first.role, first.content) == ("assistant", [TextBlock(text='{"name": "tea"}')])
    assert (second.role, second.content) == (
        "user",
        [TextBlock(text="price: Field required. Call final_result again with corrected input.")],
    )
    assert (turn.content[0].action is output, fix.role) == (
        True,
        "tool",
    )  # the run's own messages are left as they were


def test_a_call_not_run_is_dropped_and_a_message_left_empty_goes():
    sibling, output = call("c1", "Clock_now"), call("c2", "final_result", {"a": 1})
    not_run = Message(role="tool", content=[ActionResultBlock(action=sibling, text=structured.NOT_RUN, is_error=True)])
    history = structured.for_conversation([reply(sibling), not_run, reply("ok", output)])
    assert [(m.role, m.content) for m in history] == [("assistant", [TextBlock(text="ok"), TextBlock(text='{"a": 1}')])]


def test_a_real_result_keeps_its_call_beside_an_output_call_and_stays_a_tool_message():
    real, output = call("c1", "Clock_now"), call("c2", "final_result", {"a": 1})
    results = Message(
        role="tool",
        content=[
            ActionResultBlock(action=real, text="12:00"),
            ActionResultBlock(action=output, text="bad. Call final_result again", is_error=True),
        ],
    )
    turn, kept = structured.for_conversation([reply(real, output), results])
    assert turn.content == [ActionCallBlock(action=real), TextBlock(text='{"a": 1}')]
    assert kept.role == "tool" and kept.content == [
        ActionResultBlock(action=real, text="12:00"),
        TextBlock(text="bad. Call final_result again"),
    ]
