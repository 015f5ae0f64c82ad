"""``%provider --models``: a provider's models as a text table."""

from __future__ import annotations

from typing import Any


def _tokens(value: int | None) -> str:
    if not value:
        return "?"
    return f"{value / 1_000_000:g}M" if value >= 1_000_000 else f"{value / 1000:g}k" if value >= 1000 else str(value)


def _usd(value: float | None) -> str:
    return "?" if value is None else f"${value:g}"


def model_table(rows: list[Any]) -> str:
    """One line per model: id, context window, USD per million input / output tokens ("?": unknown), details."""
    table = [("model", "context", "$/M in", "$/M out", "")]
    for row in rows:
        extra = row.details.get("parameter_size") or (row.name if row.name and row.name != row.id else "")
        table.append(
            (
                row.id,
                _tokens(row.context_window),
                _usd(row.input_usd_per_mtok),
                _usd(row.output_usd_per_mtok),
                extra or "",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths)) + (f"  {r[4]}" if r[4] else "") for r in table
    ).rstrip()
