"""What changed between two evaluations: since the previous run of the same cell (kept in the
run store), and `Evaluation.diff` between any two.

Runs are matched by their row's content (not its position: a row inserted above does not make
every later row "changed"), column and repeat. A run *changed* when its status, its verdict or
its answer (a digest of the text, or of the error) differs. "Newly failing": it passed before
and ran without passing now; "fixed": it ran without passing before and passes now.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from ...core import plural
from .export import document

if TYPE_CHECKING:
    from .results import EvalResult, Evaluation

#: A run as kept for the next evaluation: row key, column, repeat, status, passed, answer digest.
Kept = tuple[str, str, int, str, "bool | None", str]


def row_key(fields: dict[str, Any]) -> str:
    """A row's identity across evaluations: a digest of its fields (JSON, keys sorted)."""
    text = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def answer_digest(r: EvalResult) -> str:
    """A digest of what the run gave: its text, or its error when it did not answer."""
    text = r.text if r.ok else f"{r.status}\x00{r.error_type}\x00{r.error}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _kept(results: list[EvalResult]) -> list[Kept]:
    keys: dict[int, str] = {}  # the rows' keys, once per row
    out = []
    for r in results:
        key = keys.get(r.row)
        if key is None:
            key = keys[r.row] = row_key(r.fields)
        out.append((key, r.column, r.repeat, r.status, r.passed, answer_digest(r)))
    return out


def snapshot(ev: Evaluation) -> dict[str, Any]:
    """What the run store keeps of `ev` for the next run of its cell (JSON data): ``cells``, one
    `Kept` list per run."""
    return {"cells": [list(k) for k in _kept(ev.results)]}


def compare_kept(before: list[Kept], now: list[Kept]) -> dict[str, Any]:
    """``newly_failing``, ``fixed``, ``new_rows``, ``removed_rows`` (counts), ``changed`` (the row
    keys of `now` that changed or are new) and ``sentence`` (``since the last run: 3 newly failing,
    2 fixed, 1 new row``; ``since the last run: no change``)."""
    old = {(k, c, rep): (status, passed, digest) for k, c, rep, status, passed, digest in before}
    old_rows = {k for k, *_ in before}
    new_rows = {k for k, *_ in now if k not in old_rows}
    changed, failing, fixed = set(new_rows), 0, 0
    ran = ("ok", "failed")
    for key, column, repeat, status, passed, digest in now:
        was = old.get((key, column, repeat))
        if was is None:
            changed.add(key)
            continue
        if was != (status, passed, digest):
            changed.add(key)
        if was[1] and status in ran and not passed:
            failing += 1
        elif was[0] in ran and not was[1] and passed:
            fixed += 1
    removed = len(old_rows - {k for k, *_ in now})
    parts = [f"{failing} newly failing"] * bool(failing) + [f"{fixed} fixed"] * bool(fixed)
    parts += [plural(len(new_rows), "new row")] * bool(new_rows) + [f"{plural(removed, 'row')} gone"] * bool(removed)
    if not parts and changed:
        parts = [f"{plural(len(changed), 'row')} with other answers"]
    return {"newly_failing": failing, "fixed": fixed, "new_rows": len(new_rows), "removed_rows": removed,
            "changed": changed, "sentence": "since the last run: " + (", ".join(parts) or "no change")}


def changes(previous: dict[str, Any], ev: Evaluation) -> dict[str, Any]:
    """`ev` against the evaluation kept before it (`previous`: `RunStore.previous_evaluation`):
    `compare_kept`'s counts and sentence, ``previous`` (its id) and ``rows`` (the positions of
    `ev`'s rows that changed)."""
    before = [tuple(k) for k in (previous.get("outcomes") or {}).get("cells", [])]
    now = _kept(ev.results)
    found = compare_kept(before, now)  # type: ignore[arg-type]
    rows = sorted({r.row for r, kept in zip(ev.results, now) if kept[0] in found["changed"]})
    del found["changed"]
    return {**found, "previous": previous.get("id"), "rows": rows}


def diff_records(ev: Evaluation, other: Evaluation) -> list[dict[str, Any]]:
    """One dict per run whose status, verdict or answer differs between `ev` and `other` (matched
    by row content, column and repeat), and per run only one of them has: ``row`` (in `ev`; None
    when only `other` has it), ``other_row``, the row's fields, ``column``, ``repeat``, ``change``
    (``newly failing``, ``fixed``, ``changed``, ``new``, ``gone``), ``status`` / ``other_status``,
    ``passed`` / ``other_passed``, ``output`` / ``other_output`` (the answers' text); in `ev`'s
    order (row, column, repeat), then those only `other` has."""
    def index(e: Evaluation) -> dict[tuple[str, str, int], tuple[EvalResult, Kept]]:
        runs = e.ordered()
        return {(k[0], k[1], k[2]): (r, k) for r, k in zip(runs, _kept(runs))}

    mine, theirs = index(ev), index(other)
    out = []
    for key in list(mine) + [k for k in theirs if k not in mine]:
        a, b = mine.get(key), theirs.get(key)
        if a is not None and b is not None and a[1][3:] == b[1][3:]:
            continue
        change = "new" if b is None else "gone" if a is None else _change(a[0], b[0])
        tail = {"column": key[1], "repeat": key[2], "change": change,
                "status": a[0].status if a else None, "other_status": b[0].status if b else None,
                "passed": a[0].passed if a else None, "other_passed": b[0].passed if b else None,
                "output": a[0].text if a else None, "other_output": b[0].text if b else None}
        head = {"row": a[0].row if a else None, "other_row": b[0].row if b else None}
        fields = (a or b)[0].fields  # type: ignore[index]
        head.update({f"row.{k}" if k in tail or k in head else k: v for k, v in fields.items()})
        out.append(head | tail)
    return out


def _change(now: EvalResult, before: EvalResult) -> str:
    if before.passed and now.ran and not now.passed:
        return "newly failing"
    if before.ran and not before.passed and now.passed:
        return "fixed"
    return "changed"


def keep(ev: Evaluation, store: Any, *, finished: bool) -> str | None:
    """At the end of an evaluation with a run store (`store`, a `RunStore`): note its path (grades
    go there), read back the grades of its runs, and when it `finished` and has a `name`, compare
    it with the previous evaluation of that name (`changes`) and keep it for the next; keep it whole
    in any case (`export.document`), for `archive.load_evaluation`. Returns a note when the store
    failed (the evaluation is not lost for it)."""
    ev.store_path = str(store.path)
    try:
        ids = [r.run_id for r in ev.results]  # each read once: a result makes its run id's str on each read
        grades = store.grades([run_id for run_id in ids if run_id])
        for r, run_id in zip(ev.results, ids) if grades else ():
            grade = grades.get(run_id) if run_id else None
            if grade is not None:
                r.human, r.human_note = grade["passed"], grade["note"]
        kept: dict[str, Any] = {}
        if finished and ev.name:
            previous = store.previous_evaluation(ev.name, before=ev.id)
            ev.changes = changes(previous, ev) if previous is not None else None
            kept = snapshot(ev)
        # under its name only when it finished: the next run of the cell is not compared with one cut short
        store.add_evaluation(ev.id, ev.name if finished else None, {**kept, "archive": document(ev)})
    except Exception as exc:  # noqa: BLE001 - the store must never cost the evaluation
        return f"the run store could not read the grades or keep the evaluation: {type(exc).__name__}: {exc}"
    return None
