"""The shape of an evaluation's results (`Evaluation`, `EvalResult`): columns are provider ×
variant and named ``provider/VARIANT``, each cell has ``repeat`` runs, a row that could not be
rendered is a ``template_error`` run, and the budget's figures travel with it."""

from __future__ import annotations

import pytest

from ipyagent.agent.evaluation.checks import Outcome, parse_assertion
from ipyagent.agent.evaluation.results import EvalResult, Evaluation, column_name


def _run(
    row: int, provider: str, variant: str | None, repeat: int, passed: bool | None, status: str = "ok"
) -> EvalResult:
    return EvalResult(
        row,
        provider,
        f"prompt {row}",
        {"q": row},
        variant=variant,
        repeat=repeat,
        passed=passed,
        status=status,
        outcomes=[Outcome("contains:x", bool(passed))] if status == "ok" else [],
        error_type={"ok": None, "failed": "server", "skipped": "budget", "template_error": "template"}[status],
        error=None if status == "ok" else "why",
    )


@pytest.fixture
def ev() -> Evaluation:
    ev = Evaluation(
        ["openai:a", "openai:b"],
        [{"q": 0}, {"q": 1}],
        assertions=["contains:x"],
        variants=["terse", "steps"],
        repeat=2,
        labels={"openai:a": "good"},
    )
    ev.results = [
        _run(0, "openai:a", "terse", 0, True),
        _run(0, "openai:a", "terse", 1, False),  # flaky
        _run(0, "openai:a", "steps", 0, True),
        _run(0, "openai:a", "steps", 1, True),
        _run(1, "openai:a", "terse", 1, True),
        _run(1, "openai:a", "terse", 0, True),
        _run(1, "openai:a", "steps", 0, None, "template_error"),
        _run(1, "openai:a", "steps", 1, None, "template_error"),
        _run(0, "openai:b", "terse", 0, False, "failed"),
        _run(0, "openai:b", "terse", 1, None, "skipped"),
    ]
    return ev


def test_a_column_is_a_provider_times_a_variant_named_provider_slash_variant(ev) -> None:
    assert column_name("openai:a", None) == "openai:a" and column_name("openai:a", "terse") == "openai:a/terse"
    assert ev.columns == ["openai:a/terse", "openai:a/steps", "openai:b/terse", "openai:b/steps"]
    assert ev.total == 2 * 4 * 2
    assert Evaluation(["openai:a"], ["r"]).columns == ["openai:a"]  # no variants: the provider's key alone
    # Every API taking a column takes its name, or the provider as the user named it.
    assert ev.column("openai:a/terse") == ev.column("good/terse") == "openai:a/terse"
    with pytest.raises(KeyError, match="no column 'good'; the columns are openai:a/terse, "):
        ev.column("good")
    assert ev.cell(0, "good/terse", repeat=1).passed is False
    assert [r.repeat for r in ev.cells(1, "openai:a/terse")] == [0, 1]
    # A provider whose id holds a slash (a model path) still names its columns.
    slashed = Evaluation(["openrouter:meta/llama"], ["r"], variants=["v"], labels={"openrouter:meta/llama": "ll"})
    assert slashed.column("ll/v") == "openrouter:meta/llama/v"


def test_results_are_ordered_by_row_column_and_repeat_and_repeats_that_disagree_are_flaky(ev) -> None:
    assert [(r.row, r.column, r.repeat) for r in ev.ordered()][:4] == [
        (0, "openai:a/terse", 0),
        (0, "openai:a/terse", 1),
        (0, "openai:a/steps", 0),
        (0, "openai:a/steps", 1),
    ]
    # A skipped or unrendered run is no verdict: only row 0 on a/terse disagrees with itself.
    assert ev.flaky() == [(0, "openai:a/terse")]


def test_the_summary_is_per_column_over_every_repeat(ev) -> None:
    summary = {s["column"]: s for s in ev.summary_records()}
    assert list(summary) == ev.columns
    terse = summary["openai:a/terse"]
    assert (
        terse["provider"],
        terse["variant"],
        terse["runs"],
        terse["passed"],
        terse["pass_rate"],
        terse["flaky"],
    ) == ("openai:a", "terse", 4, 3, 0.75, 1)
    steps = summary["openai:a/steps"]
    assert (steps["runs"], steps["template_errors"], steps["pass_rate"]) == (2, 2, 1.0)
    b = summary["openai:b/terse"]
    assert (b["runs"], b["errors"], b["skipped"], b["pass_rate"]) == (1, 1, 1, 0.0)
    assert summary["openai:b/steps"]["runs"] == 0 and summary["openai:b/steps"]["pass_rate"] is None
    assert ev.skipped == 1


def test_records_and_json_carry_column_variant_repeat_and_the_budget(ev) -> None:
    records = ev.records()
    assert len(records) == len(ev.results)
    first = records[0]
    assert (first["column"], first["provider"], first["variant"], first["repeat"]) == (
        "openai:a/terse",
        "openai:a",
        "terse",
        0,
    )
    other = next(r for r in records if r["provider"] == "openai:b")
    assert first["alias"] == "good" and other["alias"] is None  # named by its alias / by its id
    unrendered = next(r for r in records if r["status"] == "template_error")
    assert (
        unrendered["passed"] is None and unrendered["contains:x"] is None and unrendered["failures"] == "template: why"
    )
    ev.budget, ev.spent, ev.reserved = 0.5, 0.48, 0.0
    doc = ev.to_json()
    assert doc["columns"] == ev.columns and doc["variants"] == ["terse", "steps"] and doc["repeat"] == 2
    assert (doc["budget"], doc["spent"], doc["reserved"], doc["skipped"]) == (0.5, 0.48, 0.0, 1)
    assert doc["flaky"] == [[0, "openai:a/terse"]]
    assert doc["aliases"] == {"openai:a": "good"}
    ev.labels["openai:b"] = "openai:b-2"  # a label that is an id, not an alias
    assert ev.to_json()["aliases"] == {"openai:a": "good"}
    assert doc["results"][0]["column"] == "openai:a/terse" and doc["results"][0]["repeat"] == 0


def test_the_json_keeps_the_rows_field_order() -> None:
    """A saved notebook sorts JSON keys: ``field_order`` keeps the order the rows gave their fields."""
    row = {"country": "France", "capital": "Paris"}
    ev = Evaluation(["openai:a"], [row])
    ev.results.append(EvalResult(0, "openai:a", "Capital of France?", row))
    assert ev.to_json()["field_order"] == ["country", "capital"]


def test_the_summary_shows_what_the_drawn_summary_does_and_every_figure_with_full(ev) -> None:
    pytest.importorskip("pandas")
    short, full = ev.summary(), ev.summary(full=True)
    # No price known: no cost column; tokens are in + out; the interval of the pass rate beside it.
    assert list(short.columns) == ["column", "pass_rate", "pass_low", "pass_high", "passed", "failed", "errors",
                                   "total_p50_s", "tokens"]
    assert list(full.columns) == list(ev.summary_records()[0])
    assert {"ttft_p90_s", "judge_cost", "verdict", "difference"} <= set(full.columns)
    assert list(short["column"]) == list(full["column"]) == ev.columns
    # A price known for one run: the cost column comes back, unknown elsewhere.
    ev.results[0].cost, ev.results[0].input_tokens, ev.results[0].output_tokens = 0.002, 10, 4
    short = ev.summary().set_index("column")
    assert list(short.columns)[-1] == "cost" and short.loc["openai:a/terse", "cost"] == pytest.approx(0.002)
    assert short.loc["openai:a/terse", "tokens"] == 14
    assert short["cost"].isna().sum() == 3


def test_provider_progress_counts_what_ended_since_last_time_per_provider(monkeypatch) -> None:
    from types import SimpleNamespace

    from ipyagent.agent.evaluation import results

    monkeypatch.setattr(results, "time", SimpleNamespace(monotonic=lambda: 110.0))
    ev = Evaluation(["openai:a", "openai:b"], [f"r{n}" for n in range(10)], repeat=2, started=100.0)

    def ran(provider, passed=True, status="ok", cost=0.01, cached=False, judge=None):
        return SimpleNamespace(provider=provider, passed=passed, status=status, cost=cost, cached=cached,
                               judge_cost=judge)

    def figures():
        return [(p["provider"], p["done"], p["total"], p["failed"], p["skipped"], pytest.approx(p["cost"]), p["eta_s"])
                for p in ev.provider_progress()]

    ev.results = [ran("openai:a"), ran("openai:a", passed=False, judge=0.005), ran("openai:b", status="skipped",
                                                                                   passed=False, cost=None)]
    assert figures() == [("openai:a", 2, 20, 1, 0, 0.025, 90.0), ("openai:b", 1, 20, 0, 1, 0.0, 190.0)]
    ev.results.append(ran("openai:b", cost=0.5, cached=True))  # cached: no money spent
    ev.results.append(ran("openai:other"))  # not a provider of this evaluation
    ev.results[0].passed = False  # counted already: not read again
    assert figures()[1] == ("openai:b", 2, 20, 0, 1, 0.0, 90.0) and figures()[0][3] == 1
    ev.results = [ran("openai:b", passed=False)]  # replaced: counted anew
    assert figures() == [("openai:a", 0, 20, 0, 0, 0.0, None), ("openai:b", 1, 20, 1, 0, 0.01, 190.0)]
    ev.providers = ["openai:c"]  # the providers set once the evaluation is described
    assert figures() == [("openai:c", 0, 20, 0, 0, 0.0, None)]


def test_a_text_check_gives_the_cells_it_fails_for_one_value_one_outcome() -> None:
    """A matrix keeps thousands of outcomes: every cell a text check fails for the same value (one
    row's columns, or a check without a template) holds the same one, as the cells it passes do."""
    check = parse_assertion("contains:{{ row.want }}")
    x_row, x_again, y_row = {"want": "x"}, {"want": "x"}, {"want": "y"}
    first, again, other = (check.check_now("nothing", row) for row in (x_row, x_again, y_row))
    assert first == Outcome("contains:{{ row.want }}", False, reason="the answer does not contain 'x'")
    assert again is first
    assert other is not first and other.reason == "the answer does not contain 'y'"
    plain = parse_assertion("icontains:the")
    assert plain.check_now("no", x_row) is plain.check_now("nope", y_row)
    assert plain.check_now("The end", x_row) is plain.check_now("the end", y_row)
