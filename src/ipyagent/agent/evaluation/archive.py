"""An evaluation given back: `load_evaluation` reads an export file (`export.export`: JSONL, CSV,
Parquet, or `Evaluation.to_json`'s JSON) or the run store (what `export.document` kept there when
the evaluation ended, by its id) into an `Evaluation` with the same `to_dataframe`, `summary`,
verdicts and `diff`; `stored_evaluations` lists what the store keeps (``%agent evals``).

A CSV file keeps no META: it is read back from the records (the id from ``evaluation``, providers
and variants in order of first appearance, aliases from ``alias``, checks by their reason
columns; the baseline, seed and budget take their defaults), and each row field's type is what
its values read as (whole numbers, numbers, True / False, else text). JSONL and Parquet keep
META and every type.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ...memory import RunStore, StoreError, default_store_path, store_location
from .checks import Outcome
from .export import (BOOLS, FLOATS, FORMATS, INTS, JSON_COLUMNS, META_KEY, NULLABLE_TEXTS, OWN, TEXTS,
                     load_pyarrow, reason_column, score_column)
from .results import EvalResult, Evaluation, _tokens

# -- reading a file ----------------------------------------------------------------------


def read_file(path: str | Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(META or None, the records) of an export file.

    Raises:
        FileNotFoundError: no such file. ValueError: a suffix `export` does not write, or a file that
        is not an evaluation's export. ImportError: a ``.parquet`` file without pyarrow.
    """
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if not path.is_file():
        raise FileNotFoundError(f"load_evaluation: there is no file {str(path)!r}")
    if kind == "jsonl":
        with path.open(encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle if line.strip()]
        head = lines[0].get(META_KEY) if lines and isinstance(lines[0], dict) else None
        return head, lines[1:] if head is not None else lines
    if kind == "csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return None, typed_csv(list(csv.DictReader(handle)))
    if kind == "parquet":
        table = load_pyarrow().parquet.read_table(path)
        info = json.loads((table.schema.metadata or {}).get(META_KEY.encode(), b"null"))
        records = table.to_pylist()
        decoded = [*JSON_COLUMNS, *(info or {}).get("json_columns", [])]
        for rec in records:
            for name in decoded:
                if rec.get(name) is not None:
                    rec[name] = json.loads(rec[name])
        return info, records
    if kind == "json":
        return json_document(json.loads(path.read_text(encoding="utf-8")))
    raise ValueError(f"load_evaluation: {path.name!r} is not an export it reads; give a .jsonl, .csv, .parquet "
                     "or .json file (ev.export) or an evaluation's id")


def json_document(doc: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(META, records) of `Evaluation.to_json`'s document (each run's `EvalResult.to_dict`).

    Raises:
        ValueError: JSON that is not an evaluation's document.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError("load_evaluation: this JSON file is not an evaluation (ev.to_json or ev.export)")
    records = []
    for run in doc["results"]:
        rec = {key: value for key, value in run.items() if key not in ("fields", "outcomes", "text", "output")}
        for key, value in (run.get("fields") or {}).items():
            rec[f"row.{key}" if key in OWN or key in rec else key] = value
        rec.update(output=run.get("text"), structured=run.get("output"))
        for outcome in run.get("outcomes") or []:
            name = outcome.get("name")
            rec[name], rec[reason_column(name)] = outcome.get("passed"), outcome.get("reason")
            rec[score_column(name)] = outcome.get("score")
        records.append(rec)
    info = {key: doc.get(key) for key in ("id", "providers", "variants", "repeat", "assertions", "baseline", "wall_s",
                                          "interrupted", "budget", "budget_stopped", "spent", "reserved", "notes")}
    return {**info, "labels": doc.get("aliases") or {}}, records


def _read_bool(text: str) -> bool | None:
    return {"True": True, "False": False, "true": True, "false": False}.get(text)


def _infer(values: list[str]) -> list[Any]:
    """A CSV column of the row's fields, typed: whole numbers, numbers, True / False, else text; an
    empty cell is None (as pandas reads it: CSV writes None and "" alike)."""
    present = [v for v in values if v != ""]
    for cast in (int, float):
        try:
            typed = [cast(v) for v in present]
        except ValueError:
            continue
        if cast is float or all(v.strip().lstrip("-").isdigit() for v in present):
            it = iter(typed)
            return [next(it) if v != "" else None for v in values]
    if present and all(v in ("True", "False") for v in present):
        return [_read_bool(v) if v != "" else None for v in values]
    return [v if v != "" else None for v in values]


def _typed_column(name: str, values: list[str], checks: set[str]) -> list[Any]:
    """One CSV column's values typed (`typed_csv`)."""
    def check_part(suffix: str) -> bool:
        return name.endswith(suffix) and name[: -len(suffix)] in checks

    if name in INTS:
        return [int(v) if v else None for v in values]
    if name in FLOATS or check_part(" score"):
        return [float(v) if v else None for v in values]
    if name in BOOLS or name in checks:
        return [_read_bool(v) for v in values]
    if name in TEXTS:
        return values
    if name in NULLABLE_TEXTS or check_part(" reason") or name == "evaluation":
        return [v or None for v in values]
    if name in JSON_COLUMNS:
        return [json.loads(v) if v else None for v in values]
    return _infer(values)


def typed_csv(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """CSV records with each column's values typed: the record's own columns by what they hold, the
    checks' results as True / False / None, reasons as text or None, scores as numbers; the row's
    fields by `_infer`."""
    if not rows:
        return []
    names = list(rows[0])
    checks = {name for name in names if reason_column(name) in names}
    typed = {name: _typed_column(name, [row.get(name) or "" for row in rows], checks) for name in names}
    return [{name: typed[name][i] for name in names} for i in range(len(rows))]


# -- records to an Evaluation ------------------------------------------------------------------


def _outcomes(rec: dict[str, Any], assertions: list[str]) -> list[Outcome]:
    out = []
    for name in assertions:
        passed, reason, score = rec.get(name), rec.get(reason_column(name)), rec.get(score_column(name))
        if passed is not None or reason is not None:
            out.append(Outcome(name, bool(passed), score=score, reason=reason))
    return out


def result_of(rec: dict[str, Any], assertions: list[str], own: set[str]) -> EvalResult:
    """The `EvalResult` a flat record was written from (`own`: its columns that are not row fields)."""
    fields = {}
    for key, value in rec.items():
        if key.startswith("row.") and key[4:] in own:
            fields[key[4:]] = value
        elif key not in own:
            fields[key] = value
    get = rec.get
    return EvalResult(
        int(rec["row"]), get("provider") or "", get("prompt") or "", fields, variant=get("variant"),
        repeat=int(get("repeat") or 0), text=get("output") or "", output=get("structured"), passed=get("passed"),
        outcomes=_outcomes(rec, assertions) if get("status") == "ok" else [], status=get("status") or "ok",
        error_type=get("error_type"), error=get("error"), input_tokens=int(get("input_tokens") or 0),
        output_tokens=int(get("output_tokens") or 0), cost=get("cost"), judge_cost=get("judge_cost"),
        ttft_s=get("ttft_s"), total_s=get("total_s"), cached=bool(get("cached")), run_id=get("run_id"),
        tool_calls=get("tool_calls") or (), human=get("human"), human_note=get("human_note") or "")


def _inferred_meta(records: list[dict[str, Any]]) -> dict[str, Any]:
    """META read from the records themselves (a CSV file has no room for it)."""
    names = list(records[0]) if records else []
    return {"id": records[0].get("evaluation") if records else None,
            "providers": list(dict.fromkeys(r["provider"] for r in records)),
            "variants": list(dict.fromkeys(r["variant"] for r in records if r.get("variant") is not None)),
            "repeat": max((int(r.get("repeat") or 0) for r in records), default=0) + 1,
            "assertions": [n for n in names if reason_column(n) in names],
            "labels": {r["provider"]: r["alias"] for r in records if r.get("alias")}}


def from_records(info: dict[str, Any] | None, records: list[dict[str, Any]]) -> Evaluation:
    """The `Evaluation` an export's META and records describe (META None: read from the records)."""
    info = {**_inferred_meta(records), **{k: v for k, v in (info or {}).items() if v is not None}}
    assertions = list(info.get("assertions") or [])
    own = {*OWN, "row", *assertions, *map(reason_column, assertions), *map(score_column, assertions)}
    results = [result_of(rec, assertions, own) for rec in records]
    n_rows = max([int(info.get("rows") or 0), *(r.row + 1 for r in results)])
    rows: list[Any] = [{} for _ in range(n_rows)]
    for r in results:
        rows[r.row] = r.fields
    return _evaluation(info, rows, results)


def _evaluation(info: dict[str, Any], rows: list[Any], results: list[EvalResult]) -> Evaluation:
    """An `Evaluation` of `results` over `rows`, with what META says of it (id, name, baseline...)."""
    ev = Evaluation(list(info.get("providers") or []), rows, assertions=list(info.get("assertions") or []),
                    results=results, variants=list(info.get("variants") or []), repeat=int(info.get("repeat") or 1),
                    labels=dict(info.get("labels") or {}))
    if info.get("id"):
        ev.id = info["id"]
    for key in ("name", "baseline", "budget", "notes"):
        if info.get(key) is not None:
            setattr(ev, key, info[key])
    for key, kind in (("seed", int), ("wall_s", float), ("spent", float), ("reserved", float)):
        if info.get(key) is not None:
            setattr(ev, key, kind(info[key]))
    ev.interrupted, ev.budget_stopped = bool(info.get("interrupted")), bool(info.get("budget_stopped"))
    return ev


# -- the run store ---------------------------------------------------------------------


def _from_run(cell: EvalResult, run: dict[str, Any] | None) -> None:
    """What the store's row of a run adds to its cell: prompt, answer, output, tokens, cost, times, tool calls."""
    if run is None:
        return
    data = run.get("metadata") or {}
    cell.prompt = run.get("prompt") or cell.prompt
    cell.text, cell.output = data.get("text") or "", data.get("output")
    cell.input_tokens, cell.output_tokens = _tokens(run.get("usage"))
    cell.cost, cell.total_s, cell.ttft_s = run.get("cost"), run.get("duration_s"), data.get("ttft_s")
    cell.tool_calls = data.get("tool_calls") or ()


def from_document(doc: dict[str, Any], store: RunStore) -> Evaluation:
    """The `Evaluation` `document` kept, its answers read from `store` (and its grades)."""
    info = doc.get("meta") or {}
    assertions = list(info.get("assertions") or [])
    columns = [(p, v) for p in info.get("providers") or [] for v in info.get("variants") or [None]]
    rows = [fields if fields is not None else {} for fields in doc.get("rows") or []]
    runs = doc.get("runs") or []
    stored = store.runs_by_id([run[5] for run in runs if run[5]])
    grades = store.grades([run[5] for run in runs if run[5]])
    results = []
    for row, col, repeat, status, passed, run_id, cached, error_type, error, judge_cost, kept, prompt in runs:
        provider, variant = columns[col]
        cell = EvalResult(row, provider, prompt or "", rows[row] if row < len(rows) else {}, variant=variant,
                          repeat=repeat, passed=passed, status=status, error_type=error_type, error=error,
                          judge_cost=judge_cost, cached=cached, run_id=run_id)
        if kept == 1:
            cell.outcomes = [Outcome(name, True) for name in assertions]
        else:
            cell.outcomes = [Outcome(name, o[0], score=o[1], reason=o[2])
                             for name, o in zip(assertions, kept or []) if o is not None]
        _from_run(cell, stored.get(run_id) if run_id else None)
        grade = grades.get(run_id) if run_id else None
        if grade is not None:
            cell.human, cell.human_note = grade["passed"], grade["note"]
        results.append(cell)
    ev = _evaluation(info, rows, results)
    ev.store_path = str(store.path)
    return ev


def load_evaluation(source: str | Path, *, store: RunStore | str | Path | None = None) -> Evaluation:
    """An evaluation given back: from an export file (`export`: ``.jsonl``, ``.csv``, ``.parquet``), or
    from the run store by its id (``ev.id``, shown under the matrix; a prefix is enough), with the
    same `to_dataframe`, `summary`, verdicts and `diff` it had (and the grades given since).

    Args:
        source: a file's path, or an evaluation's id.
        store: the run store to look in (a `RunStore` or a path); default ``$IPYAGENT_RUN_STORE`` or
            ``.ipyagent/runs.sqlite``.

    Raises:
        KeyError: no file of that name, and no evaluation of that id in the store.
        ValueError: a file that is not an export; ImportError: a Parquet file without pyarrow.
    """
    path = Path(source)
    if path.suffix.lower() in FORMATS or path.is_file():  # an id has no suffix
        return from_records(*read_file(path))
    opened, owned = _store(store)
    try:
        kept = opened.evaluation(str(source))
        doc = (kept.get("outcomes") or {}).get("archive")
        if doc is None:
            raise KeyError(f"the run store keeps what evaluation {kept['id']} found, not its runs (it ran before "
                           "evaluations were kept whole); run its cell again")
        return from_document(doc, opened)
    finally:
        if owned:
            opened.close()


def _store(store: RunStore | str | Path | None) -> tuple[RunStore, bool]:
    """(the store to read, whether it was opened here): `store`, or the one it names (a path or a
    ``postgresql://`` URL), or the session's default.

    Raises:
        KeyError: no store there (a path naming no file, or the store turned off).
    """
    if isinstance(store, RunStore):
        return store, False
    location = store_location(store) if store is not None else default_store_path()
    if location is None or isinstance(location, Path) and not location.is_file():
        raise KeyError(f"no run store at {str(location)!r} to find the evaluation in; give store= or a file")
    try:
        return RunStore(location), True
    except StoreError as exc:
        raise KeyError(f"{exc}; give store= or a file") from None


def stored_evaluations(store: RunStore, limit: int = 20) -> list[dict[str, Any]]:
    """The evaluations `store` keeps whole, newest first: ``id``, ``name`` (the cell), ``created_at``
    (seconds since the epoch), ``columns``, ``providers`` (their keys), ``aliases`` ({provider key:
    the ``%provider --alias`` name it was given by}), ``rows``, ``repeat``, ``runs``, ``pass_rates``
    ({column: passed / ran, or None}), ``interrupted``."""
    out = []
    for kept in store.evaluations(limit):
        info = ((kept.get("outcomes") or {}).get("archive") or {}).get("meta")
        if info is None:
            continue
        tally = info.get("pass") or {}
        out.append({"id": kept["id"], "name": info.get("name") or kept.get("name"), "created_at": kept["created_at"],
                    "columns": list(tally), "providers": list(info.get("providers") or ()),
                    "aliases": {k: v for k, v in (info.get("labels") or {}).items() if ":" not in v},
                    "rows": info.get("rows"), "repeat": info.get("repeat"),
                    "runs": sum(ran for _, ran in tally.values()),
                    "pass_rates": {c: (p / ran if ran else None) for c, (p, ran) in tally.items()},
                    "interrupted": bool(info.get("interrupted"))})
    return out
