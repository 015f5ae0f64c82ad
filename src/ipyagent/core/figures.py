"""The figures drawn under a run, computed once: a transcript's footer (`footer_figures`) and a
comparison's (`comparison_footer`). `Transcript.to_json` and `ComparisonRecord.to_json` write
them into the saved document, so every renderer (the labextension's TypeScript, the HTML and
plain-text fallbacks, a terminal) shows the same words and none computes them again."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .settings import ModelSettings

if TYPE_CHECKING:
    from .transcript import ComparisonRecord, Transcript


def format_usd(amount: float) -> str:
    """``0.00117`` -> ``"$0.00117"``: cents for a dollar or more, else three significant digits."""
    if amount <= 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    decimals = 2 - math.floor(math.log10(amount))
    if round(amount, decimals) >= 1:  # 0.9996 rounds to a whole dollar: shown as one, with cents
        return "$1.00"
    text = f"{amount:.{decimals}f}".rstrip("0").rstrip(".")
    return f"${text}"


def plural(n: int, noun: str, nouns: str = "") -> str:
    """``1 row``, ``0 rows``, ``2 providers``: a count and its noun (an English regular plural, or
    `nouns` where it is not: ``plural(2, "retry", "retries")``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {nouns or noun + 's'}"


def provider_title(provider: str, alias: str | None = None) -> str:
    """How a run names its provider: ``small · openai:gpt-6-luna`` when the user named it by an
    alias, else the ``provider:model`` id."""
    return f"{alias} · {provider}" if alias and alias != provider else provider


def footer_figures(t: Transcript) -> list[str]:
    """A run's footer, as the live view ends with it: provider, tokens, times, turns, stop reason,
    retries, replay, cost, masked values, state and settings (``["openai:m", "3 in / 4 out tokens", ...]``);
    a provider named by an alias is ``small · openai:m``."""
    figures = [provider_title(t.provider, t.alias)]
    u = t.usage
    if u.input_tokens or u.output_tokens or t.status == "completed":
        figures.append(f"{u.input_tokens} in / {u.output_tokens} out tokens")
    if t.timings.first_token_s is not None:
        figures.append(f"first token {t.timings.first_token_s:.2f} s")
    if t.timings.total_s is not None:
        figures.append(f"total {t.timings.total_s:.2f} s")
    if t.timings.turns > 1:
        figures.append(f"{t.timings.turns} model turns")
    if t.status == "completed" and t.stop_reason not in (None, "end_turn"):
        figures.append(f"stop: {t.stop_reason}")
    if t.attempts and t.attempts > 1:
        figures.append(plural(t.attempts - 1, "retry", "retries"))
    if t.replayed:
        figures.append("replayed from cassette")
    if t.cost is not None:
        figures.append(format_usd(t.cost.total_usd))
    if masked_figure(t.masked):
        figures.append(masked_figure(t.masked))
    if t.status != "completed":
        figures.append(t.status)
    if t.settings:
        try:
            figures.append(ModelSettings(**t.settings).describe())
        except ValueError:  # a transcript from a newer ipyagent: show what it says
            figures.append(" · ".join(f"{k} {v}" for k, v in t.settings.items()))
    return figures


def masked_figure(masked: dict[str, int]) -> str:
    """``3 values masked (cell template 1, error 2)``: what the redactor kept from the model; empty when
    nothing was."""
    counts = {name: n for name, n in masked.items() if n}
    total = sum(counts.values())
    return f"{total} value{'s' if total != 1 else ''} masked ({', '.join(f'{k} {v}' for k, v in counts.items())})" \
        if total else ""


def comparison_footer(record: ComparisonRecord) -> list[str]:
    """A comparison's footer: ``["compared in 2.50 s", "interrupted"]`` (each when it applies)."""
    return ([f"compared in {record.wall_s:.2f} s"] if record.wall_s is not None else []) + (
        ["interrupted"] if record.interrupted else []
    )
