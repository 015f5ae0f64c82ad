"""JupyterLab in headless Chromium: a ``%%compare --over`` matrix as a person sees it, live and
after the notebook is saved and reopened without a kernel."""

from __future__ import annotations

import pytest

from ..support.evaluation import answering
from .lab import write_notebook

pytestmark = pytest.mark.browser

ROWS = 60  # over 50: the matrix comes in two pages


def _answer(question: str) -> str:
    n = int(question.split()[-1].rstrip("?"))
    return f"It is {n * 2}.\nBecause {n} + {n} = {n * 2}." if n % 7 else f"I think it is {n}."


def _check_matrix(cell) -> None:
    # The progress view was replaced by the saved evaluation, drawn by the extension's renderer (not a fallback).
    cell.locator(".jp-ipyagent-renderer .ipyagent-eval-title").wait_for(state="attached", timeout=60000)
    matrix = cell.locator(".ipyagent-evaluation")
    assert matrix.count() == 1
    pages = matrix.locator("details.ipyagent-eval-page")
    assert pages.count() == 2
    assert pages.nth(0).get_attribute("open") is not None and pages.nth(1).get_attribute("open") is None
    pages.nth(1).locator("summary").first.click()  # a page's rows are drawn when it is opened
    # ... on its 'toggle' event, which the browser fires in a later task than the click.
    rows = pages.nth(1).locator("tbody tr")
    rows.last.wait_for(state="attached", timeout=10000)
    assert rows.count() == ROWS - 50
    passed, failed = matrix.locator(".ipyagent-eval-pass"), matrix.locator(".ipyagent-eval-fail")
    assert passed.count() == ROWS - len(range(0, ROWS, 7)) and failed.count() == len(range(0, ROWS, 7))
    # Coloured: a failed cell's background differs from a passed one's.
    colour = "(el) => getComputedStyle(el).backgroundColor"
    assert passed.first.evaluate(colour) != failed.first.evaluate(colour)
    # The first line shows; clicking opens the prompt, the whole answer and why the check failed.
    first_fail = failed.first
    assert first_fail.locator("summary").inner_text().strip() == "✗ I think it is 0."
    assert not first_fail.locator("pre").first.is_visible()
    first_fail.locator("summary").click()
    assert first_fail.locator("pre").first.inner_text() == "What is 0 + 0?"
    assert "the answer does not contain 'It is 0.'" in first_fail.inner_text()
    two_lines = passed.first
    assert two_lines.locator("summary").inner_text().strip() == "✓ It is 2."
    summary = matrix.locator(".ipyagent-eval-summary tbody tr").first.inner_text()
    assert summary.split("\t")[:3] == ["openai:gpt-4.1-mini", "85%", str(passed.count())]


def test_saved_matrix_is_readable_without_a_kernel(lab, model_server):
    write_notebook(lab.root / "evaluation.ipynb", "%load_ext ipyagent",
                    f"rows = [{{'n': n, 'want': f'It is {{n * 2}}.'}} for n in range({ROWS})]",
                    "%%compare openai:gpt-4.1-mini --over rows --assert 'contains:{{ row.want }}' --concurrency 8 -o ev\n"
                    "What is {{ row.n }} + {{ row.n }}?")
    model_server.responder = answering(_answer)
    try:
        lab.open("evaluation.ipynb")
        lab.command("notebook:run-all-cells")
        cell = lab.cell(2)
        _check_matrix(cell)
        # Every row asked once, and nothing else (the server is this test's own).
        asked = [str(r['body']['messages']) for r in model_server.requests]
        assert len(asked) == len(set(asked)) == ROWS
        lab.save_and_shutdown("evaluation.ipynb")
    finally:
        model_server.responder = None
    lab.page.reload()
    lab.open("evaluation.ipynb", wait_kernel=False)
    cell = lab.cell(2)
    _check_matrix(cell)
    lab.screenshot(cell, "reloaded-evaluation.png")
