"""Summaries for a model (``--with``): their cost must not grow with the data.

Measured in the same run, median over ``--runs``:

* `summarize` of a float64 ndarray of 10⁴ and of 10⁸ elements (``--quick``: 10⁶),
  against one pass over the same array (``a.sum()``) and numpy's own ``repr``:
  the ratio summary(10⁸) / summary(10⁴) shows the cost is flat (target: under 3×),
  and summary(10⁸) / ``a.sum()`` that it never reads the data (far under 1);
  the absolute figure against the 50 ms target;
* a pandas DataFrame of 100,000 rows × 20 columns: `summarize` against
  ``str(df)`` (what ``{{ df }}`` sends), and the summary's tokens against the budget.

Usage: python benchmarks/summarize_context.py [--quick] [--runs N]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from common import median, options, print_table, versions, write_json

TARGET_S = 0.050
FLAT_RATIO = 3.0
BUDGET = 2000


def timed(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm: numpy's formatter and pandas' methods load on first use
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def main() -> int:
    args = options(__doc__.splitlines()[0])
    import numpy as np
    import pandas as pd

    from ipyagent.memory.summarize import summarize

    big_n = 10**6 if args.quick else 10**8
    small = np.random.default_rng(0).random(10**4)
    big = np.random.default_rng(1).random(big_n)
    rows: list[list[Any]] = []
    small_s = timed(lambda: summarize(small), args.runs)
    big_s = timed(lambda: summarize(big), args.runs)
    sum_s = timed(lambda: big.sum(), args.runs)
    repr_s = timed(lambda: repr(big), args.runs)
    rows += [
        ["summarize ndarray 10^4", small_s, small_s / small_s],
        [f"summarize ndarray {big_n:.0e}", big_s, big_s / small_s],
        [f"a.sum() {big_n:.0e} (one pass, baseline)", sum_s, sum_s / small_s],
        [f"repr(a) {big_n:.0e}", repr_s, repr_s / small_s],
    ]
    df = pd.DataFrame(np.random.default_rng(2).random((100_000 if not args.quick else 1_000, 20)),
                      columns=[f"column_{i}" for i in range(20)])
    df_s = timed(lambda: summarize(df, budget_tokens=BUDGET), args.runs)
    str_s = timed(lambda: str(df), args.runs)
    summary = summarize(df, budget_tokens=BUDGET)
    rows += [["summarize DataFrame", df_s, df_s / str_s], ["str(df) (baseline for the frame)", str_s, 1.0]]
    print_table(
        "Summaries for a model (milliseconds, median; ratio: arrays against summarize 10^4, frames against str(df))",
        ["case", "median_ms", "ratio"],
        [[r[0], r[1] * 1000, r[2]] for r in rows],
    )
    flat = big_s / small_s
    print(f"\nndarray of {big_n:,}: {big_s * 1000:.2f} ms (target < {TARGET_S * 1000:.0f} ms), "
          f"{flat:.2f}× the 10^4 summary (target < {FLAT_RATIO}×), {big_s / sum_s:.4f}× one pass over the data")
    print(
        f"DataFrame {df.shape[0]:,} × {df.shape[1]}: {summary.tokens} tokens of a {BUDGET}-token budget, "
        f"truncated={summary.truncated}, "
        f"every column named: {all(c in summary.text for c in df.columns)}"
    )
    write_json(args, "summarize_context", {
        "versions": versions("numpy", "pandas"),
        "results": {str(r[0]): {"median_s": r[1], "ratio": r[2]} for r in rows},
        "summary": {"ndarray_elements": big_n, "ndarray_s": big_s, "flat_ratio": flat, "vs_one_pass": big_s / sum_s,
                    "target_s": TARGET_S, "frame_tokens": summary.tokens, "budget": BUDGET,
                    "ok": big_s < TARGET_S and flat < FLAT_RATIO and summary.tokens <= BUDGET},
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
