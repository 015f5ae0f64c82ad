"""JupyterLab in headless Chromium: approval inside a ``%%compare`` cell.

Two providers (local stub servers) each ask for a tool call that needs approval. Each pane asks in
its own card; Deny in one and Approve in the other go to their own runs: the panes read "denied"
and "approved by you" live, in the saved output that replaces the widget, in the saved .ipynb and
after reload, and the kernel ran the tool for the approved call only. While a pane asks, its
footer says "waiting for your approval", not "streaming…".
"""

from __future__ import annotations

import nbformat
import pytest

from ..support.stub_server import StubServer, openai_text_reply, openai_tool_call_reply
from .lab import COMPARISON, LOOKUP, renderer_of, two_providers

pytestmark = pytest.mark.browser


def _status(pane) -> str:
    """What a pane's tool card says of the call (``call_1 · denied`` ...)."""
    return pane.locator("details.ipyagent-tool summary .ipyagent-meta").inner_text()


def _decide(pane, button: str, label: str) -> None:
    """Click `button` in `pane`'s question, then wait for its live card to say `label`."""
    target = pane.locator(f".ipyagent-approval .ipyagent-{button}")
    target.wait_for(state="visible", timeout=60000)
    target.click()  # Playwright clicks only a visible, enabled, unobscured button
    pane.locator("details.ipyagent-tool summary", has_text=label).wait_for(state="attached", timeout=30000)


def test_each_compare_pane_asks_and_its_answer_goes_to_its_own_run(lab):
    slow = dict(piece=4, delay=0.2)  # the answers after the decision stream slowly: the live cards are read first
    with StubServer(openai_tool_call_reply("lookup", {"query": "from a"}),
                    openai_text_reply("Not looked up, as you asked.", **slow)) as a, \
            StubServer(openai_tool_call_reply("lookup", {"query": "from b"}),
                       openai_text_reply("It was found.", **slow)) as b:
        two_providers(lab, "compare-approval.ipynb", a, b, LOOKUP)
        nb_path = lab.root / "compare-approval.ipynb"
        nb = nbformat.read(nb_path, as_version=4)
        nb.cells += [nbformat.v4.new_code_cell("%%compare openai:a b --tools lookup\nLook it up."),
                     nbformat.v4.new_code_cell("print('ran:', ran)")]
        nbformat.write(nb, nb_path)
        lab.open("compare-approval.ipynb")
        lab.command("notebook:run-all-cells")

        cell = lab.cell(2)
        panes = cell.locator(".ipyagent-comparison.ipyagent-live .ipyagent-pane")
        for n in (0, 1):  # both runs wait for an answer at once, each in its own pane, and its footer says so
            panes.nth(n).locator(".ipyagent-approval .ipyagent-approve").wait_for(state="visible", timeout=60000)
            panes.nth(n).locator(".ipyagent-footer-text", has_text="waiting for your approval").wait_for(timeout=10000)
        lab.screenshot(cell, "compare-approval-asked.png")
        _decide(panes.nth(0), "deny", "denied")
        assert panes.nth(1).locator(".ipyagent-approval .ipyagent-approve").is_enabled()  # still asking
        _decide(panes.nth(1), "approve", "approved by you")
        live = [_status(panes.nth(n)) for n in (0, 1)]

        rendered = renderer_of(cell)
        rendered.wait_for(state="attached", timeout=60000)
        final = [_status(rendered.locator(".ipyagent-pane").nth(n)) for n in (0, 1)]
        lab.cell(3).locator(".jp-OutputArea-output", has_text="ran:").wait_for(timeout=60000)
        ran = lab.cell(3).locator(".jp-OutputArea-output").inner_text().strip()
        lab.screenshot(cell, "compare-approval-final.png")
        lab.save_and_shutdown("compare-approval.ipynb")

    assert live[0] == "call_1 · denied" and live[1].startswith("call_1 · approved by you"), live
    assert final[0] == "call_1 · denied", final
    assert final[1].startswith("call_1 · approved by you · done in "), final
    assert ran == "ran: ['from b']"  # the kernel ran the approved call only
    assert [len(a.requests), len(b.requests)] == [2, 2]  # each model got its own tool result back
    denied_result = a.requests[1]["body"]["messages"][-1]
    assert denied_result["role"] == "tool" and "denied by the user" in denied_result["content"]
    assert b.requests[1]["body"]["messages"][-1]["content"] == "found it"

    saved = nbformat.read(nb_path, as_version=4)
    (record,) = [o["data"][COMPARISON] for o in saved.cells[2].outputs if COMPARISON in o.get("data", {})]
    calls = [(e["index"], p["approval"]) for e in record["entries"] for m in e["transcript"]["messages"]
             for p in m["parts"] if p["type"] == "tool_call"]
    assert calls == [(0, "denied"), (1, "approved")]
    assert not saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state")

    lab.page.reload()
    lab.open("compare-approval.ipynb", wait_kernel=False)
    rendered = renderer_of(lab.cell(2))
    rendered.wait_for(state="attached", timeout=60000)
    assert [_status(rendered.locator(".ipyagent-pane").nth(n)) for n in (0, 1)] == final
    assert not rendered.locator(".ipyagent-approval").count()  # nothing left to answer
    lab.screenshot(lab.cell(2), "compare-approval-reloaded.png")
