"""The live view's widget: an anywidget whose front end is the labextension's transcript
renderer (``labextension/src/live.ts``, bundled by esbuild into ``static/live.js``), loaded
by a small `_esm` (``labextension/src/live_loader.ts``) from the labextension or, once per
page, from the kernel (`LiveWidget`), so that no widget state holds it.

One renderer draws a run live and saved, so both look the same. The kernel
sends custom widget messages (``WidgetView`` in view.py makes them):

* ``{"type": "snapshot", "seq": n, "doc": {"ops": [...]}}``: the run so far, in
  answer to the front end's ``{"type": "hello"}`` (a cell run live, or a page
  reopened mid-run: it catches up from the kernel's state);
* ``{"type": "ops", "seq": n, "ops": [...]}``: what changed since the last
  message, at most one every ~30 ms. An op is ``["seg", sid, kind, call]``,
  ``["text", sid, text]`` (appended), ``["tool", sid, call]``, ``["ask", sid,
  {"request", "name", "arguments"} | None]`` (a call waits for Approve / Deny; None:
  answered), ``["artifact", sid, summary]``, ``["notice", text]``, ``["error", text]``,
  ``["interrupted"]`` or ``["status", {"figures": [...], "ticking": "waiting" |
  "approval" | "streaming" | None, "elapsed": seconds}]`` (figures include a retry notice while
  the driver retries before the first token; ``approval``: a tool call waits for Approve / Deny);
* ``{"type": "end", "doc": transcript, "output": {"mime", "fallbacks", "metadata", "model_id"}}``:
  the whole transcript, once, at the end, with the rest of the cell's saved output (`end_message`).
  It is sent after the display update that replaces the widget with that output: a page that
  displayed the run has no output showing the widget by then; a page reopened mid-run, which has
  no display id for the update to reach (display ids are not saved), sets each output showing
  widget `model_id` to ``{mime: doc, **fallbacks}`` with `metadata` (labextension/src/reopened.ts),
  so it shows and saves the same transcript and no widget. A page reopened only after the run
  ended gets no ``end``: it asks the kernel for the saved output instead (saved_outputs.py).

A ``compare`` widget carries a whole %%compare cell: the same messages per run,
tagged ``"key": "pane/run"``, and its own (``compare``, ``run``, ``table``, ``end``;
labextension/src/compare_live.ts).

The front end sends ``{"type": "hello"}`` and, on a click in a card,
``{"type": "approve", "request": id, "verdict": true | false}`` (tagged with the run's
``key`` in a ``compare`` widget). Any client of the widget's comm can answer the same
way (a front end that draws no widget included).

No trait carries the answer, so no frame resends it and nothing of it stays in
widget state; the widget is closed when the run ends. The front end's loader also sends
``{"type": "bundle"}`` when the page has no front end of this build (`_send_bundle`).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

#: The built front end (``make install`` / the wheel build runs esbuild).
STATIC = Path(__file__).parents[1] / "static"


def available() -> bool:
    """True when the front end is built and anywidget is installed."""
    if not all((STATIC / name).is_file() for name in ("live.js", "live_loader.js", "live.css")):
        return False
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return True


#: The text in the loader that the build id replaces (labextension/src/live_loader.ts).
BUILD_SLOT = "__IPYAGENT_LIVE_BUILD__"


@lru_cache(maxsize=1)
def front_end() -> tuple[str, str, str]:
    """``(build, esm, css)``: the live view's front end as built, read once: `build`, the first 16
    hex digits of the SHA-256 of ``static/live.js`` (the id the labextension of the same build
    registers: labextension/scripts/build_live.mjs), `esm` that bundle, `css` its styles."""
    esm = (STATIC / "live.js").read_bytes()
    css = (STATIC / "live.css").read_text(encoding="utf-8")
    return hashlib.sha256(esm).hexdigest()[:16], esm.decode("utf-8"), css


@lru_cache(maxsize=1)
def _widget_class() -> type:
    import anywidget
    import traitlets

    build, _, _ = front_end()

    class LiveWidget(anywidget.AnyWidget):
        """A run's live view; `kind` ``compare``: a whole %%compare cell's (compare_view.py).

        Its `_esm` is a loader of a few hundred bytes (``static/live_loader.js``), not the front end:
        a client that keeps widget state (nbclient, papermill, nbconvert keep every widget's last
        state in the notebook, closed or not) keeps no front-end code. The loader draws with the
        labextension's front end of the same build, else asks the kernel once per page with
        ``{"type": "bundle"}``, answered here with ``{"type": "bundle", "esm", "css"}`` (a custom
        message: no client keeps it). No `_css`: the labextension's styles, or the bundle's."""

        _esm = (STATIC / "live_loader.js").read_text(encoding="utf-8").replace(BUILD_SLOT, build)
        kind = traitlets.Unicode("run").tag(sync=True)

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.on_msg(_send_bundle)

    return LiveWidget


def _send_bundle(widget: Any, content: Any, _buffers: Any) -> None:
    """Answer a loader's ``{"type": "bundle"}`` with the front end (on the kernel's thread)."""
    if isinstance(content, dict) and content.get("type") == "bundle":
        _, esm, css = front_end()
        widget.send({"type": "bundle", "esm": esm, "css": css})


def live_widget(kind: str = "run") -> Any:
    """A new live-view widget (anywidget): ``run``, fed by `WidgetView`; ``compare``, fed by
    `CompareWidgetView` (every run of the cell in one widget, its front end sent once).
    Its class ``ipyagent-view`` / ``ipyagent-compare`` is set from the start (the comm opens with it)."""
    return _widget_class()(kind=kind, _dom_classes=("ipyagent-compare" if kind == "compare" else "ipyagent-view",))


def end_message(doc: dict[str, Any], output: tuple[dict[str, Any], dict[str, Any]] | None = None,
                widget: Any = None) -> dict[str, Any]:
    """The ``end`` message of a run (`doc`: its transcript or comparison record) and, when `output`
    (the (data, metadata) bundle of its cell's display, which replaced `widget`) is given, the rest
    of that bundle: the record's MIME type, the fallbacks (``text/html``, ``text/plain``), the
    metadata and the widget's model id; the record itself is not sent twice."""
    message: dict[str, Any] = {"type": "end", "doc": doc}
    if output is not None and widget is not None:
        data, metadata = output
        mime = next(key for key in data if not key.startswith("text/"))  # the record's; the others are fallbacks
        message["output"] = {"mime": mime, "fallbacks": {k: v for k, v in data.items() if k != mime},
                             "metadata": metadata, "model_id": widget.model_id}
    return message


def close_widgets(*roots: Any) -> None:
    """Close `roots` and every widget they hold (children, layout, style), so none is left
    in the notebook's widget state."""
    seen: set[int] = set()
    stack = [r for r in roots if r is not None]
    while stack:
        widget = stack.pop()
        if id(widget) in seen:
            continue
        seen.add(id(widget))
        stack += [w for w in getattr(widget, "children", ()) or () if w is not None]
        stack += [w for w in (getattr(widget, "layout", None), getattr(widget, "style", None)) if hasattr(w, "close")]
        widget.close()
