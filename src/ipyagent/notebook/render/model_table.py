"""``%provider --models``: a provider's models as a text table."""

from __future__ import annotations

from typing import Any


def _tokens(value: int | None) -> str:
    if not value:
        return "?"
    return f"{value / 1_000_000:g}M" if value >= 1_000_000 else f"{value / 1000:g}k" if value >= 1000 else str(value)


def _usd(value: float | None) -> str:
    return "?" if value is None else f"${value:g}"


def _shutdown(row: Any) -> str:
    """``2027-01-14 -> gpt-6-luna`` (the replacement when the provider names one); empty when none is announced."""
    day = getattr(row, "shutdown_date", None)
    if day is None:
        return ""
    instead = getattr(row, "replacement", None)
    return day.isoformat() + (f" -> {instead}" if instead else "")


def model_table(rows: list[Any]) -> str:
    """One line per model: id, context window, USD per million input / output tokens ("?": unknown),
    shutdown date (and replacement) where announced, details. The shutdown column is shown only
    when some model has one."""
    shutdowns = [_shutdown(row) for row in rows]
    dated = any(shutdowns)
    table = [("model", "context", "$/M in", "$/M out", *(("shuts down",) if dated else ()), "")]
    for row, shutdown in zip(rows, shutdowns):
        extra = row.details.get("parameter_size") or (row.name if row.name and row.name != row.id else "")
        prices = (_usd(row.input_usd_per_mtok), _usd(row.output_usd_per_mtok))
        table.append((row.id, _tokens(row.context_window), *prices, *((shutdown,) if dated else ()), extra or ""))
    columns = len(table[0]) - 1
    widths = [max(len(r[i]) for r in table) for i in range(columns)]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(r[:columns], widths)) + (f"  {r[-1]}" if r[-1] else "")
             for r in table)
    return "\n".join(line.rstrip() for line in lines).rstrip()
