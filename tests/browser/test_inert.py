"""Rendering model output never loads anything (issue 11): a canary server on 127.0.0.1 is named
in every remote-image form a model can write; run live, saved, then reopened untrusted, the page
makes zero requests to it (nor to the same-origin URL the model named), and inline raster images
still show."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import nbformat
import pytest

from ..support.stub_server import openai_text_reply
from .lab import renderer_of, write_notebook

pytestmark = pytest.mark.browser

PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class Canary:
    """An HTTP server that only counts the requests it gets."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                canary.hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _answer(host: str) -> str:
    return (f"Inline ![remote](http://{host}/remote.png) and ![proto](//{host}/proto.png) and "
            f"![same](/api/contents?canary-same-origin=1) and ![rel](canary-relative.png) and ![ref][r] "
            f"and a [link](http://{host}/link) and ![dot]({PNG})\n\n[r]: http://{host}/reference.png\n")


def _check(cell, requests: list[str], canary: Canary) -> None:
    """Every image form is a link with no referrer; the data: image shows; nothing was fetched."""
    body = renderer_of(cell)
    links = {a.get_attribute("href"): a for a in body.locator(".ipyagent-text a").all()}
    for href in (f"http://{canary.host}/remote.png", f"//{canary.host}/proto.png", "/api/contents?canary-same-origin=1",
                 f"http://{canary.host}/reference.png", f"http://{canary.host}/link"):
        assert href in links, (href, list(links))
        assert links[href].get_attribute("referrerpolicy") == "no-referrer"
        assert set((links[href].get_attribute("rel") or "").split()) >= {"noopener", "noreferrer", "nofollow"}
    images = [img.get_attribute("src") for img in body.locator("img").all()]
    assert images == [PNG]
    assert canary.hits == []
    assert [u for u in requests if canary.host in u or "canary-" in u] == []


def test_remote_images_in_model_output_are_never_fetched(lab, model_server):
    canary = Canary()
    requests: list[str] = []
    lab.page.on("request", lambda r: requests.append(r.url))
    try:
        answer = _answer(canary.host)
        write_notebook(lab.root / "canary.ipynb", "%load_ext ipyagent\n%provider openai:gpt-6-luna", "%%agent\nHi")
        model_server.script(openai_text_reply(answer, piece=7, delay=0.02))
        lab.open("canary.ipynb")
        cell = lab.cell(1)
        lab.command("notebook:run-all-cells")
        # The live view first (the request log covers every frame it drew), then the saved transcript.
        cell.locator("a.ipyagent-image-link").first.wait_for(state="attached", timeout=60000)
        renderer_of(cell).wait_for(state="attached", timeout=60000)
        cell.scroll_into_view_if_needed()
        _check(cell, requests, canary)

        lab.save_and_shutdown("canary.ipynb")
        path = lab.root / "canary.ipynb"
        nb = nbformat.read(path, as_version=4)
        nb.metadata["edited_elsewhere"] = True  # a changed file is no longer trusted
        nbformat.write(nb, path)
        lab.page.reload()
        lab.open("canary.ipynb", wait_kernel=False)
        cell = lab.cell(1)
        trusted = lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).trusted")
        assert trusted is False
        renderer_of(cell).wait_for(state="attached", timeout=60000)
        cell.scroll_into_view_if_needed()
        lab.page.wait_for_timeout(300)
        _check(cell, requests, canary)
    finally:
        canary.close()
