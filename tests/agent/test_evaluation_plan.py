"""What an evaluation will send, worked out before any request (`agent/evaluation/plan.py`): each
variant's prompt per row, the row a check cannot be prepared for, the one line naming why, the note
quoting the first reasons, and the one case that stops the evaluation (no row renders at all)."""

from __future__ import annotations

from typing import Any

import pytest

from ipyagent.agent.evaluation.checks import Assertion, parse_assertion
from ipyagent.agent.evaluation.plan import Plan, Variant, make_plan
from ipyagent.agent.evaluation.templates import TemplateError


class Refusing(Assertion):
    """A check that cannot be prepared for the rows `refused` names, with that row's message."""

    def __init__(self, name: str, refused: dict[int, str]) -> None:
        self.name, self.refused = name, refused

    def prepare(self, row: Any) -> None:
        if row["n"] in self.refused:
            raise ValueError(self.refused[row["n"]])


def rows(count: int) -> list[dict[str, Any]]:
    return [{"n": n, "q": f"question {n}"} for n in range(count)]


def test_each_variant_renders_each_row_stripped_with_the_namespace() -> None:
    variants = [Variant(None, "  {{ hello }}: {{ row.q }}\n")]
    plan = make_plan(variants, rows(2), [], namespace={"hello": "Hi"})
    assert plan.prompts == {None: ["Hi: question 0", "Hi: question 1"]} and plan.errors == {None: [None, None]}
    assert plan.failed_rows() == [] and plan.note() is None
    raw = make_plan([Variant("raw", " {{ row.q }} ")], rows(1), [], raw=True)
    assert raw.prompts == {"raw": ["{{ row.q }}"]}


def test_redacting_masks_what_a_secret_name_puts_in_the_prompt() -> None:
    variants = [Variant(None, "{{ api_key }} {{ row.q }}")]
    namespace = {"api_key": "abcdefgh12345678"}
    assert make_plan(variants, rows(1), [], namespace=namespace).prompts[None] == ["abcdefgh12345678 question 0"]
    masked = make_plan(variants, rows(1), [], namespace=namespace, redacting=True)
    assert masked.prompts[None] == ["[redacted] question 0"]


def test_a_row_that_does_not_render_says_which_row_and_variant() -> None:
    data = [{"n": 0, "q": "fine"}, {"n": 1}, {"n": 2, "q": "   "}]
    plan = make_plan([Variant("a", "Q: {{ row.n }}"), Variant("b", "{{ row.q }}")], data, [])
    assert plan.prompts == {"a": ["Q: 0", "Q: 1", "Q: 2"], "b": ["fine", "", ""]}
    assert plan.errors["a"] == [None, None, None]
    assert plan.errors["b"] == [None, "row 1, variant b: the template: 'dict object' has no attribute 'q'",
                                "row 2, variant b: the prompt is empty once rendered"]
    assert plan.failed_rows() == [1, 2]
    assert plan.note() == ("2 rows could not be rendered (not sent: template_error): row 1, variant b: the "
                           "template: 'dict object' has no attribute 'q'; row 2, variant b: the prompt is empty "
                           "once rendered")
    unnamed = make_plan([Variant(None, "{{ row.q }}")], data[:2], [])
    assert unnamed.errors[None][1] == "row 1: the template: 'dict object' has no attribute 'q'"


def test_a_check_that_cannot_be_prepared_keeps_its_row_from_every_variant() -> None:
    # The first check to refuse a row names it; a check without a template is not asked.
    checks = [parse_assertion("json"), Refusing("first", {1: "no\n  pattern   here"}),
              Refusing("second", {1: "later", 2: ""})]
    plan = make_plan([Variant("a", "{{ row.q }}"), Variant("b", "B {{ row.q }}")], rows(3), checks)
    assert plan.prompts == {"a": ["question 0", "", ""], "b": ["B question 0", "", ""]}
    for errors in plan.errors.values():
        assert errors == [None, "row 1: check first: no pattern here", "row 2: check second: ValueError"]


def test_no_row_rendering_in_any_variant_stops_the_evaluation_before_any_request() -> None:
    with pytest.raises(TemplateError) as caught:
        make_plan([Variant(None, "{{ row.missing }}")], rows(1), [])
    assert str(caught.value) == ("no row could be rendered, so nothing was sent: 1 row could not be rendered "
                                 "(not sent: template_error): row 0: the template: 'dict object' has no attribute "
                                 "'missing'")
    # One variant rendering one row is enough; no rows at all is not an error either.
    plan = make_plan([Variant("a", "{{ row.missing }}"), Variant("b", "{{ row.q }}")], rows(2), [])
    assert plan.failed_rows() == [0, 1] and plan.prompts["b"] == ["question 0", "question 1"]
    assert make_plan([Variant(None, "{{ row.q }}")], [], []).prompts == {None: []}


@pytest.mark.parametrize(("failed", "tail"), [(3, ""), (4, "; and 1 more"), (6, "; and 3 more")])
def test_the_note_quotes_three_rows_and_counts_the_rest(failed: int, tail: str) -> None:
    plan = Plan([Variant("a", ""), Variant("b", "")])
    plan.errors = {"a": [None] * failed + [None], "b": [f"row {n}: why" for n in range(failed)] + [None]}
    assert plan.failed_rows() == list(range(failed))
    quoted = "row 0: why; row 1: why; row 2: why"
    assert plan.note() == f"{failed} rows could not be rendered (not sent: template_error): {quoted}{tail}"


def test_the_note_quotes_the_first_variant_with_a_reason_for_the_row() -> None:
    plan = Plan([Variant("a", ""), Variant("b", "")], errors={"a": [None, "a1"], "b": ["b0", "b1"]})
    assert plan.note() == "2 rows could not be rendered (not sent: template_error): b0; a1"
    assert Plan([]).failed_rows() == [] and Plan([]).note() is None
