"""The one template environment (`agent/evaluation/templates.py`): a cell body or an evaluation's
prompt rendered for a row, what the context rule masks and counts while values are redacted, the
``context`` filter, the messages of each failure, and the rows an evaluation reads."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

from ipyagent.agent.evaluation.templates import (
    TemplateError,
    normalize_rows,
    render_cell,
    render_template,
    row_fields,
)
from ipyagent.memory import DEFAULT_BUDGET, summarize

KEY = "abcdefgh12345678"


@pytest.mark.parametrize("body", ["plain text", "a {dict: 1}", "{'json': [1]}", "{ {not} }"])
def test_a_body_without_template_marks_is_returned_as_it_is(body: str) -> None:
    assert render_cell(body, {"dict": 2}, redacting=True) == (body, 0)


@pytest.mark.parametrize(("body", "shown"), [("{{ x }}!", "1!"), ("{% if x %}yes{% endif %}", "yes"),
                                             ("{# a note #}kept", "kept"), ("{{ x", "{{ x")])
def test_each_template_mark_renders_and_a_body_that_does_not_parse_passes(body: str, shown: str) -> None:
    assert render_cell(body, {"x": 1}) == (shown, 0)


def test_without_redacting_values_go_in_as_they_are() -> None:
    cfg = SimpleNamespace(password=KEY)
    namespace = {"api_key": KEY, "cfg": cfg, "d": {"token": KEY}}
    assert render_cell("{{ api_key }} {{ cfg.password }} {{ d['token'] }} {{ d }}", namespace) == (
        f"{KEY} {KEY} {KEY} {{'token': '{KEY}'}}", 0)
    assert render_template("{{ api_key }} {{ row.token }}", {"token": KEY}, namespace) == f"{KEY} {KEY}"
    assert render_template("{{ row | context }}", {"password": KEY}) == summarize({"password": KEY}).text


def test_redacting_masks_and_counts_names_attributes_items_mappings_and_secrets_in_text() -> None:
    namespace = {"api_key": KEY, "cfg": SimpleNamespace(password=KEY, user="bob"), "d": {"token": KEY, "n": 1},
                 "err": "failed with sk-abcdefghijklmnopqrstuvwxyz0123", "n": 5, "items": [KEY]}
    text, masked = render_cell("{{ api_key }}|{{ cfg.password }}|{{ cfg.user }}|{{ d['token'] }}|{{ d }}|{{ err }}"
                               "|{{ n }}|{{ items[0] }}", namespace, redacting=True)
    assert text == ("[redacted]|[redacted]|bob|[redacted]|{'token': '[redacted]', 'n': 1}|failed with [redacted]"
                    f"|5|{KEY}")
    assert masked == 5


@pytest.mark.parametrize(("value", "shown"), [("   ", "   "), (b"abcdefgh", "[redacted]"), (12345678, "12345678")])
def test_a_secret_name_masks_non_blank_text_only(value: Any, shown: str) -> None:
    text, masked = render_cell("{{ api_key }}", {"api_key": value}, redacting=True)
    assert (text, masked) == (shown, int(shown == "[redacted]"))


def test_redacting_a_prompt_masks_the_row_and_the_namespace() -> None:
    row = {"password": KEY, "q": "why"}
    assert render_template("{{ row.password }} {{ row.q }} {{ token }}", row, {"token": KEY, "other": 1},
                           redacting=True) == "[redacted] why [redacted]"
    assert render_template("{{ row }}", "as given", {"row": "not this"}) == "as given"
    error = {"error": "failed with sk-abcdefghijklmnopqrstuvwxyz0123"}
    assert render_template("{{ row.error }}", error, redacting=True) == "failed with [redacted]"


def test_the_context_filter_summarizes_within_a_budget_and_masks_while_redacting() -> None:
    long = list(range(1000))
    assert render_cell("{{ v | context(5) }}", {"v": long})[0] == summarize(long, budget_tokens=5).text
    assert render_cell("{{ v | context }}", {"v": long})[0] == summarize(long, budget_tokens=DEFAULT_BUDGET).text
    assert render_cell("{{ v | context(5) }}", {"v": long})[0] != render_cell("{{ v | context }}", {"v": long})[0]
    cfg = {"password": KEY, "user": "bob"}
    assert render_cell("{{ cfg | context }}", {"cfg": cfg}, redacting=True) == (
        'dict with 2 keys:\n{\n  "password": "[redacted]",\n  "user": "bob"\n}', 1)
    assert KEY in render_cell("{{ cfg | context }}", {"cfg": cfg})[0]


def test_the_context_filter_masks_entries_before_summarizing_and_adds_to_the_count() -> None:
    # Masked as an entry (quoted), not by the text rule after (which would leave it bare), and counted
    # even when the summary is cut before it; the count goes on from the values masked before.
    assert render_cell("{{ cfg | context }}", {"cfg": {"token": b"abcdefghijkl"}}, redacting=True) == (
        'dict with 1 keys:\n{\n  "token": "[redacted]"\n}', 1)
    assert render_cell("{{ cfg | context(20) }}", {"cfg": {"password": "a" * 400}}, redacting=True)[1] == 1
    assert render_cell("{{ api_key }} {{ cfg | context }}", {"api_key": KEY, "cfg": {"password": KEY}},
                       redacting=True)[1] == 2


def test_the_environment_is_strict_unescaped_and_keeps_the_trailing_newline() -> None:
    assert render_template("<b>{{ row }}</b>\n", "a & b") == "<b>a & b</b>\n"
    assert render_cell("<{{ x }}>\n", {"x": "&"}, redacting=True) == ("<&>\n", 0)


def test_a_cell_template_says_what_failed_and_how_to_send_it_raw() -> None:
    with pytest.raises(TemplateError) as undefined:
        render_cell("{{ nope }}", {})
    assert str(undefined.value) == ("cell template: 'nope' is undefined; define it first, or use --raw to send the "
                                    "text as it is")
    with pytest.raises(TemplateError) as failing:
        render_cell("{{ 1 / 0 }}", {})
    assert str(failing.value) == ("cell template: ZeroDivisionError: division by zero; use --raw to send the text "
                                  "as it is")

    def leaks() -> str:
        raise RuntimeError(f"bad key sk-abcdefghijklmnopqrstuvwxyz0123 for {KEY[:4]}")

    with pytest.raises(TemplateError, match=r"^cell template: RuntimeError: bad key \[redacted\] for abcd; use --raw"):
        render_cell("{{ leaks() }}", {"leaks": leaks})

    def missing() -> str:
        raise TemplateError("Out[3] is not there")

    with pytest.raises(TemplateError) as clear:
        render_cell("{{ missing() }}", {"missing": missing})
    assert str(clear.value) == "Out[3] is not there"


@pytest.mark.parametrize(("template", "message"), [
    ("{{ row.x", ("the template does not parse: unexpected end of template, expected 'end of print statement'. "
                  "(line 1)")),
    ("a\n{% if %}", "the template does not parse: Expected an expression, got 'end of statement block' (line 2)"),
    ("{{ row.x }}", "the template: 'dict object' has no attribute 'x'"),
    ("{{ nope }}", "the template: 'nope' is undefined"),
    ("{{ 1 / 0 }}", "the template: ZeroDivisionError: division by zero"),
])
def test_a_prompt_template_says_what_failed(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        render_template(template, {}, {"other": 1})
    assert str(caught.value) == message


def test_a_render_after_a_failure_is_not_left_redacting() -> None:
    with pytest.raises(TemplateError):
        render_template("{{ nope }}", {}, redacting=True)
    assert render_template("{{ row }}", KEY) == KEY
    assert render_cell("{{ x }}", {"x": KEY}) == (KEY, 0)


def test_a_field_without_a_value_is_none_and_a_template_reading_it_fails() -> None:
    """NaN, pandas' NA and NaT are None in the row (JSON holds it); a template reading a None field is the
    row's error, never the text "nan"; other falsy values are values; a row with every value is the same."""
    frame = pd.DataFrame({"q": ["a", None, "c"], "x": [1.5, np.nan, 0.0],
                          "n": pd.array([1, None, 0], dtype="Int64"),
                          "t": pd.to_datetime(["2020-01-01", None, "2021-01-01"])})
    first, second, third = normalize_rows(frame)
    assert first == {"q": "a", "x": 1.5, "n": 1, "t": pd.Timestamp("2020-01-01")}
    assert second == {"q": None, "x": None, "n": None, "t": None} and (third["x"], third["n"]) == (0.0, 0)
    assert normalize_rows(pl.DataFrame({"q": ["a", None], "x": [float("nan"), 1.0]})) == [
        {"q": "a", "x": None}, {"q": None, "x": 1.0}]
    whole = {"q": "", "n": 0, "b": False, "l": [], "none": None}
    listed = [whole, {"x": float("nan"), "y": np.float64("nan"), "z": pd.NA, "t": pd.NaT, "k": 1}, "nan"]
    got = normalize_rows(listed)
    assert got == [whole, {"x": None, "y": None, "z": None, "t": None, "k": 1}, "nan"] and got[0] is whole
    assert listed[1]["z"] is pd.NA  # the user's row is left as it is
    for template in ("contains:{{ row.q }}", "{{ row.q | upper }}"):  # the fields-only path and Jinja's
        with pytest.raises(TemplateError, match="has no attribute 'q'"):
            render_template(template, {"q": None, "k": 1})
    assert render_template("{{ row.q | default('none') }} {{ row.k }}", {"q": None, "k": 1}) == "none 1"
    assert render_template("{{ row.k }}", {"q": None, "k": 1}) == "1"
    with pytest.raises(TemplateError, match="has no attribute 'q'"):  # a row with no value at all
        render_template("{{ row.q | upper }}", {"q": None})
    assert render_template("{{ row }}", "plain") == "plain"


def test_rows_from_dataframes_lists_and_iterables() -> None:
    frame = pd.DataFrame({"q": ["a", "b"], "n": [1, 2]})
    assert normalize_rows(frame) == [{"q": "a", "n": 1}, {"q": "b", "n": 2}]
    assert normalize_rows(pl.DataFrame({"q": ["a"], "n": [1]})) == [{"q": "a", "n": 1}]
    assert normalize_rows(["x", {"q": 1}]) == ["x", {"q": 1}] and normalize_rows(iter("ab")) == ["a", "b"]
    twice = pd.DataFrame([[1, 2, 3, 4]], columns=["q", "n", "q", "n"])
    with pytest.raises(TypeError) as caught:
        normalize_rows(twice)
    assert str(caught.value) == ("--over: the DataFrame's columns 'n', 'q' appear more than once; rename them "
                                 "(df.columns = [...]) so each row field has one value")


@pytest.mark.parametrize("rows", ["text", b"bytes", {"q": 1}, 42, pl.DataFrame({"q": [1]}).lazy()])
def test_text_a_mapping_a_scalar_or_a_lazy_frame_is_not_rows(rows: Any) -> None:
    with pytest.raises(TypeError) as caught:
        normalize_rows(rows)
    assert str(caught.value) == (f"--over needs a DataFrame, a list of dicts or a list of strings, "
                                 f"not {type(rows).__name__}")


def test_a_rows_fields_are_its_items_or_its_value() -> None:
    row = {"q": 1}
    assert row_fields(row) == row and row_fields(row) is not row
    assert row_fields("text") == {"value": "text"} and row_fields(["a"]) == {"value": ["a"]}


def test_a_field_named_like_a_secret_is_masked_without_jinja2s_render_too() -> None:
    # Only text and {{ row.NAME }}: rendered without Jinja2's per-render context, the same masks.
    for row in ({"password": "hunter2"}, SimpleNamespace(password="hunter2")):
        assert render_template("{{ row.password }}!", row, redacting=True) == "[redacted]!"
        assert render_template("{{ row.password }}!", row) == "hunter2!"
