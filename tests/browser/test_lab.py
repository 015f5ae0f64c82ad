"""JupyterLab in headless Chromium: what a person sees of a run, live and after the notebook is reopened.

The model is the session's StubServer replaying recorded streams (the notebooks' cassettes and
`../shared/fixtures/providers`), slowed down where a test watches it stream.
"""

from __future__ import annotations

import json
import time

import nbformat
import pytest


from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, openai_text_reply
from .conftest import ROOT
from .lab import renderer_of, shown, words, write_notebook

pytestmark = pytest.mark.browser

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)

# The live view's body (not its footer or style) or, once the run has ended, the renderer's text.
ANSWER_LENGTH_JS = """(cell) => {
  const out = cell.querySelector('.jp-OutputArea');
  if (!out) return null;
  const rendered = out.querySelectorAll('.jp-ipyagent-renderer .ipyagent-text');
  if (rendered.length) return {len: [...rendered].map(n => n.textContent).join('').length, final: true};
  const view = out.querySelector('.ipyagent-view');
  if (!view) return null;
  const parts = [...view.querySelectorAll('.ipyagent-text')];
  return {len: parts.map(n => n.textContent).join('').length, final: false};
}"""

SAMPLE_JS = """([panel, index, measure]) => {
  const fn = eval(measure);
  const cell = document.querySelectorAll(panel + ' .jp-Notebook .jp-Cell')[index];
  window.__samples = [];
  window.__sampler = setInterval(() => {
    const s = fn(cell);
    const last = window.__samples[window.__samples.length - 1];
    if (s && (!last || last.len !== s.len || last.final !== s.final)) window.__samples.push(s);
  }, 10);
}"""


def _cassette(name: str) -> list[dict]:
    return [
        json.loads(line)
        for line in (ROOT / "notebooks" / f"{name}.cassette.jsonl").read_text().splitlines()
        if line.strip()
    ]


def _reply(exchange: dict, delay: float = 0.0) -> Reply:
    return Reply(pieces=[p.encode() + b"\n\n" for p in exchange["response"]["body"].split("\n\n") if p], delay=delay)


def _sse_answer(exchange: dict) -> tuple[str, dict]:
    text, usage = [], {}
    for line in exchange["response"]["body"].splitlines():
        if line.startswith("data: {"):
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            text += [c["delta"].get("content") or "" for c in chunk.get("choices", [])]
    return "".join(text), usage


def _agent_cell_index(nb_path, nth: int = 0) -> int:
    nb = nbformat.read(nb_path, as_version=4)
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("%%agent")][nth]


def test_quickstart_streams_visibly_then_shows_the_transcript(lab, model_server):
    exchanges = _cassette("quickstart")
    answer, usage = _sse_answer(exchanges[0])
    # The first answer streams slowly (a piece every 60 ms); the others come at once.
    model_server.script(_reply(exchanges[0], delay=0.06), *[_reply(e) for e in exchanges[1:]])
    lab.open("quickstart.ipynb")
    index = _agent_cell_index(lab.root / "quickstart.ipynb")
    cell = lab.cell(index)
    lab.page.evaluate(SAMPLE_JS, [lab.panel, index, ANSWER_LENGTH_JS])
    lab.command("notebook:run-all-cells")

    lab.page.wait_for_function("window.__samples.filter(s => !s.final && s.len > 0).length >= 3", timeout=60000)
    live_footer = cell.locator(".ipyagent-view .ipyagent-footer")
    assert "first token" in live_footer.text_content() and "streaming" in live_footer.text_content()
    lab.screenshot(cell, "live-streaming.png")

    renderer_of(cell).wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    lab.page.wait_for_function("window.__samples.some(s => s.final)")
    samples = lab.page.evaluate("() => { clearInterval(window.__sampler); return window.__samples; }")
    streamed = [s["len"] for s in samples if not s["final"] and s["len"] > 0]
    assert len(set(streamed)) >= 3, samples
    assert streamed == sorted(streamed), f"the text shrank while streaming: {streamed}"
    final_len = [s["len"] for s in samples if s["final"]][-1]
    assert final_len >= streamed[-1] and final_len > 0

    assert words(renderer_of(cell).locator(".ipyagent-text").inner_text()) == shown(answer)
    footer = renderer_of(cell).locator(".ipyagent-footer").inner_text()
    assert f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out tokens" in footer
    assert "first token" in footer and "total" in footer
    assert not lab.dialogs
    # The labextension's own front end drew it: nothing came from the kernel (live_loader.ts).
    assert lab.page.evaluate("() => document.querySelector('style[id^=\"ipyagent-live-\"]') === null")


def test_a_page_without_the_labextension_takes_the_live_view_from_the_kernel(lab, model_server):
    """As in VS Code or Colab, where no labextension registers the front end: the widget's loader
    asks the kernel for it once, adds its styles, and the run streams the same."""
    exchanges = _cassette("quickstart")
    model_server.script(_reply(exchanges[0], delay=0.06), *[_reply(e) for e in exchanges[1:]])
    lab.open("quickstart.ipynb")
    lab.page.evaluate("() => { const r = globalThis[Symbol.for('ipyagent.live')];"
                      " for (const build of Object.keys(r)) delete r[build]; }")
    index = _agent_cell_index(lab.root / "quickstart.ipynb")
    cell = lab.cell(index)
    lab.page.evaluate(SAMPLE_JS, [lab.panel, index, ANSWER_LENGTH_JS])
    lab.command("notebook:run-all-cells")

    lab.page.wait_for_function("window.__samples.filter(s => !s.final && s.len > 0).length >= 3", timeout=60000)
    assert "streaming" in cell.locator(".ipyagent-view .ipyagent-footer").text_content()
    renderer_of(cell).wait_for(state="attached", timeout=60000)
    samples = lab.page.evaluate("() => { clearInterval(window.__sampler); return window.__samples; }")
    streamed = [s["len"] for s in samples if not s["final"] and s["len"] > 0]
    assert len(set(streamed)) >= 3 and streamed == sorted(streamed), samples
    # One copy for the page: its styles added once, its module registered for the next views.
    assert lab.page.evaluate("() => document.querySelectorAll('style[id^=\"ipyagent-live-\"]').length") == 1
    assert lab.page.evaluate("() => Object.keys(globalThis[Symbol.for('ipyagent.live')]).length") == 1
    assert not lab.dialogs


def test_saved_notebook_reopens_with_the_transcript_and_tool_cards(lab, model_server):
    exchanges = _cassette("tools")
    answer, _ = _sse_answer(exchanges[-1])
    model_server.script(*[_reply(e) for e in exchanges[:-1]], _reply(exchanges[-1], delay=0.05))
    lab.open("tools.ipynb")
    index = _agent_cell_index(lab.root / "tools.ipynb")
    cell = lab.cell(index)
    lab.command("notebook:run-all-cells")

    # Live: the tool cards are in the widget while the final answer streams.
    # (state "attached": JupyterLab skips the layout of cells out of view, which Playwright calls hidden)
    cell.locator(".ipyagent-view details.ipyagent-tool").nth(2).wait_for(state="attached", timeout=60000)
    lab.page.wait_for_function(
        "([panel, i]) => { const c = document.querySelectorAll(panel + ' .jp-Notebook .jp-Cell')[i];"
        " return c.querySelector('.ipyagent-view .ipyagent-text p') !== null"
        " || c.querySelector('.jp-ipyagent-renderer') !== null; }", arg=[lab.panel, index])
    lab.screenshot(cell, "live-tools.png")

    renderer_of(cell).wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    live_text = renderer_of(cell).locator(".ipyagent-text").inner_text()
    live_tools = renderer_of(cell).locator(".ipyagent-tool-name").all_inner_texts()
    results = {
        m["tool_call_id"]: m["content"]
        for r in model_server.requests
        for m in r["body"]["messages"]
        if m["role"] == "tool"
    }
    assert len(live_tools) == len(results) == 3
    assert words(live_text) == shown(answer)

    lab.save_and_shutdown("tools.ipynb")
    saved = nbformat.read(lab.root / "tools.ipynb", as_version=4)
    assert "application/vnd.ipyagent.transcript+json" in saved.cells[index].outputs[0]["data"]

    lab.page.reload()
    lab.open("tools.ipynb", wait_kernel=False)
    cell = lab.cell(index)
    reopened = renderer_of(cell)
    reopened.wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    assert reopened.locator(".ipyagent-text").inner_text() == live_text
    assert reopened.locator(".ipyagent-tool-name").all_inner_texts() == live_tools
    assert "Error displaying widget" not in cell.inner_text()

    card = reopened.locator("details.ipyagent-tool").first
    result = card.locator(".ipyagent-result")
    assert card.get_attribute("open") is None and not result.is_visible()
    card.locator("summary").click()
    result.wait_for(state="visible")
    call_id = card.locator(".ipyagent-meta").first.inner_text().split(" · ")[0]
    assert result.inner_text() == results[call_id]
    assert "done in" in card.locator("summary").inner_text()
    lab.screenshot(cell, "reloaded-transcript.png")
    assert not lab.dialogs

    # The renderer follows the theme: JupyterLab Dark changes its colours (then back to light for the others).
    def colours() -> list[str]:
        return lab.page.evaluate("(sel) => { const n = document.querySelector(sel);"
                                 " const s = getComputedStyle(n); return [s.color, s.backgroundColor]; }",
                                 f"{lab.panel} .jp-ipyagent-renderer pre.ipyagent-result")
    light = colours()
    for theme, flag in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
        change = f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: {json.dumps(theme)}}})"
        lab.page.evaluate(f"() => {{ {change}; }}")
        lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{flag}'", timeout=30000)
        lab.page.wait_for_timeout(500)
        if flag == "false":
            assert colours() != light
            lab.screenshot(cell, "reloaded-transcript-dark.png")


HOSTILE = ('Look: <img src=x onerror="window.__pwned=1;alert(1)"> <script>window.__pwned=2;alert(2)</script> '
           '[click me](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">or me</a>')


def _assert_harmless(lab, cell) -> None:
    """Nothing of the payload ran or can run: no flag, no dialog, no live handler or script URL."""
    for link in cell.locator("a").all():
        href = link.get_attribute("href") or ""
        assert not href.strip().lower().startswith(("javascript", "data", "vbscript")), href
        link.click(modifiers=["Control"], no_wait_after=True)
    for summary in cell.locator("summary").all():
        summary.click()
    lab.page.wait_for_timeout(300)
    assert lab.page.evaluate("() => window.__pwned") is None
    assert lab.dialogs == []
    assert cell.locator("[onerror], [onload], [onclick], script").count() == 0


def test_hostile_model_and_tool_output_runs_nothing(lab, model_server):
    tool = ("from ipyagent.tools import activity\n\n@activity\ndef get_weather(city: str, state: str = '') -> str:\n"
            "    \"\"\"Weather now.\"\"\"\n    return " + repr(HOSTILE))
    write_notebook(lab.root / "hostile.ipynb", "%load_ext ipyagent\n%provider openai:gpt-6-luna", tool,
                    "%%agent --tools get_weather\nWeather in San Francisco?")
    model_server.script(Reply.sse_file(TOOL_CALL), openai_text_reply(HOSTILE, piece=6, delay=0.02))
    lab.open("hostile.ipynb")
    cell = lab.cell(2)
    lab.command("notebook:run-all-cells")
    renderer_of(cell).wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    text = renderer_of(cell).locator(".ipyagent-text").inner_text()
    assert "<script>window.__pwned=2;alert(2)</script>" in text  # shown as text
    _assert_harmless(lab, cell)
    assert renderer_of(cell).locator(".ipyagent-result").text_content() == HOSTILE
    lab.screenshot(cell, "hostile-live.png")

    lab.save_and_shutdown("hostile.ipynb")
    lab.page.reload()
    lab.open("hostile.ipynb", wait_kernel=False)
    cell = lab.cell(2)
    renderer_of(cell).wait_for(state="attached", timeout=60000)
    cell.scroll_into_view_if_needed()
    assert renderer_of(cell).locator(".ipyagent-text").inner_text() == text
    _assert_harmless(lab, cell)
    lab.screenshot(cell, "hostile-reloaded.png")


def test_stop_button_interrupts_and_keeps_the_partial_text(lab, model_server):
    full = expected_from(TEXT).text
    write_notebook(lab.root / "interrupt.ipynb", "%load_ext ipyagent\n%provider openai:gpt-6-luna",
                    "%%agent\nWhat is the weather in San Francisco?")
    model_server.script(Reply.sse_file(TEXT, delay=0.4), Reply.sse_file(TEXT))
    lab.open("interrupt.ipynb")
    cell = lab.cell(1)
    lab.page.evaluate(SAMPLE_JS, [lab.panel, 1, ANSWER_LENGTH_JS])
    lab.command("notebook:run-all-cells")
    lab.page.wait_for_function("window.__samples.some(s => !s.final && s.len > 0)", timeout=60000)

    lab.page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']").click()
    stopped_at = time.monotonic()
    renderer_of(cell).wait_for(state="attached", timeout=30000)
    cell.scroll_into_view_if_needed()
    assert time.monotonic() - stopped_at < 20
    rendered = renderer_of(cell)
    partial = rendered.locator(".ipyagent-text").inner_text()
    assert partial.strip() and len(partial) < len(full) and full.startswith(partial.strip()[:20])
    assert "interrupted" in rendered.locator(".ipyagent-status").inner_text()
    assert "interrupted" in rendered.locator(".ipyagent-footer").inner_text()
    # The stream really stopped: the server saw the client hang up before the end of the recording.
    assert model_server.wait_for(lambda: model_server.hangups, 5)
    lab.screenshot(cell, "interrupted.png")


def test_compare_cell_is_saved_side_by_side(lab, model_server):
    first, second = expected_from(TEXT).text, "The second model says hello."
    write_notebook(lab.root / "compare.ipynb", "%load_ext ipyagent",
                    "%%compare openai:gpt-6-luna openai:gpt-6.1-terra\nWhat is the weather in San Francisco?")
    model_server.script(Reply.sse_file(TEXT), openai_text_reply(second))
    lab.open("compare.ipynb")
    cell = lab.cell(1)
    lab.command("notebook:run-all-cells")
    panes = renderer_of(cell).locator(".ipyagent-pane")
    panes.nth(1).wait_for(state="attached", timeout=60000)
    texts = sorted(words(t) for t in panes.locator(".ipyagent-text").all_text_contents())
    assert texts == sorted([words(first), words(second)])

    lab.save_and_shutdown("compare.ipynb")
    lab.page.reload()
    lab.open("compare.ipynb", wait_kernel=False)
    cell = lab.cell(1)
    panes = renderer_of(cell).locator(".ipyagent-pane")
    panes.nth(1).wait_for(state="attached", timeout=60000)
    assert sorted(words(t) for t in panes.locator(".ipyagent-text").all_text_contents()) == texts
    assert [t.split(" ·")[0] for t in panes.locator(".ipyagent-pane-title").all_text_contents()] == [
        "openai:gpt-6-luna", "openai:gpt-6.1-terra"]
    rows = renderer_of(cell).locator(".ipyagent-compare-table tbody tr")
    assert [r.split("\t")[0] for r in rows.all_inner_texts()] == ["openai:gpt-6-luna", "openai:gpt-6.1-terra"]
    lab.screenshot(cell, "reloaded-compare.png")


def test_notebook7_renders_a_saved_transcript(lab, model_server, monkeypatch):
    """Notebook 7 loads the same extension: a saved transcript renders there, with no kernel involved."""
    from ipyagent import Agent
    from ipyagent.agent import transcript_of
    from ipyagent.notebook.views.transcript_output import bundle
    from ipyagent.tools import activity

    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return f"61 F in {city}"

    model_server.script(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT))
    monkeypatch.setenv("IPYAGENT_BROWSER_TEST_KEY", "sk-test-notebook7")
    events: list = []
    result = Agent("openai:gpt-6-luna", base_url=model_server.url, api_key_env="IPYAGENT_BROWSER_TEST_KEY",
                   tools=[get_weather]).run("Weather in San Francisco?", on_event=events.append)
    data, metadata = bundle(transcript_of(result, events=events))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%agent --tools get_weather\nWeather in San Francisco?", outputs=[
        nbformat.v4.new_output("display_data", data=data, metadata=metadata)])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "saved7.ipynb")

    lab.page.goto(f"{lab.url}/notebooks/saved7.ipynb?token=browser-test")
    rendered = lab.page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-ipyagent-renderer")
    rendered.wait_for(state="attached", timeout=60000)
    rendered.scroll_into_view_if_needed()
    assert words(rendered.locator(".ipyagent-text").inner_text()) == shown(expected_from(TEXT).text)
    card = rendered.locator("details.ipyagent-tool")
    card.locator("summary").click()
    assert card.locator(".ipyagent-result").inner_text() == "61 F in San Francisco"
    lab.screenshot(rendered, "notebook7-transcript.png")


def test_labextension_is_listed_enabled():
    import subprocess
    import sys

    listing = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, timeout=120
    )
    line = next((l for l in (listing.stdout + listing.stderr).splitlines() if l.strip().startswith("ipyagent ")), "")
    assert "enabled" in line and "OK" in line, listing.stdout + listing.stderr
