"""What ``ipyagent eval`` reports: the terminal summary (the terminal evaluation view's pieces, rich), and
the ``--json``, ``--junit`` and ``--markdown`` files. Everything is read from the saved JSON of each
evaluation (`Evaluation.to_json()`) and comparison; no figure is computed again here.

JUnit (the Jenkins / Ant schema CI systems read): one ``<testsuite>`` per evaluation, one ``<testcase>`` per
row x column (classname the evaluation, name ``row N (KEY) / COLUMN``); a case whose runs all passed is a
pass, one whose failing runs all failed to run is an ``<error>``, else a ``<failure>`` with each run's reason;
all runs skipped is ``<skipped>``. A comparison is a suite of one case per provider and run (an ``<error>``
when the run failed). A notebook that did not run to its end adds a suite named after it, whose one case
(``the notebook runs to its end``) is an ``<error>`` with ``cell N: ...``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO
from xml.etree import ElementTree as ET

from ...core import redact, redact_data
from ..render.evaluation import (cells_of, columns_of, headline, outcome_class, saved_note, summary_cells,
                                summary_columns)
from ..render.evaluation_stats import _md, column_label, statistics_markdown
from ..render.text.evaluation import failures, key_fields, summary_table, verdicts
from ..render.text.records import clean, print_rendered
from ..render.text.terminal import colour_enabled
from .collect import Found
from .gates import GateResult

#: Columns of the summary written to a log (not a terminal) without ``$COLUMNS``.
LOG_WIDTH = 160
#: Failures listed per evaluation in the Markdown summary, at most (the JUnit and JSON files have all).
MARKDOWN_FAILURES = 20


def _row_name(doc: dict[str, Any], row: int, fields: dict[str, Any], column: str) -> str:
    keys = key_fields(doc)
    key = str(fields.get(keys[0], "")) if keys else ""
    key = key if len(key) <= 40 else key[:39] + "…"
    return f"row {row}" + (f" ({key})" if key else "") + f" / {column_label(doc, column)[0]}"


def _reasons(doc: dict[str, Any]) -> dict[tuple[int, str], list[str]]:
    """(row, column) -> each failing run's reason (``repeat 2: …`` with repeats)."""
    out: dict[tuple[int, str], list[str]] = {}
    for row, column, repeat, why in failures(doc):
        out.setdefault((row, column), []).append(f"repeat {repeat}: {why}" if repeat else why)
    return out


def evaluation_cases(found: Found) -> ET.Element:
    """The `<testsuite>` of one evaluation (see the module doc)."""
    doc, reasons = found.doc, _reasons(found.doc)
    suite = ET.Element("testsuite", name=found.name)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    order = {column: n for n, column in enumerate(columns_of(doc))}
    for (row, column), runs in sorted(cells_of(doc).items(), key=lambda cell: (cell[0][0], order.get(cell[0][1], -1))):
        case = ET.SubElement(suite, "testcase", classname=found.name,
                             name=_row_name(doc, row, runs[0].get("fields") or {}, column),
                             time=f"{sum(r.get('total_s') or 0.0 for r in runs):.3f}")
        counts["tests"] += 1
        kinds = [outcome_class(r) for r in runs]
        why = reasons.get((row, column), [])
        if all(k == "skipped" for k in kinds):
            ET.SubElement(case, "skipped", message="; ".join(why) or "skipped")
            counts["skipped"] += 1
        elif why:
            failing = [k for k in kinds if k not in ("pass", "none")]
            tag = "error" if all(k in ("error", "template", "skipped") for k in failing) else "failure"
            passed = sum(k in ("pass", "none") for k in kinds)
            message = why[0] if len(runs) == 1 else f"{passed}/{len(runs)} passed: {why[0]}"
            ET.SubElement(case, tag, message=message).text = "\n".join(why)
            counts["failures" if tag == "failure" else "errors"] += 1
    suite.attrib.update({k: str(v) for k, v in counts.items()})
    if saved_note(doc):  # a long matrix's saved output keeps the rows that fit, failing ones first
        ET.SubElement(suite, "system-out").text = saved_note(doc)
    return suite


def comparison_cases(found: Found) -> ET.Element:
    """The `<testsuite>` of one comparison: a case per provider and run, an ``<error>`` when it failed."""
    suite = ET.Element("testsuite", name=found.name)
    errors = 0
    for entry in found.doc.get("entries") or []:
        transcript = entry.get("transcript") or {}
        name = str(transcript.get("provider", "")) + (f" run {entry.get('run', 0) + 1}" if found.doc.get("runs", 1) > 1
                                                      else "")
        total = (transcript.get("timings") or {}).get("total_s") or 0.0
        case = ET.SubElement(suite, "testcase", classname=found.name, name=name, time=f"{total:.3f}")
        if transcript.get("status") == "failed":
            error = transcript.get("error") or {}
            ET.SubElement(case, "error", message=f"{error.get('type', 'failed')}: {error.get('message', '')}")
            errors += 1
    suite.attrib.update(tests=str(len(suite)), failures="0", errors=str(errors), skipped="0")
    return suite


def junit(found: list[Found], notebook: str, *, failure: str | None = None) -> str:
    """The JUnit XML document of every evaluation and comparison; when the notebook did not run to its end,
    a suite named `notebook` whose one case is an ``<error>`` with `failure` (``cell N: ...``, redacted)."""
    root = ET.Element("testsuites", name=f"ipyagent eval {notebook}")
    for f in found:
        root.append(evaluation_cases(f) if f.kind == "evaluation" else comparison_cases(f))
    if failure is not None:  # else a reporter shows green for a notebook that stopped half-way
        suite = ET.SubElement(root, "testsuite", name=notebook, tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname=notebook, name="the notebook runs to its end", time="0.000")
        ET.SubElement(case, "error", message=redact(failure))
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key, 0)) for s in root)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _gate_json(r: GateResult) -> dict[str, Any]:
    return {"gate": r.gate.text, "evaluation": r.evaluation, "column": r.column, "value": r.figure,
            "passed": r.passed, "line": r.line()}


def _comparison_runs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"provider": (e.get("transcript") or {}).get("provider"), "run": e.get("run", 0),
             "status": (e.get("transcript") or {}).get("status"), "error": (e.get("transcript") or {}).get("error")}
            for e in doc.get("entries") or []]


def report_json(found: list[Found], gates: list[GateResult], *, notebook: str, exit_code: int) -> str:
    """The JSON report: the notebook, the exit code, `passed` (exit code 0: false too when the notebook did
    not run to its end), each gate checked, each evaluation's summary, statistics, verdicts and failures,
    each comparison's figures table and runs (secrets redacted)."""
    evaluations = [{"name": f.name, "cell": f.cell, "id": f.doc.get("id"), "headline": headline(f.doc),
                    "summary": f.doc.get("summary"), "comparisons": f.doc.get("comparisons") or [],
                    "failures": [{"row": row, "column": column, "repeat": repeat, "reason": why}
                                 for row, column, repeat, why in failures(f.doc)],
                    "gates": [g.text for g in f.gates]}
                   for f in found if f.kind == "evaluation"]
    comparisons = [{"name": f.name, "cell": f.cell, "table": f.doc.get("table"), "runs": _comparison_runs(f.doc)}
                   for f in found if f.kind == "comparison"]
    doc = {"notebook": notebook, "exit_code": exit_code, "passed": exit_code == 0 and all(g.passed for g in gates),
           "gates": [_gate_json(g) for g in gates], "evaluations": evaluations, "comparisons": comparisons}
    return json.dumps(redact_data(doc), indent=1, ensure_ascii=False) + "\n"


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(_md(c) for c in columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(_md(c) for c in row) + " |" for row in rows)]


def report_markdown(found: list[Found], gates: list[GateResult], *, notebook: str, outcome: str) -> str:
    """A Markdown summary for a CI job's page: the outcome, each gate, then per evaluation its headline,
    summary table, statistics and verdicts, and its first failures; per comparison its figures table."""
    lines = [f"## ipyagent eval {_md(notebook)}", "", _md(redact(outcome)), ""]  # redacted before escaped
    lines += [f"- {'✅' if g.passed else '❌'} {_md(g.line())}" for g in gates]
    for f in found:
        lines += ["", f"### {_md(f.name)} (cell {f.cell})", ""]
        if f.kind == "comparison":
            table = f.doc.get("table") or {}
            lines += _md_table(table.get("columns") or [], table.get("rows") or []) if table.get("columns") else []
            continue
        summary = f.doc["summary"]
        lines += [_md(headline(f.doc)), "", *_md_table([t for _, t in summary_columns(summary)], summary_cells(
            summary, f.doc)), statistics_markdown(f.doc)]
        found_failures = failures(f.doc)
        if found_failures:
            lines += ["", f"{len(found_failures)} did not pass:", ""]
            lines += [f"- row {row} · {_md(column_label(f.doc, column)[0])}" + (f" repeat {repeat}" if repeat else "")
                      + f": {_md(why)}" for row, column, repeat, why in found_failures[:MARKDOWN_FAILURES]]
            if len(found_failures) > MARKDOWN_FAILURES:
                more = len(found_failures) - MARKDOWN_FAILURES
                lines.append(f"- … and {more} more (the JUnit report has them all)")
    return "\n".join(lines) + "\n"


def print_summary(found: list[Found], gates: list[GateResult], stream: TextIO) -> None:
    """The terminal summary on `stream`: per evaluation its headline, summary table (pass rate with its
    interval, cost, time) and verdicts against the baseline, as the terminal evaluation view draws them;
    per comparison its figures line; then each gate checked."""
    from rich.rule import Rule
    from rich.text import Text

    out: list[Any] = []
    for f in found:
        out.append(Rule(Text(clean(f"{f.name} (cell {f.cell})"), style="bold cyan"), align="left", style="cyan"))
        if f.kind == "comparison":
            out += [Text(clean(" · ".join(row)), no_wrap=True, overflow="ellipsis")
                    for row in (f.doc.get("table") or {}).get("rows") or []]
            continue
        out += [Text(clean(headline(f.doc)), style="bold"), summary_table(f.doc)]
        out += [Text(clean(line)) for line in verdicts(f.doc)]
    out += [Text.assemble(("✓ " if g.passed else "✗ ", "green" if g.passed else "bold red"), clean(g.line()))
            for g in gates]
    print_rendered(stream, out, colour=colour_enabled(stream), width=_width(stream))


def _width(stream: TextIO) -> int | None:
    """The terminal's width on a terminal; in a log (CI), ``$COLUMNS`` or `LOG_WIDTH`: a log is not
    80 columns wide, and at 80 the summary's long column names are cut to nothing."""
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 20 else LOG_WIDTH


def write(path: Path, text: str) -> None:
    """`text` into `path` (its folder made when missing).

    Raises:
        OSError: `path` cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")

