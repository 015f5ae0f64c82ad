"""An evaluation as static output: progress, the matrix and the summary, in HTML, Markdown and text.

Everything here reads the JSON of `Evaluation.to_json()` (what a saved notebook
keeps), so a notebook reopened without a kernel shows the same thing. The
matrix is rows × providers: each cell coloured by its outcome (passed, an
assertion failed, the run failed, skipped) with the answer's first line;
clicking it opens the cell (prompt, full answer, each assertion and why,
figures). It is cut into pages of `PAGE` rows, each a collapsible section, so
a long matrix stays quick to open. HTML is built from escaped text only and
then sanitized (`render.sanitize`), like every HTML output of ipyagent. The matrix is
`evaluation_matrix`, whose names this module re-exports.
"""

from __future__ import annotations

import re
from typing import Any

from ...core import current_forms, plural, redact_data
from .evaluation_stats import STYLE as STATS_STYLE
from .evaluation_stats import _interval, _md, _percent, column_title, title_html, usd
from .evaluation_stats import judgement_html, stats_table_html
from .evaluation_stats import column_label, grade_detail_html, grade_mark_html, id_html  # noqa: F401 - names it had
from .evaluation_stats import statistics_markdown, statistics_text
from .evaluation_saved import DEFAULT_OUTPUT_MAX, counts, fit, plain, preview
from .html import escape, sanitize
from .evaluation_matrix import (  # noqa: F401 - the names this module had
    _MARK,
    FIRST_LINE,
    PAGE,
    cell_figures,
    cells_of,
    column_of,
    columns_of,
    expected_fields,
    first_line,
    matrix_html,
    outcome_class,
    pass_rates,
    preview_line,
    repeats_class,
    split_fields,
)
from .policy import EVALUATION_SUMMARY_COLUMNS, EVALUATION_SUMMARY_DETAILS

#: The MIME type of a saved evaluation: `Evaluation.to_json()`, secrets redacted.
MIME_TYPE = "application/vnd.ipyagent.evaluation+json"

STYLE = """<style>
.ipyagent-evaluation{font-size:var(--jp-content-font-size1,14px);color:var(--jp-content-font-color1,inherit)}
div.ipyagent-evaluation table{border-collapse:collapse;margin:4px 0}
div.ipyagent-evaluation table tr th,div.ipyagent-evaluation table tr td{border:1px solid var(--jp-border-color2,#ddd);
padding:2px 6px;text-align:left !important;vertical-align:top}
div.ipyagent-evaluation .ipyagent-eval-summary table tr td{text-align:right !important}
div.ipyagent-evaluation .ipyagent-eval-summary table tr td:first-child{text-align:left !important}
.ipyagent-evaluation .ipyagent-eval-cell{padding:1px 4px;border-radius:3px;max-width:28em;overflow:hidden;
overflow-wrap:anywhere}
.ipyagent-evaluation .ipyagent-eval-cell>details>summary{list-style:none;display:block;cursor:pointer}
.ipyagent-evaluation .ipyagent-eval-cell>details>summary::-webkit-details-marker{display:none}
.ipyagent-evaluation .ipyagent-eval-rate{font-weight:normal;color:var(--jp-ui-font-color2,#777)}
.ipyagent-evaluation .ipyagent-eval-pass{background:rgba(40,160,70,.16)}
.ipyagent-evaluation .ipyagent-eval-fail{background:rgba(220,60,40,.18)}
.ipyagent-evaluation .ipyagent-eval-error{background:rgba(230,150,20,.22)}
.ipyagent-evaluation .ipyagent-eval-skipped{background:rgba(128,128,128,.15);color:var(--jp-ui-font-color2,#777)}
.ipyagent-evaluation .ipyagent-eval-none{background:rgba(80,120,220,.12)}
.ipyagent-evaluation .ipyagent-eval-flaky{background:repeating-linear-gradient(135deg,
rgba(40,160,70,.16) 0 6px,rgba(220,60,40,.18) 6px 12px)}
.ipyagent-evaluation .ipyagent-eval-template{background:rgba(160,80,200,.15)}
.ipyagent-evaluation pre{margin:2px 0;white-space:pre-wrap;word-break:break-word;max-height:24em;overflow:auto}
.ipyagent-evaluation .ipyagent-meta{color:var(--jp-ui-font-color2,#777);font-size:var(--jp-ui-font-size0,11px)}
.ipyagent-evaluation .ipyagent-eval-title{font-weight:bold;margin:6px 0 2px}
</style>"""

#: (key of a summary dict, column title) of the summary shown (policy.json, as the labextension's):
#: ``pass_interval`` is the pass rate with its 95% interval, ``tokens`` in / out.
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = EVALUATION_SUMMARY_COLUMNS
#: Every figure of a column, behind "details".
SUMMARY_DETAILS: tuple[tuple[str, str], ...] = EVALUATION_SUMMARY_DETAILS
PROGRESS_COLUMNS = ("provider:model", "done", "failed", "cost so far", "elapsed", "time left")


def _figure(key: str, row: dict[str, Any]) -> str:
    if key == "pass_interval":
        return _interval(row.get("pass_rate"), row.get("pass_low"), row.get("pass_high"), _percent)
    if key == "tokens":
        return f"{row.get('input_tokens', 0)} / {row.get('output_tokens', 0)}"
    value = row.get(key)
    if value is None:
        return "—"
    if key == "pass_rate":
        return f"{value:.0%}"
    if key.endswith("_s"):
        return f"{value:.2f}"
    if key in ("cost", "judge_cost"):
        return usd(value)
    return str(value)


def summary_columns(summary: list[dict[str, Any]], *, full: bool = False) -> tuple[tuple[str, str], ...]:
    """The summary's (key, title) columns: `SUMMARY_COLUMNS`, cost only when some column's is known;
    `full`: `SUMMARY_DETAILS`."""
    if full:
        return SUMMARY_DETAILS
    costs = any(row.get("cost") is not None for row in summary)
    return tuple(c for c in SUMMARY_COLUMNS if c[0] != "cost" or costs)


def summary_cells(summary: list[dict[str, Any]], doc: dict[str, Any] | None = None, *,
                  full: bool = False) -> list[list[str]]:
    """The summary table's cells, one row per column (header excluded; `summary_columns`; a document
    saved before columns names the provider), a column named as `column_title` when `doc` is given."""
    return [
        [column_title(doc or {}, row.get(key, row.get("provider"))) if key == "column" else _figure(key, row)
         for key, _ in summary_columns(summary, full=full)]
        for row in summary
    ]


def summary_html(doc: dict[str, Any], *, full: bool = False) -> str:
    """The summary table (`summary_cells`), each column named by `title_html` (escaped, unsanitized)."""
    summary = doc["summary"]
    columns = summary_columns(summary, full=full)
    head = "".join(f"<th>{escape(title)}</th>" for _, title in columns)
    body = "".join(
        "<tr><td>" + title_html(doc, row.get("column") or row.get("provider") or "") + "</td>"
        + "".join(f"<td>{escape(c)}</td>" for c in cells[1:]) + "</tr>"
        for row, cells in zip(summary, summary_cells(summary, doc, full=full))
    )
    css = "ipyagent-eval-summary ipyagent-eval-full" if full else "ipyagent-eval-summary"
    return f'<div class="{css}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def details_html(doc: dict[str, Any]) -> str:
    """What the summary leaves out, closed: every figure of each column, and the statistics."""
    inner = summary_html(doc, full=True) + stats_table_html(doc)
    return (f'<details class="ipyagent-eval-details"><summary>details</summary>'
            f'<div class="ipyagent-eval-scroll">{inner}</div></details>')


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def progress_cells(progress: list[dict[str, Any]]) -> list[list[str]]:
    """The progress table's cells, one row per provider."""
    return [
        [
            p["provider"],
            f"{p['done']}/{p['total']}",
            str(p["failed"]) + (f" ({p['skipped']} skipped)" if p["skipped"] else ""),
            usd(p["cost"]),
            _duration(p["elapsed_s"]),
            _duration(p["eta_s"]) if p["done"] < p["total"] else "done",
        ]
        for p in progress
    ]


def _table(columns: list[str] | tuple[str, ...], rows: list[list[str]], css: str) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="{css}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def progress_html(progress: list[dict[str, Any]], *, line: str = "", note: str = "") -> str:
    """The live progress: `line` over the table (the whole matrix: runs ended of all, rate, time
    left, money spent; `Progress`), the table (per provider: done/total, failed, cost so far,
    elapsed, time left), then `note`."""
    title = f'<div class="ipyagent-eval-title ipyagent-eval-progress">{escape(line)}</div>' if line else ""
    extra = f'<div class="ipyagent-meta">{escape(note)}</div>' if note else ""
    return (
        f'<div class="ipyagent-evaluation">{STYLE}'
        + sanitize(title + _table(PROGRESS_COLUMNS, progress_cells(progress), "ipyagent-eval-summary") + extra)
        + "</div>"
    )


def wall_time(seconds: float | None) -> str:
    """A wall time as read: ``0.043`` -> ``"43 ms"`` (a re-run served from the cache takes
    milliseconds, which ``"0.0 s"`` hid), ``12.34`` -> ``"12.3 s"``."""
    seconds = seconds or 0.0
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _shape(doc: dict[str, Any]) -> str:
    """``2 providers × 20 rows``, ``4 columns (2 providers × 2 variants) × 20 rows × 3 repeats``."""
    columns, providers = len(columns_of(doc)), len(doc["providers"])
    repeat = doc.get("repeat") or 1
    rows = doc["total"] // max(columns * repeat, 1)
    head = (f"{columns} columns ({plural(providers, 'provider')} × {columns // max(providers, 1)} variants)"
            if doc.get("variants") else plural(providers, "provider"))
    return f"{head} × {plural(rows, 'row')}" + (f" × {repeat} repeats" if repeat > 1 else "")


#: A text check's kind in words (checks.TextAssertion.KINDS), and what it adds after its value.
_CHECK_WORDS = {"contains": ("contains", ""), "icontains": ("contains", ", any case"), "regex": ("matches", ""),
                "equals": ("equals", "")}
_ROW_TEMPLATE = re.compile(r"""\{\{\s*row(?:\.(\w+)|\[\s*['"]([^'"]+)['"]\s*\])\s*\}\}""")


def check_title(spec: str) -> str:
    """A check as read in a title: ``icontains:{{ row.capital }}`` -> ``contains the row's capital, any
    case``, ``contains:Paris`` -> ``contains Paris``; any other check (json, python:f, judge:p) by its name."""
    kind, colon, value = spec.partition(":")
    if not colon or kind not in _CHECK_WORDS:
        return spec
    verb, after = _CHECK_WORDS[kind]
    return f"{verb} {_ROW_TEMPLATE.sub(_row_words, value)}{after}"


def _row_words(m: re.Match[str]) -> str:
    return f"the row's {m.group(1) or m.group(2)}"


def headline(doc: dict[str, Any]) -> str:
    """One line: columns × rows (× repeats), runs done (those served from the cache), passed,
    assertions, wall time, the budget (spent, reserved, runs skipped), flaky cells, and why it
    stopped early."""
    counted = doc.get("saved") or counts(doc)  # a saved document counts every run, shown or not
    rows, done, cached, passed = counted["rows"], counted["done"], counted["cached"], counted["passed"]
    text = (
        f"{_shape(doc)}: {done} of {doc['total']} runs" + (f" ({cached} from the cache)" if cached else "")
        + f", {passed} passed"
    )
    if doc.get("assertions"):
        text += f" ({'; '.join(check_title(str(a)) for a in doc['assertions'])})"
    text += f", {wall_time(doc.get('wall_s'))}"
    if doc.get("interrupted"):
        text += f"; interrupted: {rows and doc['total'] - counted['results']} runs not finished"
    if doc.get("budget") is not None:
        text += (f"; budget {usd(doc.get('budget'))}: spent {usd(doc.get('spent') or 0.0)}, "
                 f"reserved {usd(doc.get('reserved') or 0.0)}, {doc.get('skipped') or 0} runs skipped")
    if doc.get("flaky"):
        text += f"; {len(doc['flaky'])} flaky (repeats disagree)"
    return text


def reload_line(doc: dict[str, Any]) -> str:
    """The line under an evaluation naming its id, by which the run store gives it back after the
    kernel is gone: ``evaluation 3f2a9c1b7e0d · ipyagent.load_evaluation("3f2a9c1b7e0d") reads it back``
    (the labextension's `reloadLine` writes the same)."""
    return f'evaluation {doc["id"]} · ipyagent.load_evaluation("{doc["id"]}") reads it back'


def evaluation_html(doc: dict[str, Any]) -> str:
    """The saved evaluation as sanitized HTML: headline, summary per column, the statistics
    (`evaluation_stats`), the matrix, notes."""
    notes = "".join(f'<div class="ipyagent-meta">{escape(n)}</div>' for n in doc.get("notes") or [])
    body = (
        f'<div class="ipyagent-eval-title">{escape(headline(doc))}</div>'
        + summary_html(doc)
        + details_html(doc)
        + judgement_html(doc)
        + saved_note_html(doc)
        + f'<div class="ipyagent-eval-matrix">{matrix_html(doc)}</div>'
        + notes
        + f'<div class="ipyagent-meta">{escape(reload_line(doc))}</div>'
    )
    return f'<div class="ipyagent-evaluation">{STYLE}{STATS_STYLE}{sanitize(body)}</div>'


def evaluation_markdown(doc: dict[str, Any]) -> str:
    """Headline, the summary table, the statistics and the matrix (marks, first lines, human
    grades) as Markdown."""
    columns = [title for _, title in summary_columns(doc["summary"])]
    lines = [_md(headline(doc)), "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in summary_cells(doc["summary"], doc)]
    lines.append(statistics_markdown(doc))
    lines += ["", _md(saved_note(doc))] if saved_note(doc) else []
    by_cell, repeat = cells_of(doc), doc.get("repeat") or 1
    rows = sorted({r["row"] for r in doc["results"]})
    columns = columns_of(doc)
    lines += ["", "| # | " + " | ".join(_md(column_title(doc, p)) for p in columns) + " |",
              "|---|" + "---|" * len(columns)]
    for n in rows:
        cells = []
        for p in columns:
            runs = by_cell.get((n, p))
            human = "".join(f" (human {'✓' if r['human'] else '✗'})" for r in runs or () if r.get("human") is not None)
            if not runs:
                cells.append("")
            elif repeat > 1 and not all(r.get("status") == "template_error" for r in runs):
                passed = sum(bool(r.get("passed")) for r in runs)
                mark = _MARK[repeats_class(runs)]
                cells.append(f"{mark} {passed}/{repeat} passed · {_md(first_line(runs[0]))}{human}")
            else:
                cells.append(f"{_MARK[outcome_class(runs[0])]} {_md(first_line(runs[0]))}{human}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += [f"\n{_md(note)}" for note in doc.get("notes") or []]
    lines.append(f"\n{_md(reload_line(doc))}")
    return "\n".join(lines)


def evaluation_text(doc: dict[str, Any]) -> str:
    """Headline, the summary table as aligned plain text, the statistics and the notes (a pipe,
    logs)."""
    rows = [[title for _, title in summary_columns(doc["summary"])], *summary_cells(doc["summary"], doc)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    stats = statistics_text(doc)
    notes = "".join(f"\n{note}" for note in [saved_note(doc), *(doc.get("notes") or []), reload_line(doc)] if note)
    return f"{headline(doc)}\n{table}" + (f"\n\n{stats}" if stats else "") + notes


def saved_note(doc: dict[str, Any]) -> str:
    """The saved matrix's line saying how many rows it shows and where the rest are
    (`evaluation_saved.note`; "" when it shows them all, or for a document saved before it)."""
    return str((doc.get("saved") or {}).get("note") or "")


def saved_note_html(doc: dict[str, Any]) -> str:
    line = saved_note(doc)
    return f'<div class="ipyagent-meta ipyagent-eval-saved">{escape(line)}</div>' if line else ""


def render_data(doc: dict[str, Any]) -> dict[str, Any]:
    """The MIME bundle of an evaluation's document: the JSON itself, HTML, Markdown, plain text."""
    return {MIME_TYPE: doc, "text/html": evaluation_html(doc), "text/markdown": evaluation_markdown(doc),
            "text/plain": evaluation_text(doc)}


def bundle(ev: Any, gates: list[str] | None = None, *, limit: int = DEFAULT_OUTPUT_MAX,
           name: str = "ev") -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a finished evaluation's display (an `agent.Evaluation`): its JSON (secrets
    redacted) and fallbacks, within `limit` bytes all together (`evaluation_saved.fit`: the summary
    and statistics whole, the matrix's rows that fit, answers previewed; `name`: the variable the
    note tells to read the rest from); metadata ``{"ipyagent": {"evaluation": {"id", "gates"}}}``,
    `gates` the cell's ``--gate`` options (what ``ipyagent eval`` checks), left out when there are none."""
    whole = ev.json_head()  # the runs are asked for by the rows shown only: ~8 % at 2,000 × 3 (issue 33)
    forms = current_forms()  # the secrets in play, read once
    head = plain(redact_data({key: value for key, value in whole.items() if key != "results"}, forms))
    # of every run, what `counts` and `row_order` read
    marks = [{"row": r.row, "status": r.status, "cached": r.cached, "passed": r.passed} for r in ev.results]
    doc = {key: marks if key == "results" else head[key] for key in whole}
    made: dict[int, list[dict[str, Any]]] = {}

    def runs(rows: set[int]) -> list[dict[str, Any]]:
        """The runs of `rows` the saved matrix shows: redacted (the runs not shown never are), made
        `plain`, then previewed; each row's once, however many renders `fit` tries."""
        missing = rows - made.keys()
        for row in missing:
            made[row] = []
        for run in ev.json_results(missing) if missing else ():
            made[run["row"]].append(preview(plain(redact_data(run, forms))))
        return [run for row in sorted(rows) for run in made[row]]

    data = fit(doc, render_data, limit, name, runs=runs)
    return data, {"ipyagent": {"evaluation": {"id": doc["id"], **({"gates": list(gates)} if gates else {})}}}


def saved_output(ev: Any, *, limit: int = DEFAULT_OUTPUT_MAX, name: str = "ev") -> dict[str, Any]:
    """The nbformat output (``display_data``) of `ev`'s saved matrix (`bundle`)."""
    data, metadata = bundle(ev, limit=limit, name=name)
    return {"output_type": "display_data", "data": data, "metadata": metadata}
