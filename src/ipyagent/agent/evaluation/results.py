"""An evaluation's results: one `EvalResult` per cell, and the `Evaluation` that holds them,
with its figures (`summary`, `progress`) and its data (`records`, DataFrame, CSV, JSON)."""

from __future__ import annotations

import csv
import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare import dataframe
from .cache import json_output
from .checks import Outcome


def _tokens(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of a `Usage` or its stored dict (older stores: ``input`` / ``output``)."""
    if usage is None:
        return 0, 0
    if isinstance(usage, dict):
        return int(usage.get("input_tokens", usage.get("input")) or 0), int(
            usage.get("output_tokens", usage.get("output")) or 0
        )
    return usage.input_tokens, usage.output_tokens


@dataclass(slots=True)
class EvalResult:
    """One cell of the matrix: one row run on one provider.

    Attributes:
        row: the row's position (0-based).
        provider: the provider's key (``provider:model``; ``... #2`` when named twice).
        prompt: the rendered prompt sent.
        fields: the row's fields (a dict row's items; ``{"value": row}`` otherwise).
        text: the answer's text ("" when the run failed before any).
        output: the structured output (an instance of the schema's model), or None.
        passed: the run succeeded and every assertion passed; None when skipped.
        outcomes: one `Outcome` per assertion, in order.
        status: ``ok``, ``failed`` (the run failed), or ``skipped`` (not run: the budget).
        error_type, error: `ProviderError.type` (``rate_limit``, ...; ``budget`` when skipped)
            and its message; None when the run succeeded.
        input_tokens, output_tokens: billed by the provider, over the run's model turns.
        cost: the run's price in USD (None: unknown); a cached run reports its original price.
        judge_cost: the judges' price in USD for this cell (None: no judge, or unknown).
        ttft_s: seconds from the start to the first streamed delta; total_s: to the end.
        cached: served from the run store without a request.
        run_id: the run's id in the run store (the full transcript: ``%agent inspect RUN``).
        tool_calls: the tools called, ``[{"name", "input", "output"}]`` (output text, shortened).
    """

    row: int
    provider: str
    prompt: str
    fields: dict[str, Any]
    text: str = ""
    output: Any = None
    passed: bool | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    status: str = "ok"
    error_type: str | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    judge_cost: float | None = None
    ttft_s: float | None = None
    total_s: float | None = None
    cached: bool = False
    run_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def first_line(self) -> str:
        """The answer's first non-empty line (the error's, for a failed run)."""
        text = self.text if self.ok or self.text else (self.error or "")
        return next((line.strip() for line in text.splitlines() if line.strip()), "")

    def failures(self) -> list[str]:
        """Why the cell did not pass: the error, or each failed assertion with its reason."""
        if not self.ok:
            return [f"{self.error_type}: {self.error}"]
        return [f"{o.name}: {o.reason or 'failed'}" for o in self.outcomes if not o.passed]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every attribute, the structured output as JSON, outcomes as dicts."""
        out = {name: getattr(self, name) for name in self.__slots__ if name not in ("outcomes", "output")}  # type: ignore[attr-defined]
        out["output"] = json_output(self.output)
        out["outcomes"] = [o.to_dict() for o in self.outcomes]
        return out


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


@dataclass
class Evaluation:
    """The outcome of `evaluate`: one `EvalResult` per finished cell.

    Attributes:
        providers: the providers' keys, in the order given.
        rows: the rows as given (dicts or strings).
        assertions: the assertions' names, in order.
        results: finished (and skipped) cells, in the order they ended.
        wall_s: seconds the evaluation took.
        interrupted: True when it was stopped (kernel interrupt) before every cell ran.
        budget: the limit in USD (None: none); budget_stopped: True when it stopped scheduling.
        notes: things worth knowing (an unknown price under a budget, a store that failed).
        finished_s: per provider, seconds from the start to its last cell's end.
    """

    providers: list[str]
    rows: list[Any]
    assertions: list[str] = field(default_factory=list)
    results: list[EvalResult] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False
    budget: float | None = None
    budget_stopped: bool = False
    notes: list[str] = field(default_factory=list)
    finished_s: dict[str, float] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return len(self.rows) * len(self.providers)

    def cell(self, row: int, provider: str) -> EvalResult | None:
        """The result of `row` on `provider` (None: not finished)."""
        return next((r for r in self.results if r.row == row and r.provider == provider), None)

    def ordered(self) -> list[EvalResult]:
        """Results by row, then by provider in the order given."""
        order = {p: i for i, p in enumerate(self.providers)}
        return sorted(self.results, key=lambda r: (r.row, order.get(r.provider, 0)))

    # -- figures -----------------------------------------------------------------------

    def summary(self) -> list[dict[str, Any]]:
        """One dict per provider: ``provider``, ``runs`` (finished, skipped excluded), ``passed``,
        ``failed`` (an assertion failed), ``errors`` (the run failed), ``skipped``, ``cached``,
        ``pass_rate`` (passed / runs, None without runs), ``ttft_p50_s``, ``ttft_p90_s``,
        ``total_p50_s``, ``total_p90_s`` (seconds, over successful runs), ``input_tokens``,
        ``output_tokens`` (sums), ``cost`` and ``judge_cost`` (USD sums; None when unknown)."""
        rows = []
        for provider in self.providers:
            mine = [r for r in self.results if r.provider == provider]
            ran = [r for r in mine if r.status != "skipped"]
            ok = [r for r in ran if r.ok]
            ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
            total = [r.total_s for r in ok if r.total_s is not None]
            costs = [r.cost for r in ran if r.cost is not None]
            judges = [r.judge_cost for r in ran if r.judge_cost is not None]
            rows.append(
                {
                    "provider": provider,
                    "runs": len(ran),
                    "passed": sum(bool(r.passed) for r in ran),
                    "failed": sum(r.ok and not r.passed for r in ran),
                    "errors": len(ran) - len(ok),
                    "skipped": len(mine) - len(ran),
                    "cached": sum(r.cached for r in ran),
                    "pass_rate": (sum(bool(r.passed) for r in ran) / len(ran)) if ran else None,
                    "ttft_p50_s": _percentile(ttft, 0.5),
                    "ttft_p90_s": _percentile(ttft, 0.9),
                    "total_p50_s": _percentile(total, 0.5),
                    "total_p90_s": _percentile(total, 0.9),
                    "input_tokens": sum(r.input_tokens for r in ran),
                    "output_tokens": sum(r.output_tokens for r in ran),
                    "cost": sum(costs) if costs else None,
                    "judge_cost": sum(judges) if judges else None,
                }
            )
        return rows

    def progress(self) -> list[dict[str, Any]]:
        """One dict per provider while it runs: ``done`` of ``total``, ``failed`` (errors and
        failed assertions), ``cost`` so far (USD, new requests only), ``elapsed_s`` and
        ``eta_s`` (seconds left at the pace so far; None before the first result)."""
        per = len(self.rows)
        elapsed = time.monotonic() - self.started
        out = []
        for provider in self.providers:
            mine = [r for r in self.results if r.provider == provider]
            done = len(mine)
            rate = done / elapsed if done and elapsed > 0 else 0.0
            out.append(
                {
                    "provider": provider,
                    "done": done,
                    "total": per,
                    "failed": sum(not r.passed for r in mine if r.status != "skipped"),
                    "skipped": sum(r.status == "skipped" for r in mine),
                    "cost": sum((r.cost or 0.0) + (r.judge_cost or 0.0) for r in mine if not r.cached),
                    "elapsed_s": elapsed,
                    "eta_s": (per - done) / rate if rate else None,
                }
            )
        return out

    # -- data --------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per cell (by row, then provider): ``row``, the row's fields (a field
        named like a column below becomes ``row.NAME``), ``provider``, ``prompt``, ``output``
        (the answer's text), ``structured`` (the structured output), ``passed``, one column per
        assertion (True / False), ``failures`` (reasons, ``; ``-joined), ``status``,
        ``error_type``, ``error``, ``input_tokens``, ``output_tokens``, ``cost``, ``judge_cost``,
        ``ttft_s``, ``total_s``, ``cached``, ``run_id``."""
        out = []
        for r in self.ordered():
            rec: dict[str, Any] = {"row": r.row}
            tail: dict[str, Any] = {
                "provider": r.provider,
                "prompt": r.prompt,
                "output": r.text,
                "structured": r.output,
                "passed": r.passed,
            }
            outcomes = {o.name: o.passed for o in r.outcomes}
            for name in self.assertions:
                tail[name] = outcomes.get(name) if r.ok else (False if r.status == "failed" else None)
            tail.update(
                failures="; ".join(r.failures()),
                status=r.status,
                error_type=r.error_type,
                error=r.error,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                cost=r.cost,
                judge_cost=r.judge_cost,
                ttft_s=r.ttft_s,
                total_s=r.total_s,
                cached=r.cached,
                run_id=r.run_id,
            )
            for key, value in r.fields.items():
                rec[f"row.{key}" if key in tail or key == "row" else key] = value
            rec.update(tail)
            out.append(rec)
        return out

    def to_dataframe(self) -> Any:
        """`records` as a pandas DataFrame.

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        return dataframe(self.records())

    def to_csv(self, path: str | Path) -> Path:
        """Write `records` as CSV (UTF-8; a structured output as JSON text). Returns the path."""
        records = self.records()
        columns = list(dict.fromkeys(k for rec in records for k in rec)) or ["row", "provider"]
        path = Path(path)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for rec in records:
                writer.writerow(
                    {
                        k: json.dumps(json_output(v), default=str) if k == "structured" and v is not None else v
                        for k, v in rec.items()
                    }
                )
        return path

    def to_json(self, path: str | Path | None = None) -> Any:
        """The evaluation as JSON data (``providers``, ``assertions``, ``summary``, ``results``:
        each cell's `EvalResult.to_dict`, with its row's fields); written to `path` when given
        (then the path is returned)."""
        doc = {
            "id": self.id,
            "providers": self.providers,
            "assertions": self.assertions,
            "total": self.total,
            "wall_s": self.wall_s,
            "interrupted": self.interrupted,
            "budget": self.budget,
            "budget_stopped": self.budget_stopped,
            "notes": self.notes,
            "summary": self.summary(),
            "results": [r.to_dict() for r in self.ordered()],
        }
        if path is None:
            return doc
        path = Path(path)
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        state = " (interrupted)" if self.interrupted else " (budget reached)" if self.budget_stopped else ""
        passed = sum(bool(r.passed) for r in self.results)
        return (
            f"<Evaluation {len(self.rows)} rows x {len(self.providers)} providers: {len(self.results)} of {self.total} "
            f"done, {passed} passed, wall {self.wall_s:.2f} s{state}>"
        )
