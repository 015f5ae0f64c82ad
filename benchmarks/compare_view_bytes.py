"""Compare view: what a ``%%compare`` cell's live view opens in the front end.

Each live view's widget carries its front end (the ~290 kB ES module: markdown-it,
DOMPurify, highlight.js) in the state it opens with. Measured with a comm that
counts what the front end would receive, for P providers x R runs:

* ours: one widget for the whole cell (`CompareWidgetView`), every run started;
* baseline, in the same run: one live view per run (`WidgetView`, as a %%compare
  cell made them before: a widget per pane, a fresh one per run).

Reported: widgets opened carrying the module, bytes opened, and baseline / ours.

Then the live matrix of a ``%%compare --over`` cell (`EvaluationView`, issue 33): R rows x 2
columns of finished runs (answers of 200 characters) end 50 between two frames, then the user
pages forward and back. Reported: the bytes the widget sends, the summary aside (the rows' pages)
and the summary's own (the progress line, the filters' counts, the summary per column); ours at R
rows / ours at 50 rows (the target: at most 2); and the baseline, in the same run: every row's runs
sent once (the whole matrix, answers previewed as the saved output does), baseline / ours.

Usage: python benchmarks/compare_view_bytes.py [--quick]
"""

from __future__ import annotations

import json
from typing import Any

from common import options, print_table, versions, write_json
from render_path import CountingComm

CASES = ((1, 1), (3, 1), (3, 3), (5, 3))
QUICK_CASES = ((1, 1), (3, 3))
ROWS = (50, 1_000, 3_000, 10_000)
QUICK_ROWS = (50, 300)
#: What a live matrix's message carries beside its page (notebook/views/evaluation_pages.py).
PROGRESS = ("summary", "progress", "note", "counts")


class OpenCounter(CountingComm):
    """Stands in for a kernel comm: keeps the size of each widget's opening state."""

    opened: list[tuple[int, bool]] = []  # (bytes, carries the ES module)

    def __init__(self, *args: Any, data: Any = None, **kwargs: Any) -> None:
        super().__init__()
        state = (data or {}).get("state") or {}
        OpenCounter.opened.append((len(json.dumps(data or {}, ensure_ascii=False)), "_esm" in state))


def measure(make: Any) -> dict[str, int]:
    OpenCounter.opened.clear()
    make()
    return {"widgets_with_module": sum(esm for _, esm in OpenCounter.opened),
            "bytes_opened": sum(size for size, _ in OpenCounter.opened)}


def finished(rows: int) -> Any:
    """An `Evaluation` of `rows` x 2 finished runs; every 50th row fails on the last column."""
    from ipyagent.agent import EvalResult, Evaluation
    from ipyagent.agent.evaluation.checks import Outcome

    check = "contains:{{ row.want }}"
    providers = ["openai:m0", "openai:m1"]
    fields = [{"n": n, "want": f"It is {n}."} for n in range(rows)]
    ev = Evaluation(providers, fields, assertions=[check])
    for n, row in enumerate(fields):
        for c, provider in enumerate(providers):
            ok = not (n % 50 == 7 and c == 1)
            ev.results.append(EvalResult(row=n, provider=provider, prompt=f"What is {n}?", fields=row,
                                         text=(f"It is {n}." if ok else "No idea.").ljust(200, "."), passed=ok,
                                         outcomes=[Outcome(check, ok)], total_s=0.05))
    return ev


class Frames:
    """The view's frame timer, driven by the benchmark: a frame every 50 runs ended."""

    due: list[Any] = []

    def __init__(self, wait: float, frame: Any) -> None:
        self.frame = frame

    def start(self) -> None:
        Frames.due.append(self.frame)

    @classmethod
    def draw(cls) -> None:
        while cls.due:
            cls.due.pop()()


def live_evaluation(rows: int) -> dict[str, int]:
    """Bytes the live matrix of `rows` x 2 sends: ``pages`` (the summary aside), ``summary``, and
    ``baseline``: every row's runs sent once."""
    import threading

    from ipyagent import Evaluation
    from ipyagent.core import redact_data
    from ipyagent.notebook.render.evaluation import PAGE
    from ipyagent.notebook.render.evaluation_saved import preview
    from ipyagent.notebook.views import evaluation_view, transcript_output

    for module in (evaluation_view, transcript_output):
        module.display = module.update_display = lambda *a, **kw: None  # type: ignore[attr-defined]
    evaluation_view.FRAME_S = 1e6  # frames drawn by `Frames`
    evaluation_view.threading = type("T", (), {"Timer": Frames, "Lock": threading.Lock})  # type: ignore[assignment]
    done = finished(rows)
    ev = Evaluation(done.providers, done.rows, assertions=done.assertions)
    view = evaluation_view.EvaluationView(ev, widgets=True)
    sent: list[dict[str, Any]] = []
    view.widget.send = sent.append
    view._on_msg(view.widget, {"type": "hello"}, [])
    for n, result in enumerate(done.results):
        ev.results.append(result)
        view.update(result)
        if n % 50 == 49:
            Frames.draw()
    Frames.draw()
    for start in (PAGE, 0):
        view._on_msg(view.widget, {"type": "page", "start": start, "filter": "all"}, [])
    view._closed = True  # not finished: the saved output is another benchmark's (saved_evaluation.py)
    whole = [preview(redact_data(r.to_dict())) for r in done.ordered()]
    return {"pages": sum(len(json.dumps({k: v for k, v in m.items() if k not in PROGRESS})) for m in sent),
            "summary": sum(len(json.dumps({k: v for k, v in m.items() if k in PROGRESS})) for m in sent),
            "messages": len(sent), "baseline": len(json.dumps(whole))}


def evaluation_table(args: Any) -> dict[str, Any]:
    results = {str(rows): live_evaluation(rows) for rows in (QUICK_ROWS if args.quick else ROWS)}
    first = results[str(min(QUICK_ROWS if args.quick else ROWS))]["pages"]
    table = []
    for rows, r in results.items():
        r["vs_50_rows"] = round(r["pages"] / first, 2)
        r["baseline_vs_ours"] = round(r["baseline"] / r["pages"], 2)
        table.append([f"{int(rows):,} rows x 2", r["messages"], r["pages"], r["summary"], r["vs_50_rows"],
                      r["baseline"], r["baseline_vs_ours"]])
    print_table("Live evaluation view: bytes the widget sends per %%compare --over cell",
                ["case", "messages", "ours: pages", "ours: summary", "ours / 50 rows", "baseline: every row",
                 "baseline / ours"], table)
    return results


def main() -> None:
    import comm

    from ipyagent.notebook.views.compare_view import CompareWidgetView
    from ipyagent.notebook.views.run_view import WidgetView

    args = options(__doc__.splitlines()[0], runs=1)
    comm.create_comm = OpenCounter  # ipywidgets asks `comm.create_comm` for each widget's comm
    results: dict[str, Any] = {}
    rows = []
    for providers, runs in QUICK_CASES if args.quick else CASES:
        ids = [f"openai:m{i}" for i in range(providers)]

        def ours() -> None:
            view = CompareWidgetView(ids, runs)
            for run in range(runs):
                for index in range(providers):
                    view.start(index, run)

        def baseline() -> None:
            for run in range(runs):
                for provider in ids:
                    WidgetView(provider)

        new, old = measure(ours), measure(baseline)
        ratio = old["bytes_opened"] / new["bytes_opened"]
        results[f"{providers}x{runs}"] = {"ours": new, "baseline": old, "ratio": round(ratio, 2)}
        rows.append([f"{providers} providers x {runs} runs", new["widgets_with_module"], new["bytes_opened"],
                     old["widgets_with_module"], old["bytes_opened"], round(ratio, 2)])
    print_table(
        "Compare view: widget state opened per %%compare cell",
        ["case", "ours: modules", "ours: bytes", "baseline: modules", "baseline: bytes", "baseline / ours"],
        rows,
    )
    evaluation = evaluation_table(args)
    write_json(args, "compare_view_bytes", {"results": results, "evaluation": evaluation,
                                            "versions": versions("anywidget", "ipywidgets")})


if __name__ == "__main__":
    main()
