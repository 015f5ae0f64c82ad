"""One source of truth for what is drawn: the same saved outputs (answers in Markdown, tool calls
in every state, reasoning, an image, artifacts, a failed and an interrupted run, a thread's history
with code for a new cell, a comparison with several runs, an evaluation; tests/support/gallery.py)
drawn by Python's text renderer (`render.transcript.to_text` and its pieces, `comparison_to_text`,
`evaluation_text`) and by the labextension's TypeScript renderer in JupyterLab give the same visible
text, piece by piece.

Each side is read into the same pieces: ``(kind, words)``. Markdown is compared as it reads once
drawn (Python's own rendering of it, `lab.shown`: markdown-it-py and nh3 against markdown-it and
DOMPurify); what the text renderer brackets (``[tool ...]``, ``[error] ...``) is compared by its
words and fields. What each side adds on its own (the TypeScript's "arguments" and "result" labels,
its copy buttons; the text renderer's brackets) is left out.
"""

from __future__ import annotations

import json
import re

import pytest

from ipyagent.core import ComparisonRecord, Transcript
from ipyagent.notebook.render.evaluation import (
    _MARK as MARK,
    evaluation_text,
    first_line,
    headline,
    outcome_class,
    summary_cells,
)
from ipyagent.notebook.render.evaluation_stats import agreement_cells, stats_cells, verdicts
from ipyagent.notebook.render.html import with_titles, without_unknown_cost
from ipyagent.notebook.render.transcript import comparison_to_text, footer_figures, text_pieces, to_text

from ..support.gallery import outputs, write_gallery
from .lab import shown, words

pytestmark = pytest.mark.browser

#: What a tool's card adds to an image, audio or file it does not show (the text renderer does not say why).
WHY_NOT_SHOWN = r": (too large to show|not a type shown here)$"

#: Reads the pieces of one drawn transcript (the children of `root`), every <details> opened first.
PIECES_JS = """(root) => {
  const text = n => (n ? n.innerText : '').trim();
  const pieces = [];
  for (const node of root.children) {
    const has = c => node.classList.contains(c);
    if (has('ipyagent-title')) pieces.push(['title', text(node)]);
    else if (has('ipyagent-prompt')) {
      for (const part of node.children) {
        if (part.classList.contains('ipyagent-prompt-text')) pieces.push(['prompt', text(part)]);
        else if (part.tagName === 'P') pieces.push(['prompt', '[' + text(part) + ']']);
      }
    }
    else if (has('ipyagent-text')) pieces.push(['text', text(node)]);
    else if (has('ipyagent-reasoning'))
      pieces.push(['reasoning', text(node.querySelector('.ipyagent-reasoning-text, p'))]);
    else if (has('ipyagent-server-tool')) pieces.push(['server', {
      title: text(node.querySelector('.ipyagent-tool-name')),
      detail: text(node.querySelector('summary .ipyagent-meta')),
      output: [...node.querySelectorAll(':scope > .ipyagent-meta')].filter(m => text(m) === 'output')
        .map(m => m.nextElementSibling.textContent)[0] ?? null}]);
    else if (has('ipyagent-sources')) pieces.push(['sources', [...node.querySelectorAll('li')].map(li => ({
      label: text(li.firstElementChild), url: li.querySelector('a') ? li.querySelector('a').getAttribute('href') : '',
      location: li.childNodes[1] && li.childNodes[1].nodeType === 3 ? li.childNodes[1].textContent : ''}))]);
    else if (has('ipyagent-tool')) pieces.push(['tool', {
      name: text(node.querySelector('.ipyagent-tool-name')), meta: text(node.querySelector('summary .ipyagent-meta')),
      args: node.querySelector('.ipyagent-args').textContent,
      result: node.querySelector('.ipyagent-result') ? node.querySelector('.ipyagent-result').textContent : null,
      media: [...node.querySelectorAll('.ipyagent-media')].map(m => text(m.querySelector('.ipyagent-meta'))),
      failed: has('ipyagent-tool-error')}]);
    else if (has('ipyagent-image')) pieces.push(['image', node.getAttribute('alt')]);
    else if (has('ipyagent-artifact')) pieces.push(['artifact', text(node.querySelector('summary'))]);
    else if (has('ipyagent-error')) pieces.push(['error', text(node)]);
    else if (has('ipyagent-status')) pieces.push(['status', text(node)]);
    else if (has('ipyagent-footer')) pieces.push(['footer', text(node.querySelector('.ipyagent-footer-text'))]);
    else if (has('ipyagent-next-cell'))
      pieces.push(['next_cell', {language: node.dataset.language, source: node.querySelector('code').textContent}]);
    else if (node.tagName === 'P') pieces.push(['other', text(node)]);
    else pieces.push(['unknown', node.outerHTML.slice(0, 200)]);
  }
  return pieces;
}"""


def python_pieces(t: Transcript) -> list[tuple[str, str]]:
    """What Python's text renderer shows of `t` (`text_pieces` and the footer), each piece as its words."""
    drawn = []
    for kind, text in text_pieces(t):
        if kind in ("text", "reasoning"):
            drawn.append((kind, shown(text)))
        elif kind == "prompt":
            drawn.append((kind, text if text.startswith("[") else shown(text)))
        elif kind == "other" and text.startswith("[<image "):
            drawn.append(("image", "image from the model"))
        elif kind.startswith("tool"):
            drawn.append(("tool", words(text)))
        elif kind == "error":
            drawn.append((kind, words(text.removeprefix("[error] "))))
        elif kind == "interrupted":
            drawn.append(("status", words(text.strip("[]"))))
        else:
            drawn.append((kind, words(text)))
    return [*drawn, ("footer", " · ".join(footer_figures(t)))]


def typescript_pieces(pieces: list) -> list[tuple[str, str]]:
    """The TypeScript's drawing read into the text renderer's pieces (tool calls as its ``[tool ...]`` line)."""
    out = []
    for kind, value in pieces:
        if kind == "tool":
            call_id, _, status = value["meta"].partition(" · ")
            arguments = json.dumps(json.loads(value["args"]), ensure_ascii=False)
            result = f" -> {value['result']}" if value["result"] is not None else ""
            # An image, audio or file the tool returned: its summary (the card says why one is not shown).
            result += "".join(f" [{re.sub(WHY_NOT_SHOWN, '', m)}]" for m in value["media"])
            out.append(("tool", words(f"[tool {value['name']}({arguments}){result} · {status}]")))
        elif kind == "server":
            output = f"\n{value['output'].rstrip()}" if value["output"] else ""
            out.append((kind, words(f"[{value['title']}: {value['detail']}]{output}")))
        elif kind == "sources":  # the text renderer's lines; the quotes the list adds are left out
            lines = [
                f"[{n}] {s['label']}{s['location'].replace(' · ', ', ') if not s['url'] else ''}"
                + (f" <{s['url']}>" if s["url"] and s["url"] != s["label"] else "")
                for n, s in enumerate(value, 1)
            ]
            out.append((kind, words("\n".join(["sources:", *lines]))))
        elif kind == "error":
            out.append((kind, words(value.removeprefix("⚠ "))))
        elif kind == "status":
            out.append((kind, words(value.removeprefix("■ "))))
        elif kind == "artifact":
            out.append((kind, words(f"[artifact {value}]")))
        elif kind == "next_cell":
            lines = value["source"].count("\n") + 1
            out.append((kind, f"[code for a new cell below: {lines} lines of {value['language']}]"))
        elif kind == "other":
            out.append((kind, words(f"[{value}]")))
        elif kind == "title":
            out.append((kind, f"── {value}"))
        elif kind == "footer":
            out.append((kind, value))
        else:
            out.append((kind, words(value)))
    return out


def _expected_python(t: Transcript) -> list[tuple[str, str]]:
    """`python_pieces`, the code offered as a new cell moved after the footer: the text renderer ends
    with the footer line, the drawn transcript with the code block (as the HTML fallback does)."""
    pieces = [(k, f"── {v}" if k == "title" else v) for k, v in python_pieces(t)]
    return [p for p in pieces if p[0] != "next_cell"] + [p for p in pieces if p[0] == "next_cell"]


def _drawn(renderer) -> list:
    renderer.evaluate("n => n.querySelectorAll('details').forEach(d => d.open = true)")
    return renderer.evaluate(PIECES_JS)


def test_python_and_typescript_renderers_draw_the_same_visible_text(lab):
    names = write_gallery(lab.root / "parity.ipynb")
    records = {name: data for name, (data, _) in outputs().items()}
    lab.open("parity.ipynb", wait_kernel=False)
    renderers = lab.page.locator(".jp-ipyagent-renderer")
    renderers.nth(len(names) - 1).wait_for(state="attached", timeout=60000)
    checked = 0
    for index, name in enumerate(names):
        data = records[name]
        cell = lab.cell(index)
        cell.scroll_into_view_if_needed()
        renderer = cell.locator(".jp-ipyagent-renderer").first
        if "application/vnd.ipyagent.transcript+json" in data:
            t = Transcript.from_json(data["application/vnd.ipyagent.transcript+json"])
            assert typescript_pieces(_drawn(renderer)) == _expected_python(t), name
            assert to_text(t).endswith("\n[" + " · ".join(footer_figures(t)) + "]")
        elif "application/vnd.ipyagent.comparison+json" in data:
            _check_comparison(
                renderer, ComparisonRecord.model_validate(data["application/vnd.ipyagent.comparison+json"])
            )
        else:
            _check_evaluation(renderer, data["application/vnd.ipyagent.evaluation+json"])
        checked += 1
    assert checked == len(names) == 9


def _check_comparison(renderer, record: ComparisonRecord) -> None:
    text = comparison_to_text(record)
    table = [
        [c.inner_text() for c in row.locator("td").all()]
        for row in renderer.locator(".ipyagent-compare-table tbody tr").all()
    ]
    columns, rows = without_unknown_cost(  # an alias first; a cost column no run knows left out
        record.table.columns, with_titles(record.table.rows, record.table.row_runs, record.titles))
    assert [c.inner_text() for c in renderer.locator(".ipyagent-compare-table th").all()] == columns
    assert table == rows
    rows = [record.table.columns, *record.table.rows]  # the text renderer's table: the same cells, aligned
    assert [line.split() for line in text.splitlines()[: len(rows)]] == [" ".join(row).split() for row in rows]
    for entry in record.entries:
        pane = renderer.locator(".ipyagent-pane").nth(entry.index)
        assert entry.transcript.provider in pane.locator(".ipyagent-pane-title").inner_text()
        body = pane.locator(f".ipyagent-run[data-run='{entry.run}']")
        body.evaluate("n => { n.hidden = false; }")  # every run, as the text renderer lists them all
        assert typescript_pieces(_drawn(body)) == _expected_python(entry.transcript), (entry.index, entry.run)
        assert f"== {entry.transcript.provider} (run {entry.run + 1}) ==" in text
    assert renderer.locator(".ipyagent-compare-footer").inner_text() == "compared in 2.50 s"


def _cells(table) -> list[list[str]]:
    return [[c.inner_text() for c in row.locator("td").all()] for row in table.locator("tbody tr").all()]


def _check_evaluation(renderer, doc: dict) -> None:
    text = evaluation_text(doc).splitlines()
    assert renderer.locator(".ipyagent-eval-title").inner_text() == headline(doc) == text[0]
    cells = _cells(renderer.locator(".ipyagent-eval-summary").first)
    assert cells == summary_cells(doc["summary"], doc)
    assert [line.split() for line in text[2 : 2 + len(cells)]] == [" ".join(row).split() for row in cells]
    # behind "details": every figure, the statistics (pass rate and score intervals, the paired test)
    renderer.evaluate("n => n.querySelectorAll('details.ipyagent-eval-details').forEach(d => d.open = true)")
    assert _cells(renderer.locator(".ipyagent-eval-full")) == summary_cells(doc["summary"], doc, full=True)
    assert _cells(renderer.locator(".ipyagent-eval-stats")) == stats_cells(doc) != []
    assert [v.inner_text() for v in renderer.locator(".ipyagent-eval-verdict").all()] == verdicts(doc)
    agreement = renderer.locator(".ipyagent-eval-agreement")
    assert (_cells(agreement) if agreement.count() else []) == agreement_cells(doc)
    by_cell = {(r["row"], r["provider"]): r for r in doc["results"]}
    matrix = renderer.locator(".ipyagent-eval-matrix table").first.locator(":scope > tbody > tr")
    for i, row in enumerate(matrix.all()):
        summaries = [s.inner_text().strip() for s in row.locator("summary").all()]
        expected = [
            f"{MARK[outcome_class(by_cell[(i, p)])]} {first_line(by_cell[(i, p)])}".strip() for p in doc["providers"]
        ]
        assert summaries == expected, i
