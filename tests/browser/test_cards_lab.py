"""Tool call cards and artifacts in JupyterLab, as a person sees them.

- Approval: a call with a 300-character argument shows Approve and Deny inside the output area
  (the arguments wrap in a capped box); the live footer says "waiting for your approval" until
  a click; Deny reads "denied" and Approve "approved by you", live and after the notebook is
  saved and reopened.
- An artifact: a tool output too big for the prompt goes to Task Memory; its entry opens to
  rendered Markdown (a heading and a table), not raw text, in the cell and after reopening.
"""

from __future__ import annotations

import nbformat
import pytest

from ..support.stub_server import openai_text_reply, openai_tool_call_reply
from .lab import LOOKUP, renderer_of, write_notebook

pytestmark = pytest.mark.browser

SETUP = "%load_ext ipyagent\n%provider openai:gpt-6-luna"
QUERY = ("q" * 20 + " ") * 15  # 315 characters, one long argument
MIME = "application/vnd.ipyagent.transcript+json"


def _inside(box: dict, outer: dict) -> bool:
    return (box["x"] >= outer["x"] - 0.5 and box["y"] >= outer["y"] - 0.5
            and box["x"] + box["width"] <= outer["x"] + outer["width"] + 0.5
            and box["y"] + box["height"] <= outer["y"] + outer["height"] + 0.5)


# Where the question is drawn, measured in one go (the card may be redrawn between two calls).
MEASURE_JS = """(cell) => {
  const box = n => { const r = n.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; };
  const bar = cell.querySelector('.ipyagent-view .ipyagent-approval');
  const args = bar.parentElement.querySelector('pre.ipyagent-args');
  const output = cell.querySelector('.jp-OutputArea-output');
  return {area: box(cell.querySelector('.jp-OutputArea')), approve: box(bar.querySelector('.ipyagent-approve')),
          deny: box(bar.querySelector('.ipyagent-deny')), args: args.textContent,
          wraps: args.scrollWidth <= args.clientWidth,
          fits: output.scrollWidth <= output.clientWidth + 1};
}"""


def _decide(lab, index: int, button: str, label: str) -> None:
    """Wait for the question in cell `index`, check where it is, click `button`, and wait for
    the live card to say `label`."""
    cell = lab.cell(index)
    target = cell.locator(f".ipyagent-view .ipyagent-approval .ipyagent-{button}")
    target.wait_for(state="visible", timeout=60000)
    cell.scroll_into_view_if_needed()
    seen = cell.evaluate(MEASURE_JS)
    for name in ("approve", "deny"):
        assert _inside(seen[name], seen["area"]), (name, seen)
    assert QUERY.strip() in seen["args"].replace("\n", "")
    assert seen["wraps"] and seen["fits"], seen
    lab.screenshot(cell, f"approval-{button}.png")
    # Not "streaming…" while the call waits: the footer's clock says what it waits for.
    cell.locator(".ipyagent-view .ipyagent-footer-text", has_text="waiting for your approval").wait_for(
        state="attached"
    )
    target.click()  # Playwright clicks only a visible, enabled, unobscured button
    lab.page.wait_for_function(
        "(cell) => !Array.from(cell.querySelectorAll('.ipyagent-footer-text')).some(n => "
        "n.textContent.includes('approval'))",
        arg=cell.element_handle(),
    )
    summary = cell.locator(".ipyagent-view details.ipyagent-tool summary", has_text=label)
    summary.wait_for(state="attached", timeout=30000)


def test_approve_and_deny_sit_in_the_output_area_and_say_what_was_decided(lab, model_server):
    arguments = {"query": QUERY}
    slow = 0.15  # the answers after the decision stream slowly: the live card is read first
    model_server.script(openai_tool_call_reply("lookup", arguments),
                        openai_text_reply("Not looked up, as you asked.", piece=4, delay=slow),
                        openai_tool_call_reply("lookup", arguments, call_id="call_2"),
                        openai_text_reply("It was found.", piece=4, delay=slow))
    write_notebook(lab.root / "approval.ipynb", SETUP, LOOKUP,
                    "%%agent --tools lookup\nLook it up.", "%%agent --tools lookup\nLook it up again.")
    lab.open("approval.ipynb")
    lab.command("notebook:run-all-cells")

    _decide(lab, 2, "deny", "denied")
    renderer_of(lab.cell(2)).wait_for(state="attached", timeout=60000)
    _decide(lab, 3, "approve", "approved by you")
    renderer_of(lab.cell(3)).wait_for(state="attached", timeout=60000)

    def statuses() -> list[str]:
        return [
            renderer_of(lab.cell(i)).locator("details.ipyagent-tool summary .ipyagent-meta").inner_text()
            for i in (2, 3)
        ]

    final = statuses()
    assert final[0] == "call_1 · denied", final
    assert final[1].startswith("call_2 · approved by you · done in "), final
    assert not renderer_of(lab.cell(2)).locator(".ipyagent-tool-error").count()

    lab.save_and_shutdown("approval.ipynb")
    saved = nbformat.read(lab.root / "approval.ipynb", as_version=4)
    calls = [p for i in (2, 3) for o in saved.cells[i].outputs if MIME in o.get("data", {})
             for m in o["data"][MIME]["messages"] for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["approval"] for c in calls] == ["denied", "approved"]
    lab.page.reload()
    lab.open("approval.ipynb", wait_kernel=False)
    for i in (2, 3):
        renderer_of(lab.cell(i)).wait_for(state="attached", timeout=60000)
    assert statuses() == final
    lab.screenshot(lab.cell(2), "approval-reloaded.png")


BIG_REPORT = '''from ipyagent.tools import activity

@activity
def sales_report() -> str:
    """The whole sales report, as Markdown."""
    rows = "\\n".join(f"| {i} | item {i} | {i * 3} |" for i in range(48_000))
    return "## Sales report\\n\\n| id | name | units |\\n| --- | --- | --- |\\n" + rows'''


def _opens_rendered(cell) -> None:
    entry = cell.locator(".jp-ipyagent-renderer details.ipyagent-artifact").first
    entry.wait_for(state="attached", timeout=60000)
    entry.locator("summary").first.click()
    table = entry.locator("table").first
    table.wait_for(state="visible", timeout=10000)
    assert entry.locator("h2", has_text="Sales report").is_visible()
    assert table.locator("th").all_inner_texts() == ["id", "name", "units"]
    assert "| --- |" not in entry.inner_text()  # not the raw Markdown
    assert not entry.locator("pre").count()
    body = entry.locator(".ipyagent-artifact-body").bounding_box()
    assert body is not None and body["height"] < 500, body  # scrolls inside the entry, as in %agent memory


def test_an_off_prompt_artifact_opens_rendered(lab, model_server):
    model_server.script(openai_tool_call_reply("sales_report", {}), openai_text_reply("The report is stored."))
    write_notebook(
        lab.root / "artifact.ipynb", SETUP, BIG_REPORT, "%%agent --tools sales_report\nGet the sales report."
    )
    lab.open("artifact.ipynb")
    lab.command("notebook:run-all-cells")
    cell = lab.cell(2)
    renderer_of(cell).wait_for(state="attached", timeout=90000)
    # Over the size limit for a tool result: the model got a reference, the report went to Task Memory.
    request = model_server.requests[-1]["body"]["messages"][-1]
    assert request["role"] == "tool" and "off-prompt" in request["content"] and len(request["content"]) < 10_000
    _opens_rendered(cell)
    lab.screenshot(cell, "artifact-open.png")
    lab.save_and_shutdown("artifact.ipynb")
    lab.page.reload()
    lab.open("artifact.ipynb", wait_kernel=False)
    _opens_rendered(lab.cell(2))
