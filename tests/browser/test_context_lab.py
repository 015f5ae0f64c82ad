"""Code from an answer in a reopened notebook (``%%agent --code``): the saved transcript shows it
with insert and copy buttons, and "insert" adds it as a new code cell below the answer's cell."""

from __future__ import annotations

import nbformat
import pytest

pytestmark = pytest.mark.browser

CODE = 'per_unit = [p / c if c else float("nan") for p, c in zip(prices, counts)]\nprint("<b>not html</b>")'


def test_insert_button_adds_the_code_as_a_cell_below(lab):
    from ipyagent.core.transcript import NextCell, TextPart, Transcript, TranscriptMessage
    from ipyagent.notebook.views.transcript_output import bundle

    answer = f"Guard the zero count:\n\n```python\n{CODE}\n```\n"
    transcript = Transcript(
        provider="openai:gpt-6-luna",
        messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=answer)])],
        next_cell=NextCell(language="python", source=CODE),
    )
    data, metadata = bundle(transcript)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%agent fix --code", outputs=[nbformat.v4.new_output("display_data", data=data, metadata=metadata)]
        ),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "next_cell.ipynb")

    lab.open("next_cell.ipynb", wait_kernel=False)
    block = lab.cell(0).locator(".jp-ipyagent-renderer .ipyagent-next-cell")
    block.wait_for(state="attached", timeout=60000)
    assert block.locator("code").inner_text() == CODE  # set as text: the tag is shown, not rendered
    assert block.locator("button.ipyagent-copy").inner_text() == "copy"
    block.locator("button.ipyagent-insert").click()
    lab.page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.model.cells.length === 3", timeout=30000)
    sources = lab.page.evaluate(
        "() => Array.from(window.jupyterapp.shell.currentWidget.content.model.cells).map(c => "
        "c.sharedModel.getSource())"
    )
    types = lab.page.evaluate(
        "() => Array.from(window.jupyterapp.shell.currentWidget.content.model.cells).map(c => c.type)"
    )
    assert sources == ["%agent fix --code", CODE, "x = 1"] and types == ["code", "code", "code"]
    assert block.locator("button.ipyagent-insert").inner_text() == "inserted"
    lab.screenshot(lab.cell(0), "next-cell-inserted.png")
    assert not lab.errors
