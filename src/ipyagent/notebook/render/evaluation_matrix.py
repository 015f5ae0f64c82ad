"""An evaluation's matrix as HTML: rows × columns, each cell coloured by its outcome (passed, an
assertion failed, the run failed, skipped) with the answer's first line; clicking it opens the
cell (prompt, full answer, each assertion and why, figures). It is cut into pages of `PAGE`
rows, each a collapsible section, so a long matrix stays quick to open. Reads the JSON of
`Evaluation.to_json()`; unsanitized (`evaluation.evaluation_html` sanitizes the whole output).
Re-exported by `evaluation`."""

from __future__ import annotations

import json
import re
from typing import Any

from .evaluation_stats import column_label, grade_detail_html
from .evaluation_stats import grade_mark_html, id_html, usd
from .evaluation_saved import PREVIEW
from .html import escape
from .policy import EVALUATION_FIRST_LINE, EVALUATION_PAGE_ROWS

#: Rows of the matrix per page (a collapsible section).
PAGE = EVALUATION_PAGE_ROWS
#: Characters of an answer's first line shown in a matrix cell.
FIRST_LINE = EVALUATION_FIRST_LINE


def columns_of(doc: dict[str, Any]) -> list[str]:
    """The matrix's columns (a document saved before variants: its providers)."""
    return doc.get("columns") or doc["providers"]


def column_of(result: dict[str, Any]) -> str:
    return result.get("column") or result["provider"]


def outcome_class(result: dict[str, Any]) -> str:
    """``pass``, ``fail`` (an assertion failed), ``error`` (the run failed), ``skipped``,
    ``template`` (its row could not be rendered) or ``none`` (no assertions)."""
    status = result.get("status")
    if status == "skipped":
        return "skipped"
    if status == "template_error":
        return "template"
    if status != "ok":
        return "error"
    if not result.get("outcomes"):
        return "none"
    return "pass" if result.get("passed") else "fail"


_MARK = {"pass": "✓", "fail": "✗", "error": "!", "skipped": "–", "none": "·", "flaky": "≈", "template": "?"}


def first_line(result: dict[str, Any]) -> str:
    text = (result.get("text") or "") if result.get("status") == "ok" else (result.get("error") or "")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE else line[: FIRST_LINE - 1] + "…"


#: A row's field an assertion reads (``{{ row.capital }}``, ``{{ row["capital"] }}``): an expected value.
_ROW_FIELD = re.compile(r"""\brow(?:\.(\w+)|\[\s*['"]([^'"]+)['"]\s*\])""")


def expected_fields(doc: dict[str, Any]) -> set[str]:
    """The row's fields the assertions read: the expected values, shown apart from the inputs."""
    return {a or b for spec in doc.get("assertions") or () for a, b in _ROW_FIELD.findall(str(spec))}


def split_fields(fields: dict[str, Any], expected: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the inputs, the expected values) of a row's `fields`, each in the row's order."""
    return ({k: v for k, v in fields.items() if k not in expected}, {k: v for k, v in fields.items() if k in expected})


def _fields_html(fields: dict[str, Any], expected: set[str]) -> str:
    """A row's inputs cell, then its expected values' cell when the assertions read some (escaped)."""
    inputs, wanted = split_fields(fields, expected)
    return f"<td>{escape(_row_label(inputs))}</td>" + (f"<td>{escape(_row_label(wanted))}</td>" if expected else "")


def _row_label(fields: dict[str, Any]) -> str:
    if set(fields) == {"value"}:
        text = str(fields["value"])
    else:
        text = ", ".join(f"{k}={v}" for k, v in fields.items())
    return text if len(text) <= 60 else text[:59] + "…"


def cell_figures(result: dict[str, Any]) -> str:
    parts = []
    if result.get("total_s") is not None:
        parts.append(f"{result['total_s']:.2f} s")
    if result.get("ttft_s") is not None:
        parts.append(f"first token {result['ttft_s']:.2f} s")
    if result.get("input_tokens") or result.get("output_tokens"):
        parts.append(f"{result.get('input_tokens', 0)} in / {result.get('output_tokens', 0)} out tokens")
    if result.get("cost") is not None:
        parts.append(usd(result["cost"]))
    if result.get("judge_cost") is not None:
        parts.append(f"judge {usd(result['judge_cost'])}")
    if result.get("cached"):
        parts.append("cached")
    if result.get("run_id"):
        parts.append(f"run {result['run_id']}")
    return " · ".join(parts)


def _run_detail(result: dict[str, Any]) -> list[str]:
    """One run's detail: prompt, answer, structured output, tool calls, error, each check and why, figures."""
    detail = [f"<div><b>prompt</b><pre>{escape(result.get('prompt') or '')}</pre></div>"]
    if result.get("text"):
        detail.append(f"<div><b>answer</b><pre>{escape(result['text'])}</pre></div>")
        if result.get("text_chars"):
            detail.append(f'<div class="ipyagent-meta">{escape(preview_line(result))}</div>')
    if result.get("output") is not None:
        detail.append(
            "<div><b>structured "
            f"output</b><pre>{escape(json.dumps(result['output'], ensure_ascii=False, indent=1))}</pre></div>"
        )
    for call in result.get("tool_calls") or []:
        detail.append(
            f'<div class="ipyagent-meta">tool {escape(str(call.get("name")))}({escape(str(call.get("input")))})'
            f" → {escape(str(call.get('output')))}</div>"
        )
    if result.get("status") != "ok":
        detail.append(f"<div><b>{escape(str(result.get('error_type')))}</b>: {escape(result.get('error') or '')}</div>")
    items = "".join(
        f"<li>{'✓' if o['passed'] else '✗'} {escape(o['name'])}"
        + (f" ({o['score']:g})" if o.get("score") is not None else "")
        + (f" — {escape(o['reason'])}" if o.get("reason") else "")
        + "</li>"
        for o in result.get("outcomes") or []
    )
    if items:
        detail.append(f"<ul>{items}</ul>")
    detail.append(grade_detail_html(result))
    figures = cell_figures(result)
    if figures:
        detail.append(f'<div class="ipyagent-meta">{escape(figures)}</div>')
    return detail


def repeats_class(runs: list[dict[str, Any]]) -> str:
    """A cell of several repeats: ``pass`` (all passed), ``fail`` / ``error`` (none did),
    ``flaky`` (they disagree), or the one kind they all share."""
    kinds = {outcome_class(r) for r in runs}
    if len(kinds) == 1:
        return kinds.pop()
    verdicts = {bool(r.get("passed")) for r in runs if r.get("status") in ("ok", "failed")}
    return "flaky" if len(verdicts) > 1 else "fail" if verdicts == {False} else "skipped"


def _cell_html(runs: list[dict[str, Any]] | None, repeat: int = 1) -> str:
    """A matrix cell: its run (its `repeat` runs: ``k/N passed`` and each repeat's detail)."""
    if not runs:
        return '<td><div class="ipyagent-eval-cell ipyagent-eval-skipped">not run</div></td>'
    if (repeat <= 1 and len(runs) == 1) or all(r.get("status") == "template_error" for r in runs):
        kind = outcome_class(runs[0])
        summary = f"{_MARK[kind]} {escape(first_line(runs[0]))}{grade_mark_html(runs[0])}"
        body = "".join(_run_detail(runs[0]))
    else:
        kind = repeats_class(runs)
        passed = sum(bool(r.get("passed")) for r in runs)
        marks = "".join(grade_mark_html(r) for r in runs)
        summary = f"{_MARK[kind]} {passed}/{repeat} passed · {escape(first_line(runs[0]))}{marks}"
        body = "".join(f'<div class="ipyagent-eval-title">repeat {r.get("repeat", 0) + 1}: '
                       f"{_MARK[outcome_class(r)]}{grade_mark_html(r)}</div>" + "".join(_run_detail(r)) for r in runs)
    return (
        f'<td><div class="ipyagent-eval-cell ipyagent-eval-{kind}"><details><summary>{summary}</summary>'
        f"{body}</details></div></td>"
    )


def pass_rates(doc: dict[str, Any]) -> dict[str, str]:
    """Each column's pass rate as its matrix header shows it (``80%``; none before a run)."""
    return {s.get("column") or s.get("provider") or "": f"{s['pass_rate']:.0%}"
            for s in doc.get("summary") or () if s.get("pass_rate") is not None}


def _label_html(doc: dict[str, Any], column: str, rate: str = "") -> str:
    """A column's header: its alias (its pass rate beside it), the full id under it in small type (escaped)."""
    name, full = column_label(doc, column)
    head = id_html(name) + (f' <span class="ipyagent-eval-rate">{escape(rate)}</span>' if rate else "")
    return head + (f'<br><span class="ipyagent-meta">{id_html(full)}</span>' if full else "")


def cells_of(doc: dict[str, Any]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """(row, column) -> its runs, by repeat."""
    cells: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in doc["results"]:
        cells.setdefault((r["row"], column_of(r)), []).append(r)
    for runs in cells.values():
        runs.sort(key=lambda r: r.get("repeat", 0))
    return cells


def matrix_html(doc: dict[str, Any]) -> str:
    """The matrix of an evaluation's JSON, in pages of `PAGE` rows (unsanitized; see `evaluation_html`)."""
    providers = columns_of(doc)
    by_cell, repeat = cells_of(doc), doc.get("repeat") or 1
    rows = sorted({r["row"] for r in doc["results"]})
    fields = {r["row"]: r.get("fields") or {} for r in doc["results"]}
    expected, rates = expected_fields(doc), pass_rates(doc)
    head = ("<tr><th>#</th><th>input</th>" + ("<th>expected</th>" if expected else "")
            + "".join(f"<th>{_label_html(doc, p, rates.get(p, ''))}</th>" for p in providers) + "</tr>")
    pages = []
    for start in range(0, len(rows), PAGE):
        chunk = rows[start : start + PAGE]
        body = "".join(
            f"<tr><td>{n}</td>{_fields_html(fields[n], expected)}"
            + "".join(_cell_html(by_cell.get((n, p)), repeat) for p in providers)
            + "</tr>"
            for n in chunk
        )
        table = f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"
        if len(rows) <= PAGE:
            pages.append(table)
        else:
            label = f"rows {chunk[0]}–{chunk[-1]} (page {start // PAGE + 1} of {-(-len(rows) // PAGE)})"
            opened = " open" if start == 0 else ""
            summary = f"<summary>{escape(label)}</summary>"
            pages.append(f'<details class="ipyagent-eval-page"{opened}>{summary}{table}</details>')
    return "".join(pages)


def preview_line(result: dict[str, Any]) -> str:
    """Under a cut answer: ``the first 300 of 1,234 characters``."""
    return f"the first {PREVIEW} of {result['text_chars']:,} characters"
