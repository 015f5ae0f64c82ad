"""An evaluation's figures (`agent/evaluation/analysis.py`) on evaluations built by hand: the runs each
column counts, its pass rate, scores and median cost, the judges against the people, the baseline
chosen, the short summary, a person's grade, and the rows the matrix's filters show."""

from __future__ import annotations

from typing import Any

import pytest

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation.analysis import (
    by_column,
    column_figures,
    compare_columns,
    judge_agreement,
    pass_fail,
    row_flags,
    run_score,
    short_summary,
    statistics,
    versus,
)
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.agent.evaluation.statistics import cohen_kappa, compare_paired, row_bootstrap, wilson_interval
from ipyagent.memory import RunStore


def run(row: int, provider: str = "openai:a", *, passed: bool | None = True, status: str = "ok", repeat: int = 0,
        variant: str | None = None, **more: Any) -> EvalResult:
    return EvalResult(row=row, provider=provider, prompt=f"q{row}", fields={"q": row}, variant=variant,
                      repeat=repeat, passed=passed, status=status, text="answer", **more)


def evaluation(results: list[EvalResult], rows: int = 4, **more: Any) -> Evaluation:
    ev = Evaluation(["openai:a", "openai:b"], [{"q": n} for n in range(rows)], **more)
    ev.results.extend(results)
    return ev


def test_a_column_counts_the_runs_that_ran_in_the_columns_order() -> None:
    runs = [run(0, "openai:b"), run(1, status="skipped", passed=None), run(2, status="template_error", passed=None),
            run(3, status="failed", passed=False), run(0)]
    found = by_column(evaluation(runs))
    assert list(found) == ["openai:a", "openai:b"]
    assert found == {"openai:a": [runs[3], runs[4]], "openai:b": [runs[0]]}
    assert pass_fail(found["openai:a"]) == {(3, 0): False, (0, 0): True}
    ev = Evaluation(["openai:a"], [{"q": 0}], variants=["x", "y"])
    ev.results.extend([run(0, variant="y"), run(0, variant="x", passed=False)])
    assert {c: [r.variant for r in rs] for c, rs in by_column(ev).items()} == {"openai:a/x": ["x"], "openai:a/y": ["y"]}


def test_a_runs_score_is_the_mean_of_its_scored_checks() -> None:
    outcomes = [Outcome("python:f", True, score=0.5), Outcome("contains:x", True), Outcome("python:g", True, score=1.0)]
    assert run_score(run(0, outcomes=outcomes)) == 0.75
    assert run_score(run(0, outcomes=outcomes[1:2])) is None and run_score(run(0)) is None


def test_a_columns_figures_pass_rate_interval_scores_by_row_and_median_cost() -> None:
    def scored(row: int, score: float | None, **more: Any) -> EvalResult:
        return run(row, outcomes=[Outcome("python:f", True, score=score)], **more)

    runs = [scored(0, 1.0, cost=0.01), scored(0, 0.5, repeat=1, cost=0.04, passed=False), scored(1, 0.0),
            scored(2, None, cost=0.02)]
    figures = column_figures("c", runs, seed=7)
    low, high = wilson_interval(3, 4)
    s_low, s_high = row_bootstrap([1.5, 0.0], [2, 1], seed=7)
    assert figures == {"column": "c", "runs": 4, "passed": 3, "pass_rate": 0.75, "pass_low": low, "pass_high": high,
                       "score": 0.5, "score_low": s_low, "score_high": s_high, "scored": 3, "cost_p50": 0.02}
    unscored = column_figures("c", runs, seed=7, scored=False)
    assert (unscored["score"], unscored["score_low"], unscored["score_high"], unscored["scored"]) == (None,) * 3 + (0,)
    assert column_figures("c", [], seed=1) == {
        "column": "c", "runs": 0, "passed": 0, "pass_rate": None, "pass_low": None, "pass_high": None, "score": None,
        "score_low": None, "score_high": None, "scored": 0, "cost_p50": None}


def test_a_judge_agrees_with_the_person_on_the_answered_runs_they_graded() -> None:
    judge, other = "judge:openai:j", "judge:openai:k"
    runs = [run(0, outcomes=[Outcome(judge, True), Outcome("contains:x", False)], human=True),
            run(1, outcomes=[Outcome(judge, True)], human=False),
            run(2, outcomes=[Outcome(judge, False)], human=False),
            run(3, outcomes=[Outcome(judge, False)], human=None),  # not graded
            run(3, "openai:b", status="failed", passed=False, outcomes=[Outcome(judge, False)], human=True)]
    ev = evaluation(runs, assertions=[judge, "contains:x", other])
    expected = cohen_kappa([(True, True), (True, False), (False, False)])
    assert judge_agreement(ev) == [
        {"check": judge, "n": 3, "percent": expected.percent, "kappa": expected.kappa},
        {"check": other, "n": 0, "percent": cohen_kappa([]).percent, "kappa": cohen_kappa([]).kappa}]


def test_the_baseline_is_the_one_asked_for_else_the_evaluations_else_the_first() -> None:
    runs = [run(n, p, passed=n % 2 == 0) for n in range(4) for p in ("openai:a", "openai:b")]
    assert statistics(evaluation(runs))["baseline"] == "openai:a"
    found = statistics(evaluation(runs, baseline="openai:b"))
    assert found["baseline"] == "openai:b" and [c.column for c in found["comparisons"]] == ["openai:a"]
    assert statistics(evaluation(runs, baseline="openai:b"), baseline="openai:a")["baseline"] == "openai:a"
    assert [c["column"] for c in found["columns"]] == ["openai:a", "openai:b"]
    empty = Evaluation([], [])
    assert statistics(empty) == {"baseline": None, "columns": [], "comparisons": [], "agreement": []}


def test_compare_takes_its_seed_else_the_evaluations() -> None:
    a, b = ({(n, 0): n % 2 == 0 for n in range(30)}, {(n, 0): n % 3 > 0 for n in range(30)})
    runs = [run(n, "openai:a", passed=a[n, 0]) for n in range(30)] + [run(n, "openai:b", passed=b[n, 0])
                                                                      for n in range(30)]
    ev = evaluation(runs, rows=30, seed=123)  # seed 123 gives an interval seeds 0 to 11 do not
    by_seed = {seed: compare_paired(a, b, baseline="openai:a", column="openai:b", seed=seed) for seed in (11, 123)}
    assert by_seed[11] != by_seed[123]
    assert ev.compare("openai:a", "openai:b") == compare_columns(ev, "openai:a", "openai:b") == by_seed[123]
    assert ev.compare("openai:a", "openai:b", seed=11) == by_seed[11]


def test_the_statistics_take_their_seed_else_the_evaluations() -> None:
    a, b = ({(n, 0): n % 2 == 0 for n in range(30)}, {(n, 0): n % 3 > 0 for n in range(30)})
    scores = [(n * 5 % 11) / 10 for n in range(30)]  # intervals that differ by seed: 123, 11 and none
    runs = [run(n, "openai:a", passed=a[n, 0], outcomes=[Outcome("python:f", a[n, 0], score=scores[n])])
            for n in range(30)] + [run(n, "openai:b", passed=b[n, 0]) for n in range(30)]
    ev = evaluation(runs, rows=30, assertions=["python:f"], seed=123)
    for found, seed in ((ev.statistics(), 123), (ev.statistics(seed=11), 11), (statistics(ev, seed=11), 11)):
        assert found["comparisons"] == [compare_paired(a, b, baseline="openai:a", column="openai:b", seed=seed)]
        low, high = row_bootstrap(scores, [1] * 30, seed=seed)
        assert (found["columns"][0]["score_low"], found["columns"][0]["score_high"]) == (low, high)
    assert ev.statistics()["columns"][0]["score_low"] != ev.statistics(seed=11)["columns"][0]["score_low"]


def test_a_column_with_no_run_sent_compares_on_no_pairs() -> None:
    ev = evaluation([run(0), run(0, "openai:b", status="skipped", passed=None)], rows=1)
    assert ev.compare("openai:a", "openai:b").pairs == 0


def test_only_a_python_check_makes_the_figures_look_for_scores() -> None:
    runs = [run(0, outcomes=[Outcome("contains:x", True, score=0.5)])]
    assert statistics(evaluation(runs, assertions=["contains:x"]))["columns"][0]["scored"] == 0
    assert statistics(evaluation(runs, assertions=["python:f"]))["columns"][0]["scored"] == 1


def test_the_baseline_has_no_figures_against_itself() -> None:
    assert versus(None) == {"difference": None, "difference_low": None, "difference_high": None, "p_value": None,
                            "verdict": "baseline"}
    comparison = statistics(evaluation([run(0), run(0, "openai:b")]))["comparisons"][0]
    assert versus(comparison) == {"difference": comparison.difference, "difference_low": comparison.low,
                                  "difference_high": comparison.high, "p_value": comparison.p_value,
                                  "verdict": comparison.verdict}


def test_the_short_summary_sums_tokens_and_shows_cost_only_when_some_is_known() -> None:
    records = [{"column": "a", "pass_rate": 1.0, "input_tokens": 3, "output_tokens": 4, "cost": None, "extra": 1},
               {"column": "b", "output_tokens": 2, "cost": None}, {"column": "c", "input_tokens": 5}]
    assert short_summary(records)[2]["tokens"] == 5
    assert short_summary(records)[:2] == [
        {"column": "a", "pass_rate": 1.0, "pass_low": None, "pass_high": None, "passed": None, "failed": None,
         "errors": None, "total_p50_s": None, "tokens": 7},
        {"column": "b", "pass_rate": None, "pass_low": None, "pass_high": None, "passed": None, "failed": None,
         "errors": None, "total_p50_s": None, "tokens": 2}]
    records[1]["cost"] = 0.5
    assert [r["cost"] for r in short_summary(records)] == [None, 0.5, None]


def test_a_grade_needs_a_run_that_was_sent(store: RunStore) -> None:
    ev = evaluation([run(0, run_id="r0"), run(1, status="skipped", passed=None)])
    with pytest.raises(LookupError) as unfinished:
        ev.grade(2, "openai:a", True)
    assert str(unfinished.value) == "row 2 on openai:a (repeat 0) has not finished: there is no answer to grade"
    with pytest.raises(LookupError) as skipped:
        ev.grade(1, "openai:a", True, repeat=0)
    assert str(skipped.value) == "row 1 on openai:a (repeat 0) was not sent (skipped): there is no answer to grade"
    seen: list[EvalResult] = []
    ev.listeners.append(seen.append)
    ev.store_path = str(store.path)
    cell = ev.grade(0, "openai:a", 1, None)  # type: ignore[arg-type]
    assert (cell.human, cell.human_note) == (True, "") and seen == [cell]
    assert store.grades(["r0"])["r0"]["passed"] is True
    ev.grade(0, "openai:a", 0, "no")  # type: ignore[arg-type]
    assert (cell.human, cell.human_note) == (False, "no") and store.grades(["r0"])["r0"]["note"] == "no"
    ev.grade(0, "openai:a", None, "ignored")
    assert (cell.human, cell.human_note) == (None, "") and store.grades(["r0"]) == {}
    unstored = evaluation([run(0, run_id="r1")])
    assert unstored.grade(0, "openai:a", True).human is True  # no store: the grade stays in the evaluation


def test_the_matrix_filters_show_failing_rows_and_rows_the_columns_disagree_on() -> None:
    runs = [run(0), run(0, "openai:b"),  # agree
            run(1), run(1, "openai:b", passed=False),  # disagree, and failing
            run(2, status="template_error", passed=None), run(2, "openai:b", status="skipped", passed=None),
            run(3), run(3, repeat=1, passed=False), run(3, "openai:b", passed=False),  # 1/2 against 0/1
            run(4), run(4, repeat=1, passed=False), run(4, "openai:b"), run(4, "openai:b", repeat=1, passed=False),
            run(5, "openai:b", status="skipped", passed=None), run(5),  # one column ran
            run(6), run(6, repeat=1), run(6, "openai:b"), run(6, "openai:b", repeat=1, status="skipped", passed=None)]
    assert row_flags(evaluation(runs, rows=7)) == {"failed": [1, 2, 3, 4], "disagree": [1, 3]}  # row 6: 2/2, 1/1
    ev = evaluation(runs, rows=7)
    ev.changes = {"rows": [4, 1]}
    found = ev.analysis_json(ev.statistics())
    assert found["row_flags"] == {"failed": [1, 2, 3, 4], "disagree": [1, 3], "changed": [1, 4]}
    assert found["changes"] == {"rows": [4, 1]}


def test_the_summary_compares_with_the_baseline_asked_for() -> None:
    ev = evaluation([run(n, p, passed=n % 2 == 0) for n in range(4) for p in ("openai:a", "openai:b")])
    assert list(ev.summary(full=True)["verdict"]) == ["baseline", "no significant difference"]
    assert list(ev.summary("openai:b", full=True)["verdict"]) == ["no significant difference", "baseline"]
