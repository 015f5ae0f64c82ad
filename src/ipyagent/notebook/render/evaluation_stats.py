"""An evaluation's statistics under its matrix, and the marks of a person's grades, in HTML,
Markdown and text (read from `Evaluation.to_json()`, like the rest of `render.evaluation`).

Per column: runs, pass rate with its 95% interval, mean score with its interval, median
seconds and cost per run, and against the baseline the paired difference in points with its
interval, McNemar's p and the verdict; then each verdict in words, the judges' agreement with
the grades, and what changed since the previous run of the cell. A graded cell carries a mark
apart from its automatic result: ``human ✓`` or ``human ✗``.
"""

from __future__ import annotations

import re
from typing import Any

from .html import escape
from .transcript import _md_escape

STATS_COLUMNS = ("column", "runs", "pass rate (95% CI)", "mean score (95% CI)", "median s", "median cost",
                 "vs baseline, points (95% CI)", "McNemar p", "verdict")
AGREEMENT_COLUMNS = ("judge", "runs graded", "agreement", "Cohen's κ")

_ID_BREAKS = re.compile(r"[^:/]*[:/]?")

STYLE = """<style>
.ipyagent-evaluation .ipyagent-eval-human{font-size:var(--jp-ui-font-size0,11px);padding:0 3px;margin-left:4px;
border-radius:3px;border:1px solid var(--jp-border-color1,#999)}
.ipyagent-evaluation .ipyagent-eval-human-pass{color:var(--jp-success-color1,#2a7)}
.ipyagent-evaluation .ipyagent-eval-human-fail{color:var(--jp-error-color1,#c33)}
.ipyagent-evaluation .ipyagent-eval-verdict{margin:2px 0}
.ipyagent-evaluation .ipyagent-id{white-space:nowrap}
.ipyagent-evaluation th{overflow-wrap:normal;word-break:normal;hyphens:none}
.ipyagent-evaluation .ipyagent-eval-summary th{white-space:nowrap}
.ipyagent-evaluation .ipyagent-eval-scroll,.ipyagent-evaluation .ipyagent-eval-matrix{overflow-x:auto;max-width:100%}
.ipyagent-evaluation details.ipyagent-eval-details>summary{cursor:pointer;color:var(--jp-ui-font-color2,#777)}
</style>"""


def column_label(doc: dict[str, Any], column: str) -> tuple[str, str]:
    """(the name a person gave `column`: its provider's alias, with ``/VARIANT``; the full column
    name, or "" when that is the name): ``("small", "openai:gpt-6-luna")``, ``("openai:m", "")``.
    A document saved before aliases names its columns by id."""
    aliases = doc.get("aliases") or {}
    for provider in doc.get("providers") or ():
        if provider in aliases and (column == provider or column.startswith(provider + "/")):
            return aliases[provider] + column[len(provider):], column
    return column, ""


def column_title(doc: dict[str, Any], column: str) -> str:
    """`column_label` as one text: ``small (openai:gpt-6-luna)``, or the column's name."""
    name, full = column_label(doc, column)
    return f"{name} ({full})" if full else name


def id_parts(text: str) -> list[str]:
    """`text` (an id or a column) cut after each ``:`` and ``/``: where it may break over two lines,
    never inside the model's name (``openai:gpt-6-luna`` would break at its hyphens)."""
    return [part for part in _ID_BREAKS.findall(text) if part]


def id_html(text: str) -> str:
    """An id as HTML breaking only between its `id_parts` (a ``<wbr>``), escaped."""
    return "<wbr>".join(f'<span class="ipyagent-id">{escape(part)}</span>' for part in id_parts(text))


def title_html(doc: dict[str, Any], column: str) -> str:
    """`column_title` as HTML, its text the same: the alias, then ``(the full id)`` dim; the id
    breaking only after its ``provider:`` (`id_html`)."""
    name, full = column_label(doc, column)
    if not full:
        return id_html(name)
    return f'{escape(name)} <span class="ipyagent-meta">({id_html(full)})</span>'


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _interval(value: float | None, low: float | None, high: float | None, fmt: Any) -> str:
    if value is None:
        return "—"
    return fmt(value) + (f" ({fmt(low)}–{fmt(high)})" if low is not None and high is not None else "")


def _points(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.0f}"


def p_value(p: float | None) -> str:
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def usd(value: float | None) -> str:
    """``$0.0012``: a cost in USD for the matrix and its statistics ("—": unknown)."""
    if value is None:
        return "—"
    return f"${value:.4f}" if value >= 0.01 else f"${value:.6f}".rstrip("0").rstrip(".") if value else "$0"


def _md(text: str) -> str:
    return _md_escape(text).replace("|", "\\|")


def _money(value: float | None) -> str:
    return usd(value)


def _versus(s: dict[str, Any]) -> str:
    if s.get("difference_low") is None:
        return _points(s.get("difference"))
    return f"{_points(s.get('difference'))} ({_points(s['difference_low'])} to {_points(s.get('difference_high'))})"


def stats_cells(doc: dict[str, Any]) -> list[list[str]]:
    """The statistics table's cells, one row per column (`STATS_COLUMNS`)."""
    rows = []
    for s in doc.get("summary") or []:
        if "pass_low" not in s:  # a document saved before the statistics
            continue
        verdict = s.get("verdict") or "—"
        rows.append([
            column_title(doc, s.get("column") or s.get("provider") or ""), str(s.get("runs", "")),
            _interval(s.get("pass_rate"), s.get("pass_low"), s.get("pass_high"), _percent),
            _interval(s.get("score"), s.get("score_low"), s.get("score_high"), lambda v: f"{v:.2f}"),
            "—" if s.get("total_p50_s") is None else f"{s['total_p50_s']:.2f}", _money(s.get("cost_p50")),
            "" if verdict == "baseline" else _versus(s),
            "" if verdict == "baseline" else p_value(s.get("p_value")), verdict])
    return rows


def agreement_cells(doc: dict[str, Any]) -> list[list[str]]:
    """Per judge check: its agreement with the grades (`AGREEMENT_COLUMNS`)."""
    return [[a["check"], str(a["n"]), _percent(a["percent"] / 100 if a["percent"] is not None else None),
             "—" if a["kappa"] is None else f"{a['kappa']:.2f}"] for a in doc.get("agreement") or []]


def verdicts(doc: dict[str, Any]) -> list[str]:
    """Each comparison's verdict in words, then what changed since the cell's last run."""
    lines = [f"{column_title(doc, c['column'])} vs {column_title(doc, c['baseline'])}: {c['sentence']}"
             for c in doc.get("comparisons") or []]
    if doc.get("changes"):
        lines.append(doc["changes"]["sentence"])
    return lines


def _table(columns: tuple[str, ...], rows: list[list[str]], css: str) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="{css}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def stats_table_html(doc: dict[str, Any]) -> str:
    """The statistics table, shown under "details" (unsanitized, escaped: `evaluation_html` sanitizes
    the whole); "" for a document saved before the statistics."""
    rows = stats_cells(doc)
    return _table(STATS_COLUMNS, rows, "ipyagent-eval-summary ipyagent-eval-stats") if rows else ""


def judgement_html(doc: dict[str, Any]) -> str:
    """The verdicts in words and the judges' agreement with the grades (escaped)."""
    if not stats_cells(doc):
        return ""
    parts = [f'<div class="ipyagent-eval-verdict">{escape(line)}</div>' for line in verdicts(doc)]
    agreement = agreement_cells(doc)
    if agreement:
        parts.append(_table(AGREEMENT_COLUMNS, agreement, "ipyagent-eval-summary ipyagent-eval-agreement"))
    return "".join(parts)


def _md_row(cells: list[str] | tuple[str, ...]) -> str:
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def statistics_markdown(doc: dict[str, Any]) -> str:
    rows = stats_cells(doc)
    if not rows:
        return ""
    lines = ["", _md_row(STATS_COLUMNS), "|" + "---|" * len(STATS_COLUMNS), *map(_md_row, rows), ""]
    lines += [f"- {line}" for line in verdicts(doc)]
    agreement = agreement_cells(doc)
    if agreement:
        lines += ["", _md_row(AGREEMENT_COLUMNS), "|" + "---|" * len(AGREEMENT_COLUMNS), *map(_md_row, agreement)]
    return "\n".join(lines)


def _aligned(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def statistics_text(doc: dict[str, Any]) -> str:
    rows = stats_cells(doc)
    if not rows:
        return ""
    out = [_aligned([list(STATS_COLUMNS), *rows]), *verdicts(doc)]
    agreement = agreement_cells(doc)
    if agreement:
        out.append(_aligned([list(AGREEMENT_COLUMNS), *agreement]))
    return "\n".join(out)


def grade_mark_html(result: dict[str, Any]) -> str:
    """A graded cell's mark, apart from its automatic one: ``human ✓`` / ``human ✗`` ("" ungraded)."""
    human = result.get("human")
    if human is None:
        return ""
    kind = "pass" if human else "fail"
    return f' <span class="ipyagent-eval-human ipyagent-eval-human-{kind}">human {"✓" if human else "✗"}</span>'


def grade_detail_html(result: dict[str, Any]) -> str:
    """In a cell's detail: the person's grade and note."""
    human = result.get("human")
    if human is None:
        return ""
    note = result.get("human_note") or ""
    return f"<div><b>human grade</b>: {'pass' if human else 'fail'}{' — ' + escape(note) if note else ''}</div>"
