"""notebooks/mcp.ipynb in JupyterLab, replayed offline as a new user runs it: its own MCP server
draws a swatch, blends with progress, asks the model (sampling) and asks *you* (elicitation): the
form is drawn in the tool's card, the user picks a finish and accepts, and the replay goes on with
the answer the server got."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from .lab import renderer_of

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "mcp.ipynb"
CASSETTE = ROOT / "notebooks" / "mcp.cassette.jsonl"


def test_the_mcp_notebook_asks_for_a_finish_in_a_form_and_replays_the_answer(lab):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    provider = next(i for i, c in enumerate(nb.cells) if "%provider" in c.source)
    nb.cells[provider].source = "%provider replay:mcp.cassette.jsonl"  # the lab's kernel has a test key
    nbformat.write(nb, lab.root / "mcp_demo.ipynb")
    shutil.copy(CASSETTE, lab.root / CASSETTE.name)
    order = next(i for i, c in enumerate(nb.cells) if c.source.startswith("%%agent --tools palette -o ordered"))
    lab.open("mcp_demo.ipynb")
    lab.command("notebook:run-all-cells")

    form = lab.cell(order).locator(".ipyagent-view .ipyagent-elicitation")
    form.wait_for(state="visible", timeout=120000)
    assert "MCP server palette asks: A tin of #800080 paint: which finish?" in form.inner_text()
    assert "waiting for your answer" in lab.cell(order).locator(".ipyagent-view").inner_text()
    form.locator("[data-field=finish]").select_option("gloss")
    lab.screenshot(lab.cell(order), "mcp-notebook-elicitation.png")
    form.locator(".ipyagent-accept").click()

    printed = lab.cell(order + 1).locator(".jp-OutputArea-output")
    printed.filter(has_text="ordered a tin of #800080 paint, gloss finish").wait_for(timeout=60000)
    saved = renderer_of(lab.cell(order))
    assert "gloss finish" in saved.inner_text()
    assert "palette asked you for input: you answered" in saved.locator(".ipyagent-note").text_content()
    lab.save_and_shutdown("mcp_demo.ipynb")
