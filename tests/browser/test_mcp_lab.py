"""MCP servers in JupyterLab, as a person sees them: the MCP project's server-everything (npm, installed
by ``make install``) over stdio and over streamable HTTP on 127.0.0.1, its tools called by a scripted model.

- ``get-tiny-image``: the image is drawn in the tool's live card, in the saved output, and again after
  the notebook is saved and reopened; the next request to the model holds it as an image part.
"""

from __future__ import annotations

import json
import time

import nbformat
import pytest

from ..support.mcp_servers import everything, everything_http
from ..support.stub_server import openai_text_reply, openai_tool_call_reply
from .lab import renderer_of, write_notebook

pytestmark = pytest.mark.browser

SETUP = "%load_ext ipyagent\n%provider openai:gpt-4.1-mini"
MIME = "application/vnd.ipyagent.transcript+json"
#: The start of server-everything's MCP_TINY_IMAGE (a PNG).
TINY = "iVBORw0KGgoAAAANSUhEUgAAABQAAAAU"


def _image_src(locator) -> str:
    image = locator.locator("details.ipyagent-tool img.ipyagent-image").first
    image.wait_for(state="visible", timeout=60000)
    return image.get_attribute("src") or ""


def test_a_tool_image_is_drawn_live_saved_and_reopened(lab, model_server):
    slow = 0.2  # the answer after the call streams slowly: the live card is read first
    model_server.script(openai_tool_call_reply("ev_get-tiny-image", {}, call_id="call_a"),
                        openai_text_reply("That is the MCP logo.", piece=3, delay=slow),
                        openai_tool_call_reply("web_get-tiny-image", {}, call_id="call_b"),
                        openai_text_reply("The same logo, over HTTP.", piece=3, delay=slow))
    with everything_http() as url:
        write_notebook(lab.root / "mcp_image.ipynb", SETUP,
                       f"%mcp add ev -- {' '.join(everything())}\n%mcp add web --url {url}",
                       "%%agent --tools ev.get-tiny-image\nShow me the logo.",
                       "%%agent --tools web.get-tiny-image\nAnd over HTTP?")
        lab.open("mcp_image.ipynb")
        lab.command("notebook:run-all-cells")
        for index in (2, 3):
            cell = lab.cell(index)
            live = cell.locator(".ipyagent-view")
            assert _image_src(live).startswith(f"data:image/png;base64,{TINY}")  # while the answer streams
            assert "Here's the image you requested" in live.locator("details.ipyagent-tool").inner_text()
            lab.screenshot(cell, f"mcp-image-live-{index}.png")
            assert _image_src(renderer_of(cell)).startswith(f"data:image/png;base64,{TINY}")
        lab.save_and_shutdown("mcp_image.ipynb")
    # the model got the image as an image part after each tool result
    for request in (model_server.requests[1], model_server.requests[3]):
        after = request["body"]["messages"][-1]
        assert after["role"] == "user"
        assert after["content"][1]["image_url"]["url"].startswith(f"data:image/png;base64,{TINY}")
        assert "<image" not in json.dumps(request["body"])
    saved = nbformat.read(lab.root / "mcp_image.ipynb", as_version=4)
    cards = [p for i in (2, 3) for o in saved.cells[i].outputs if MIME in o.get("data", {})
             for m in o["data"][MIME]["messages"] for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["media"][0]["data"][:len(TINY)] for c in cards] == [TINY, TINY]
    lab.page.reload()
    lab.open("mcp_image.ipynb", wait_kernel=False)
    for index in (2, 3):
        assert _image_src(renderer_of(lab.cell(index))).startswith(f"data:image/png;base64,{TINY}")
    lab.screenshot(lab.cell(2), "mcp-image-reopened.png")


def _progress_values(cell) -> list[str]:
    """The progress bar's values the live card shows, read until the call has its result."""
    card = cell.locator(".ipyagent-view details.ipyagent-tool").first
    card.wait_for(state="attached", timeout=60000)
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = card.evaluate("(c) => ({bar: c.querySelector('progress') && c.querySelector('progress').value,"
                              " max: c.querySelector('progress') && c.querySelector('progress').max,"
                              " done: !!c.querySelector('pre.ipyagent-result')})")
        if state["done"]:
            return seen
        value = f"{state['bar']:g} of {state['max']:g}" if state["bar"] is not None else None
        if value and value not in seen:
            seen.append(value)
        time.sleep(0.05)
    raise AssertionError(f"the call did not finish; progress seen: {seen}")


def test_progress_a_sampling_approval_and_an_elicitation_form_in_the_live_card(lab, model_server):
    """trigger-long-running-operation: the live card's bar moves through the steps before the result;
    trigger-sampling-request: the request is shown, edited and approved, and the model gets the edit;
    trigger-elicitation-request: the form is drawn from its schema, filled and submitted, and the tool's
    result holds the values; the saved card notes both."""
    slow = 0.2
    model_server.script(
        openai_tool_call_reply("ev_trigger-long-running-operation", {"duration": 3, "steps": 4}, call_id="call_p"),
        openai_text_reply("It finished.", piece=3, delay=slow),
        openai_tool_call_reply("ev_trigger-sampling-request", {"prompt": "six times seven?", "maxTokens": 20},
                               call_id="call_s"),
        openai_text_reply("forty-two"),
        openai_text_reply("The server got its answer.", piece=3, delay=slow),
        openai_tool_call_reply("ev_trigger-elicitation-request", {}, call_id="call_e"),
        openai_text_reply("Thank you, Ada.", piece=3, delay=slow))
    write_notebook(lab.root / "mcp_ask.ipynb", SETUP, f"%mcp add ev -- {' '.join(everything())}",
                   "%%agent --tools ev.trigger-long-running-operation\nRun the long operation.",
                   "%%agent --tools ev.trigger-sampling-request\nAsk the server to sample.",
                   "%%agent --tools ev.trigger-elicitation-request\nAsk me for my details.")
    lab.open("mcp_ask.ipynb")
    lab.command("notebook:run-all-cells")

    progress = _progress_values(lab.cell(2))
    assert len(progress) >= 3 and progress[:3] == ["1 of 4", "2 of 4", "3 of 4"], progress

    sampling = lab.cell(3).locator(".ipyagent-view .ipyagent-sampling")
    sampling.wait_for(state="visible", timeout=60000)
    assert "MCP server ev asks the model (at most 20 tokens)" in sampling.inner_text()
    assert "Resource trigger-sampling-request context: six times seven?" in sampling.inner_text()
    lab.screenshot(lab.cell(3), "mcp-sampling-approval.png")
    sampling.locator(".ipyagent-edit").click()
    sampling.locator("textarea").fill("What is six times seven? In words.")
    sampling.locator(".ipyagent-approve").click()

    form = lab.cell(4).locator(".ipyagent-view .ipyagent-elicitation")
    form.wait_for(state="visible", timeout=60000)
    assert "Please provide inputs for the following fields" in form.inner_text()
    form.locator("[data-field=name]").fill("Ada Lovelace")
    form.locator("[data-field=check]").check()
    form.locator("[data-field=integer]").fill("7")
    form.locator("[data-field=titledSingleSelectEnum]").select_option("hero-3")
    lab.screenshot(lab.cell(4), "mcp-elicitation-form.png")
    form.locator(".ipyagent-accept").click()
    renderer_of(lab.cell(4)).wait_for(state="attached", timeout=60000)

    assert model_server.requests[3]["body"]["messages"][-1]["content"] == "What is six times seven? In words."
    result = renderer_of(lab.cell(4)).locator("pre.ipyagent-result").text_content()
    assert "- Name: Ada Lovelace" in result and "- Favorite Integer: 7" in result and '"hero-3"' in result
    lab.save_and_shutdown("mcp_ask.ipynb")
    saved = nbformat.read(lab.root / "mcp_ask.ipynb", as_version=4)
    parts = [p for i in (3, 4) for o in saved.cells[i].outputs if MIME in o.get("data", {})
             for m in o["data"][MIME]["messages"] for p in m["parts"]]
    notes = [n for p in parts if p["type"] == "tool_call" for n in p.get("notes", [])]
    assert notes[0].startswith("sampling request from ev answered by openai:gpt-4.1-mini (")
    assert notes[0].endswith("forty-two")
    assert notes[1] == "ev asked you for input: you answered"
    lab.page.reload()
    lab.open("mcp_ask.ipynb", wait_kernel=False)
    assert "answered by openai:gpt-4.1-mini" in renderer_of(lab.cell(3)).locator(".ipyagent-note").text_content()
