"""JupyterLab in headless Chromium: a ``%%compare --over`` matrix as a person sees it, live and
after the notebook is saved and reopened without a kernel."""

from __future__ import annotations

import pytest

from ipyagent.drivers import current_model

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
    summary = matrix.locator(".ipyagent-eval-summary tbody tr").first.inner_text().split("\t")
    assert summary[0] == "openai:gpt-6-luna" and summary[2] == str(passed.count())
    assert summary[1].startswith("85% (")  # with its 95% interval


def test_saved_matrix_is_readable_without_a_kernel(lab, model_server):
    write_notebook(lab.root / "evaluation.ipynb", "%load_ext ipyagent",
                    f"rows = [{{'n': n, 'want': f'It is {{n * 2}}.'}} for n in range({ROWS})]",
                    "%%compare openai:gpt-6-luna --over rows --assert 'contains:{{ row.want }}' --concurrency 8 -o ev\n"
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


GRADED_ROWS = 6


#: The words of every drawn header, and every id's parts, that the browser broke over two lines: a
#: word is split at white space and after a ':' (where an id may break), each must be on one line.
BROKEN_WORDS_JS = r"""(root) => {
  const broken = [];
  const nodes = [...root.querySelectorAll('th'), ...root.querySelectorAll('.ipyagent-id')];
  for (const holder of nodes.filter(n => n.getClientRects().length)) {
    const walker = document.createTreeWalker(holder, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[^\s:]+:?/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        if (new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""
#: Elements of the output wider than their box: (class, scrollWidth, clientWidth).
OVERFLOW_JS = """(root) => [root.closest('.jp-OutputArea-output'), root,
  ...root.querySelectorAll(':scope > .ipyagent-eval-summary')]
  .filter(n => n && n.getClientRects().length && n.scrollWidth > n.clientWidth)
  .map(n => [n.className, n.scrollWidth, n.clientWidth])"""


def _fits(matrix) -> None:
    """The evaluation fits its cell: nothing wider than the output (the details scroll inside
    themselves), no header broken inside a word, no id inside its model's name."""
    assert matrix.evaluate(OVERFLOW_JS) == []
    assert matrix.evaluate(BROKEN_WORDS_JS) == []
    summary = matrix.locator(":scope > .ipyagent-eval-summary").first.locator("th").all_inner_texts()
    assert len(summary) <= 8 and summary[:2] == ["column", "pass rate (95% CI)"]


def _light_and_dark(lab, matrix, name: str = "evaluation") -> None:
    """The matrix drawn in JupyterLab Light, then Dark (its text and controls follow the theme), then
    Light again for the tests after this one."""
    def colours() -> list[str]:
        return matrix.evaluate("(root) => [root, root.querySelector('.ipyagent-eval-filter')]"
                               ".map(n => getComputedStyle(n).color + ' ' + getComputedStyle(n).backgroundColor)")
    light = colours()
    lab.screenshot(matrix, f"{name}-light.png")
    for theme, flag in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
        change = f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})"
        lab.page.evaluate(f"() => {{ {change}; }}")
        lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{flag}'", timeout=30000)
        lab.page.wait_for_timeout(500)
        if flag == "false":
            assert colours() != light
            lab.screenshot(matrix, f"{name}-dark.png")


def _by_model(body: dict) -> object:
    """The mini model answers every row right; the nano one says 'maybe' on odd rows."""
    from ..support.evaluation import last_user_text
    from ..support.stub_server import openai_text_reply

    n = int(last_user_text(body).split()[-1].rstrip("?"))
    right = body["model"] == "gpt-4.1-mini" or n % 2 == 0
    return openai_text_reply(f"It is {n * 2}." if right else f"It is maybe {n * 2 + 1}.")


def test_a_grade_clicked_in_the_matrix_survives_save_reopen_and_a_kernel_restart(lab, model_server):
    write_notebook(lab.root / "grading.ipynb", "%load_ext ipyagent",
                   f"rows = [{{'n': n, 'want': f'It is {{n * 2}}.'}} for n in range({GRADED_ROWS})]",
                   "%%compare openai:gpt-4.1-mini openai:gpt-4.1-nano --over rows "
                   "--assert 'contains:{{ row.want }}' -o ev\n"
                   "What is {{ row.n }} + {{ row.n }}?",
                   "print(ev.to_dataframe().dropna(subset=['human'])[['row', 'column', 'human', 'human_note']]"
                   ".to_dict('records'))")
    model_server.responder = _by_model
    try:
        lab.open("grading.ipynb")
        lab.command("notebook:run-all-cells")
        matrix = lab.cell(2).locator(".jp-ipyagent-renderer .ipyagent-evaluation")
        matrix.locator(".ipyagent-eval-verdict").first.wait_for(timeout=60000)
        assert "no significant difference (n=6" in matrix.locator(".ipyagent-eval-verdict").first.inner_text()
        # Filters: the rows where the columns disagree are the odd ones.
        matrix.locator("button[data-filter='disagree']").click()
        assert matrix.locator(".ipyagent-eval-matrix tbody tr").count() == GRADED_ROWS // 2
        matrix.locator("button[data-filter='all']").click()
        assert matrix.locator(".ipyagent-eval-matrix tbody tr").count() == GRADED_ROWS
        # Row 1 on nano: open it, compare with mini word by word, then grade it "fail" with a note.
        cell = matrix.locator(".ipyagent-eval-matrix tbody tr").nth(1).locator("td").nth(4)
        cell.locator("summary").click()
        cell.locator("select.ipyagent-eval-diff-select").select_option("openai:gpt-4.1-mini")
        assert cell.locator(".ipyagent-diff ins").inner_text() == "2"
        assert cell.locator(".ipyagent-diff del").inner_text() == "maybe 3"
        cell.locator(".ipyagent-eval-grade-note").fill("a guess, and wrong")
        cell.locator("button", has_text="✗ fail").click()
        # The kernel kept it and sent the new output: the cell shows the mark, still open.
        graded = matrix.locator(".ipyagent-eval-matrix tbody tr").nth(1).locator("td").nth(4)
        graded.locator(".ipyagent-eval-human-fail").wait_for(timeout=20000)
        assert graded.locator("details").get_attribute("open") is not None
        assert graded.locator(".ipyagent-eval-grade-note").input_value() == "a guess, and wrong"
        assert matrix.locator(".ipyagent-eval-agreement").count() == 0  # no judge here: no agreement table
        lab.screenshot(lab.cell(2), "graded-evaluation.png")
        requests = len(model_server.requests)
        lab.save_and_shutdown("grading.ipynb")
        # Reopened without a kernel: the grade is drawn from the saved output.
        lab.page.reload()
        lab.open("grading.ipynb", wait_kernel=False)
        reopened = lab.cell(2).locator(".jp-ipyagent-renderer .ipyagent-evaluation")
        reopened.locator(".ipyagent-eval-human-fail").wait_for(timeout=60000)
        assert reopened.locator(".ipyagent-eval-human").count() == 1
        _light_and_dark(lab, reopened)
        # A new kernel: the cell runs again from the cache, and reads the grade back from the run store.
        lab.page.reload()
        lab.open("grading.ipynb")
        lab.command("notebook:run-all-cells")
        printed = lab.cell(3).locator(".jp-OutputArea-output")
        printed.wait_for(timeout=60000)
        assert printed.inner_text().strip() == ("[{'row': 1, 'column': 'openai:gpt-4.1-nano', 'human': False, "
                                                "'human_note': 'a guess, and wrong'}]")
        assert len(model_server.requests) == requests  # every run served from the cache
    finally:
        model_server.responder = None


def test_the_evaluate_notebook_draws_its_verdict_grades_and_filters_without_a_kernel(lab, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    from .conftest import ROOT

    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    nb = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    nbformat.write(nb, lab.root / "evaluate-executed.ipynb")
    lab.open("evaluate-executed.ipynb", wait_kernel=False)
    index = next(i for i, c in enumerate(nb.cells) if c.source.startswith("%%compare"))
    matrix = lab.cell(index).locator(".jp-ipyagent-renderer .ipyagent-evaluation")
    matrix.locator(".ipyagent-eval-verdict").first.wait_for(timeout=60000)
    verdicts = matrix.locator(".ipyagent-eval-verdict").all_inner_texts()
    assert any(f"openai:{current_model('openai')}/careful better by 15 points" in v for v in verdicts)
    assert matrix.locator("summary .ipyagent-eval-human").count() == 4  # the grades given in later cells
    assert matrix.locator(".ipyagent-eval-agreement td").all_inner_texts()[1:] == ["4", "75%", "0.50"]
    matrix.locator("button[data-filter='disagree']").click()
    shown = matrix.locator(".ipyagent-eval-matrix tbody tr").count()
    assert 0 < shown < 20
    matrix.locator("button[data-filter='all']").click()
    # At 1280 × 800 the summary fits the cell, and so do its details once opened (they scroll inside).
    lab.page.set_viewport_size({"width": 1280, "height": 800})
    try:
        lab.page.wait_for_timeout(300)
        _fits(matrix)
        assert matrix.locator(".ipyagent-eval-details .ipyagent-eval-stats").is_hidden()
        matrix.locator(".ipyagent-eval-details > summary").click()
        matrix.locator(".ipyagent-eval-details .ipyagent-eval-stats").wait_for()
        assert matrix.locator(".ipyagent-eval-full th").count() > 8
        _fits(matrix)
        matrix.locator(".ipyagent-eval-details > summary").click()
        _light_and_dark(lab, matrix, "evaluate-notebook")
    finally:
        lab.page.set_viewport_size({"width": 1100, "height": 900})


def test_a_saved_matrix_cut_to_its_limit_draws_without_a_kernel_with_its_note(lab):
    """Issue 33: a long evaluation's saved output keeps the rows that fit `eval_output_max` (here
    a small one), failing rows first, and says how many are left out; reopened without a kernel."""
    import nbformat

    from ipyagent.notebook.render.evaluation import saved_output

    from ..support.evaluation import finished_evaluation

    ev = finished_evaluation(200, failing={5, 150}, answer=400)
    nb = nbformat.v4.new_notebook()
    output = nbformat.from_dict(saved_output(ev, limit=40_000))
    nb.cells = [nbformat.v4.new_code_cell("%%compare m0 m1 --over rows -o ev", outputs=[output])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "cut-evaluation.ipynb")
    lab.open("cut-evaluation.ipynb", wait_kernel=False)
    matrix = lab.cell(0).locator(".jp-ipyagent-renderer .ipyagent-evaluation")
    note = matrix.locator(".ipyagent-eval-saved")
    note.wait_for(timeout=60000)
    shown = int(note.inner_text().split(" of ")[0])
    assert 2 < shown < 50 and note.inner_text().startswith(f"{shown} of 200 rows shown")
    assert "ev.to_dataframe()" in note.inner_text()
    rows = matrix.locator(".ipyagent-eval-matrix tbody tr")
    assert rows.count() == shown
    numbers = [int(t) for t in rows.locator("td:first-child").all_inner_texts()]
    assert {5, 150} <= set(numbers) and numbers == sorted(numbers)
    assert matrix.locator(".ipyagent-eval-fail").count() == 2
    headline = matrix.locator(".ipyagent-eval-title").first.inner_text()
    assert headline.startswith("2 providers × 200 rows: 400 of 400 runs")
    failed = matrix.locator(".ipyagent-eval-fail").first
    failed.locator("summary").click()
    assert "the first 300 of 400 characters" in failed.inner_text()
    _light_and_dark(lab, matrix, "cut-evaluation")
