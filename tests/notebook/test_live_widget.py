"""The live view's widget carries a loader, not its front end, and hands the front end to a page
that asks for it (live_widget.py; labextension/src/live_loader.ts, live_registry.ts)."""

from __future__ import annotations

import hashlib
import json

import pytest

from ipyagent.notebook.views import live_widget as lw

pytestmark = pytest.mark.skipif(not lw.available(), reason="the front end is not built")


def test_the_widget_state_holds_the_loader_of_its_build():
    widget = lw.live_widget()
    try:
        state = widget.get_state()
        build = hashlib.sha256((lw.STATIC / "live.js").read_bytes()).hexdigest()[:16]
        assert f'"{build}"' in state["_esm"] and lw.BUILD_SLOT not in state["_esm"]
        assert len(state["_esm"]) < 3_000 and "_css" not in state
        assert len(json.dumps(state)) < 4_000
    finally:
        widget.close()


def test_the_labextension_registers_the_same_build():
    """The id the labextension was built with (lib/live_build.js, bundled into it) is the one the
    kernel computes, so JupyterLab draws with its own copy and asks the kernel for nothing."""
    build, _, _ = lw.front_end()
    chunks = [p.read_text(encoding="utf-8") for p in (lw.STATIC.parents[1] / "labextension" / "static").glob("*.js")]
    # As a quoted key, or (an id starting with a letter is a name to the minifier) as `registry.ID=`.
    assert chunks and any(f'"{build}"' in chunk or f"'{build}'" in chunk or f".{build}=" in chunk for chunk in chunks)


class _Widget:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, content: dict) -> None:
        self.sent.append(content)


def test_a_bundle_request_is_answered_with_the_front_end_and_its_styles():
    widget = _Widget()
    lw._send_bundle(widget, {"type": "hello"}, [])
    assert widget.sent == []  # the views answer the rest
    lw._send_bundle(widget, {"type": "bundle"}, [])
    (answer,) = widget.sent
    assert answer == {"type": "bundle", "esm": (lw.STATIC / "live.js").read_text(encoding="utf-8"),
                      "css": (lw.STATIC / "live.css").read_text(encoding="utf-8")}
