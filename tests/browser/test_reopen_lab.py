"""A page reopened while a run streams, or after it ended, in JupyterLab (and in Notebook 7).

The notebook is saved mid-run (its output is then the live widget) and the page reloaded: the
reopened page must catch up from the kernel (the text so far), keep streaming, and, when the run
ends — finished or stopped from that page — hold the same saved transcript a page that never
left gets, with no widget left in the output or in the notebook's widget state. The kernel's
display update cannot reach the reopened page (display ids are not saved), so the live view
hands the saved output to the page itself (labextension/src/saved_output.ts, reopened.ts).
A page closed mid-run and reopened only after the run ended finds the widget closed: it asks the
kernel for the saved output (src/ipyagent/notebook/saved_outputs.py).

The model server holds the stream after `HELD` pieces until the test releases it: no sleeps.
"""

from __future__ import annotations

import time

import nbformat
import pytest
from playwright.sync_api import Error as PlaywrightError

from ..support.stub_server import openai_text_reply
from .conftest import TOKEN, api
from .lab import renderer_of, shown, words, write_notebook

pytestmark = pytest.mark.browser

PIECE = 16
BEFORE = "Streaming text. " * 12  # 12 pieces of 16 characters, each ending a word
AFTER = "\n\nThe rest came after the page was reopened, **in bold**.\n\n- one\n- two\n"
HELD = 1 + len(BEFORE) // PIECE  # the role chunk, then BEFORE


def _save_mid_run(lab, name: str) -> None:
    """Save the notebook while its run streams (the output saved is the live widget's)."""
    lab.save(name)
    saved = nbformat.read(lab.root / name, as_version=4)
    assert [o for o in saved.cells[1].outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})], \
        "the notebook was not saved mid-run with the live widget"


def _run_and_save_mid_run(lab, model_server, name: str):
    """Run the %%agent cell and save the notebook while the stream is held; the reply."""
    reply = openai_text_reply(BEFORE + AFTER, piece=PIECE, hold_after=HELD)
    write_notebook(lab.root / name, "%load_ext ipyagent\n%provider openai:gpt-6-luna", "%%agent\nWrite.")
    model_server.script(reply)
    lab.open(name)
    lab.command("notebook:run-all-cells")
    assert reply.held.wait(60), "the run did not start"
    live = lab.cell(1).locator(".ipyagent-view .ipyagent-text")
    live.first.wait_for(state="attached")
    lab.page.wait_for_function("(el) => el.textContent.includes('Streaming text.')", arg=live.first.element_handle())
    _save_mid_run(lab, name)
    return reply


def _reopen_mid_run(lab, model_server, name: str, *, notebook7: bool = False):
    """Run the %%agent cell, save while it is held, reload the page (in JupyterLab, or open the
    notebook in Notebook 7); the reopened cell, caught up."""
    reply = _run_and_save_mid_run(lab, model_server, name)
    if notebook7:
        lab.page.goto(f"{lab.url}/notebooks/{name}?token={TOKEN}")
        cell = lab.page.locator(".jp-Notebook .jp-Cell").nth(1)
    else:
        lab.page.reload()
        lab.open(name, wait_kernel=False)  # the kernel is busy with the run
        cell = lab.cell(1)
    # The reopened page's widget is restored from the kernel and caught up by a snapshot.
    live = cell.locator(".ipyagent-view .ipyagent-text")
    live.first.wait_for(state="attached")
    lab.page.wait_for_function("([el, n]) => el.textContent.split('Streaming text.').length - 1 === n",
                               arg=[live.first.element_handle(), BEFORE.count("Streaming text.")])
    assert words(live.inner_text()) == shown(BEFORE)
    assert "streaming" in cell.locator(".ipyagent-view .ipyagent-footer").inner_text()
    return reply, cell


def _saved_output(lab, name: str) -> dict:
    """The %%agent cell's one saved output: the transcript bundle, no widget anywhere."""
    saved = nbformat.read(lab.root / name, as_version=4)
    (output,) = saved.cells[1].outputs
    assert output["output_type"] == "display_data"
    assert set(output["data"]) == {"application/vnd.ipyagent.transcript+json", "text/html", "text/plain"}
    assert output["metadata"] == {"ipyagent": {"record": "transcript"}}
    assert not saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state")
    assert "widget-view" not in nbformat.writes(saved)
    return output["data"]["application/vnd.ipyagent.transcript+json"]


def _ends_finished_and_saved(lab, cell, name: str, shot: str) -> None:
    """The cell shows the finished run's saved output (no live view), the saved notebook holds
    its transcript alone, and a reload without the run's kernel draws it whole."""
    assert cell.locator(".ipyagent-view").count() == 0
    assert "streaming" not in renderer_of(cell).locator(".ipyagent-footer").inner_text()
    lab.save_and_shutdown(name)
    doc = _saved_output(lab, name)
    assert doc["status"] == "completed" and _answer(doc) == BEFORE + AFTER
    lab.page.reload()  # no kernel of that run: the saved transcript alone
    lab.open(name, wait_kernel=False)
    cell = lab.cell(1)
    renderer_of(cell).wait_for(state="attached")
    assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(BEFORE + AFTER)
    lab.screenshot(cell, shot)


def _answer(doc: dict) -> str:
    return "".join(
        p["text"] for m in doc["messages"] if m["role"] == "assistant" for p in m["parts"] if p["type"] == "text"
    )


def test_a_page_reopened_mid_run_catches_up_streams_on_and_saves_the_transcript(lab, model_server):
    reply, cell = _reopen_mid_run(lab, model_server, "reopen.ipynb")
    reply.release.set()
    renderer_of(cell).wait_for(state="attached")  # the saved output took the widget's place
    assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(BEFORE + AFTER)
    _ends_finished_and_saved(lab, cell, "reopen.ipynb", "reopened-finished.png")


def test_notebook7_reopened_mid_run_ends_with_the_saved_transcript(lab, model_server):
    """Notebook 7 runs the same plugin: a run started in JupyterLab, its notebook opened in
    Notebook 7 mid-run, catches up there and ends as the saved transcript, no widget left."""
    reply, cell = _reopen_mid_run(lab, model_server, "reopen7.ipynb", notebook7=True)
    # Drawn with the labextension's front end, which Notebook 7 registers too: nothing from the kernel.
    assert lab.page.evaluate("() => document.querySelector('style[id^=\"ipyagent-live-\"]') === null")
    reply.release.set()
    renderer_of(cell).wait_for(state="attached")
    assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(BEFORE + AFTER)
    assert cell.locator(".ipyagent-view").count() == 0
    lab.save("reopen7.ipynb")
    doc = _saved_output(lab, "reopen7.ipynb")
    assert doc["status"] == "completed" and _answer(doc) == BEFORE + AFTER
    lab.screenshot(cell, "reopened-notebook7.png")


def test_a_run_stopped_from_a_page_reopened_mid_run_keeps_its_partial_transcript(lab, model_server):
    reply, cell = _reopen_mid_run(lab, model_server, "reopen-stop.ipynb")
    try:
        lab.page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']").click()
        renderer_of(cell).wait_for(state="attached")
        footer = renderer_of(cell).locator(".ipyagent-footer").inner_text()
        assert "interrupted" in footer, footer
        assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(
            BEFORE
        )  # the partial text stays
        assert cell.locator(".ipyagent-view").count() == 0
        assert "Traceback" not in cell.inner_text() and "CancelledError" not in cell.inner_text()
        lab.save_and_shutdown("reopen-stop.ipynb")
    finally:
        reply.release.set()
    doc = _saved_output(lab, "reopen-stop.ipynb")
    assert doc["status"] == "interrupted" and _answer(doc) == BEFORE
    saved = nbformat.read(lab.root / "reopen-stop.ipynb", as_version=4)
    assert not [o for c in saved.cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    lab.screenshot(cell, "reopened-stopped.png")


def _kernel_idle(lab) -> None:
    """Wait until the (only) kernel has finished its cells, as the server sees it (no page open)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kernels = api(lab.url, "GET", "/api/kernels")
        if kernels and all(k["execution_state"] == "idle" for k in kernels):  # type: ignore[union-attr]
            return
        time.sleep(0.1)
    pytest.fail(f"the kernel did not finish the run: {api(lab.url, 'GET', '/api/kernels')}")


def _leave(page) -> None:
    """Navigate the page away. JupyterLab may start a navigation of its own at that moment (a
    loaded machine makes it likelier), which aborts ours (net::ERR_ABORTED): then it is tried again."""
    for _ in range(3):
        try:
            page.goto("about:blank")
            return
        except PlaywrightError as exc:
            if "ERR_ABORTED" not in str(exc):
                raise
            if page.url == "about:blank":
                return
    page.goto("about:blank")


def test_a_page_closed_mid_run_and_reopened_after_the_end_shows_the_whole_transcript(lab, model_server):
    """The widget is closed by then (ipywidgets would read "model not found"): the page asks the
    kernel for the run's saved output, shows the whole transcript, and saves it, no widget left."""
    reply = _run_and_save_mid_run(lab, model_server, "reopen-after.ipynb")
    _leave(lab.page)  # the page is closed while the run streams
    reply.release.set()
    _kernel_idle(lab)  # the run ended with no page to see it
    lab.open("reopen-after.ipynb")
    cell = lab.cell(1)
    renderer_of(cell).wait_for(state="attached")
    assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(BEFORE + AFTER)
    assert "model not found" not in cell.inner_text()
    _ends_finished_and_saved(lab, cell, "reopen-after.ipynb", "reopened-after-the-end.png")
