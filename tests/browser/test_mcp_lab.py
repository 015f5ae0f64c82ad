"""MCP servers in JupyterLab, as a person sees them: the MCP project's server-everything (npm, installed
by ``make install``) over stdio and over streamable HTTP on 127.0.0.1, its tools called by a scripted model.

- ``get-tiny-image``: the image is drawn in the tool's live card, in the saved output, and again after
  the notebook is saved and reopened; the next request to the model holds it as an image part.
"""

from __future__ import annotations

import json

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
