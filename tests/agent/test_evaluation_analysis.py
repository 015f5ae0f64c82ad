"""An evaluation's statistics, grades and changes: "is B better than A on these rows?" answered
through `evaluate` (the verdict, its p-value and interval against scipy), a person's grades kept
in the run store against the runs (a cached re-run shows them), the judges' agreement with those
grades, what changed since the previous run of the same evaluation, and `diff`."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as scipy_stats

from ipyagent import Agent, evaluate
from ipyagent.agent.evaluation.history import compare_kept, row_key
from ipyagent.memory.store import RunStore

from ..support.evaluation import answering, last_user_text
from ..support.scripted_driver import ScriptedDriver, text
from ..support.stub_server import StubServer, openai_text_reply


def seeded(model: str, p: float, seed: int) -> Agent:
    """An agent answering ``yes`` to row N with probability `p` (drawn once per row, seeded)."""
    def reply(stack) -> object:
        n = int(stack.messages[-1].text.removeprefix("q"))
        return text("yes" if random.Random(f"{seed}-{n}").random() < p else "no")

    driver = ScriptedDriver(reply)
    driver.model = model
    return Agent(driver)


def _scipy_interval(differences: list[float]) -> tuple[float, float]:
    result = scipy_stats.bootstrap((np.asarray(differences),), np.mean, method="percentile", vectorized=True,
                                   rng=np.random.default_rng(0))
    return result.confidence_interval.low, result.confidence_interval.high


def test_a_seeded_model_at_0_9_against_one_at_0_6_over_200_rows_is_a_better_as_scipy_says() -> None:
    rows = [f"q{n}" for n in range(200)]
    agents = [seeded("a", 0.9, 1), seeded("b", 0.6, 2)]
    ev = evaluate(agents, "{{ row }}", rows, assertions=["equals:yes"], store=False)
    a, b = ev.columns
    assert (a, b) == ("scripted:a", "scripted:b")
    result = ev.compare(a, b)
    passed = {c: {r.row: bool(r.passed) for r in ev.results if r.column == c} for c in (a, b)}
    only_a = sum(passed[a][n] and not passed[b][n] for n in range(200))
    only_b = sum(passed[b][n] and not passed[a][n] for n in range(200))
    assert round(result.p_value, 3) == round(scipy_stats.binomtest(min(only_a, only_b), only_a + only_b).pvalue, 3)
    low, high = _scipy_interval([float(passed[b][n]) - float(passed[a][n]) for n in range(200)])
    assert (round(result.low, 3), round(result.high, 3)) == (round(low, 3), round(high, 3))
    assert result.winner == a and result.sentence().startswith(f"{a} better by ")
    # The same verdict in the summary (a DataFrame, the baseline first) and in the saved matrix's JSON.
    summary = ev.summary(full=True).set_index("column")
    assert summary.loc[b, "verdict"] == "worse" and summary.loc[a, "verdict"] == "baseline"
    assert summary.loc[b, "p_value"] == pytest.approx(result.p_value)
    assert summary.loc[a, "pass_low"] < summary.loc[a, "pass_rate"] < summary.loc[a, "pass_high"]
    doc = ev.to_json()
    assert doc["baseline"] == a and doc["comparisons"][0]["sentence"] == result.sentence()
    assert ev.compare(a, b).sentence() == result.sentence()  # seeded: the same runs, the same interval


def test_two_columns_of_equal_chance_over_20_rows_are_no_significant_difference() -> None:
    rows = [f"q{n}" for n in range(20)]
    agents = [seeded("a", 0.7, 3), seeded("b", 0.7, 4)]
    ev = evaluate(agents, "{{ row }}", rows, assertions=["equals:yes"], store=False)
    result = ev.compare("scripted:a", "scripted:b")
    assert result.verdict == "no significant difference"
    assert result.sentence() == (f"no significant difference (n=20, need ≈ {result.needed_rows:,} rows to detect "
                                 "a 10-point gap)")


def test_the_baseline_is_chosen_by_name_and_checked() -> None:
    rows = [f"q{n}" for n in range(30)]
    agents = [seeded("a", 0.5, 5), seeded("b", 0.5, 6), seeded("c", 0.5, 7)]
    ev = evaluate(agents, "{{ row }}", rows, assertions=["equals:yes"], store=False, baseline="scripted:b")
    assert ev.baseline == "scripted:b"
    assert [c["column"] for c in ev.to_json()["comparisons"]] == ["scripted:a", "scripted:c"]
    assert ev.summary_records()[1]["verdict"] == "baseline"
    with pytest.raises(ValueError, match="baseline: no column 'scripted:z'; the columns are scripted:a"):
        evaluate(agents, "{{ row }}", rows, store=False, baseline="scripted:z")


def test_scores_have_a_mean_with_a_bootstrap_interval_by_row() -> None:
    def score(result, row) -> float:
        return 0.25 if result.text == "no" else 1.0

    rows = [f"q{n}" for n in range(40)]
    ev = evaluate([seeded("a", 0.5, 8)], "{{ row }}", rows, assertions=[score], store=False)
    figures = ev.summary_records()[0]
    scores = [0.25 if r.text == "no" else 1.0 for r in ev.ordered()]
    assert figures["score"] == pytest.approx(sum(scores) / 40) and figures["scored"] == 40
    low, high = _scipy_interval(scores)
    assert figures["score_low"] == pytest.approx(low, abs=5e-4)
    assert figures["score_high"] == pytest.approx(high, abs=5e-4)


def _verdict(prompt: str) -> str:
    answer = prompt.split("Answer:\n", 1)[1]
    return '{"pass": %s, "reason": "r"}' % ("true" if "Paris" in answer else "false")


def test_grades_are_kept_against_the_runs_and_a_cached_rerun_shows_them(tmp_path: Path) -> None:
    rows = [{"country": c} for c in ("France", "Japan", "Peru", "Chile")]
    store = tmp_path / "runs.sqlite"
    with StubServer(responder=answering(lambda q: "Paris" if "France" in q else "Lima")) as model, \
            StubServer(responder=lambda body: openai_text_reply(_verdict(last_user_text(body)))) as judge:
        def run() -> object:
            return evaluate([Agent("openai:m", base_url=model.url)], "Capital of {{ row.country }}?", rows,
                            assertions=["judge:openai:j"], store=store, judge_factory=lambda pid: Agent(
                                pid, base_url=judge.url))

        ev = run()
        seen: list = []
        ev.listeners.append(seen.append)
        column = ev.columns[0]
        ev.grade(0, column, True, "right")
        ev.grade(1, column, True, "the judge is too strict")  # the judge failed it
        ev.grade(2, column, False)
        ev.grade(3, column, True)
        ev.grade(3, column, None)  # taken back
        assert [r.row for r in seen] == [0, 1, 2, 3, 3]
        frame = ev.to_dataframe()
        assert list(frame["human"]) == [True, True, False, None] and frame["human_note"][1] == "the judge is too strict"
        (agreement,) = ev.to_json()["agreement"]
        # Graded: rows 0-2. The judge passed row 0 only: it agrees on rows 0 and 2 (2 of 3), kappa 0.4.
        assert agreement == {"check": "judge:openai:j", "n": 3, "percent": pytest.approx(200 / 3),
                             "kappa": pytest.approx(0.4)}
        again = run()  # served from the cache: the same runs, their grades read back from the store
        assert all(r.cached for r in again.results)
        graded = [(r.human, r.human_note) for r in again.ordered()]
        assert graded == [(True, "right"), (True, "the judge is too strict"), (False, ""), (None, "")]
    opened = RunStore(store)
    assert len(opened.grades([r.run_id for r in ev.results])) == 3
    opened.close()


def test_a_grade_needs_an_answer_and_without_a_store_stays_in_the_evaluation() -> None:
    ev = evaluate([seeded("a", 0.5, 9)], "{{ row }}", ["q0", "q1"], store=False)
    ev.grade(1, "scripted:a", False, "vague")
    assert ev.cell(1, "scripted:a").human is False and ev.store_path is None
    with pytest.raises(LookupError, match="row 5 on scripted:a .repeat 0. has not finished"):
        ev.grade(5, "scripted:a", True)
    with pytest.raises(KeyError, match="no column 'other'"):
        ev.grade(0, "other", True)


def test_the_next_run_of_a_named_evaluation_says_what_changed(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    answers = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima"}
    with StubServer(responder=answering(lambda q: answers[q.split()[-1].rstrip("?")])) as model:
        def run(countries: list[str]) -> object:
            capitals = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima"}
            rows = [{"country": c, "capital": capitals[c]} for c in countries]
            return evaluate([Agent("openai:m", base_url=model.url)], "Capital of {{ row.country }}?", rows,
                            assertions=["contains:{{ row.capital }}"], store=store, name="cell-7", cache=False)

        first = run(["France", "Japan"])
        assert first.changes is None  # nothing before it
        answers.update(France="Lyon")
        second = run(["Peru", "France", "Japan"])  # a row added above: rows are matched by content
    assert second.changes["sentence"] == "since the last run: 1 newly failing, 1 new row"
    assert second.changes["rows"] == [0, 1] and second.to_json()["row_flags"]["changed"] == [0, 1]
    diff = second.diff(first)
    assert list(diff["change"]) == ["new", "newly failing"]
    assert list(diff["country"]) == ["Peru", "France"] and list(diff["other_row"].fillna(-1)) == [-1, 0]
    assert list(diff["output"]) == ["Lima", "Lyon"] and diff["other_output"][1] == "Paris"


def test_what_changed_is_counted_by_row_content_column_and_repeat() -> None:
    k1, k2, k3 = row_key({"q": 1}), row_key({"q": 2}), row_key({"q": 3})
    assert row_key({"a": 1, "b": 2}) == row_key({"b": 2, "a": 1}) != row_key({"a": 1, "b": 3})
    before = [(k1, "A", 0, "ok", True, "d1"), (k2, "A", 0, "ok", False, "d2"), (k3, "A", 0, "ok", True, "d3")]
    now = [(k1, "A", 0, "failed", False, "e"), (k2, "A", 0, "ok", True, "d2b"), (k1, "B", 0, "ok", True, "x")]
    found = compare_kept(before, now)
    assert (found["newly_failing"], found["fixed"], found["new_rows"], found["removed_rows"]) == (1, 1, 0, 1)
    assert found["changed"] == {k1, k2}
    assert found["sentence"] == "since the last run: 1 newly failing, 1 fixed, 1 row gone"
    assert compare_kept(before, before)["sentence"] == "since the last run: no change"
    reworded = [(k1, "A", 0, "ok", True, "other words")]
    assert compare_kept(before[:1], reworded)["sentence"] == "since the last run: 1 row with other answers"
