"""Summaries of pandas and polars frames and series and numpy arrays (see summarize.py).

A value is checked against a library only when that library is already
imported (``sys.modules``): summarizing never imports pandas, polars or numpy.
Every figure is computed without touching all the data when the data is large:
an array of 10⁸ elements is described from its shape, dtype and edge values
(benchmarks/summarize_array.py).
"""

from __future__ import annotations

import sys
from typing import Any

from .summary_writer import CELL_CHARS, Summary, Writer, cut

#: Rows shown of a frame or series.
HEAD_ROWS = 5
#: Frames with more cells count nulls over their first `NULL_SAMPLE_ROWS` rows only.
NULL_SCAN_CELLS = 50_000_000
NULL_SAMPLE_ROWS = 1_000_000
#: Arrays up to this many elements also get min / max / mean.
STATS_ELEMENTS = 1_000_000


def _instance_of(value: Any, module: str, *names: str) -> str | None:
    """The first of `names` in the already-imported `module` that `value` is an instance of."""
    mod = sys.modules.get(module)
    if mod is None:
        return None
    for name in names:
        cls = getattr(mod, name, None)
        if isinstance(cls, type) and isinstance(value, cls):
            return name
    return None


def summarize_frame(value: Any, budget_tokens: int) -> Summary | None:
    """The summary of a pandas / polars frame or series or a numpy array; None for anything else."""
    if (name := _instance_of(value, "numpy", "ndarray")) is not None:
        return summarize_ndarray(value, budget_tokens)
    if (name := _instance_of(value, "pandas", "DataFrame", "Series")) is not None:
        return (pandas_frame if name == "DataFrame" else pandas_series)(value, budget_tokens)
    if (name := _instance_of(value, "polars", "DataFrame", "LazyFrame", "Series")) is not None:
        return {"DataFrame": polars_frame, "LazyFrame": polars_lazy, "Series": polars_series}[name](
            value, budget_tokens
        )
    return None


def _cell(value: Any) -> str:
    """One Markdown table cell: floats to 6 significant digits, no newlines, pipes escaped, cut to `CELL_CHARS`."""
    text = f"{value:.6g}" if isinstance(value, float) else str(value).replace("\n", " ").replace("|", "\\|")
    return cut(text, CELL_CHARS)[0]


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


def _head_table(
    out: Writer, columns: list[str], rows: list[list[Any]], index: list[Any] | None, total_rows: int
) -> None:
    """The first rows as a Markdown table; with too many columns for the budget, the first ones that fit."""
    shown = len(columns)
    while shown > 0:
        header = ([""] if index is not None else []) + columns[:shown]
        body = [([i] if index is not None else []) + r[:shown] for i, r in zip(index or [None] * len(rows), rows)]
        lines = _table(header, body)
        if sum(len(x) + 1 for x in lines) + 120 < out.room():
            break
        shown = shown // 2 if shown > 8 else shown - 1
    if shown == 0:
        out.note("… the first rows left out (budget)")
        return
    what = f"first {len(rows)} of {total_rows:,} rows" + (
        f", first {shown} of {len(columns):,} columns" if shown < len(columns) else ""
    )
    out.add(f"{what}:")
    out.add_all(lines, "table lines")
    if shown < len(columns):
        out.truncated = True


def _columns(out: Writer, names: list[str], dtypes: list[str], nulls: list[int] | None, note: str = "") -> None:
    header = ["column", "dtype"] + (["nulls"] if nulls is not None else [])
    rows = [
        [n, d] + ([f"{c:,}"] if nulls is not None else [])
        for n, d, c in zip(names, dtypes, nulls or [None] * len(names))
    ]
    out.add(f"columns ({len(names):,}){note}:")
    out.add_all(_table(header, rows), "columns")


# -- pandas -----------------------------------------------------------------------------


def pandas_frame(df: Any, budget_tokens: int) -> Summary:
    rows, cols = df.shape
    out = Writer(budget_tokens)
    out.add(f"pandas.DataFrame: {rows:,} rows × {cols:,} columns")
    if type(df.index).__name__ != "RangeIndex" or df.index.name is not None:
        out.add(f"index: {type(df.index).__name__} {df.index.name or ''} dtype {df.index.dtype}".replace("  ", " "))
    sample, note = (
        (df, "")
        if rows * cols <= NULL_SCAN_CELLS
        else (df.iloc[:NULL_SAMPLE_ROWS], f", nulls in the first {NULL_SAMPLE_ROWS:,} rows")
    )
    nulls = [int(n) for n in sample.isna().sum().tolist()]
    names = [str(c) for c in df.columns]
    _columns(out, names, [str(d) for d in df.dtypes.tolist()], nulls, note)
    if not out.truncated and rows:
        head = df.head(HEAD_ROWS)
        _head_table(out, names, head.values.tolist(), [str(i) for i in head.index.tolist()], rows)
    return out.summary("pandas.DataFrame")


def pandas_series(s: Any, budget_tokens: int) -> Summary:
    out = Writer(budget_tokens)
    out.add(f"pandas.Series {s.name!r}: {len(s):,} values, dtype {s.dtype}, {int(s.isna().sum()):,} nulls")
    head = s.head(HEAD_ROWS)
    _head_table(out, [str(s.name)], [[v] for v in head.tolist()], [str(i) for i in head.index.tolist()], len(s))
    return out.summary("pandas.Series")


# -- polars -----------------------------------------------------------------------------


def polars_frame(df: Any, budget_tokens: int) -> Summary:
    rows, cols = df.shape
    out = Writer(budget_tokens)
    out.add(f"polars.DataFrame: {rows:,} rows × {cols:,} columns")
    nulls = [int(n) for n in df.null_count().row(0)] if cols else []
    _columns(out, list(df.columns), [str(d) for d in df.dtypes], nulls)
    if not out.truncated and rows:
        _head_table(out, list(df.columns), [list(r) for r in df.head(HEAD_ROWS).rows()], None, rows)
    return out.summary("polars.DataFrame")


def polars_lazy(lf: Any, budget_tokens: int) -> Summary:
    schema = lf.collect_schema()
    out = Writer(budget_tokens)
    out.add(f"polars.LazyFrame (not computed): {len(schema):,} columns")
    _columns(out, list(schema.names()), [str(d) for d in schema.dtypes()], None)
    return out.summary("polars.LazyFrame")


def polars_series(s: Any, budget_tokens: int) -> Summary:
    out = Writer(budget_tokens)
    out.add(f"polars.Series {s.name!r}: {s.len():,} values, dtype {s.dtype}, {s.null_count():,} nulls")
    _head_table(out, [s.name], [[v] for v in s.head(HEAD_ROWS).to_list()], None, s.len())
    return out.summary("polars.Series")


# -- numpy ------------------------------------------------------------------------------


def summarize_ndarray(a: Any, budget_tokens: int) -> Summary:
    """Shape, dtype, size in bytes and the edge values (numpy's own summarized print);
    min / max / mean only for arrays up to `STATS_ELEMENTS` elements, so the cost does
    not grow with the array."""
    import numpy as np  # the value is an ndarray: numpy is imported already

    out = Writer(budget_tokens)
    shape = " × ".join(f"{n:,}" for n in a.shape) or "scalar"
    out.add(f"numpy.ndarray: shape ({shape}), dtype {a.dtype}, {a.size:,} elements, {a.nbytes:,} bytes")
    if a.size and a.size <= STATS_ELEMENTS and a.dtype.kind in "iufb":
        finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
        nan = int(a.size - finite.size)
        if finite.size:
            out.add(
                f"min {finite.min()}, max {finite.max()}, mean {finite.astype(float).mean():.6g}"
                + (f", {nan:,} NaN or infinite" if nan else "")
            )
    elif a.size > STATS_ELEMENTS:
        out.add(f"(no statistics: over {STATS_ELEMENTS:,} elements)")
    text = np.array2string(a, threshold=40, edgeitems=3, max_line_width=100)
    out.add("values:")
    out.add_all(text.splitlines(), "lines of values")
    return out.summary("numpy.ndarray")
