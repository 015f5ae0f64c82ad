"""core.interaction: an elicitation's form read from its requested schema (MCP "Elicitation", form mode)
and the user's answers converted to the schema's types, each wrong answer with one line saying why."""

from __future__ import annotations

import pytest

from ipyagent.core import ElicitationRequest, form_fields, read_form

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "as on the card", "minLength": 2,
                 "maxLength": 5, "default": "Ann"},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "score": {"type": "number", "minimum": 0.5, "maximum": 2.5},
        "ok": {"type": "boolean"},
        "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium"]},
        "colour": {"type": "string",
                   "oneOf": [{"const": "r", "title": "Red"}, {"const": "g"}, "bad", {"title": "no const"}]},
        "tone": {"anyOf": [{"const": "warm", "title": "Warm"}]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
        "odd": {"type": "object"},
    },
    "required": ["name", "age", "tags"],
}


def test_each_property_becomes_a_field_of_its_kind_in_the_schema_order() -> None:
    fields = {f.name: f for f in form_fields(SCHEMA)}
    assert list(fields) == list(SCHEMA["properties"])
    assert {n: f.kind for n, f in fields.items()} == {
        "name": "string", "email": "string", "age": "integer", "score": "number", "ok": "boolean",
        "size": "choice", "colour": "choice", "tone": "choice", "tags": "choices", "odd": "string"}
    assert {n for n, f in fields.items() if f.required} == {"name", "age", "tags"}


def test_a_field_keeps_its_title_description_default_format_and_bounds() -> None:
    fields = {f.name: f for f in form_fields(SCHEMA)}
    name = fields["name"]
    assert (name.title, name.description, name.default, name.minimum, name.maximum) == (
        "Your name", "as on the card", "Ann", 2, 5)  # a string's bounds are its length
    assert (fields["email"].title, fields["email"].description, fields["email"].format) == ("email", "", "email")
    assert (fields["age"].minimum, fields["age"].maximum) == (18, 99)
    assert (fields["tags"].minimum, fields["tags"].maximum) == (1, 2)  # a multiple choice's: its count
    assert fields["email"].default is None and fields["email"].minimum is None and fields["email"].maximum is None


def test_enum_labels_come_from_enum_names_or_the_titles_of_consts() -> None:
    fields = {f.name: f for f in form_fields(SCHEMA)}
    assert fields["size"].options == [("s", "Small"), ("m", "Medium"), ("l", "l")]  # a missing name: the value
    assert fields["colour"].options == [("r", "Red"), ("g", "g")]  # not a dict or no const: left out
    assert fields["tone"].options == [("warm", "Warm")]
    assert fields["tags"].options == [("a", "a"), ("b", "b"), ("c", "c")]
    assert form_fields({"properties": {"x": {"enum": [1, 2], "enumNames": "no"}}})[0].options == [("1", "1"),
                                                                                                   ("2", "2")]


def test_a_field_as_json_is_what_the_front_end_draws() -> None:
    size = form_fields(SCHEMA)[5]
    assert size.as_json() == {"name": "size", "kind": "choice", "title": "size", "description": "",
                              "required": False, "default": None, "options": [["s", "Small"], ["m", "Medium"],
                                                                              ["l", "l"]],
                              "format": None, "minimum": None, "maximum": None}


def test_no_schema_or_a_property_of_another_shape_gives_no_field_or_a_string() -> None:
    assert form_fields(None) == [] and form_fields({}) == [] and form_fields({"properties": None}) == []
    odd = form_fields({"properties": {"x": "not a dict"}, "required": None})[0]
    assert (odd.name, odd.kind, odd.title, odd.required, odd.options) == ("x", "string", "x", False, [])


def test_answers_are_converted_to_the_schema_types() -> None:
    raw = {"name": "Bob", "email": "b@x.org", "age": " 42 ", "score": "1.5", "ok": "Yes", "size": "m",
           "colour": "r", "tone": "warm", "tags": "a, c", "odd": 7}
    content, errors = read_form(SCHEMA, raw)
    assert errors == {}
    assert content == {"name": "Bob", "email": "b@x.org", "age": 42, "score": 1.5, "ok": True, "size": "m",
                       "colour": "r", "tone": "warm", "tags": ["a", "c"], "odd": "7"}
    assert type(content["age"]) is int and type(content["score"]) is float


@pytest.mark.parametrize(("raw", "value"), [
    (True, True), (False, False), ("y", True), ("TRUE", True), (" 1 ", True), ("on", True),
    ("n", False), ("No", False), ("false", False), ("0", False), ("off", False)])
def test_a_boolean_answer_is_yes_or_no_in_its_usual_spellings(raw, value) -> None:
    assert read_form(SCHEMA, {"name": "Bob", "age": 20, "tags": ["a"], "ok": raw}) == (
        {"name": "Bob", "age": 20, "tags": ["a"], "ok": value}, {})


@pytest.mark.parametrize(("field", "raw", "error"), [
    ("ok", "maybe", "answer yes or no"),
    ("size", "xl", "pick one of s, m, l"),
    ("tags", "a, z", "pick from a, b, c"),
    ("tags", ["a", "b", "c"], "at most 2 choices"),
    ("age", "forty", "give a whole number"),
    ("age", "4.5", "give a whole number"),
    ("score", "lots", "give a number"),
    ("age", "17", "at least 18"),
    ("age", "100", "at most 99"),
    ("score", "0.4", "at least 0.5"),
    ("score", "2.6", "at most 2.5"),
    ("name", "B", "at least 2 characters"),
    ("name", "Bobbie", "at most 5 characters"),
])
def test_a_wrong_answer_gives_one_line_saying_why(field, raw, error) -> None:
    answers = {"name": "Bob", "age": "20", "tags": ["a"], field: raw}
    content, errors = read_form(SCHEMA, answers)
    assert errors == {field: error}
    assert set(content) == {"name", "age", "tags"} - {field}


def test_bounds_are_inclusive() -> None:
    content, errors = read_form(SCHEMA, {"name": "Bo", "age": "18", "tags": ["a", "b"], "score": "2.5"})
    assert errors == {} and content == {"name": "Bo", "age": 18, "tags": ["a", "b"], "score": 2.5}
    content, errors = read_form(SCHEMA, {"name": "Bobby", "age": "99", "tags": "b", "score": "0.5"})
    assert errors == {} and content == {"name": "Bobby", "age": 99, "tags": ["b"], "score": 0.5}


def test_too_few_choices_is_wrong_and_empty_picks_are_dropped() -> None:
    schema = {"properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2}}}
    assert read_form(schema, {"tags": "a, ,"}) == ({}, {"tags": "at least 2 choices"})
    assert read_form(schema, {"tags": " a ,b"}) == ({"tags": ["a", "b"]}, {})


def test_an_empty_answer_leaves_an_optional_field_out_and_is_wrong_for_a_required_one() -> None:
    for empty in (None, "", []):
        content, errors = read_form(SCHEMA, {"name": empty, "age": empty, "tags": empty, "email": empty})
        assert content == {}
        assert errors == {"name": "required", "age": "required", "tags": "required"}
    assert read_form(SCHEMA, {}) == ({}, {"name": "required", "age": "required", "tags": "required"})


def test_a_choice_answer_is_compared_as_text() -> None:
    schema = {"properties": {"n": {"enum": [1, 2]}, "m": {"type": "array", "items": {"enum": [1, 2]}}}}
    assert read_form(schema, {"n": 2, "m": [1, 2]}) == ({"n": "2", "m": ["1", "2"]}, {})


def test_an_elicitation_is_a_form_unless_it_gives_a_url() -> None:
    assert ElicitationRequest(server="s", message="m", schema=SCHEMA).mode == "form"
    assert ElicitationRequest(server="s", message="m", url="https://example.org/x", elicitation_id="1").mode == "url"


def test_an_array_without_item_choices_is_a_multiple_choice_of_none() -> None:
    for items in ({}, {"items": "not a schema"}, {"items": {"type": "string"}}):
        [tags] = form_fields({"properties": {"tags": {"type": "array", **items}}})
        assert (tags.kind, tags.options) == ("choices", [])
