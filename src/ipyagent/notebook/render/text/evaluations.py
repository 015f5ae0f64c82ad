"""``%agent evals`` as a small table of plain text, aligned for a terminal and a notebook's
monospaced output alike: one line per evaluation (id, when, the cell, rows × columns × repeats,
runs, ``interrupted`` when it was stopped), then its columns' pass rates one per line under it,
so that no line grows with the number of columns and nothing wraps mid-word."""

from __future__ import annotations

import os
from typing import Any

from ..evaluation_stats import column_title
from .session import when_text

HEADER = ("id", "when", "cell", "rows × columns × repeats", "runs", "")


def cell_text(name: str | None) -> str:
    """Where the evaluation ran, as read: ``ux.ipynb · cell 7387ff02`` (the notebook and the start
    of JupyterLab's cell id), ``-o ev`` / ``--over rows`` (a terminal: the variable), ``-`` (none)."""
    if not name:
        return "-"
    notebook, _, cell = name.rpartition("#")
    where = os.path.basename(notebook)
    if cell and not cell.startswith("-"):
        cell = f"cell {cell[:8]}"
    return " · ".join(part for part in (where, cell) if part) or "-"


def _size(e: dict[str, Any]) -> str:
    return f"{e['rows'] or 0:,} × {len(e['columns'])} × {e['repeat'] or 1}"


def _runs(e: dict[str, Any]) -> str:
    """The runs that ran, ``50 of 60`` when fewer than the matrix holds (stopped, skipped by the budget
    or not rendered: the store does not always know which, a cancelled run is kept before it is marked)."""
    total = (e["rows"] or 0) * len(e["columns"]) * (e["repeat"] or 1)
    return f"{e['runs']:,}" if e["runs"] >= total else f"{e['runs']:,} of {total:,}"


def evaluations_lines(listed: list[dict[str, Any]]) -> list[str]:
    """The table for `stored_evaluations`'s list (newest first): a header, then per evaluation its
    line (its runs as ``50 of 60`` when fewer ran than the matrix holds) and, indented under it,
    ``pass  COLUMN  RATE`` per column (``-`` when no run of it ran)."""
    rows = [HEADER] + [(e["id"], when_text(e["created_at"]), cell_text(e["name"]), _size(e), _runs(e),
                        "interrupted" if e["interrupted"] else "") for e in listed]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    right = {4}  # numbers to the right

    def line(row: tuple[str, ...]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    out = [line(rows[0])]
    for e, row in zip(listed, rows[1:]):
        out.append(line(row))
        titles = {column: column_title(e, column) for column in e["pass_rates"]}
        wide = max((len(t) for t in titles.values()), default=0)
        for column, rate in e["pass_rates"].items():
            out.append(f"    pass  {titles[column].ljust(wide)}  {'-' if rate is None else f'{rate:.0%}':>4}")
    return out
