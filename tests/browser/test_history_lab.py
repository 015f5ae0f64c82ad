"""JupyterLab in headless Chromium: ``%agent history`` drawn by the transcript renderer (each turn
with its prompt), and ``%%agent`` / ``%%compare`` cell bodies highlighted as Markdown."""

from __future__ import annotations

import nbformat
import pytest

from ipyagent.core import ActionCallBlock, ActionResultBlock, Message, TextBlock, ToolAction, Usage
from ipyagent.memory.conversation import Turn
from ipyagent.notebook.session_magics import turn_transcript
from ipyagent.notebook.transcript_output import bundle

pytestmark = pytest.mark.browser


def _history_notebook(path) -> None:
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
    turn = Turn([Message(role="user", content=[TextBlock(text="Weather in **Paris**?")]),
                 Message(role="assistant", content=[ActionCallBlock(action=action)], usage=Usage(input_tokens=10, output_tokens=5)),
                 Message(role="tool", content=[ActionResultBlock(action=action, text="18 C and clear")]),
                 Message(role="assistant", content=[TextBlock(text="It is *18 C* and clear.")], usage=Usage(input_tokens=30, output_tokens=8))],
                "ok", "run0001", "openai:gpt-4.1-mini")
    failed = Turn([Message(role="user", content=[TextBlock(text="And tomorrow?")]),
                   Message(role="assistant", content=[TextBlock(text="Tomorrow it")], metadata={"partial": True, "failed": True})],
                  "failed", "run0002", "openai:gpt-4.1-mini", "server: 502 Bad Gateway")
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
    boxes = [first.locator(sel).bounding_box()["y"] for sel in (".ipyagent-title", ".ipyagent-prompt", "details.ipyagent-tool", ".ipyagent-text")]
    assert boxes == sorted(boxes)
    assert "**" not in first.inner_text() and '{"city"' not in first.inner_text()
    assert second.locator(".ipyagent-title").inner_text().startswith("turn 2 · run run0002 · kept for the record")
    assert second.locator(".ipyagent-error").inner_text() == "⚠ server: 502 Bad Gateway"
    assert "failed" in second.locator(".ipyagent-footer").inner_text()
    lab.screenshot(lab.cell(0), "history.png")
