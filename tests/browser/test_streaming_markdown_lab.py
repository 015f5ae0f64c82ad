"""A streaming answer in JupyterLab at 1280×800 shows no half-parsed Markdown (markdown.ts `settled`):
a stream that stops at ``**Short`` shows ``**Short`` as text, never an emphasis; no list item is ever
drawn empty while it forms; and an answer table reads with the text around it (left-aligned, text left,
numbers right), live and saved, in the light and the dark theme (screenshots in build/screenshots/)."""

from __future__ import annotations

import json

import pytest

from ..support.stub_server import openai_text_reply
from .lab import renderer_of, write_notebook

pytestmark = pytest.mark.browser

HEAD = ("Kernels in short\n\n- one kernel per notebook\n- it keeps the state\n\n"
        "| name | cells run |\n|---|---|\n| python3 | 12 |\n| ir | 3.5 |\n\nA **Short")
REST = " answer** at the end."

#: Every animation frame: was a list item of the live view ever drawn without text?
WATCH_JS = """([panel, index]) => {
  const cell = document.querySelectorAll(panel + ' .jp-Notebook .jp-Cell')[index];
  window.__emptyItems = 0;
  window.__frames = 0;
  const tick = () => {
    const live = cell.querySelector('.ipyagent-live');
    if (live) {
      window.__frames++;
      for (const li of live.querySelectorAll('li')) if (!li.textContent.trim()) window.__emptyItems++;
    }
    if (!cell.querySelector('.jp-ipyagent-renderer')) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""

#: The computed alignment of an answer table's cells, and its left edge against its paragraph's.
TABLE_JS = """(root) => {
  const table = root.querySelector('.ipyagent-text table');
  const cells = [...table.querySelectorAll('tbody tr:first-child td')].map(td => getComputedStyle(td).textAlign);
  const para = root.querySelector('.ipyagent-text p');
  return {cells, indent: table.getBoundingClientRect().left - para.getBoundingClientRect().left};
}"""


def _theme(lab, theme: str, light: str) -> None:
    change = f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: {json.dumps(theme)}}})"
    lab.page.evaluate(f"() => {{ {change}; }}")
    lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=30000)
    lab.page.wait_for_timeout(300)


def test_a_stream_stopped_at_an_open_strong_shows_it_as_text_and_tables_align(lab, model_server):
    text = HEAD + REST
    pieces_before_hold = 1 + -(-len(HEAD) // 2)  # the role chunk, then HEAD in 2-character pieces
    reply = openai_text_reply(text, piece=2, delay=0.01, hold_after=pieces_before_hold)
    model_server.script(reply)
    write_notebook(lab.root / "streaming.ipynb", "%load_ext ipyagent\n%provider openai:gpt-6-luna",
                   "%%agent\nExplain kernels briefly.")
    lab.page.set_viewport_size({"width": 1280, "height": 800})
    lab.open("streaming.ipynb")
    cell = lab.cell(1)
    lab.page.evaluate(WATCH_JS, [lab.panel, 1])
    lab.command("notebook:run-all-cells")
    assert reply.held.wait(60)
    live = cell.locator(".ipyagent-live")
    live.locator(".ipyagent-text p", has_text="Short").last.wait_for(timeout=30000)
    lab.page.wait_for_function(
        "([p, i]) => document.querySelectorAll(p + ' .jp-Notebook .jp-Cell')[i].querySelector('.ipyagent-live')"
        ".innerText.includes('**Short')", arg=[lab.panel, 1], timeout=30000)

    last = live.locator(".ipyagent-text p").last
    assert last.inner_text().strip() == "A **Short"
    assert live.locator(".ipyagent-text strong, .ipyagent-text em").count() == 0
    assert lab.page.evaluate("window.__frames") > 3 and lab.page.evaluate("window.__emptyItems") == 0
    aligned = live.evaluate(TABLE_JS)
    assert aligned["cells"] == ["left", "right"] and abs(aligned["indent"]) < 2, aligned
    cell.scroll_into_view_if_needed()
    lab.screenshot(cell, "streaming-markdown-live.png")
    _theme(lab, "JupyterLab Dark", "false")
    assert live.evaluate(TABLE_JS)["cells"] == ["left", "right"]
    lab.screenshot(cell, "streaming-markdown-live-dark.png")
    _theme(lab, "JupyterLab Light", "true")

    reply.release.set()
    saved = renderer_of(cell)
    saved.wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    assert saved.locator(".ipyagent-text strong").inner_text() == "Short answer"
    aligned = saved.evaluate(TABLE_JS)
    assert aligned["cells"] == ["left", "right"] and abs(aligned["indent"]) < 2, aligned
    lab.screenshot(cell, "streaming-markdown-saved.png")
    _theme(lab, "JupyterLab Dark", "false")
    lab.screenshot(cell, "streaming-markdown-saved-dark.png")
    _theme(lab, "JupyterLab Light", "true")
    assert lab.page.evaluate("window.__emptyItems") == 0
