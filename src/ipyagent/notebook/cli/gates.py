"""Gates of ``ipyagent eval``: ``pass_rate>=0.9`` (every column of every evaluation), ``COLUMN:pass_rate>=0.9``
(the columns of that name), read against each evaluation's saved summary (`Evaluation.to_json()["summary"]`:
the figures and statistics computed when the notebook ran; nothing is computed again here).

A gate is ``[WHERE:]METRIC OP VALUE``: OP one of ``>= <= > < == !=``; VALUE a number (``90%`` is 0.9),
or for ``verdict`` a verdict word (``verdict!=worse``: no column worse than the baseline). WHERE is a
column (its name ``openai:gpt-6-luna/terse``, its alias form ``small/terse`` or a glob over either,
``*/careful``) in any evaluation, an evaluation (its ``-o`` name or ``cell N``: all its columns), or
``EVALUATION:COLUMN``.
"""

from __future__ import annotations

import fnmatch
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..render.evaluation import columns_of
from ..render.evaluation_stats import column_label

#: The summary figures a gate may read (`Evaluation.summary()`'s keys), with what each is.
METRICS: dict[str, str] = {
    "pass_rate": "passed / runs", "pass_low": "the pass rate's 95% interval, low end",
    "pass_high": "the pass rate's 95% interval, high end", "score": "mean score", "score_low": "its interval, low",
    "score_high": "its interval, high", "runs": "runs", "passed": "runs passed", "failed": "runs failed a check",
    "errors": "runs that failed", "skipped": "runs skipped (budget)", "flaky": "rows whose repeats disagree",
    "cost": "USD", "judge_cost": "USD", "cost_p50": "median USD per run", "total_p50_s": "median seconds",
    "total_p90_s": "90th percentile seconds", "ttft_p50_s": "median seconds to the first token",
    "difference": "paired difference with the baseline (points / 100)", "p_value": "McNemar's p",
    "verdict": "better, worse, no significant difference or baseline",
}
#: The verdicts a column's summary has (`verdict==WORD`, `verdict!=WORD`).
VERDICTS = ("better", "worse", "no significant difference", "baseline")
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
#: Rates shown as percentages in what a gate says.
_RATES = {"pass_rate", "pass_low", "pass_high"}
_GATE = re.compile(r"^(?:(?P<column>.+):)?(?P<metric>[A-Za-z_0-9]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>.+)$")


@dataclass(frozen=True)
class Gate:
    """One gate: `text` as given; `column` None for every column."""

    text: str
    column: str | None
    metric: str
    op: str
    value: float | str


@dataclass(frozen=True)
class GateResult:
    """A gate checked on one column of one evaluation (`figure` the column's value, None unknown)."""

    gate: Gate
    evaluation: str
    column: str
    figure: Any
    passed: bool
    #: Why nothing was checked (no evaluation, no such column), else "".
    why: str = ""

    def line(self) -> str:
        """``pass_rate>=0.99: ev openai:gpt-6-luna/terse 85% (needs >= 99%)``."""
        if self.why:
            return f"{self.gate.text}: {self.why}"
        shown = "unknown" if self.figure is None else _show(self.gate.metric, self.figure)
        return (f"{self.gate.text}: {self.evaluation} {self.column} {shown}"
                f" (needs {self.gate.op} {_show(self.gate.metric, self.gate.value)})")


def _show(metric: str, value: Any) -> str:
    if metric in _RATES and isinstance(value, (int, float)):
        return f"{value:.0%}" if value * 100 == round(value * 100) else f"{value:.1%}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_gate(text: str) -> Gate:
    """`text` (``[WHERE:]METRIC OP VALUE``) as a `Gate`.

    Raises:
        ValueError: not that shape, an unknown metric, a value that is not a finite number, or a verdict
            that is not one of `VERDICTS` (one line, naming the metrics or verdicts known).
    """
    match = _GATE.match(text.strip())
    if not match:
        raise ValueError(f"gate {text!r}: write [WHERE:]METRIC OP VALUE, e.g. 'pass_rate>=0.9'")
    column, metric, op, raw = match["column"], match["metric"], match["op"], match["value"].strip()
    if metric not in METRICS:
        raise ValueError(f"gate {text!r}: unknown metric {metric!r}; one of {', '.join(METRICS)}")
    if metric == "verdict":
        if op not in ("==", "!="):
            raise ValueError(f"gate {text!r}: a verdict is compared with == or !=")
        if raw not in VERDICTS:  # a typo would be a gate that always passes (!=) or never (==)
            raise ValueError(f"gate {text!r}: {raw!r} is not a verdict; one of {', '.join(VERDICTS)}")
        return Gate(text, column, metric, op, raw)
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"gate {text!r}: {raw!r} is not a number") from None
    if not math.isfinite(value):  # nan passes no comparison, inf none that can fail
        raise ValueError(f"gate {text!r}: {raw!r} is not a finite number")
    return Gate(text, column, metric, op, value)


def _matches(pattern: str, doc: dict[str, Any], column: str) -> bool:
    names = {column, column_label(doc, column)[0]}
    return any(name == pattern or fnmatch.fnmatchcase(name, pattern) for name in names)


def _columns_named(where: str | None, names: list[str], doc: dict[str, Any]) -> list[str]:
    """The columns of `doc` (the evaluation called `names`: its name, and ``cell N`` too when it has an
    ``-o`` name) a gate's qualifier names: all without one, or when it is one of `names`;
    ``EVALUATION:COLUMN`` that evaluation's columns named COLUMN; else the columns named `where` in any
    evaluation."""
    columns = columns_of(doc)
    if where is None or where in names:
        return columns
    for name in names:
        if where.startswith(name + ":"):
            where = where[len(name) + 1:]
            break
    return [column for column in columns if _matches(where, doc, column)]


def check(gate: Gate, evaluation: str, doc: dict[str, Any], cell: Any = None) -> list[GateResult]:
    """`gate` on each column of `doc` (an evaluation's JSON, named `evaluation`, made by cell number `cell`)
    it names: one result per column."""
    summary = {s.get("column") or s.get("provider"): s for s in doc.get("summary") or []}
    out = []
    names = [evaluation] + ([f"cell {cell}"] if cell is not None else [])
    for column in _columns_named(gate.column, names, doc):
        figure = (summary.get(column) or {}).get(gate.metric)
        passed = figure is not None and OPERATORS[gate.op](figure, gate.value)
        out.append(GateResult(gate, evaluation, column_label(doc, column)[0], figure, passed))
    return out


def check_all(gates: list[Gate], evaluations: list[tuple[str, dict[str, Any], list[Gate], Any]]) -> list[GateResult]:
    """Every gate on every evaluation ((name, JSON, the cell's own gates, its cell number)); a gate of the
    command line naming a column no evaluation has fails (no column checked is no gate passed)."""
    results: list[GateResult] = []
    for gate in gates:
        found = [r for name, doc, _, cell in evaluations for r in check(gate, name, doc, cell)]
        why = f"no evaluation or column is named {gate.column!r}" if gate.column else "the notebook ran no evaluation"
        results += found or [GateResult(gate, "", "", None, False, why)]
    for name, doc, own, _ in evaluations:
        for gate in own:
            why = f"{name} has no column {gate.column!r} ({', '.join(columns_of(doc))})"
            results += check(gate, name, doc) or [GateResult(gate, name, "", None, False, why)]
    return results


def not_checked(gates: list[Gate], why: str) -> list[GateResult]:
    """Each of `gates` failed, unchecked, for `why` (the notebook did not run to its end): listed, never
    left out of a report as though there were none."""
    return [GateResult(gate, "", "", None, False, f"not checked: {why}") for gate in gates]
