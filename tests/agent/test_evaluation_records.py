"""An evaluation's results built by hand (`agent/evaluation/results.py`, `cell_store.py`): every figure of a
column's summary, a column named by its alias, the order of runs and of flaky cells (a column the
evaluation does not list included), each provider's progress, a result's own fields and its dict, older
stores' token counts, and where a block keeps what its arrays cannot hold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from ipyagent.agent.evaluation import results as results_module
from ipyagent.agent.evaluation.cell_store import SIZE, Block, FloatField, IdField, RareField
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.agent.evaluation.results import EvalResult, Evaluation, _tokens
from ipyagent.agent.evaluation.statistics import percentile


def test_a_stores_usage_is_read_by_either_name_and_none_as_zero() -> None:
    assert _tokens({"input": 3, "output": 4}) == (3, 4)  # an older store's names
    assert _tokens({"input_tokens": 5, "output_tokens": 6, "input": 1, "output": 1}) == (5, 6)
    assert _tokens({"input_tokens": None, "output_tokens": None}) == (0, 0) == _tokens({}) == _tokens(None)
    assert _tokens(SimpleNamespace(input_tokens=7, output_tokens=8)) == (7, 8)


def test_a_result_keeps_a_rare_field_given_alone() -> None:
    assert EvalResult(0, "a", "", {}, error="boom").error == "boom"
    assert EvalResult(0, "a", "", {}, human_note="noted").human_note == "noted"
    assert EvalResult(0, "a", "", {}, human_note="XXXX").human_note == "XXXX"  # any note
    assert EvalResult(0, "a", "", {}, human=False).human is False


class City(BaseModel):
    name: str


def test_a_results_dict_has_its_output_as_json_and_its_outcomes_as_dicts() -> None:
    r = EvalResult(0, "openai:a", "p", {"q": 0}, output=City(name="Lima"), outcomes=[Outcome("c", True, score=0.5)])
    out = r.to_dict()
    assert out["output"] == {"name": "Lima"} and out["column"] == "openai:a"
    assert out["outcomes"] == [{"name": "c", "passed": True, "score": 0.5, "reason": None, "cost": None}]


def run(row: int, provider: str, passed: bool | None, status: str = "ok", **more: object) -> EvalResult:
    return EvalResult(row, provider, f"p{row}", {"q": row}, passed=passed, status=status, **more)  # type: ignore


def test_a_columns_summary_counts_every_kind_of_run_and_its_times_tokens_and_costs() -> None:
    ev = Evaluation(["openai:a", "openai:b"], [{"q": n} for n in range(6)], repeat=1)
    ev.results = [
        run(0, "openai:a", True, ttft_s=0.1, total_s=1.0, cost=0.25, judge_cost=0.01, cached=True,
            input_tokens=3, output_tokens=4),
        run(1, "openai:a", False, ttft_s=0.3, total_s=3.0, cost=0.5, input_tokens=5, output_tokens=6),
        run(2, "openai:a", True, ttft_s=0.2, total_s=2.0, judge_cost=0.02),
        run(3, "openai:a", False, "failed", total_s=9.0, cost=0.125),
        run(4, "openai:a", None, "skipped"), run(5, "openai:a", None, "template_error"),
        run(0, "openai:b", True), run(1, "openai:b", True, cost=None),
    ]
    first, second = ev.summary_records()
    figures = {key: first[key] for key in ("runs", "passed", "failed", "errors", "skipped", "template_errors",
                                           "cached", "pass_rate", "flaky", "input_tokens", "output_tokens", "cost",
                                           "judge_cost")}
    assert figures == {"runs": 4, "passed": 2, "failed": 1, "errors": 1, "skipped": 1, "template_errors": 1,
                       "cached": 1, "pass_rate": 0.5, "flaky": 0, "input_tokens": 8, "output_tokens": 10,
                       "cost": 0.875, "judge_cost": pytest.approx(0.03)}
    assert (first["ttft_p50_s"], first["ttft_p90_s"]) == (percentile([0.1, 0.2, 0.3], 0.5),
                                                          percentile([0.1, 0.2, 0.3], 0.9))
    assert (first["total_p50_s"], first["total_p90_s"]) == (2.0, percentile([1.0, 2.0, 3.0], 0.9))
    assert first["ttft_p90_s"] != first["ttft_p50_s"] and first["total_p90_s"] != 2.0
    assert (second["cost"], second["judge_cost"], second["failed"], second["ttft_p50_s"]) == (None, None, 0, None)


def test_a_column_is_found_by_its_alias_and_a_cells_runs_by_row_and_column() -> None:
    ev = Evaluation(["openai:a", "openai:b"], [{}, {}], variants=["v"], labels={"openai:b": "good"}, repeat=2)
    ev.results = [run(0, "openai:b", True, variant="v", repeat=1), run(1, "openai:b", True, variant="v"),
                  run(0, "openai:a", True, variant="v"), run(0, "openai:b", False, variant="v")]
    assert ev.column("good/v") == "openai:b/v"
    assert ev.cells(0, "good/v") == [ev.results[3], ev.results[0]] and ev.cell(0, "openai:b/v", 1) is ev.results[0]
    assert ev.cell(1, "good/v") is ev.results[1]  # the first repeat by default
    with pytest.raises(KeyError, match="no column 'openai:c'"):
        ev.column("openai:c")


def test_runs_and_flaky_cells_are_in_row_then_column_order_a_column_not_listed_first() -> None:
    ev = Evaluation(["openai:b", "openai:a"], [{}, {}], repeat=2)
    for row, provider in ((0, "openai:a"), (0, "openai:z"), (0, "openai:b"), (1, "openai:a")):
        ev.results += [run(row, provider, True), run(row, provider, False, repeat=1)]
    assert ev.flaky() == [(0, "openai:z"), (0, "openai:b"), (0, "openai:a"), (1, "openai:a")]
    ordered = [(r.row, r.provider, r.repeat) for r in ev.ordered()]
    assert ordered[:6] == [(0, "openai:z", 0), (0, "openai:b", 0), (0, "openai:z", 1), (0, "openai:b", 1),
                           (0, "openai:a", 0), (0, "openai:a", 1)]  # z ranks as the first column


def test_each_providers_progress_counts_its_runs_and_its_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SimpleNamespace(monotonic=lambda: 100.0)
    monkeypatch.setattr(results_module, "time", clock)
    ev = Evaluation(["openai:a", "openai:b"], [{}, {}, {}], variants=["v", "w"], repeat=2, started=100.0)
    ev.results = [run(0, "openai:x", True), run(0, "openai:a", None, "skipped"), run(1, "openai:a", None, "skipped"),
                  run(0, "openai:a", False), run(1, "openai:a", False, "failed"), run(2, "openai:b", True)]
    a, b = ev.provider_progress()  # no time yet: no pace
    assert a == {"provider": "openai:a", "done": 4, "total": 12, "failed": 2, "skipped": 2, "cost": 0.0,
                 "elapsed_s": 0.0, "eta_s": None}
    assert b["done"] == 1 and b["eta_s"] is None
    clock.monotonic = lambda: 100.5
    assert ev.provider_progress()[0]["eta_s"] == pytest.approx(8 / 8.0)  # 4 done in 0.5 s: 8 a second
    ev.results = [*ev.results[1:], run(2, "openai:a", True)]  # replaced: counted again
    assert ev.provider_progress()[0]["done"] == 5


def test_a_block_keeps_what_its_arrays_cannot_hold_under_the_fields_key_and_the_place() -> None:
    assert Block().used == 0
    assert (FloatField(1).offset, FloatField(1).key, IdField(4).key, RareField(5, None).key) == (1, SIZE, 4 * SIZE,
                                                                                                  5 * SIZE)
    r = EvalResult(0, "a", "", {})
    block, at = r._block, r._at
    r.judge_cost = 2  # an int: kept as given
    assert block.other[SIZE + at] == 2 and type(r.judge_cost) is int
    r.judge_cost = 2.5  # a float: in the array, the int dropped
    assert SIZE + at not in block.other and r.judge_cost == 2.5
    r.run_id, r.error_type = "not-hex", "rate_limit"
    assert block.other[4 * SIZE + at] == "not-hex" and block.other[5 * SIZE + at] == "rate_limit"


def test_an_evaluation_reads_as_its_size_progress_and_state() -> None:
    ev = Evaluation(["openai:a", "openai:b"], [{}, {}], repeat=2, wall_s=1.234)
    ev.results = [run(0, "openai:a", True), run(0, "openai:b", False), run(1, "openai:a", True)]
    assert repr(ev) == "<Evaluation 2 rows x 2 columns x 2 repeats: 3 of 8 done, 2 passed, wall 1.23 s>"
    ev.budget_stopped = True
    assert repr(ev).endswith("wall 1.23 s (budget reached)>")
    ev.interrupted = True
    assert repr(ev).endswith("wall 1.23 s (interrupted)>")
    ev._job = SimpleNamespace(finished=SimpleNamespace(is_set=lambda: False))
    assert repr(ev).endswith("wall 1.23 s (running in the background)>")
    assert repr(Evaluation(["openai:a"], [{}])) == "<Evaluation 1 rows x 1 columns: 0 of 1 done, 0 passed, wall 0.00 s>"
