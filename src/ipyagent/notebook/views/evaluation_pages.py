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
  with no run yet). ``PROGRESS`` is ``{"progress": LINE, "note": NOTE, "counts": {FILTER: ROWS}, "summary"?:
  SUMMARY}``: the progress line (`Evaluation.progress`), a background run's note (how to wait for
  it or stop it; both "" once it ended), the rows each filter keeps and, with a page or at most
  every `SUMMARY_S` seconds, the summary per column (`Evaluation.summary_records`, without the
  bootstrap statistics, which the saved output computes once at the end).

A frame reads the runs ended since the last one (`RowIndex`, which keeps the summary's counts
too: `LiveSummary`) and the page's runs; what it costs grows with what changed, not with the
matrix.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from typing import Any

from ...agent import EvalResult, Evaluation, percentile, row_fields
from ...core import redact_data
from ..render.evaluation import PAGE
from ..render.evaluation_saved import plain, preview

#: The matrix's filters, as labextension/src/matrix_filters.ts names them.
FILTERS = ("all", "failed", "disagree", "changed")
#: Seconds between two summaries sent at most (it reads every run), but for one that goes with a page.
SUMMARY_S = 1.0


def _no_statistics(ev: Evaluation) -> dict[str, Any]:
    """`Evaluation.statistics`' shape with every figure None: the live summary counts runs, it does
    not bootstrap an interval every frame (the saved output does, once)."""
    return {"baseline": None, "comparisons": [], "agreement": [],
            "columns": [defaultdict(lambda: None, column=c) for c in ev.columns]}


class LiveSummary:
    """`Evaluation.summary_records` without the statistics (`_no_statistics`), counted on from the
    runs `add` is given (each once, in the order they ended): a summary costs its columns, not the
    matrix (read whole, 47 ms at 10,000 rows × 3, it was sent once a `SUMMARY_S` all run long)."""

    def __init__(self, ev: Evaluation) -> None:
        self.ev = ev
        self.columns: dict[str, dict[str, Any]] = {}  # per column: its counts, sums and ordered times
        # (row, column) -> its repeats' verdicts seen (1: passed, 2: not): flaky at 3. Kept with repeats only:
        # a cell run once is never flaky, and a set per cell was 6.5 MB at 10,000 rows x 3.
        self.verdicts: dict[tuple[int, str], int] | None = {} if ev.repeat > 1 else None

    def add(self, runs: list[EvalResult]) -> None:
        for r in runs:
            column = r.column
            tally = self.columns.get(column)
            if tally is None:
                tally = self.columns[column] = {"counts": dict.fromkeys(_COUNTED, 0), "costs": [], "judges": [],
                                                "ttft": [], "total": [], "flaky": 0}
            counts = tally["counts"]
            if not r.ran:
                counts["skipped"] += r.status == "skipped"
                counts["template_errors"] += r.status == "template_error"
                continue
            passed = bool(r.passed)
            counts["runs"] += 1
            counts["passed"] += passed
            counts["failed"] += r.ok and not passed
            counts["errors"] += not r.ok
            counts["cached"] += bool(r.cached)
            counts["input_tokens"] += r.input_tokens
            counts["output_tokens"] += r.output_tokens
            for key, value in (("costs", r.cost), ("judges", r.judge_cost)):
                if value is not None:
                    tally[key].append(value)  # summed when asked, in this order: as `sum` over the runs
            for key, value in (("ttft", r.ttft_s), ("total", r.total_s)):
                if r.ok and value is not None:
                    bisect.insort(tally[key], value)
            if self.verdicts is not None:
                key = (r.row, column)
                seen = self.verdicts.get(key, 0)
                self.verdicts[key] = now = seen | (1 if passed else 2)
                tally["flaky"] += now == 3 and seen != 3

    def records(self) -> list[dict[str, Any]]:
        """`ev.summary_records(stats=_no_statistics(ev))` of the runs added."""
        ev = self.ev
        shape = Evaluation(ev.providers, [], variants=ev.variants)  # no runs: the keys, in order, and no figures
        rows = shape.summary_records(stats=_no_statistics(shape))
        for row in rows:
            tally = self.columns.get(row["column"])
            if tally is None:
                continue
            row.update(tally["counts"])
            runs, costs, judges = row["runs"], tally["costs"], tally["judges"]
            row.update(pass_rate=row["passed"] / runs if runs else None, flaky=tally["flaky"],
                       ttft_p50_s=percentile(tally["ttft"], 0.5), ttft_p90_s=percentile(tally["ttft"], 0.9),
                       total_p50_s=percentile(tally["total"], 0.5), total_p90_s=percentile(tally["total"], 0.9),
                       cost=sum(costs) if costs else None, judge_cost=sum(judges) if judges else None)
        return rows


#: What `LiveSummary` counts per column, as `Evaluation.summary_records` names it.
_COUNTED = ("runs", "passed", "failed", "errors", "skipped", "template_errors", "cached", "input_tokens",
            "output_tokens")


class RowIndex:
    """`ev`'s runs by row and the rows each filter keeps, brought up to date from the runs ended
    since the last call only (a frame costs what changed, not the matrix); `summary`, the
    summary of those runs (`LiveSummary`)."""

    def __init__(self, ev: Evaluation) -> None:
        self.ev = ev
        self.summary = LiveSummary(ev)
        self.by_row: dict[int, list[EvalResult]] = {}
        self.failed: set[int] = set()
        self.disagree: set[int] = set()
        self._read = 0  # runs of `ev.results` indexed
        self._first: EvalResult | None = None  # the first run indexed: the results were replaced when it differs

    def update(self) -> None:
        results = self.ev.results
        if self._read > len(results) or (self._read and results[0] is not self._first):
            self.__init__(self.ev)  # type: ignore[misc]  # the results were replaced: index again
        new = results[self._read:]
        self._read += len(new)
        self.summary.add(new)
        if new and self._first is None:
            self._first = results[0]
        for r in new:
            self.by_row.setdefault(r.row, []).append(r)
        for row in {r.row for r in new}:
            self._flag(row)

    def _flag(self, row: int) -> None:
        """`analysis.row_flags` of one row: failed (a run did not pass or was not rendered), disagree
        (the columns' pass rates on it differ)."""
        runs = self.by_row[row]
        failed = any(r.status == "template_error" or (r.ran and not r.passed) for r in runs)
        rates: dict[str, list[int]] = {}
        for r in runs:
            if r.ran:
                counts = rates.setdefault(r.column, [0, 0])
                counts[0] += bool(r.passed)
                counts[1] += 1
        disagree = len(rates) > 1 and len({p / n for p, n in rates.values()}) > 1
        for rows, flagged in ((self.failed, failed), (self.disagree, disagree)):
            if flagged:
                rows.add(row)
            else:
                rows.discard(row)

    def flags(self) -> dict[str, list[int]]:
        """Row numbers per filter (`FILTERS`), each sorted."""
        return {"all": list(range(len(self.ev.rows))), "failed": sorted(self.failed),
                "disagree": sorted(self.disagree), "changed": sorted((self.ev.changes or {}).get("rows", []))}


class Pager:
    """The page of `ev`'s matrix a live view shows, and the messages that keep it up to date. The
    summary (`LiveSummary`) goes at most every `SUMMARY_S` seconds of `clock`, and whenever a page goes.

    Thread-safe: runs end on ipyagent's loop, pages are asked on the kernel's thread."""

    def __init__(self, ev: Evaluation, size: int = PAGE, note: str = "", clock: Any = time.monotonic,
                 line: Any = None) -> None:
        """`line`: the progress line, called each frame (default `Evaluation.progress`'s)."""
        self.ev, self.size, self.note, self.clock = ev, size, note, clock
        self.line = line or (lambda: str(ev.progress))
        self.start, self.filter = 0, "all"
        self.ended = False  # the evaluation ended: no progress line (the headline says it all)
        self.index = RowIndex(ev)
        self._lock = threading.Lock()
        self._shown: tuple[int, ...] | None = None  # the rows of the page last sent
        self._dirty: set[int] = set()  # rows with a run ended or graded since the last message
        self._summary_at: float | None = None  # when the summary was last sent

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

    def message(self) -> dict[str, Any]:
        """The next message for the front end: the page when its rows changed, else the progress."""
        with self._lock:
            self.index.update()
            flags = self.index.flags()
            matching = flags[self.filter]
            if self.start >= len(matching):  # the last page, when the rows kept shrank
                self.start = max((len(matching) - 1) // self.size * self.size, 0)
            rows = tuple(matching[self.start:self.start + self.size])
            again = rows != self._shown or not self._dirty.isdisjoint(rows)
            self._shown, self._dirty = rows, set()
            start, name = self.start, self.filter
            now = self.clock()
            summary = again or self.ended or self._summary_at is None or now - self._summary_at >= SUMMARY_S
            if summary:
                self._summary_at = now
            message: dict[str, Any] = {
                "type": "progress", "progress": "" if self.ended else self.line(),
                "note": "" if self.ended else self.note, "counts": {f: len(flags[f]) for f in FILTERS},
            }
            if summary:
                message["summary"] = redact_data(self.index.summary.records())
            if again:
                message["type"] = "page"
                message["page"] = {"start": start, "size": self.size, "filter": name, "matching": len(matching),
                                   "rows": list(rows), "fields": self._fields(rows)}
                message["doc"] = self._doc(rows, flags, message["summary"])
        return message

    def _fields(self, rows: tuple[int, ...]) -> dict[str, Any]:
        return {str(n): plain(redact_data(row_fields(self.ev.rows[n]))) for n in rows if n < len(self.ev.rows)}

    def _doc(self, rows: tuple[int, ...], flags: dict[str, list[int]], summary: list[dict[str, Any]]) -> dict[str, Any]:
        """The page's document (the module doc's ``DOC``)."""
        ev, keep = self.ev, set(rows)
        order = {c: i for i, c in enumerate(ev.columns)}
        mine = sorted((r for n in rows for r in self.index.by_row.get(n, [])),
                      key=lambda r: (r.row, order.get(r.column, 0), r.repeat))
        flaky: dict[tuple[int, str], set[bool]] = {}
        for r in mine:
            if r.ran:
                flaky.setdefault((r.row, r.column), set()).add(bool(r.passed))
        progress = ev.progress
        return {
            "id": ev.id, "providers": ev.providers, "columns": ev.columns, "variants": ev.variants,
            "repeat": ev.repeat, "assertions": ev.assertions, "total": ev.total,
            "wall_s": ev.wall_s or progress.elapsed_s,  # so far, while it runs
            "interrupted": False, "budget": ev.budget, "budget_stopped": ev.budget_stopped, "spent": ev.spent,
            "reserved": ev.reserved, "skipped": sum(s["skipped"] for s in summary), "notes": [],
            "aliases": ev.aliases, "summary": summary, "baseline": None, "comparisons": [], "agreement": [],
            "changes": ev.changes,
            "row_flags": {f: [n for n in flags[f] if n in keep] for f in ("failed", "disagree", "changed")},
            "flaky": [[n, c] for (n, c), seen in flaky.items() if len(seen) > 1],
            "results": [preview(plain(redact_data(r.to_dict()))) for r in mine],
            "field_order": list(dict.fromkeys(k for r in mine for k in r.fields)),
            "saved": {"results": progress.finished, "done": sum(s["runs"] for s in summary),
                      "cached": sum(s["cached"] for s in summary), "passed": sum(s["passed"] for s in summary),
                      "rows": len(self.index.by_row), "note": ""},
        }
