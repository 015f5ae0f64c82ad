"""Compare view: what a ``%%compare`` cell's live view opens in the front end.

Each live view's widget carries its front end (the ~290 kB ES module: markdown-it,
DOMPurify, highlight.js) in the state it opens with. Measured with a comm that
counts what the front end would receive, for P providers x R runs:

* ours: one widget for the whole cell (`CompareWidgetView`), every run started;
* baseline, in the same run: one live view per run (`WidgetView`, as a %%compare
  cell made them before: a widget per pane, a fresh one per run).

Reported: widgets opened carrying the module, bytes opened, and baseline / ours.

Usage: python benchmarks/compare_view_bytes.py [--quick]
"""

from __future__ import annotations

import json
from typing import Any

from common import options, print_table, versions, write_json
from render_path import CountingComm

CASES = ((1, 1), (3, 1), (3, 3), (5, 3))
QUICK_CASES = ((1, 1), (3, 3))


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
    print_table("Compare view: widget state opened per %%compare cell",
                ["case", "ours: modules", "ours: bytes", "baseline: modules", "baseline: bytes", "baseline / ours"], rows)
    write_json(args, "compare_view_bytes", {"results": results, "versions": versions("anywidget", "ipywidgets")})


if __name__ == "__main__":
    main()
