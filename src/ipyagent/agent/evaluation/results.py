"""An evaluation's results: one `EvalResult` per cell, and the `Evaluation` that holds them,
with its figures (`summary`, `progress`) and its data (`export.EvaluationData`: `records`,
DataFrame, CSV, JSON)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .cache import json_output
from .export import EvaluationData
from .analysis import FIGURES, Analysis, column_name, versus
from .background import Background
from .cell_store import FloatField, IdField, RareField, place
from .checks import Outcome
from .statistics import SEED, percentile


def _tokens(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of a `Usage` or its stored dict (older stores: ``input`` / ``output``)."""
    if usage is None:
        return 0, 0
    if isinstance(usage, dict):
        return int(usage.get("input_tokens", usage.get("input")) or 0), int(
            usage.get("output_tokens", usage.get("output")) or 0
        )
    return usage.input_tokens, usage.output_tokens


#: An `EvalResult`'s fields, in order (its constructor's arguments).
FIELDS = ("row", "provider", "prompt", "fields", "variant", "repeat", "text", "output", "passed", "outcomes", "status",
          "error_type", "error", "input_tokens", "output_tokens", "cost", "judge_cost", "ttft_s", "total_s", "cached",
          "run_id", "tool_calls", "human", "human_note")

#: A cell's status: the run answered, the run failed, not run (the budget), or its row could not be rendered.
STATUSES = ("ok", "failed", "skipped", "template_error")


class EvalResult:
    """One run of the matrix: one row on one column (a provider × a prompt variant), one repeat.

    Attributes:
        row: the row's position (0-based).
        provider: the provider's key (``provider:model``; ``... #2`` when named twice).
        prompt: the rendered prompt sent ("" when it could not be rendered).
        fields: the row's fields (a dict row's items; ``{"value": row}`` otherwise).
        variant: the prompt variant's name (None: the evaluation has no variants).
        repeat: which of the cell's ``repeat`` runs this is (0-based); each is its own request.
        text: the answer's text ("" when the run failed before any).
        output: the structured output (an instance of the schema's model), or None.
        passed: the run succeeded and every assertion passed; None when not run (skipped,
            template_error).
        outcomes: one `Outcome` per assertion, in order.
        status: ``ok``, ``failed`` (the run failed), ``skipped`` (not run: the budget), or
            ``template_error`` (not run: its prompt or a check could not be rendered for the row).
        error_type, error: `ProviderError.type` (``rate_limit``, ...; ``budget`` when skipped,
            ``template`` for a template_error) and its message, one line; None when the run succeeded.
        input_tokens, output_tokens: billed by the provider, over the run's model turns.
        cost: the run's price in USD (None: unknown); a cached run reports its original price.
        judge_cost: the judges' price in USD for this cell (None: no judge, or unknown).
        ttft_s: seconds from the start to the first streamed delta; total_s: to the end.
        cached: served from the run store without a request.
        run_id: the run's id in the run store (the full transcript: ``%agent inspect RUN``).
        tool_calls: the tools called, ``[{"name", "input", "output"}]`` (output text, shortened).
        human: a person's grade (pass True / fail False; None: not graded), kept in the run store
            against `run_id`, apart from the automatic `passed`; human_note: what they noted.
    """

    __slots__ = ("row", "provider", "prompt", "fields", "variant", "repeat", "text", "output", "passed", "outcomes",
                 "status", "input_tokens", "output_tokens", "cached", "tool_calls", "_block", "_at")
    __hash__ = None  # type: ignore[assignment] - compared by value, as a dataclass is
    __match_args__ = FIELDS
    #: the times and prices, kept in the result's block of `cell_store` (no float object per value)
    cost = FloatField(0)
    judge_cost = FloatField(1)
    ttft_s = FloatField(2)
    total_s = FloatField(3)
    run_id = IdField(4)
    #: set on few results (a failed run, a person's grade): kept in the block only when set
    error_type = RareField(5, None)
    error = RareField(6, None)
    human = RareField(7, None)
    human_note = RareField(8, "")

    def __init__(
        self,
        row: int,
        provider: str,
        prompt: str,
        fields: dict[str, Any],
        variant: str | None = None,
        repeat: int = 0,
        text: str = "",
        output: Any = None,
        passed: bool | None = None,
        outcomes: list[Outcome] | None = None,
        status: str = "ok",
        error_type: str | None = None,
        error: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float | None = None,
        judge_cost: float | None = None,
        ttft_s: float | None = None,
        total_s: float | None = None,
        cached: bool = False,
        run_id: str | None = None,
        tool_calls: list[dict[str, Any]] | tuple[()] = (),  # () when none: a matrix keeps thousands
        human: bool | None = None,
        human_note: str = "",
    ) -> None:
        self.row, self.provider, self.prompt, self.fields = row, provider, prompt, fields
        self.variant, self.repeat, self.text, self.output, self.passed = variant, repeat, text, output, passed
        self.outcomes = [] if outcomes is None else outcomes
        self.status, self.input_tokens, self.output_tokens = status, input_tokens, output_tokens
        self.cached, self.tool_calls = cached, tool_calls
        self._block, self._at = place()  # a new place: its numbers are None and its rare fields unset until set
        if run_id is not None:
            self.run_id = run_id
        if error_type is not None or error is not None or human is not None or human_note != "":
            self.error_type, self.error, self.human, self.human_note = error_type, error, human, human_note
        if cost is not None:
            self.cost = cost
        if judge_cost is not None:
            self.judge_cost = judge_cost
        if ttft_s is not None:
            self.ttft_s = ttft_s
        if total_s is not None:
            self.total_s = total_s

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"EvalResult({', '.join(f'{name}={getattr(self, name)!r}' for name in FIELDS)})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied or pickled by its fields: a copy takes a place of its own."""
        return _result, (self._values(),)

    @property
    def column(self) -> str:
        """The column's name (`column_name`): ``openai:gpt-6-luna``, or ``openai:gpt-6-luna/terse``."""
        return column_name(self.provider, self.variant)

    @property
    def ran(self) -> bool:
        """The run was sent or served (ok or failed), not skipped nor left unrendered."""
        return self.status in ("ok", "failed")

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
        """JSON-ready: every attribute and ``column``, the structured output as JSON, outcomes as dicts."""
        out = {name: getattr(self, name) for name in FIELDS if name not in ("outcomes", "output")}
        out["column"] = self.column
        out["output"] = json_output(self.output)
        out["outcomes"] = [o.to_dict() for o in self.outcomes]
        return out


def _result(values: tuple[Any, ...]) -> EvalResult:
    return EvalResult(*values)


@dataclass
class Evaluation(Analysis, Background, EvaluationData):
    """The outcome of `evaluate`: one `EvalResult` per finished run (while a background run goes
    on, the runs finished so far: `Background.done`, `progress`, `wait`, `cancel`).

    The matrix is rows × columns; a column is a provider × a prompt variant (`columns`), each
    cell run `repeat` times. A column is named by its provider's key, with ``/VARIANT``
    appended when there are variants (`column_name`); every method taking a column takes that
    name, or the provider as the user named it (an alias: `labels`) with the same suffix.

    Attributes:
        providers: the providers' keys, in the order given.
        rows: the rows as given (dicts or strings).
        assertions: the assertions' names, in order.
        results: finished (skipped and unrendered) runs, in the order they ended.
        variants: the prompt variants' names, in order ([]: one prompt, no variant axis).
        repeat: runs per cell (each a fresh request with its own cache key).
        labels: provider key -> the name it was given by (an alias, ``openai:m``), when it differs.
        wall_s: seconds the evaluation took.
        interrupted: True when it was stopped (kernel interrupt) before every cell ran.
        budget: the limit in USD (None: none); budget_stopped: True when it stopped scheduling.
        spent: USD spent by this evaluation's new requests (runs and judges; a cached run costs
            nothing); a run of unknown price counts its estimate.
        reserved: USD reserved for runs in flight (0 once every run has ended).
        notes: things worth knowing (an unknown price under a budget, a store that failed, rows
            that could not be rendered).
        finished_s: per provider, seconds from the start to its last run's end.
        baseline: the column the others are compared with (None: the first).
        seed: the bootstrap's seed (the same runs give the same intervals).
        name: what the run store keeps this evaluation under (the notebook cell that ran it), so the
            next run of that cell finds it and says what changed (`changes`); None: not kept.
        store_path: the run store's file, where grades are kept (None: no store; grades stay here).
        changes: what changed since the previous evaluation of the same name (`history.changes`).
        listeners: called with a run when it is graded (`grade`): the view redraws the matrix.
    """

    providers: list[str]
    rows: list[Any]
    assertions: list[str] = field(default_factory=list)
    results: list[EvalResult] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    repeat: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted: bool = False
    budget: float | None = None
    budget_stopped: bool = False
    spent: float = 0.0
    reserved: float = 0.0
    notes: list[str] = field(default_factory=list)
    finished_s: dict[str, float] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: float = field(default_factory=time.monotonic)
    baseline: str | None = None
    seed: int = SEED
    name: str | None = None
    store_path: str | None = None
    changes: dict[str, Any] | None = None
    listeners: list[Any] = field(default_factory=list, repr=False, compare=False)
    #: (the results list counted, how many of them, the counts per provider): `provider_progress` goes on from it.
    _progress_tally: ClassVar[tuple[list[Any], int, dict[str, list[Any]]] | None] = None

    @property
    def columns(self) -> list[str]:
        """The columns' names, provider by provider, each provider's variants in order."""
        return [column_name(p, v) for p in self.providers for v in (self.variants or [None])]

    @property
    def aliases(self) -> dict[str, str]:
        """Provider key -> the ``%provider --alias`` name it was given by (a label without ``:``);
        a provider named by its id has none."""
        return {key: label for key, label in self.labels.items() if ":" not in label}

    @property
    def total(self) -> int:
        """Runs in the matrix: rows × columns × repeat."""
        return len(self.rows) * len(self.providers) * max(len(self.variants), 1) * self.repeat

    @property
    def skipped(self) -> int:
        """Runs not started because of the budget."""
        return sum(r.status == "skipped" for r in self.results)

    def column(self, name: str) -> str:
        """The column `name` stands for: a column's name, or a provider as the user named it
        (``good``, ``good/terse``).

        Raises:
            KeyError: no such column; the message lists them.
        """
        if name in self.columns:
            return name
        for key in self.providers:
            for variant in self.variants or [None]:
                if name == column_name(self.labels.get(key, key), variant):
                    return column_name(key, variant)
        raise KeyError(f"no column {name!r}; the columns are {', '.join(self.columns)}")

    def cell(self, row: int, column: str, repeat: int = 0) -> EvalResult | None:
        """The result of `row` on `column`, its `repeat`-th run (None: not finished)."""
        column = self.column(column)
        return next((r for r in self.results if r.row == row and r.repeat == repeat and r.column == column), None)

    def cells(self, row: int, column: str) -> list[EvalResult]:
        """Every finished run of `row` on `column`, by repeat."""
        column = self.column(column)
        return sorted((r for r in self.results if r.row == row and r.column == column), key=lambda r: r.repeat)

    def ordered(self) -> list[EvalResult]:
        """Results by row, then by column in the order given, then by repeat."""
        order = {c: i for i, c in enumerate(self.columns)}
        return sorted(self.results, key=lambda r: (r.row, order.get(r.column, 0), r.repeat))

    def flaky(self) -> list[tuple[int, str]]:
        """(row, column) of each cell whose repeats disagree: some passed, some did not (runs
        skipped or not rendered left out). Empty when `repeat` is 1."""
        verdicts: dict[tuple[int, str], set[bool]] = {}
        for r in self.results:
            if r.ran:
                verdicts.setdefault((r.row, r.column), set()).add(bool(r.passed))
        order = {c: i for i, c in enumerate(self.columns)}
        return sorted(
            (key for key, seen in verdicts.items() if len(seen) > 1), key=lambda k: (k[0], order.get(k[1], 0))
        )

    # -- figures -----------------------------------------------------------------------

    def summary_records(self, baseline: str | None = None, stats: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One dict per column (`summary` is their DataFrame): ``column``, ``provider``, ``variant``,
        ``runs`` (sent or served,
        over every repeat), ``passed``, ``failed`` (an assertion failed), ``errors`` (the run
        failed), ``skipped`` (the budget), ``template_errors`` (not rendered), ``cached``,
        ``pass_rate`` (passed / runs, None without runs), ``flaky`` (rows whose repeats disagree),
        ``ttft_p50_s``, ``ttft_p90_s``, ``total_p50_s``, ``total_p90_s`` (seconds, over
        successful runs), ``input_tokens``, ``output_tokens`` (sums), ``cost`` and ``judge_cost``
        (USD sums; None when unknown); then the statistics (`analysis.FIGURES`: the pass rate's
        interval, the mean score's, median latency and cost) and against the baseline (`analysis.VERSUS`:
        the paired difference, its interval, McNemar's p, the verdict; ``baseline`` for the baseline).
        `stats`: `statistics` already computed (else computed for `baseline`)."""
        stats = stats or self.statistics(baseline)
        figures = {f["column"]: f for f in stats["columns"]}
        against = {c.column: c for c in stats["comparisons"]}
        by_column: dict[str, list[EvalResult]] = {}
        for r in self.results:
            by_column.setdefault(r.column, []).append(r)
        flaky = [column for _, column in self.flaky()]
        rows = []
        for provider, variant in ((p, v) for p in self.providers for v in self.variants or [None]):
            column = column_name(provider, variant)
            mine = by_column.get(column, [])
            ran = [r for r in mine if r.ran]
            ok = [r for r in ran if r.ok]
            ttft = sorted(r.ttft_s for r in ok if r.ttft_s is not None)
            total = sorted(r.total_s for r in ok if r.total_s is not None)
            costs = [r.cost for r in ran if r.cost is not None]
            judges = [r.judge_cost for r in ran if r.judge_cost is not None]
            passed = sum(bool(r.passed) for r in ran)
            rows.append(
                {
                    "column": column,
                    "provider": provider,
                    "variant": variant,
                    "runs": len(ran),
                    "passed": passed,
                    "failed": sum(r.ok and not r.passed for r in ran),
                    "errors": len(ran) - len(ok),
                    "skipped": sum(r.status == "skipped" for r in mine),
                    "template_errors": sum(r.status == "template_error" for r in mine),
                    "cached": sum(r.cached for r in ran),
                    "pass_rate": passed / len(ran) if ran else None,
                    "flaky": flaky.count(column),
                    "ttft_p50_s": percentile(ttft, 0.5),
                    "ttft_p90_s": percentile(ttft, 0.9),
                    "total_p50_s": percentile(total, 0.5),
                    "total_p90_s": percentile(total, 0.9),
                    "input_tokens": sum(r.input_tokens for r in ran),
                    "output_tokens": sum(r.output_tokens for r in ran),
                    "cost": sum(costs) if costs else None,
                    "judge_cost": sum(judges) if judges else None,
                    **{key: figures[column][key] for key in FIGURES},
                    **versus(against.get(column) if column != stats["baseline"] else None),
                }
            )
        return rows

    def provider_progress(self) -> list[dict[str, Any]]:
        """One dict per provider while it runs: ``done`` of ``total`` (its rows × variants ×
        repeats), ``failed`` (errors and failed assertions), ``skipped``, ``cost`` so far (USD,
        new requests only), ``elapsed_s`` and ``eta_s`` (seconds left at the pace so far; None
        before the first result). Costs what ended since the last call, not the whole matrix (a
        live view draws it every frame)."""
        per = len(self.rows) * max(len(self.variants), 1) * self.repeat
        elapsed = time.monotonic() - self.started
        counts = self._provider_counts()
        out = []
        for provider, (done, failed, skipped, cost) in counts.items():
            rate = done / elapsed if done and elapsed > 0 else 0.0
            out.append({"provider": provider, "done": done, "total": per, "failed": failed, "skipped": skipped,
                        "cost": cost, "elapsed_s": elapsed, "eta_s": (per - done) / rate if rate else None})
        return out

    def _provider_counts(self) -> dict[str, list[Any]]:
        """Per provider [done, failed, skipped, cost], counted on from the last call's tally (counted
        again when the results or the providers were replaced)."""
        results = self.results
        tally = self._progress_tally
        if tally is None or tally[0] is not results or tally[1] > len(results) or list(tally[2]) != self.providers:
            tally = (results, 0, {p: [0, 0, 0, 0.0] for p in self.providers})
        _, counted, counts = tally
        finished = len(results)
        for r in results[counted:finished]:
            c = counts.get(r.provider)
            if c is None:
                continue
            c[0] += 1
            if r.status == "skipped":
                c[2] += 1
            elif not r.passed:
                c[1] += 1
            if not r.cached:
                c[3] += (r.cost or 0.0) + (r.judge_cost or 0.0)
        self._progress_tally = (results, finished, counts)
        return {p: list(c) for p, c in counts.items()}

    def __repr__(self) -> str:
        state = " (interrupted)" if self.interrupted else " (budget reached)" if self.budget_stopped else ""
        state = state if self.done else " (running in the background)"
        passed = sum(bool(r.passed) for r in self.results)
        repeats = f" x {self.repeat} repeats" if self.repeat > 1 else ""
        return (
            f"<Evaluation {len(self.rows)} rows x {len(self.columns)} columns{repeats}: "
            f"{len(self.results)} of {self.total} done, {passed} passed, wall {self.wall_s:.2f} s{state}>"
        )
