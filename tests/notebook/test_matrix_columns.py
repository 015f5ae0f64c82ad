"""The matrix as the HTML fallback draws it (the labextension's evaluation.ts the same): a row's
inputs and the expected values its assertions read in columns of their own, each column's header
its name with its pass rate, and no disclosure triangle on every cell."""

from __future__ import annotations

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.notebook.render.evaluation import (STYLE, check_title, evaluation_html, expected_fields, headline,
                                                 split_fields)


def _doc(assertions: list[str]) -> dict:
    rows = [{"country": "France", "capital": "Paris"}, {"country": "Peru", "capital": "Lima"}]
    ev = Evaluation(["openai:a"], rows, assertions=assertions, labels={"openai:a": "small"})
    ev.results = [EvalResult(row=i, provider="openai:a", prompt="?", fields=row, text=row["capital"], status="ok",
                             passed=i == 0, outcomes=[Outcome(assertions[0], i == 0)]) for i, row in enumerate(rows)]
    return ev.to_json()


def test_the_fields_an_assertion_reads_are_the_expected_values() -> None:
    assert expected_fields({"assertions": ["icontains:{{ row.capital }}", "regex:{{ row['code'] }}", "json"]}) == {
        "capital", "code"}
    assert expected_fields({"assertions": ["contains:Paris"]}) == set()
    assert split_fields({"country": "France", "capital": "Paris"}, {"capital"}) == ({"country": "France"},
                                                                                  {"capital": "Paris"})


def test_the_matrix_has_input_and_expected_columns_and_each_header_its_pass_rate() -> None:
    html = evaluation_html(_doc(["icontains:{{ row.capital }}"]))
    assert "<th>#</th><th>input</th><th>expected</th><th>" in html
    assert "<td>0</td><td>country=France</td><td>capital=Paris</td>" in html
    assert '<span class="ipyagent-id">small</span> <span class="ipyagent-eval-rate">50%</span><br>' in html
    # No expected value read: one column of the row's fields, as before.
    plain = evaluation_html(_doc(["contains:a"]))
    assert "<th>#</th><th>input</th><th>" in plain and "<th>expected</th>" not in plain
    assert "<td>0</td><td>country=France, capital=Paris</td>" in plain
    # The cell's line opens it without a triangle before it.
    assert "summary{list-style:none" in STYLE


def test_the_title_names_a_check_in_words_not_by_its_raw_template() -> None:
    assert check_title("icontains:{{ row.capital }}") == "contains the row's capital, any case"
    assert check_title("regex:^{{ row['code'] }}$") == "matches ^the row's code$"
    assert check_title("contains:Paris") == "contains Paris"
    assert check_title("judge:openai:m") == "judge:openai:m" and check_title("json") == "json"
    assert " 1 passed (contains the row's capital, any case), " in headline(_doc(["icontains:{{ row.capital }}"]))
