"""Saved evaluation: the bytes a ``%%compare --over`` output takes in the notebook, and its CPU.

For R rows x 3 columns of finished runs (answers of 200 characters, one row in 50 failing on
one column), built without a server:

* ours: `render.evaluation.bundle` (the saved output within ``eval_output_max``, 1 MB);
* baseline, in the same run: the whole document drawn, as the output was before (every run's
  JSON, HTML and Markdown).

Reported: the bytes each takes as nbformat writes it, the bytes per row, the rows ours shows,
the CPU seconds of each and the ratios (baseline / ours).

Usage: python benchmarks/saved_evaluation.py [--quick]
"""

from __future__ import annotations

import time
from typing import Any

from common import median, options, print_table, versions, write_json

CASES = (1_000, 3_000, 10_000)
QUICK_CASES = (300, 1_000)
COLUMNS, ANSWER = 3, 200


def finished(rows: int) -> Any:
    """An `Evaluation` of `rows` x `COLUMNS` finished runs; every 50th row fails on the last column."""
    from ipyagent.agent import EvalResult, Evaluation
    from ipyagent.agent.evaluation.checks import Outcome

    check = "contains:{{ row.want }}"
    providers = [f"openai:m{c}" for c in range(COLUMNS)]
    fields = [{"n": n, "want": f"It is {n}."} for n in range(rows)]
    ev = Evaluation(providers, fields, assertions=[check])
    for n, row in enumerate(fields):
        for c, provider in enumerate(providers):
            ok = not (n % 50 == 7 and c == COLUMNS - 1)
            text = (f"It is {n}." if ok else "No idea.").ljust(ANSWER, ".")
            ev.results.append(EvalResult(row=n, provider=provider, prompt=f"What is {n}?", fields=row, text=text,
                                         passed=ok, outcomes=[Outcome(check, ok)], total_s=0.05,
                                         input_tokens=10, output_tokens=5))
    return ev


def cpu(make: Any, runs: int) -> tuple[Any, float]:
    times, result = [], None
    for _ in range(runs):
        start = time.process_time()
        result = make()
        times.append(time.process_time() - start)
    return result, median(times)


def main() -> None:
    from ipyagent.core import redact_data
    from ipyagent.notebook.render.evaluation import MIME_TYPE, bundle, render_data
    from ipyagent.notebook.render.evaluation_saved import stored_size

    args = options(__doc__.splitlines()[0], runs=3)
    results: dict[str, Any] = {}
    rows = []
    for n in QUICK_CASES if args.quick else CASES:
        ev = finished(n)
        (ours, _), ours_s = cpu(lambda: bundle(ev), args.runs)
        whole, whole_s = cpu(lambda: render_data(redact_data(ev.to_json())), args.runs)
        shown = len({r["row"] for r in ours[MIME_TYPE]["results"]})
        new, old = stored_size(ours), stored_size(whole)
        results[str(n)] = {"ours_bytes": new, "baseline_bytes": old, "rows_shown": shown, "ours_cpu_s": ours_s,
                           "baseline_cpu_s": whole_s, "bytes_ratio": round(old / new, 2),
                           "cpu_ratio": round(whole_s / ours_s, 2)}
        rows.append([f"{n:,} x {COLUMNS}", new, round(new / n), shown, old, round(old / n), round(old / new, 1),
                     round(ours_s, 2), round(whole_s, 2), round(whole_s / ours_s, 2)])
    print_table("Saved evaluation: bytes in the notebook (eval_output_max 1 MB) and CPU",
                ["rows", "ours: bytes", "ours: bytes/row", "rows shown", "baseline: bytes", "baseline: bytes/row",
                 "bytes baseline / ours", "ours: CPU s", "baseline: CPU s", "CPU baseline / ours"], rows)
    write_json(args, "saved_evaluation", {"results": results, "versions": versions("nh3")})


if __name__ == "__main__":
    main()
