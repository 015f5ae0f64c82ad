"""An evaluation written out: `export` writes every run to a file (JSONL, CSV or Parquet, by its
suffix), and `document` is what the run store keeps of it when it ends; `archive` reads both back.

A file holds one flat record per run: the columns of `Evaluation.records` (the row's fields, the
column, variant, repeat, prompt, answer, each check's result, status, error, tokens, cost, times,
human grade...), then for each check its reason (``CHECK reason``) and score (``CHECK score``),
the tool calls (``tool_calls``) and the evaluation's id (``evaluation``). A JSONL file starts
with one line ``{"ipyagent_evaluation": META}`` (the evaluation's providers, variants, repeats,
checks, aliases, baseline, seed, budget...); a Parquet file keeps META in its schema's metadata; a
CSV file has no room for it (`archive` reads it back from the records).
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Container
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..compare import dataframe
from .cache import json_output

if TYPE_CHECKING:
    from .results import EvalResult, Evaluation

#: The first key of a JSONL export's first line (its META), and of a Parquet file's schema metadata.
META_KEY = "ipyagent_evaluation"
#: The suffixes `export` knows, each its format's.
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".json": "json"}
#: The record's own columns by type (a row field named like one of these is written ``row.NAME``).
INTS = ("row", "repeat", "input_tokens", "output_tokens")
FLOATS = ("cost", "judge_cost", "ttft_s", "total_s")
BOOLS = ("passed", "cached", "human")
TEXTS = ("column", "provider", "prompt", "output", "failures", "status", "human_note")
NULLABLE_TEXTS = ("alias", "variant", "error_type", "error", "run_id")
JSON_COLUMNS = ("structured", "tool_calls")
OWN = (*INTS, *FLOATS, *BOOLS, *TEXTS, *NULLABLE_TEXTS, *JSON_COLUMNS, "evaluation")
#: The one line said when Parquet is asked for without pyarrow.
PYARROW_MISSING = "Parquet needs pyarrow, the parquet extra: pip install 'ipyagent[parquet]'"


def reason_column(check: str) -> str:
    return f"{check} reason"


def score_column(check: str) -> str:
    return f"{check} score"


def meta(ev: Evaluation) -> dict[str, Any]:
    """What a file or the store keeps of `ev` beside its runs (JSON data)."""
    return {"v": 1, "id": ev.id, "name": ev.name, "providers": ev.providers, "variants": ev.variants,
            "repeat": ev.repeat, "assertions": ev.assertions, "labels": ev.labels, "baseline": ev.baseline,
            "seed": ev.seed, "rows": len(ev.rows), "wall_s": ev.wall_s, "interrupted": ev.interrupted,
            "budget": ev.budget, "budget_stopped": ev.budget_stopped, "spent": ev.spent, "reserved": ev.reserved,
            "notes": ev.notes, "created_at": time.time()}


def export_records(ev: Evaluation) -> list[dict[str, Any]]:
    """One flat dict per run (`Evaluation.records`, then each check's reason and score, the tool
    calls and the evaluation's id), by row, column and repeat."""
    out = []
    for rec, r in zip(ev.records(), ev.ordered()):
        outcomes = {o.name: o for o in r.outcomes}
        for name in ev.assertions:
            outcome = outcomes.get(name)
            rec[reason_column(name)] = outcome.reason if outcome is not None else None
            rec[score_column(name)] = outcome.score if outcome is not None else None
        rec["structured"] = json_output(rec["structured"])
        rec["tool_calls"] = list(r.tool_calls)
        rec["evaluation"] = ev.id
        out.append(rec)
    return out


def export(ev: Evaluation, path: str | Path) -> Path:
    """Write every run of `ev` to `path`, in the format its suffix names: ``.jsonl`` / ``.ndjson``
    (JSON Lines, META first), ``.csv`` (UTF-8), ``.parquet`` (pyarrow), ``.json``
    (`Evaluation.to_json`'s document). Returns the path.

    Raises:
        ValueError: a suffix that is none of those.
        ImportError: ``.parquet`` without pyarrow (`PYARROW_MISSING`: the extra to install).
    """
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"export: {path.name!r} has no suffix it knows; end it in .jsonl, .csv, .parquet or .json")
    if kind == "json":
        return ev.to_json(path)
    records = export_records(ev)
    if kind == "jsonl":
        with path.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps({META_KEY: meta(ev)}, ensure_ascii=False, default=str) + "\n")
            for rec in records:
                handle.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
    elif kind == "csv":
        write_csv(records, path)
    else:
        write_parquet(records, meta(ev), path)
    return path


def write_csv(records: list[dict[str, Any]], path: Path) -> None:
    """`records` as CSV: JSON columns (structured output, tool calls) as JSON text, None as nothing."""
    columns = list(dict.fromkeys(k for rec in records for k in rec)) or ["row", "provider"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for rec in records:
            writer.writerow({k: json_text(v) if k in JSON_COLUMNS else v for k, v in rec.items()})


def json_text(value: Any) -> str | None:
    """A JSON column's value as JSON text (None and ``[]``: None)."""
    return None if value is None or value == [] else json.dumps(value, ensure_ascii=False, default=str)


def load_pyarrow() -> Any:
    """The pyarrow module, with its Parquet reader and writer loaded.

    Raises:
        ImportError: pyarrow is not installed (`PYARROW_MISSING`).
    """
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - loads pyarrow.parquet for the caller
    except ImportError:
        raise ImportError(PYARROW_MISSING) from None
    return pyarrow


def write_parquet(records: list[dict[str, Any]], info: dict[str, Any], path: Path) -> None:
    """`records` as one Parquet table, META in its schema's metadata; JSON columns as JSON text, and a
    row field whose values are of several types (pyarrow takes one per column) as JSON text too
    (META's ``json_columns`` names those)."""
    pa = load_pyarrow()
    columns = list(dict.fromkeys(k for rec in records for k in rec))
    arrays, encoded = [], []
    for name in columns:
        values = [rec.get(name) for rec in records]
        if name in JSON_COLUMNS:
            values = [json_text(v) for v in values]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays.append(pa.array([None if v is None else json.dumps(v, default=str) for v in values]))
            encoded.append(name)
    table = pa.Table.from_arrays(arrays, names=columns)
    table = table.replace_schema_metadata({META_KEY: json.dumps({**info, "json_columns": encoded}, default=str)})
    pa.parquet.write_table(table, path)


# -- the run store ---------------------------------------------------------------------


def _compact_outcomes(r: EvalResult, assertions: list[str]) -> Any:
    """A run's outcomes as kept: 1 when every check passed without a score or reason, else one
    ``[passed, score, reason]`` (or None: not checked) per check."""
    outcomes = {o.name: o for o in r.outcomes}
    kept = [None if (o := outcomes.get(name)) is None else [o.passed, o.score, o.reason] for name in assertions]
    return 1 if kept and all(k is not None and k[0] and k[1] is None and k[2] is None for k in kept) else kept


def document(ev: Evaluation) -> dict[str, Any]:
    """What the run store keeps of `ev` so that `archive.load_evaluation` can give it back after the
    kernel is gone: META (with each column's ``[passed, ran]``), the rows' fields and per run
    ``[row, column (its index), repeat, status, passed, run id, cached, error type, error, judges'
    USD, outcomes, prompt (only for a run the store has no row of)]``; the answers, tokens, costs
    and times stay in the store's runs (``runs.metadata``), named by their ids. It is kept as the
    matrix ends, before its runner notes the wall time: META's ``wall_s`` is the time since it
    started then (an evaluation loaded by id read ``wall 0.00 s``)."""
    index = {c: i for i, c in enumerate(ev.columns)}
    rows: list[Any] = [None] * len(ev.rows)
    tally: dict[str, list[int]] = {c: [0, 0] for c in ev.columns}
    runs = []
    for r in ev.ordered():
        column = r.column
        rows[r.row] = r.fields if rows[r.row] is None else rows[r.row]
        if r.ran and column in tally:
            tally[column][0] += bool(r.passed)
            tally[column][1] += 1
        run_id = r.run_id  # read once: a result makes its run id's str on each read
        runs.append([r.row, index.get(column, 0), r.repeat, r.status, r.passed, run_id, r.cached, r.error_type,
                     r.error, r.judge_cost, _compact_outcomes(r, ev.assertions), None if run_id else r.prompt])
    wall_s = ev.wall_s or time.monotonic() - ev.started
    return {"meta": {**meta(ev), "wall_s": wall_s, "pass": tally}, "rows": rows, "runs": runs}


class EvaluationData:
    """A mixin of `results.Evaluation`: its runs as data (`records`, a DataFrame, a file, CSV, JSON).
    Uses the evaluation's fields and `ordered`, `aliases`, `columns`, `total`, `skipped`, `flaky`,
    `statistics`, `summary_records` and `analysis_json`."""

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per run (by row, then column, then repeat): ``row``, the row's fields (a
        field named like a column below becomes ``row.NAME``), ``column``, ``provider``,
        ``alias`` (the ``%provider --alias`` name it was given by; None: named by its id),
        ``variant``, ``repeat``, ``prompt``, ``output`` (the answer's text), ``structured`` (the
        structured output), ``passed``, one column per assertion (True / False; None when not
        checked), ``failures`` (reasons, ``; ``-joined), ``status``, ``error_type``, ``error``,
        ``input_tokens``, ``output_tokens``, ``cost``, ``judge_cost``, ``ttft_s``, ``total_s``,
        ``cached``, ``run_id``, ``human`` (a person's grade: True / False; None: not graded) and
        ``human_note``."""
        out, aliases = [], self.aliases
        for r in self.ordered():
            rec: dict[str, Any] = {"row": r.row}
            tail: dict[str, Any] = {
                "column": r.column,
                "provider": r.provider,
                "alias": aliases.get(r.provider),
                "variant": r.variant,
                "repeat": r.repeat,
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
                human=r.human,
                human_note=r.human_note,
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

    def export(self, path: str | Path) -> Path:
        """Write every run to `path` in the format its suffix names (`export.export`): ``.jsonl``,
        ``.csv``, ``.parquet`` (pyarrow: ``pip install 'ipyagent[parquet]'``) or ``.json`` (`to_json`):
        each run's row fields, column, variant, repeat, prompt, answer, each check's result, reason
        and score, status, error, tokens, cost, times, tool calls, human grade, and the evaluation's
        id. `ipyagent.load_evaluation(path)` reads it back. Returns the path.

        Raises:
            ValueError: another suffix. ImportError: ``.parquet`` without pyarrow.
        """
        return export(self, path)  # the module's function

    def to_csv(self, path: str | Path) -> Path:
        """`export` as CSV (UTF-8; the structured output and tool calls as JSON text). Returns the path."""
        path = Path(path)
        write_csv(export_records(self), path)
        return path

    def json_head(self) -> dict[str, Any]:
        """`to_json`'s document without its runs: ``results`` is [] (`json_results` gives them).
        A saved output asks for the runs of the rows it keeps only (issue 33)."""
        stats = self.statistics()
        return {
            "id": self.id,
            "providers": self.providers,
            "columns": self.columns,
            "variants": self.variants,
            "repeat": self.repeat,
            "assertions": self.assertions,
            "total": self.total,
            "wall_s": self.wall_s,
            "interrupted": self.interrupted,
            "budget": self.budget,
            "budget_stopped": self.budget_stopped,
            "spent": self.spent,
            "reserved": self.reserved,
            "skipped": self.skipped,
            "notes": self.notes,
            "aliases": self.aliases,
            "summary": self.summary_records(stats=stats),
            **self.analysis_json(stats),
            "flaky": [list(k) for k in self.flaky()],
            "results": [],
            # the rows' field names as the rows gave them: a saved notebook's JSON has its keys sorted
            "field_order": list(dict.fromkeys(k for r in self.ordered() for k in r.fields)),
        }

    def json_results(self, rows: Container[int] | None = None) -> list[dict[str, Any]]:
        """`to_json`'s ``results``: each run's `EvalResult.to_dict`, by row, column and repeat (as
        `ordered`); only the runs of `rows` when given."""
        order = {c: i for i, c in enumerate(self.columns)}
        runs = self.results if rows is None else [r for r in self.results if r.row in rows]
        return [r.to_dict() for r in sorted(runs, key=lambda r: (r.row, order.get(r.column, 0), r.repeat))]

    def to_json(self, path: str | Path | None = None) -> Any:
        """The evaluation as JSON data (``providers``, ``columns``, ``variants``, ``repeat``,
        ``assertions``, ``total``, the budget's ``budget``, ``spent``, ``reserved``, ``skipped``,
        ``summary``, ``flaky`` (``[row, column]`` pairs), ``results``: each run's
        `EvalResult.to_dict`, with its row's fields, and ``field_order``: those fields' names in
        the rows' order); written to `path` when given (then the
        path is returned). Then the statistics (`Analysis.analysis_json`): ``baseline``,
        ``comparisons``, ``agreement``, ``changes``, ``row_flags``. Made of `json_head` and
        `json_results`."""
        doc = self.json_head()
        doc["results"] = self.json_results()
        if path is None:
            return doc
        path = Path(path)
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
        return path
