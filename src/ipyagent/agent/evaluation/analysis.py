"""An evaluation's statistics (`statistics` module's formulas over its runs): per column, each
column against the baseline, the judges against the people who graded, and which rows to show
under the matrix's filters.

A run counts for the pass rate when it ran (ok, or failed: a failed run did not pass); runs not
sent (skipped by the budget, rows that could not be rendered) are left out. Columns are compared
on the (row, repeat) pairs both ran.
"""

from __future__ import annotations

import statistics as stdlib_statistics
from typing import TYPE_CHECKING, Any

from ...memory import RunStore
from ..compare import dataframe
from .history import diff_records
from .statistics import Comparison, cohen_kappa, compare_paired, row_bootstrap, wilson_interval

if TYPE_CHECKING:
    from .results import EvalResult, Evaluation


def column_name(provider: str, variant: str | None) -> str:
    """A column's name: the provider's key, with ``/VARIANT`` appended when there are variants."""
    return provider if variant is None else f"{provider}/{variant}"


def _median(values: list[float]) -> float | None:
    return stdlib_statistics.median(values) if values else None


def by_column(ev: Evaluation) -> dict[str, list[EvalResult]]:
    """The runs of each column (in `ev.columns` order), skipped and unrendered ones left out."""
    out: dict[str, list[EvalResult]] = {column: [] for column in ev.columns}
    names: dict[tuple[str, str | None], str] = {}  # (provider, variant) -> column, named once
    for r in ev.results:
        if r.status == "ok" or r.status == "failed":  # `EvalResult.ran`, without a call per run
            key = (r.provider, r.variant)
            name = names.get(key)
            if name is None:
                name = names[key] = column_name(*key)
            out.setdefault(name, []).append(r)
    return out


def pass_fail(runs: list[EvalResult]) -> dict[tuple[int, int], bool]:
    """(row, repeat) -> passed, for runs that ran."""
    return {(r.row, r.repeat): bool(r.passed) for r in runs}


def run_score(r: EvalResult) -> float | None:
    """The mean of a run's scores (scored ``python:`` checks); None when it has none."""
    scores = [o.score for o in r.outcomes if o.score is not None]
    return sum(scores) / len(scores) if scores else None


def _scores(runs: list[EvalResult], seed: int | None, scored: bool = True) -> dict[str, Any]:
    """Mean score over the runs that have one, with a bootstrap interval resampling rows; `scored`:
    whether any check may give a score (a ``python:`` one), else none is looked for."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for r in runs if scored else ():
        score = run_score(r)
        if score is not None:
            sums[r.row] = sums.get(r.row, 0.0) + score
            counts[r.row] = counts.get(r.row, 0) + 1
    if not counts:
        return {"score": None, "score_low": None, "score_high": None, "scored": 0}
    interval = row_bootstrap(list(sums.values()), list(counts.values()), seed=seed)
    total = sum(counts.values())
    return {"score": sum(sums.values()) / total, "score_low": interval[0] if interval else None,
            "score_high": interval[1] if interval else None, "scored": total}


def column_figures(column: str, runs: list[EvalResult], seed: int | None, scored: bool = True) -> dict[str, Any]:
    """One column's figures: ``column``, ``runs``, ``passed``, ``pass_rate`` with its Wilson
    interval ``pass_low`` .. ``pass_high``, ``score`` (mean) with ``score_low`` .. ``score_high``
    and ``scored`` (runs with a score), ``cost_p50`` (median USD per run, those with a known
    price). The median latency is the summary's ``total_p50_s``."""
    passed = sum(bool(r.passed) for r in runs)
    interval = wilson_interval(passed, len(runs))
    return {"column": column, "runs": len(runs), "passed": passed, "pass_rate": passed / len(runs) if runs else None,
            "pass_low": interval[0] if interval else None, "pass_high": interval[1] if interval else None,
            **_scores(runs, seed, scored), "cost_p50": _median([r.cost for r in runs if r.cost is not None])}


def judge_agreement(ev: Evaluation) -> list[dict[str, Any]]:
    """Per judge check (``judge:...``): ``check``, and on the runs a person graded, ``n``,
    ``percent`` agreement and Cohen's ``kappa`` (None: undefined) of the judge with the person."""
    judges = [name for name in ev.assertions if name.startswith("judge:")]
    out = []
    for name in judges:
        pairs = []
        for r in ev.results:
            if r.human is None or not r.ok:
                continue
            outcome = next((o for o in r.outcomes if o.name == name), None)
            if outcome is not None:
                pairs.append((outcome.passed, r.human))
        agreement = cohen_kappa(pairs)
        out.append({"check": name, "n": agreement.n, "percent": agreement.percent, "kappa": agreement.kappa})
    return out


def compare_columns(ev: Evaluation, baseline: str, column: str, *, seed: int | None = None,
                    verdicts: dict[str, dict[tuple[int, int], bool]] | None = None) -> Comparison:
    """`column` against `baseline` (names as `Evaluation.column` takes them) on the pairs both ran;
    `verdicts`: each column's `pass_fail`, when already read."""
    baseline, column = ev.column(baseline), ev.column(column)
    if verdicts is None:
        runs = by_column(ev)
        verdicts = {c: pass_fail(runs.get(c, [])) for c in (baseline, column)}
    return compare_paired(verdicts[baseline], verdicts[column], baseline=baseline, column=column,
                          seed=ev.seed if seed is None else seed)


def statistics(ev: Evaluation, *, baseline: str | None = None, seed: int | None = None) -> dict[str, Any]:
    """``baseline`` (the column the others are compared with: `baseline`, else `ev.baseline`, else
    the first), ``columns`` (`column_figures` of each), ``comparisons`` (each other column against
    the baseline: `Comparison`), ``agreement`` (`judge_agreement`)."""
    seed = ev.seed if seed is None else seed
    runs = by_column(ev)
    columns = ev.columns
    base = ev.column(baseline or ev.baseline or columns[0]) if columns else None
    verdicts = {c: pass_fail(runs.get(c, [])) for c in columns}
    others = [c for c in columns if base is not None and c != base]
    comparisons = [compare_columns(ev, base, c, seed=seed, verdicts=verdicts) for c in others]  # type: ignore[arg-type]
    scored = any(name.startswith("python:") for name in ev.assertions)  # only functions give scores
    return {"baseline": base, "columns": [column_figures(c, runs.get(c, []), seed, scored) for c in columns],
            "comparisons": comparisons, "agreement": judge_agreement(ev)}


#: Keys a column's figures add to its summary (`column_figures`), and those of its comparison with the baseline.
FIGURES = ("pass_low", "pass_high", "score", "score_low", "score_high", "scored", "cost_p50")
VERSUS = ("difference", "difference_low", "difference_high", "p_value", "verdict")


def versus(comparison: Comparison | None) -> dict[str, Any]:
    """A column's figures against the baseline (`VERSUS`); the baseline's own: ``verdict`` ``baseline``."""
    if comparison is None:
        return dict.fromkeys(VERSUS) | {"verdict": "baseline"}
    return {"difference": comparison.difference, "difference_low": comparison.low, "difference_high": comparison.high,
            "p_value": comparison.p_value, "verdict": comparison.verdict}


#: The figures `Analysis.summary` gives by default (the drawn summary's; ``tokens``: in + out).
SUMMARY = ("column", "pass_rate", "pass_low", "pass_high", "passed", "failed", "errors", "total_p50_s", "tokens",
           "cost")


def short_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` (`summary_records`) cut to `SUMMARY`; ``cost`` left out when no column's is known."""
    keys = [k for k in SUMMARY if k != "cost" or any(r.get("cost") is not None for r in records)]
    return [{k: r.get("input_tokens", 0) + r.get("output_tokens", 0) if k == "tokens" else r.get(k) for k in keys}
            for r in records]


class Analysis:
    """What `Evaluation` answers about itself: statistics, comparisons, grades and changes."""

    def statistics(self: Any, baseline: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """`analysis.statistics` of this evaluation (``baseline``, ``columns``, ``comparisons``,
        ``agreement``); `seed` for the bootstrap (default the evaluation's `seed`)."""
        return statistics(self, baseline=baseline, seed=seed)

    def summary(self: Any, baseline: str | None = None, *, full: bool = False) -> Any:
        """A pandas DataFrame, one row per column: by default what the drawn summary shows
        (`SUMMARY`: the column, its pass rate with the 95% interval ``pass_low`` .. ``pass_high``,
        passed / failed / errors, the median total seconds, ``tokens`` in + out, and ``cost`` in
        USD only when some run's price is known); `full`: every figure of `summary_records`
        (first-token and total percentiles, skipped, cached, judge cost, the scores, the
        comparison with the baseline).

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        records = self.summary_records(baseline=baseline)
        return dataframe(records if full else short_summary(records))

    def compare(self: Any, a: str, b: str, *, seed: int | None = None) -> Comparison:
        """Is `b` better than `a` on these rows? The paired difference in pass rate (B − A) over the
        (row, repeat) pairs both ran, its bootstrap interval, McNemar's p and the verdict in words
        (`Comparison.sentence`).

        Raises:
            KeyError: `a` or `b` is not a column (the message lists them).
        """
        return compare_columns(self, a, b, seed=seed)

    def grade(self: Any, row: int, column: str, passed: bool | None, note: str = "", *, repeat: int = 0) -> EvalResult:
        """A person's grade of the run of `row` on `column` (its `repeat`-th): pass (True) or fail
        (False) and a note; None removes it. Kept in the run store against the run (when the
        evaluation has a store), so a cached re-run shows it again; shown in the matrix apart from
        the automatic result, and in `to_dataframe` as ``human``. Returns the run.

        Raises:
            KeyError: no such column (the message lists them).
            LookupError: the run has not finished, or was not sent (skipped, not rendered).
        """
        cell = self.cell(row, column, repeat)
        if cell is None or not cell.ran:
            state = "has not finished" if cell is None else f"was not sent ({cell.status})"
            where = f"row {row} on {self.column(column)} (repeat {repeat})"
            raise LookupError(f"{where} {state}: there is no answer to grade")
        cell.human, cell.human_note = (None, "") if passed is None else (bool(passed), note or "")
        if self.store_path is not None and cell.run_id is not None:
            store = RunStore(self.store_path)
            try:
                store.set_grade(cell.run_id, cell.human, cell.human_note)
            finally:
                store.close()
        for listener in list(self.listeners):
            listener(cell)
        return cell

    def diff(self: Any, other: Evaluation) -> Any:
        """The runs whose status, verdict or answer differ from `other`'s (matched by row content,
        column and repeat), and those only one has, as a DataFrame (`history.diff_records`).

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        return dataframe(diff_records(self, other))

    def analysis_json(self: Any, stats: dict[str, Any]) -> dict[str, Any]:
        """What the saved matrix shows of `stats` (`statistics`) beside the summary: ``baseline``,
        ``comparisons`` (`Comparison.to_dict`, with the verdict's sentence), ``agreement`` (the
        judges with the people), ``changes`` (since the previous run of the cell; None: none
        kept) and ``row_flags`` (`row_flags`, with ``changed``: the rows that changed)."""
        flags = row_flags(self)
        flags["changed"] = sorted((self.changes or {}).get("rows", []))
        return {"baseline": stats["baseline"], "comparisons": [c.to_dict() for c in stats["comparisons"]],
                "agreement": stats["agreement"], "changes": self.changes, "row_flags": flags}


def row_flags(ev: Evaluation) -> dict[str, list[int]]:
    """Rows for the matrix's filters: ``failed`` (a run of the row did not pass, or could not be
    rendered) and ``disagree`` (the columns' pass rates on the row differ), each sorted."""
    failed: set[int] = set()
    rates: dict[int, dict[str, list[int]]] = {}
    for r in ev.results:
        if r.status == "template_error" or (r.ran and not r.passed):
            failed.add(r.row)
        if r.ran:
            counts = rates.setdefault(r.row, {}).setdefault(r.column, [0, 0])
            counts[0] += bool(r.passed)
            counts[1] += 1
    disagree = [row for row, per in rates.items() if len(per) > 1 and len({p / n for p, n in per.values()}) > 1]
    return {"failed": sorted(failed), "disagree": sorted(disagree)}


__all__ = ["Analysis", "by_column", "column_figures", "compare_columns", "judge_agreement", "pass_fail",
           "row_flags", "run_score", "statistics"]
