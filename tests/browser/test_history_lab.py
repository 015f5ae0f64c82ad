"""JupyterLab in headless Chromium: ``%agent history`` drawn by the transcript renderer (each turn
with its prompt), ``%%agent`` / ``%%compare`` cell bodies highlighted as Markdown, the ``%tools`` table."""

from __future__ import annotations

import json

import nbformat
import pytest

from ipyagent.core import ActionCallBlock, ActionResultBlock, Message, TextBlock, ToolAction, Usage
from ipyagent.agent.conversation import Turn
from ipyagent.notebook.magics.session import turn_transcript
from ipyagent.notebook.views.transcript_output import bundle

from .conftest import WAIT_KERNEL_JS

pytestmark = pytest.mark.browser


def _history_notebook(path) -> None:
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
    turn = Turn(
        [
            Message(role="user", content=[TextBlock(text="Weather in **Paris**?")]),
            Message(
                role="assistant",
                content=[ActionCallBlock(action=action)],
                usage=Usage(input_tokens=10, output_tokens=5),
            ),
            Message(role="tool", content=[ActionResultBlock(action=action, text="18 C and clear")]),
            Message(
                role="assistant",
                content=[TextBlock(text="It is *18 C* and clear.")],
                usage=Usage(input_tokens=30, output_tokens=8),
            ),
        ],
        "ok",
        "run0001",
        "openai:gpt-6-luna",
    )
    failed = Turn([Message(role="user", content=[TextBlock(text="And tomorrow?")]),
                   Message(role="assistant", content=[TextBlock(text="Tomorrow it")], status="failed")],
                  "failed", "run0002", "openai:gpt-6-luna", "server: 502 Bad Gateway")
    outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "thread 'default': 2 turns"})]
    for n, t in enumerate([turn, failed], 1):
        data, metadata = bundle(turn_transcript(t, n))
        outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=metadata))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%agent history", outputs=outputs)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_history_is_drawn_as_transcripts_with_their_prompts(lab):
    _history_notebook(lab.root / "history.ipynb")
    lab.open("history.ipynb", wait_kernel=False)
    turns = lab.cell(0).locator(".jp-ipyagent-renderer")
    turns.nth(1).wait_for(state="attached")
    first, second = turns.nth(0), turns.nth(1)
    assert first.locator(".ipyagent-title").inner_text() == "turn 1 · run run0001"
    prompt = first.locator(".ipyagent-prompt")
    assert prompt.locator("strong").inner_text() == "Paris"  # the prompt's Markdown, rendered
    assert " ".join(prompt.inner_text().split()) == "user Weather in Paris?"
    card = first.locator("details.ipyagent-tool")
    card.locator("summary").click()
    assert card.locator(".ipyagent-result").inner_text() == "18 C and clear"
    assert first.locator(".ipyagent-text em").inner_text() == "18 C"
    assert "40 in / 13 out tokens" in first.locator(".ipyagent-footer").inner_text()
    # the prompt sits above its reply, and the raw syntax is nowhere
    boxes = [
        first.locator(sel).bounding_box()["y"]
        for sel in (".ipyagent-title", ".ipyagent-prompt", "details.ipyagent-tool", ".ipyagent-text")
    ]
    assert boxes == sorted(boxes)
    assert "**" not in first.inner_text() and '{"city"' not in first.inner_text()
    assert second.locator(".ipyagent-title").inner_text().startswith("turn 2 · run run0002 · kept for the record")
    assert second.locator(".ipyagent-error").inner_text() == "⚠ server: 502 Bad Gateway"
    assert "failed" in second.locator(".ipyagent-footer").inner_text()
    lab.screenshot(lab.cell(0), "history.png")


SPAN_STYLE_JS = """([cell, text]) => {
  const spans = [...cell.querySelectorAll('.cm-line span')].filter(s => s.textContent.includes(text));
  const node = spans.length ? spans[spans.length - 1] : null;
  if (!node) return null;
  const style = getComputedStyle(node);
  return {weight: style.fontWeight, italic: style.fontStyle === 'italic'};
}"""


def test_prompt_cells_are_highlighted_as_markdown(lab):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%agent --tools get_weather\n# Weather {{ city }}\nSay it in *one* line."),
                nbformat.v4.new_code_cell("# Weather here\nx = 1"),
                nbformat.v4.new_code_cell("%%compare openai:a,openai:b\n# Which is better?")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}
    nbformat.write(nb, lab.root / "highlight.ipynb")
    lab.open("highlight.ipynb", wait_kernel=False)
    editors = [lab.cell(i).locator(".cm-editor") for i in range(3)]
    for editor in editors:
        editor.locator(".cm-line").first.wait_for()
    languages = [e.get_attribute("data-ipyagent-language") for e in editors]
    assert languages == ["markdown", None, "markdown"]
    agent, python = (lab.cell(i).element_handle() for i in (0, 1))
    # "# Weather" is a Markdown heading in the prompt cell (bold, upright), a Python comment below (italic)
    heading = lab.page.evaluate(SPAN_STYLE_JS, [agent, "Weather"])
    comment = lab.page.evaluate(SPAN_STYLE_JS, [python, "Weather"])
    assert heading is not None and heading["weight"] in ("700", "bold") and not heading["italic"], heading
    assert comment is not None and comment["italic"], comment
    assert lab.page.evaluate(SPAN_STYLE_JS, [agent, "one"])["italic"]  # *one*: Markdown emphasis
    assert lab.cell(0).locator(".ipyagent-jinja").inner_text() == "{{ city }}"
    assert lab.cell(0).locator(".cm-line.ipyagent-magic-line").inner_text().startswith("%%agent")
    # typing the magic into a Python cell switches it; removing it switches back
    lab.cell(1).locator(".cm-content").click()
    lab.page.keyboard.press("Control+Home")
    lab.page.keyboard.type("%%agent\n")
    lab.page.wait_for_function(
        "(el) => el.getAttribute('data-ipyagent-language') === 'markdown'", arg=editors[1].element_handle()
    )
    assert not lab.page.evaluate(SPAN_STYLE_JS, [python, "Weather"])["italic"]
    lab.page.keyboard.press("Control+Home")
    lab.page.keyboard.press("Shift+ArrowDown")  # the magic line, selected with its newline
    lab.page.keyboard.press("Backspace")
    lab.page.wait_for_function("(el) => !el.hasAttribute('data-ipyagent-language')", arg=editors[1].element_handle())
    assert lab.page.evaluate(SPAN_STYLE_JS, [python, "Weather"])["italic"]
    lab.screenshot(lab.page.locator(lab.panel + " .jp-Notebook"), "prompt-cell-highlighting.png")
    assert not lab.errors



def test_prompt_cells_are_markdown_before_the_kernel_names_its_language(lab):
    """A notebook saved without ``language_info`` and a new notebook's first cell: their editors are
    made before the kernel says it is Python (as text/plain), and stay Markdown once it has."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%%agent\n# Weather {{ city }}\nWhat is it?"),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "no_language_info.ipynb")
    lab.open("no_language_info.ipynb")  # the kernel is idle: the cells are Python now
    editors = [lab.cell(i).locator(".cm-editor") for i in range(2)]
    assert [e.get_attribute("data-ipyagent-language") for e in editors] == ["markdown", None]
    assert lab.cell(0).locator(".ipyagent-jinja").inner_text() == "{{ city }}"
    # File > New > Notebook: the magic typed into the cell that was there before the kernel answered
    lab.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:create-new', {kernelName: 'python3'}); }")
    lab.page.wait_for_function("() => window.jupyterapp.shell.currentWidget.context"
                               " && window.jupyterapp.shell.currentWidget.context.path.startsWith('Untitled')")
    lab.panel = "#" + lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    assert lab.page.evaluate(WAIT_KERNEL_JS), "the kernel did not become idle"
    lab.cell(0).locator(".cm-content").click()
    lab.page.keyboard.type("%%agent\n# Weather")
    lab.page.wait_for_function("(el) => el.getAttribute('data-ipyagent-language') === 'markdown'",
                               arg=lab.cell(0).locator(".cm-editor").element_handle())
    assert not lab.errors

def test_tools_listing_is_a_table_with_the_schema_folded(lab):
    tool = (
        "from typing import Literal\nfrom ipyagent.tools import activity\n\n@activity\n"
        "def get_weather(city: str, mode: Literal["
        + ", ".join(repr(f"choice_number_{n}_with_a_long_name") for n in range(12))
        + "] = 'choice_number_0_with_a_long_name') -> str:\n"
        '    """Weather now, for a city anywhere on Earth.\n\n    Args:\n        city: the city\'s name\n    """\n    '
        'return \'sunny\''
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext ipyagent\n" + tool), nbformat.v4.new_code_cell("%tools")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "tools_listing.ipynb")
    lab.open("tools_listing.ipynb")
    lab.command("notebook:run-all-cells")
    table = lab.cell(1).locator(".ipyagent-tools table")
    table.wait_for()
    assert [t.strip() for t in table.locator("th").all_inner_texts()] == ["tool", "description", "parameters"]
    cells = table.locator("tbody td").all_inner_texts()
    assert cells[0].strip() == "get_weather" and cells[1].strip() == "Weather now, for a city anywhere on Earth."
    params = " ".join(cells[2].split())
    assert "city string required — the city's name" in params and '"choice_number_11_with_a_long_name"' in params
    assert "mode" in params and "mode string required" not in params
    schema_box = table.locator("details.ipyagent-schema")
    pre = schema_box.locator("pre")
    assert not pre.is_visible()  # folded until asked for
    schema_box.locator("summary").click()
    assert pre.is_visible()
    assert pre.evaluate("p => getComputedStyle(p).whiteSpace") == "pre"  # scrolls, never wraps mid-word
    schema = json.loads(pre.inner_text())
    assert schema["required"] == ["city"] and len(schema["properties"]["mode"]["enum"]) == 12
    lab.screenshot(lab.cell(1), "tools-listing.png")
