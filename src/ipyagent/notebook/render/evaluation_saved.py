"""An evaluation's saved output, of bounded size whatever the matrix's (issue 33, item 1).

A 10,000-row evaluation drawn whole made a 42 MB notebook. Its saved output (the evaluation's
JSON, `render.evaluation.MIME_TYPE`, with its HTML, Markdown and plain-text fallbacks, all
together) now stays within a byte budget (`DEFAULT_OUTPUT_MAX`, ``%agent settings
eval_output_max=SIZE``), measured as the notebook file stores it (`stored_size`):

- the headline, the summary, the statistics and the verdicts are always whole (they are read
  from the whole evaluation: the headline's counts come with the document, `counts`);
- the matrix keeps as many rows as fit, chosen in this order (`row_order`): rows with a failing
  or errored cell, rows where the columns disagree, flaky rows (repeats that disagree), rows
  changed since the cell's last run, then the rest in order; the rows kept are drawn in order;
- each answer (and prompt, error and check's reason) is a preview, its first `PREVIEW`
  characters (`preview`), its whole length kept beside it (``text_chars``);
- one line (``saved.note``, drawn by every renderer) says how many rows are shown and where the
  rest are: ``ev.to_dataframe()``, ``ev.export(PATH)``.

The whole evaluation stays in the kernel (and in the run store); this is what the notebook keeps.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from .policy import EVALUATION_PREVIEW

#: Bytes an evaluation's saved output takes at most, all its MIME types together (1 MB).
DEFAULT_OUTPUT_MAX = 1_000_000
#: The least it may be (``%agent settings``): 10 kB, room for a summary and a few rows.
MIN_OUTPUT_MAX = 10_000
#: Characters of an answer (a prompt, an error, a check's reason) kept in the saved output (policy.json).
PREVIEW = EVALUATION_PREVIEW
#: Spaces before each line of an output's data in a notebook file (cells, a cell, outputs, an
#: output, data: nbformat indents by one per level).
NOTEBOOK_DEPTH = 5
#: The fields of a run cut to `PREVIEW` characters, and where each one's whole length is kept.
_CUT = (("text", "text_chars"), ("prompt", "prompt_chars"), ("error", "error_chars"))
#: Rows the first render of a long matrix tries, renders tried at most, and the share of the
#: bytes left that a guess fills (rows differ in size).
FIRST_GUESS, GUESSES, MARGIN = 50, 10, 0.98


def _text_of(value: Any) -> Any:
    """What JSON cannot hold, as `plain` writes it: a numpy scalar as the Python number it holds, a set
    as a list, anything else (a date, a Decimal, bytes, a Timedelta) as its ``str``."""
    if type(value).__module__ == "numpy" and callable(getattr(value, "item", None)):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


_PLAIN = json.JSONEncoder(ensure_ascii=False, default=_text_of).encode


def plain(value: Any) -> Any:
    """`value` as JSON gives it back: the row fields a DataFrame brings (dates, Decimals, numpy
    numbers, sets, bytes) as `_text_of` writes them, NaN and the infinities as None. A saved output,
    its `stored_size` and a widget's message take it whatever the rows held (a row's date once
    failed the whole matrix's display after every run was paid for)."""
    return json.loads(_PLAIN(value), parse_constant=lambda _: None)


def stored_size(data: dict[str, Any]) -> int:
    """Bytes `data` (a display's MIME bundle) takes in a notebook file, as nbformat writes it:
    JSON indented by one, keys sorted, non-ASCII as UTF-8, a ``text/*`` value split into its
    lines, each line indented `NOTEBOOK_DEPTH` deeper."""
    stored = {k: v.splitlines(True) if isinstance(v, str) else v for k, v in data.items()}
    text = json.dumps(stored, indent=1, sort_keys=True, ensure_ascii=False)
    return len(text.encode("utf-8")) + NOTEBOOK_DEPTH * text.count("\n")


def _cut(text: str) -> str:
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


def preview(result: dict[str, Any]) -> dict[str, Any]:
    """A run's dict (`EvalResult.to_dict`) with its answer, prompt and error cut to their first
    `PREVIEW` characters (then ``…``; the whole length in ``text_chars``, ``prompt_chars``,
    ``error_chars``), each check's reason too; a run with nothing to cut is returned as it is."""
    out = result
    for key, length in _CUT:
        value = result.get(key)
        if isinstance(value, str) and len(value) > PREVIEW:
            out = out if out is not result else dict(result)
            out[key], out[length] = _cut(value), len(value)
    outcomes = result.get("outcomes") or []
    if any(len(o.get("reason") or "") > PREVIEW for o in outcomes):
        out = out if out is not result else dict(result)
        out["outcomes"] = [{**o, "reason": _cut(o["reason"])} if o.get("reason") else o for o in outcomes]
    return out


def row_order(doc: dict[str, Any]) -> list[int]:
    """The rows of `doc` (`Evaluation.to_json()`) in the order the saved matrix takes them:
    failing or errored (``row_flags.failed``), the columns disagreeing (``row_flags.disagree``),
    flaky (``flaky``), changed since the last run (``row_flags.changed``), then the rest; each
    group in row order, a row in its first group only."""
    flags = doc.get("row_flags") or {}
    rows = sorted({r["row"] for r in doc["results"]})
    groups = [flags.get("failed") or [], flags.get("disagree") or [],
              sorted({row for row, _ in doc.get("flaky") or []}), flags.get("changed") or [], rows]
    present = set(rows)
    return [row for row in dict.fromkeys(n for group in groups for n in group) if row in present]


def counts(doc: dict[str, Any]) -> dict[str, int]:
    """What the headline counts over every run of `doc`: ``rows`` (with a run), ``results``
    (runs finished, skipped or unrendered), ``done`` (sent or served), ``cached``, ``passed``."""
    results = doc["results"]
    return {"rows": len({r["row"] for r in results}), "results": len(results),
            "done": sum(r["status"] in ("ok", "failed") for r in results),
            "cached": sum(bool(r.get("cached")) for r in results),
            "passed": sum(bool(r.get("passed")) for r in results)}


def note(shown: int, total: int, cut: int, evaluation_id: str, name: str = "ev") -> str:
    """The line under a saved matrix: how many rows it shows and how to see the rest ("" when it
    shows every row and every answer whole)."""
    if shown >= total and not cut:
        return ""
    where = (f"{name}.to_dataframe() or {name}.export(\"results.jsonl\") has every run "
             f"(evaluation {evaluation_id})")
    answers = f"answers cut to their first {PREVIEW} characters ({cut:,} of them)" if cut else ""
    if shown >= total:
        return f"every row shown, {answers}: {where}"
    head = f"{shown:,} of {total:,} rows shown, failing and disagreeing rows first; {total - shown:,} rows not shown"
    return f"{head}{', ' + answers if cut else ''}: {where}"


#: The runs a saved matrix shows of some rows (a set of row numbers), in the document's order.
Runs = Callable[[set[int]], list[dict[str, Any]]]


def saved_doc(doc: dict[str, Any], order: list[int], shown: int, name: str = "ev",
              kept: Callable[[dict[str, Any]], dict[str, Any]] = preview, runs: Runs | None = None) -> dict[str, Any]:
    """`doc` with the runs of its first `shown` rows of `order` only, each `kept` (a `preview`), and
    ``saved``: `counts` of the whole, ``rows_shown``, ``preview`` (characters) and ``note``. `runs`:
    the runs shown of those rows, made apart (then `doc`'s ``results`` need only what `counts`
    and `row_order` read: each run's ``row``, ``status``, ``cached``, ``passed``)."""
    keep = set(order[:shown])
    results = runs(keep) if runs is not None else [kept(r) for r in doc["results"] if r["row"] in keep]
    cut = sum(any(length in r for _, length in _CUT) for r in results)
    whole = counts(doc)
    saved = {**whole, "rows_shown": len(keep), "preview": PREVIEW,
             "note": note(len(keep), whole["rows"], cut, str(doc.get("id", "")), name)}
    return {**doc, "results": results, "saved": saved}


def fit(doc: dict[str, Any], render: Callable[[dict[str, Any]], dict[str, Any]], limit: int,
        name: str = "ev", kept: Callable[[dict[str, Any]], dict[str, Any]] = preview,
        runs: Runs | None = None) -> dict[str, Any]:
    """The display data `render` (a document -> its MIME bundle) makes of `doc` cut to the most
    rows of `row_order` that keep it within `limit` bytes (`stored_size`): every row when they
    all fit; none (the summary, statistics and verdicts whole, and the note) when the summary
    alone passes `limit`. `kept`: what a run shown becomes (`preview`; `bundle`'s also redacts it,
    once, whichever render shows it); `runs`: the runs shown of some rows, made apart (`saved_doc`).

    The rows are counted by the secant: from the bytes a guess takes, the bytes per row, then
    the rows that fit, never more than a guess found too many; a few renders, each of at most
    about `limit` bytes, never one of the whole matrix."""
    order = row_order(doc)

    def build(shown: int) -> tuple[dict[str, Any], int]:
        data = render(saved_doc(doc, order, shown, name, kept, runs))
        return data, stored_size(data)

    shown = min(len(order), FIRST_GUESS)
    data, size = build(shown)
    if shown == len(order) and size <= limit:
        return data
    best, best_data = 0, None
    base_data, base = build(0)
    over = len(order) + 1  # the fewest rows found too many
    for _ in range(GUESSES):
        if size <= limit:
            best, best_data = shown, data
            if shown == len(order):
                break
        else:
            over = shown
        per_row = max((size - base) / max(shown, 1), 1.0)
        shown = min(int((limit - base) / per_row * MARGIN), over - 1, len(order))
        if shown <= best:  # no more rows would fit
            break
        data, size = build(shown)
    return best_data if best_data is not None else base_data
