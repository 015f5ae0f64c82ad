"""The notebook as the agent's workspace in JupyterLab (headless Chromium): a scripted local model asks
``%%agent --notebook`` to insert a cell and run it. Each asks in the call's card with the change as a
diff; approved, the cell is in the notebook with its output (the kernel ran it; the labextension put
the outputs under it) and the model's next request holds that output; denied, the notebook is as it was."""

from __future__ import annotations

import nbformat
import pytest

from ..support.stub_server import StubServer, openai_text_reply, openai_tool_call_reply
from .lab import renderer_of, write_notebook

pytestmark = pytest.mark.browser

ASK = "%%agent --notebook\nAdd a cell below this one that prints 6 * 7, and run it."


def _replies() -> list:
    return [openai_tool_call_reply("notebook_insert_cell", {"index": 2, "source": "print(6 * 7)"}),
            openai_tool_call_reply("notebook_run_cell", {"index": 2}, call_id="call_2"),
            openai_text_reply("The new cell printed 42.")]


def _decide(cell, n: int, button: str) -> str:
    """Wait for the `n`th question in `cell`'s live view, read its preview, click `button`."""
    bars = cell.locator(".ipyagent-live .ipyagent-approval")
    target = bars.locator(f".ipyagent-{button}")
    target.nth(0).wait_for(state="visible", timeout=60000)
    preview = bars.nth(0).locator(".ipyagent-preview").inner_text()
    target.nth(0).click()
    cell.locator("details.ipyagent-tool").nth(n).locator(
        "summary", has_text="approved by you" if button == "approve" else "denied").wait_for(state="attached",
                                                                                         timeout=30000)
    return preview


def test_approved_the_agent_inserts_and_runs_a_cell(lab):
    with StubServer(*_replies()) as server:
        write_notebook(lab.root / "workspace.ipynb",
                       f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}/v1", ASK)
        lab.open("workspace.ipynb")
        lab.command("notebook:run-all-cells")
        cell = lab.cell(1)
        inserted = _decide(cell, 0, "approve")
        lab.screenshot(cell, "workspace-asked-to-run.png")
        ran = _decide(cell, 1, "approve")
        renderer_of(cell).wait_for(state="attached", timeout=60000)
        new = lab.cell(2)
        new.locator(".jp-OutputArea-output", has_text="42").wait_for(timeout=30000)
        source = new.locator(".jp-InputArea-editor").inner_text()
        lab.screenshot(lab.page.locator(".jp-Notebook"), "workspace-inserted-and-run.png")
        lab.save_and_shutdown("workspace.ipynb")
        requests = server.requests

    assert "+print(6 * 7)" in inserted.splitlines()
    assert ran.splitlines() == ["runs cell 2:", "print(6 * 7)"]
    assert source.strip() == "print(6 * 7)"
    assert len(requests) == 3
    result = requests[2]["body"]["messages"][-1]
    assert result["role"] == "tool" and result["content"].endswith("outputs:\n42\n")
    saved = nbformat.read(lab.root / "workspace.ipynb", as_version=4)
    assert [c.source for c in saved.cells][2] == "print(6 * 7)"
    assert saved.cells[2].outputs[0]["text"] == "42\n"


def test_denied_nothing_changes(lab):
    with StubServer(openai_tool_call_reply("notebook_insert_cell", {"index": 2, "source": "print(6 * 7)"}),
                    openai_text_reply("Then I will not add it.")) as server:
        write_notebook(lab.root / "denied.ipynb",
                       f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}/v1", ASK)
        lab.open("denied.ipynb")
        lab.command("notebook:run-all-cells")
        cell = lab.cell(1)
        _decide(cell, 0, "deny")
        renderer_of(cell).wait_for(state="attached", timeout=60000)
        count = lab.page.locator(f"{lab.panel} .jp-Notebook .jp-Cell").count()
        lab.save_and_shutdown("denied.ipynb")
        requests = server.requests

    assert count == 2
    assert "denied by the user" in requests[1]["body"]["messages"][-1]["content"]
    assert len(nbformat.read(lab.root / "denied.ipynb", as_version=4).cells) == 2
