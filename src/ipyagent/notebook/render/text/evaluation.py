"""An evaluation drawn with rich for terminal IPython: what ``%%compare --over`` prints when it ends.

Read from `Evaluation.to_json()` (like `render.evaluation`), and laid out for a screen
`COLUMNS` wide, so nothing the terminal would wrap is written:

- the headline, wrapped at word boundaries;
- a summary with one row per column: its name (the alias, the ``provider:model`` dim beside
  it), pass rate with its 95% interval, passed / failed / errors, median seconds, tokens, and
  cost and judge cost only when known;
- the matrix, one line per row: the row's first fields (its key), then per column ``✓`` / ``✗``
  (``!`` the run failed, ``–`` skipped, ``?`` not rendered) with the answer's first words,
  every cell cut with ``…`` to fit rather than wrapped;
- the failures under it, each with its reason (the failed check's, or the run's error), wrapped
  with a hanging indent;
- the verdicts against the baseline, the evaluation's notes and its id (`evaluation.reload_line`).

Everything passes `terminal_records.clean` (redacted, control characters shown), and rich is
imported when something is drawn.
"""

from __future__ import annotations

from typing import Any

from ..evaluation import (_MARK, cells_of, column_label, column_of, columns_of, first_line, headline, outcome_class,
                         reload_line, repeats_class, saved_note, usd)
from ..evaluation_stats import _interval, _percent, verdicts
from .records import clean

#: The styles of a cell's outcome (`evaluation.outcome_class`).
OUTCOME_STYLES = {"pass": "green", "fail": "red", "error": "bold red", "skipped": "dim", "template": "magenta",
                  "none": "", "flaky": "yellow"}
#: A row's fields shown in the matrix, at most (the rest are in ``ev.to_dataframe()``).
KEY_FIELDS = 3
#: Characters of a field's value at most, before the table shares out the width.
FIELD_CHARS = 24
#: Failures listed under the matrix at most (``ev.to_dataframe()`` has them all).
FAILURES_SHOWN = 50


def _label_text(doc: dict[str, Any], column: str, *, pass_rate: float | None = None) -> Any:
    from rich.text import Text

    name, full = column_label(doc, column)
    text = Text(clean(name), style="bold", no_wrap=True, overflow="ellipsis")
    if pass_rate is not None:
        text.append(f" {pass_rate:.0%}", style="bold")
    if full:
        text.append(f" ({clean(full)})", style="dim")
    return text


def summary_table(doc: dict[str, Any]) -> Any:
    """Per column: name, pass rate (95% CI), passed / failed / errors, median seconds, tokens in /
    out, and cost (judge cost) only when some run's is known."""
    from rich import box
    from rich.table import Table

    summary = doc.get("summary") or []
    costs = any(s.get("cost") is not None for s in summary)
    judges = any(s.get("judge_cost") is not None for s in summary)
    grid = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    grid.add_column("column")  # the one that gives way (its cells are one line, cut with …)
    grid.add_column("pass rate (95% CI)", justify="right", no_wrap=True)
    for title in ("passed", "failed", "errors"):
        grid.add_column(title, justify="right", no_wrap=True)
    grid.add_column("median s", justify="right", no_wrap=True)
    grid.add_column("tokens in/out", justify="right", no_wrap=True)
    if costs:
        grid.add_column("cost", justify="right", no_wrap=True)
    if judges:
        grid.add_column("judge cost", justify="right", no_wrap=True)
    for s in summary:
        cells = [_label_text(doc, s.get("column") or s.get("provider") or ""),
                 _interval(s.get("pass_rate"), s.get("pass_low"), s.get("pass_high"), _percent),
                 *(str(s.get(key, 0)) for key in ("passed", "failed", "errors")),
                 "—" if s.get("total_p50_s") is None else f"{s['total_p50_s']:.2f}",
                 f"{s.get('input_tokens', 0)} / {s.get('output_tokens', 0)}"]
        cells += [usd(s.get("cost"))] if costs else []
        cells += [usd(s.get("judge_cost"))] if judges else []
        grid.add_row(*cells)
    return grid


def key_fields(doc: dict[str, Any]) -> list[str]:
    """The fields that name a row in the matrix: the first `KEY_FIELDS` of the rows' fields."""
    names: dict[str, None] = {}
    for r in doc["results"]:
        names.update(dict.fromkeys(r.get("fields") or {}))
    return list(names)[:KEY_FIELDS]


def _cell(runs: list[dict[str, Any]] | None, repeat: int) -> Any:
    """A matrix cell: the mark and the answer's first words (``k/N`` of its repeats), coloured."""
    from rich.text import Text

    if not runs:
        return Text("not run", style="dim", no_wrap=True, overflow="ellipsis")
    if repeat > 1 and not all(r.get("status") == "template_error" for r in runs):
        kind = repeats_class(runs)
        passed = sum(bool(r.get("passed")) for r in runs)
        head = f"{_MARK[kind]} {passed}/{len(runs)}"
    else:
        kind = outcome_class(runs[0])
        head = _MARK[kind]
    text = Text(head, style=OUTCOME_STYLES.get(kind, ""), no_wrap=True, overflow="ellipsis")
    words = clean(first_line(runs[0]))
    if words:
        text.append(f" {words}")
    return text


def matrix_table(doc: dict[str, Any]) -> Any:
    """One line per row: ``#``, its key fields, then per column its cell (`_cell`); each column's
    header is its name with its pass rate. Cells are cut with ``…``, never wrapped."""
    from rich import box
    from rich.table import Table

    columns, fields = columns_of(doc), key_fields(doc)
    by_cell, repeat = cells_of(doc), doc.get("repeat") or 1
    rates = {s.get("column") or s.get("provider"): s.get("pass_rate") for s in doc.get("summary") or []}
    shown: dict[int, dict[str, Any]] = {}
    for r in doc["results"]:
        shown.setdefault(r["row"], r.get("fields") or {})
    keys = {n: [clean(str(shown[n].get(name, ""))) for name in fields] for n in shown}
    grid = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    grid.add_column("#", justify="right", no_wrap=True, min_width=len(str(max(shown, default=0))))
    for i, name in enumerate(fields):
        title = clean("row" if name == "value" else name)
        widest = max([len(title), *(len(k[i]) for k in keys.values())])  # whole up to FIELD_CHARS: answers give way
        grid.add_column(title, no_wrap=True, overflow="ellipsis", max_width=FIELD_CHARS,
                        min_width=min(widest, FIELD_CHARS))
    for column in columns:
        # wrapable, so these give way when the screen is narrow; each cell stays one line, cut with …
        grid.add_column(_label_text(doc, column, pass_rate=rates.get(column)))
    for n in sorted(shown):
        grid.add_row(str(n), *keys[n], *(_cell(by_cell.get((n, c)), repeat) for c in columns))
    return grid


def failures(doc: dict[str, Any]) -> list[tuple[int, str, int | None, str]]:
    """(row, column, repeat or None without repeats, why) of every run that did not pass: the run's
    error, or each failed check
    with its reason; skipped runs and rows never rendered say so."""
    out = []
    for r in doc["results"]:
        if r.get("passed"):
            continue
        kind = outcome_class(r)
        if kind == "none":
            continue
        if kind == "fail":
            why = "; ".join(f"{o['name']}: {o.get('reason') or 'failed'}" for o in r.get("outcomes") or []
                            if not o.get("passed"))
        else:
            why = f"{r.get('error_type') or kind}: {r.get('error') or ''}".rstrip(": ")
        repeat = r.get("repeat", 0) + 1 if (doc.get("repeat") or 1) > 1 else None
        out.append((r["row"], column_of(r), repeat, why))
    return out


def failures_text(doc: dict[str, Any]) -> list[Any]:
    """The failures as lines (`failures`): ``row 2 · small ✗ icontains:Canberra: …``, each wrapped
    under its own start; at most `FAILURES_SHOWN`, then how many more."""
    from rich.padding import Padding
    from rich.text import Text

    found = failures(doc)
    if not found:
        return []
    fields = key_fields(doc)
    rows = {r["row"]: r.get("fields") or {} for r in doc["results"]}
    out: list[Any] = [Text(f"{len(found)} did not pass:", style="bold")]
    for row, column, repeat, why in found[:FAILURES_SHOWN]:
        key = clean(str(rows[row].get(fields[0], ""))) if fields else ""
        name = column_label(doc, column)[0] + (f" repeat {repeat}" if repeat else "")
        line = Text.assemble((f"row {row}", "bold"), (f" ({key})" if key else "", ""), " · ",
                             (clean(name), "bold"), " ", (clean(why), "red"))
        out.append(Padding(line, (0, 0, 0, 2)))
    if len(found) > FAILURES_SHOWN:
        out.append(Text(f"  … and {len(found) - FAILURES_SHOWN} more: ev.to_dataframe() has them all", style="dim"))
    return out


def evaluation_renderables(doc: dict[str, Any]) -> list[Any]:
    """What a terminal shows of an evaluation (see the module doc), in order."""
    from rich.text import Text

    out: list[Any] = [Text(clean(headline(doc)), style="bold"), summary_table(doc)]
    if doc["results"]:
        out.append(matrix_table(doc))
    out += failures_text(doc)
    out += [Text(clean(line)) for line in verdicts(doc)]
    out += [Text(clean(note), style="dim") for note in [saved_note(doc), *(doc.get("notes") or []), reload_line(doc)]
            if note]
    return out
