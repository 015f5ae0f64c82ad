"""JupyterLab in headless Chromium: a one-prompt ``%%compare`` as a person sees it.

One widget draws the whole cell live with the saved record's own frame (compare.ts): with
``--runs N`` each pane has its runs selectable ("run 1 · 2"), the table has a row per run under
each provider's median, and the table looks the same live, final and reloaded. A comparison
stopped midway is saved with what each provider had, and a reopened notebook shows it. A run the
user picks while the comparison streams is the one shown after the saved output replaces the widget,
and after reload.
"""

from __future__ import annotations

import nbformat
import pytest

from ..support.stub_server import StubServer, openai_text_reply
from .lab import COMPARISON, renderer_of, two_providers, words

pytestmark = pytest.mark.browser


# Each animation frame while the live comparison is on screen: its table's look (cell tags, classes and
# computed styles) and row texts, and the frame's look (pane titles, run tabs), kept in window.__live.
OBSERVE_JS = """([panel, index]) => {
  const cell = document.querySelectorAll(panel + ' .jp-Notebook .jp-Cell')[index];
  window.__live = null;
  const tick = () => {
    const root = cell.querySelector('.ipyagent-comparison.ipyagent-live');
    if (root && root.querySelector('.ipyagent-compare-table')) window.__live = window.__look(root);
    if (!cell.querySelector('.jp-ipyagent-renderer')) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""

LOOK_JS = """() => {
  window.__look = (root) => {
    const style = (n) => { const s = getComputedStyle(n);
      return [n.tagName, n.className, s.borderTopWidth, s.borderTopStyle, s.paddingLeft, s.textAlign,
              s.fontSize, s.lineHeight].join(' '); };
    const table = root.querySelector('.ipyagent-compare-table');
    return {
      cells: [...table.querySelectorAll('tr')].slice(0, 2).flatMap(tr => [...tr.children].map(style)),
      rows: [...table.querySelectorAll('tbody tr')].map(tr => tr.innerText),
      frame: [...root.querySelectorAll('.ipyagent-pane-title, .ipyagent-runs, .ipyagent-runs > *')].map(style),
      panes: root.querySelectorAll('.ipyagent-pane').length,
      best: [...table.querySelectorAll('tbody tr')].flatMap((tr, i) =>
        [...tr.querySelectorAll('td.ipyagent-best')].map(td => [i, td.title])),
    };
  };
}"""


def _light_and_dark(lab, node, name: str) -> None:
    """Screenshots of `node` in JupyterLab Light and Dark (``NAME-light.png``, ``NAME-dark.png``), then Light again."""
    lab.screenshot(node, f"{name}-light.png")
    for theme, flag in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
        lab.page.evaluate("theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
        lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{flag}'", timeout=30000)
        lab.page.wait_for_timeout(500)
        if flag == "false":
            lab.screenshot(node, f"{name}-dark.png")


def _tab(pane, run: int):
    return pane.locator(f"button.ipyagent-run-tab[data-run='{run}']")


def _shown_run(pane) -> str:
    """The text of the run a pane shows (the others are hidden)."""
    return words(pane.locator(".ipyagent-run:not([hidden]) .ipyagent-text").inner_text())


def test_runs_are_selectable_and_the_table_looks_the_same_live_and_reloaded(lab):
    answers = {("a", 0): "Alpha answers first.", ("a", 1): "Alpha answers second.",
               ("b", 0): "Beta answers first.", ("b", 1): "Beta answers second, more slowly."}
    with StubServer(openai_text_reply(answers["a", 0]), openai_text_reply(answers["a", 1])) as a, \
            StubServer(openai_text_reply(answers["b", 0], piece=4, delay=0.05),
                       openai_text_reply(answers["b", 1], piece=2, delay=0.15)) as b:
        two_providers(lab, "runs.ipynb", a, b, "%%compare openai:a b --runs 2\nSay something.")
        lab.open("runs.ipynb")
        cell = lab.cell(1)
        lab.page.evaluate(LOOK_JS)
        lab.page.evaluate(OBSERVE_JS, [lab.panel, 1])
        lab.command("notebook:run-all-cells")

        # Live: one pane per provider; pane "a" has finished both runs while "b" still streams.
        live = cell.locator(".ipyagent-comparison.ipyagent-live")
        pane_a = live.locator(".ipyagent-pane").nth(0)
        pane_a.locator(".ipyagent-run[data-run='1'] .ipyagent-footer-text", has_text="total").wait_for(timeout=60000)
        assert _shown_run(pane_a) == answers["a", 1]  # the pane followed the newest run
        _tab(pane_a, 0).click()
        assert _shown_run(pane_a) == answers["a", 0] and _tab(pane_a, 0).get_attribute("aria-selected") == "true"
        assert live.locator(".ipyagent-run").count() >= 3  # runs selectable, not stacked: one shown per pane
        assert live.locator(".ipyagent-run:not([hidden])").count() == 2
        lab.screenshot(cell, "compare-runs-live.png")

        renderer_of(cell).wait_for(state="attached", timeout=60000)
        live_look = lab.page.evaluate("() => window.__live")
        final_look = lab.page.evaluate("(root) => window.__look(root)", renderer_of(cell).element_handle())
        # The saved output that replaced the widget shows the run picked live; the other pane its last run.
        final_panes = renderer_of(cell).locator(".ipyagent-pane")
        assert [_shown_run(final_panes.nth(0)), _shown_run(final_panes.nth(1))] == [answers["a", 0], answers["b", 1]]

    assert live_look is not None, "the live comparison never drew its table"
    assert live_look["cells"] == final_look["cells"] and live_look["frame"] == final_look["frame"]
    # A finished run's row is final as soon as it is drawn (a provider's median row changes until its last run).
    assert {r for r in live_look["rows"] if r.startswith("run ")} <= set(final_look["rows"])
    assert final_look["panes"] == 2
    # A provider's row is named by its alias first (b), its id after it, dim.
    assert [r.split("\t")[0] for r in final_look["rows"]] == [
        "openai:a · median (min–max) of 2 runs", "run 1", "run 2",
        "b · openai:b · median (min–max) of 2 runs", "run 1", "run 2"]
    # a answers at once and shorter, b streams slowly: a's median row has the fastest and fewest tokens.
    assert final_look["best"] == [[0, "fastest"], [0, "fewest tokens"]]

    lab.save_and_shutdown("runs.ipynb")
    saved = nbformat.read(lab.root / "runs.ipynb", as_version=4)
    assert not saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state")
    (record,) = [o["data"][COMPARISON] for o in saved.cells[1].outputs if COMPARISON in o.get("data", {})]
    assert record["selected"] == [0, None]
    lab.page.reload()
    lab.open("runs.ipynb", wait_kernel=False)
    lab.page.evaluate(LOOK_JS)
    cell = lab.cell(1)
    rendered = renderer_of(cell)
    rendered.wait_for(state="attached", timeout=60000)
    reloaded_look = lab.page.evaluate("(root) => window.__look(root)", rendered.element_handle())
    assert reloaded_look == final_look

    # Reloaded without a kernel: the run picked live first (else the last), and the runs are still
    # selectable, by tab and by the table's run rows.
    panes = rendered.locator(".ipyagent-pane")
    assert (
        _shown_run(panes.nth(0)) == answers["a", 0] and _tab(panes.nth(0), 0).get_attribute("aria-selected") == "true"
    )
    assert _shown_run(panes.nth(1)) == answers["b", 1]
    _tab(panes.nth(0), 1).click()
    assert _shown_run(panes.nth(0)) == answers["a", 1]
    _tab(panes.nth(1), 0).click()
    assert _shown_run(panes.nth(1)) == answers["b", 0]
    rendered.locator("tr.ipyagent-run-row[data-index='1'][data-run='1']").click()
    assert _shown_run(panes.nth(1)) == answers["b", 1]
    assert rendered.locator("tr.ipyagent-selected[data-index='1'][data-run='1']").count() == 1
    lab.screenshot(cell, "compare-runs-reloaded.png")
    # Bordered panes, in the light theme and the dark one.
    assert panes.nth(0).evaluate("n => getComputedStyle(n).borderTopStyle") == "solid"
    _light_and_dark(lab, rendered, "compare")
    # The two panes' answers word by word: the runs they show now.
    rendered.locator("details.ipyagent-compare-diff > summary").click()
    diff = rendered.locator(".ipyagent-compare-diff .ipyagent-diff")
    diff.wait_for(timeout=10000)  # drawn on the details' toggle event, a task after the click
    assert diff.locator("del").all_inner_texts() == ["Alpha"]
    assert diff.locator("ins").all_inner_texts() == ["Beta", ", more slowly"]


def test_a_stopped_comparison_is_saved_with_the_finished_and_the_partial_answer(lab):
    finished = "The quick provider finished its whole answer."
    slow_text = " ".join(f"word{i}" for i in range(200))
    with (
        StubServer(openai_text_reply(finished)) as a,
        StubServer(openai_text_reply(slow_text, piece=6, delay=0.1)) as b,
    ):
        two_providers(lab, "stopped.ipynb", a, b, "%%compare openai:a b -o cmp\nSay something long.")
        lab.open("stopped.ipynb")
        cell = lab.cell(1)
        lab.command("notebook:run-all-cells")
        live = cell.locator(".ipyagent-comparison.ipyagent-live")
        live.locator(".ipyagent-pane").nth(0).locator(".ipyagent-footer-text", has_text="total").wait_for(timeout=60000)
        live.locator(".ipyagent-pane").nth(1).locator(".ipyagent-text", has_text="word5").wait_for(timeout=60000)
        live_height = (
            live.locator(".ipyagent-pane").nth(0).locator(".ipyagent-run").bounding_box()["height"]
        )  # "a" has finished
        lab.page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']").click()
        renderer_of(cell).wait_for(state="attached", timeout=30000)
        assert "Traceback" not in cell.inner_text() and "CancelledError" not in cell.inner_text()
        lab.save_and_shutdown("stopped.ipynb")

    saved = nbformat.read(lab.root / "stopped.ipynb", as_version=4)
    assert not [o for c in saved.cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    lab.page.reload()
    lab.open("stopped.ipynb", wait_kernel=False)
    rendered = renderer_of(lab.cell(1))
    rendered.wait_for(state="attached", timeout=60000)
    panes = rendered.locator(".ipyagent-pane")
    assert words(panes.nth(0).locator(".ipyagent-text").inner_text()) == finished
    reloaded_height = panes.nth(0).locator(".ipyagent-run").bounding_box()["height"]
    assert abs(live_height - reloaded_height) <= 2, (live_height, reloaded_height)  # one look: no re-flow
    partial = words(panes.nth(1).locator(".ipyagent-text").inner_text())
    assert partial.startswith("word0 word1") and len(partial) < len(slow_text)
    assert "interrupted" in panes.nth(1).inner_text() and "interrupted" not in panes.nth(0).inner_text()
    assert "interrupted" in rendered.locator(".ipyagent-compare-footer").inner_text()
    lab.screenshot(lab.cell(1), "compare-stopped-reloaded.png")
