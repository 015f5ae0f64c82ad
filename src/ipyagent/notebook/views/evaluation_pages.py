"""The live matrix of an evaluation, one page of rows at a time (issue 33, item 2).

The live view of ``%%compare --over`` (`evaluation_view.EvaluationView`, an anywidget of kind
``evaluation``: labextension/src/evaluation_live.ts) holds one page of `PAGE` rows; the front
end asks for a page and the kernel sends only that page, so a 10,000-row evaluation sends the
front end no more than a 50-row one, apart from the summary. Messages (custom widget messages):

* browser -> kernel: ``{"type": "hello"}`` (a view was made: the page shown is sent again) and
  ``{"type": "page", "start": ROW_INDEX, "filter": "all" | "failed" | "disagree" | "changed"}``
  (`start`: the index of the page's first row among the rows the filter keeps, 0-based);
* kernel -> browser: ``{"type": "page", "page": PAGE_INFO, "doc": DOC, **PROGRESS}`` when the
  rows of the page shown changed (another page or filter, a run of one of its rows ended, a run
  was graded), else ``{"type": "progress", **PROGRESS}``, at most once a frame. ``DOC`` is the
  saved document's shape (`Evaluation.to_json`, secrets redacted) with the runs of the page's
  rows only, each answer a preview (`evaluation_saved.preview`), the headline's counts over
  every run in ``saved``; ``PAGE_INFO`` is ``{"start", "size", "filter", "matching", "rows",
  "fields"}`` (``rows``: the page's row numbers; ``fields``: each row's fields, by row, for rows
  with no run yet). ``PROGRESS`` is ``{"progress": LINE, "note": NOTE, "counts": {FILTER: ROWS},
  "summary": SUMMARY}``: the progress line (`Evaluation.progress`), the rows each filter keeps
  and the summary per column (`Evaluation.summary_records`, without the bootstrap statistics,
  which the saved output computes once at the end).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from ...agent import Evaluation, row_fields, row_flags
from ...core import redact_data
from ..render.evaluation import PAGE
from ..render.evaluation_saved import preview

#: The matrix's filters, as labextension/src/matrix_filters.ts names them.
FILTERS = ("all", "failed", "disagree", "changed")


def _no_statistics(ev: Evaluation) -> dict[str, Any]:
    """`Evaluation.statistics`' shape with every figure None: the live summary counts runs, it does
    not bootstrap an interval every frame (the saved output does, once)."""
    return {"baseline": None, "comparisons": [], "agreement": [],
            "columns": [defaultdict(lambda: None, column=c) for c in ev.columns]}


class Pager:
    """The page of `ev`'s matrix a live view shows, and the messages that keep it up to date.

    Thread-safe: runs end on ipyagent's loop, pages are asked on the kernel's thread."""

    def __init__(self, ev: Evaluation, size: int = PAGE, note: str = "", line: Any = None) -> None:
        """`line`: the progress line, called each frame (default `Evaluation.progress`'s)."""
        self.ev, self.size, self.note = ev, size, note
        self.line = line or (lambda: str(ev.progress))
        self.start, self.filter = 0, "all"
        self.ended = False  # the evaluation ended: no progress line (the headline says it all)
        self._lock = threading.Lock()
        self._shown: tuple[int, ...] | None = None  # the rows of the page last sent
        self._dirty: set[int] = set()  # rows with a run ended or graded since the last message

    def ask(self, content: Any) -> bool:
        """A front end's request (the module doc); True when it was one (the page is sent again)."""
        if not isinstance(content, dict) or content.get("type") not in ("hello", "page"):
            return False
        with self._lock:
            if content["type"] == "page":
                wanted = content.get("filter")
                self.filter = wanted if wanted in FILTERS else "all"
                start = content.get("start")
                self.start = max(int(start), 0) if isinstance(start, int) and not isinstance(start, bool) else 0
            self._shown = None  # sent whole again
        return True

    def changed(self, row: int) -> None:
        """A run of `row` ended or was graded: its page is sent again if shown."""
        with self._lock:
            self._dirty.add(row)

    def _flags(self) -> dict[str, list[int]]:
        flags = row_flags(self.ev)
        flags["changed"] = sorted((self.ev.changes or {}).get("rows", []))
        flags["all"] = list(range(len(self.ev.rows)))
        return flags

    def message(self) -> dict[str, Any]:
        """The next message for the front end: the page when its rows changed, else the progress."""
        flags = self._flags()
        with self._lock:
            matching = flags[self.filter]
            if self.start >= len(matching):  # the last page, when the rows kept shrank
                self.start = max((len(matching) - 1) // self.size * self.size, 0)
            rows = tuple(matching[self.start:self.start + self.size])
            again = rows != self._shown or not self._dirty.isdisjoint(rows)
            self._shown, self._dirty = rows, set()
            start, name = self.start, self.filter
        ev = self.ev
        message: dict[str, Any] = {
            "type": "progress", "progress": "" if self.ended else self.line(),
            "note": "" if self.ended else self.note,
            "counts": {f: len(flags[f]) for f in FILTERS},
            "summary": redact_data(ev.summary_records(stats=_no_statistics(ev))),
        }
        if again:
            message["type"] = "page"
            message["page"] = {"start": start, "size": self.size, "filter": name, "matching": len(matching),
                               "rows": list(rows), "fields": self._fields(rows)}
            message["doc"] = self._doc(rows, flags, message["summary"])
        return message

    def _fields(self, rows: tuple[int, ...]) -> dict[str, Any]:
        return {str(n): redact_data(row_fields(self.ev.rows[n])) for n in rows if n < len(self.ev.rows)}

    def _doc(self, rows: tuple[int, ...], flags: dict[str, list[int]], summary: list[dict[str, Any]]) -> dict[str, Any]:
        """The page's document (the module doc's ``DOC``)."""
        ev, keep = self.ev, set(rows)
        results = list(ev.results)
        order = {c: i for i, c in enumerate(ev.columns)}
        mine = sorted((r for r in results if r.row in keep), key=lambda r: (r.row, order.get(r.column, 0), r.repeat))
        runs = [preview(redact_data(r.to_dict())) for r in mine]
        return {
            "id": ev.id, "providers": ev.providers, "columns": ev.columns, "variants": ev.variants,
            "repeat": ev.repeat, "assertions": ev.assertions, "total": ev.total,
            "wall_s": ev.wall_s or time.monotonic() - ev.started,  # so far, while it runs
            "interrupted": False, "budget": ev.budget, "budget_stopped": ev.budget_stopped, "spent": ev.spent,
            "reserved": ev.reserved, "skipped": ev.skipped, "notes": [], "aliases": ev.aliases,
            "summary": summary, "baseline": None, "comparisons": [], "agreement": [], "changes": ev.changes,
            "row_flags": {f: [n for n in flags[f] if n in keep] for f in ("failed", "disagree", "changed")},
            "flaky": [[n, c] for n, c in ev.flaky() if n in keep], "results": runs,
            "field_order": list(dict.fromkeys(k for r in mine for k in r.fields)),
            "saved": {"results": len(results), "done": sum(r.ran for r in results),
                      "cached": sum(r.cached for r in results), "passed": sum(bool(r.passed) for r in results),
                      "rows": len({r.row for r in results}), "note": ""},
        }
