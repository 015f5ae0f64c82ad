"""A run's cell output: the live widget while it runs, the static transcript once it ends.

How the display is chosen (and why):

* While a run streams, the cell shows the live view (an anywidget drawn by the
  labextension's renderer, live_widget.py), displayed under a fresh ``display_id``.
* When the run ends (completed, failed or interrupted), that display is
  *updated* in place with a bundle holding no widget: the transcript
  (``application/vnd.ipyagent.transcript+json``), sanitized ``text/html`` and a
  short ``text/plain``; the output's metadata says which record it holds
  (``metadata["ipyagent"]["record"]``: ``transcript`` or ``comparison``), so the
  answer is not saved once more there.

What each copy costs (a saved notebook keeps every type of the bundle): the
transcript holds the run once, its default-valued fields left out
(`core.transcript.compact_json`); ``text/html`` draws it all for front ends without
the extension (JupyterLab and Notebook 7 without it, VS Code, Colab, GitHub,
nbviewer and nbconvert's HTML), written compactly (`render.compact`: on one line,
since the notebook stores text line by line at ~12 characters a line, and without
the end tags a parser infers), an answer denser than `transcript_render.HTML_BUDGET`
as its Markdown source; ``text/plain`` is the first `PLAIN_CHARS` characters and
the footer, for a terminal or a text export. No ``text/markdown``: every front end
that draws Markdown prefers the HTML, so it was a fourth copy of the answer that
nothing showed. A 23,000-character answer costs 2.33 times its text, one with a
table every ~260 characters 2.39 (``tests/notebook/test_saved_size.py``): the transcript
~1.05, the HTML ~1.25, the plain text ~0.02.

Keeping the widget reference in the saved output would make every front end
without the widget's state (a reopened notebook, JupyterLab without the
kernel's environment, VS Code, nbviewer without JavaScript) choose the widget
first and show "model not found" (ipywidgets #3773, #1664). Without it, each
front end takes the best static type it renders: JupyterLab and Notebook 7
with ipyagent installed use the extension's renderer for the transcript; without
it, and nbconvert's HTML export, use ``text/html``; a terminal ``text/plain``.
The final frame looks like the live view, so the swap is not noticed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from IPython.display import display, update_display

from ...agent import RunLog, comparison_record, transcript_of
from ...core import (
    COMPARISON_MIME_TYPE,
    MIME_TYPE,
    ComparisonRecord,
    Transcript,
    redact,
    redact_data,
)
from ..render.html import compact
from ..render.memory_html import draw_artifacts
from ..render.streamed_html import StreamedMarkdown
from ..render.transcript import (
    PLAIN_CHARS,
    comparison_to_html,
    comparison_to_text,
    to_html,
    to_text,
)
from .. import saved_outputs
from .compare_view import table_data


def _bundle(record: Any, mime_type: str, key: str, renderers: tuple[Any, Any],
            plain_limit: int | None = PLAIN_CHARS) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a saved record: its JSON (secrets redacted) under `mime_type`, the
    HTML and the plain-text fallbacks (that cut after `plain_limit` characters; None: whole),
    and ``{"ipyagent": {"record": key}}`` (one copy of the record per output: it is in `data`
    only; nothing names the live widget, which is closed when the run ends)."""
    doc = redact_data(record.to_json())
    clean = type(record).model_validate(doc)
    html, text = renderers
    data = {
        mime_type: doc,
        "text/html": redact(compact(html(clean))),
        "text/plain": redact(text(clean, limit=plain_limit)),
    }
    return data, {"ipyagent": {"record": key}}


def bundle(
    transcript: Transcript, *, plain_limit: int | None = PLAIN_CHARS, markdown: Callable[[str], str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a transcript's display: the transcript JSON and its
    HTML / plain-text fallbacks (the plain text cut after `plain_limit` characters; None: the
    whole run, for what a terminal shows in full); metadata ``{"ipyagent": {"record": "transcript"}}``.
    `markdown`: what renders the answer's Markdown in the HTML (default `render.markdown_to_html`;
    a live run's `StreamedMarkdown.html`, which rendered most of it while it streamed)."""
    html = partial(to_html, markdown=markdown) if markdown is not None else to_html
    return _bundle(transcript, MIME_TYPE, "transcript", (html, to_text), plain_limit)


class LiveTranscript:
    """The output of one run in a notebook.

    Displays `view` (its ``widget``) under a new display id, keeps what the transcript needs
    from the events it forwards to ``view.feed`` (a `RunLog`: turns, tool timings, artifacts,
    the streaming reply's record; no delta), and on `finish` replaces the view with the
    transcript bundle. `feed` and `finish` may be called from ipyagent's
    background loop thread.

    Args:
        view: a live view (``feed(event)``; ``widget`` is what is displayed).
        provider: ``provider:model`` of the run.
        alias: the name the user gave it (``-p small``), shown before the id (`Transcript.alias`).
        prompt: the user's prompt (kept in the transcript of an interrupted run).
        show: display the view now (False: the caller displays it and passes `display_id`).
        masked: values the redactor masked in the run's context, by block (`Transcript.masked`).
    """

    def __init__(
        self, view: Any, *, provider: str, prompt: str | None = None, show: bool = True, display_id: str | None = None,
        masked: dict[str, int] | None = None, alias: str | None = None,
    ) -> None:
        self.view = view
        self.alias = alias
        self.masked = dict(masked or {})  # values masked in the run's context, by block (the footer says so)
        self.provider = provider
        self.prompt = prompt
        self.log = RunLog()
        self.display_id = display_id or f"ipyagent-{uuid.uuid4().hex}"
        self.transcript: Transcript | None = None
        # The answer's Markdown rendered for the HTML fallback while it streams (the end renders only the rest).
        self.markdown = StreamedMarkdown()
        self._turn = 0
        self._first_request: float | None = None
        self._lock = threading.Lock()
        if show:
            show_live(view, self.display_id)

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "model_started":
            self._turn += 1
            if self._first_request is None:
                self._first_request = time.monotonic()
        self.log.feed(event)
        self.view.feed(event)
        if kind in ("text_delta", "reasoning_delta"):
            self.markdown.append((self._turn, event.index, kind), event.text)

    def finish(self, result: Any = None, *, next_cell: Any = None) -> Transcript | None:
        """Replace the live view with the transcript of `result` (None: the run was
        interrupted before it produced one), with `next_cell` (a `NextCell`: code offered
        as a new cell) when given. Only the first call counts."""
        with self._lock:
            if self.transcript is not None:
                return self.transcript
            elapsed = time.monotonic() - self._first_request if self._first_request is not None else None
            self.transcript = transcript_of(
                result, log=self.log, prompt=self.prompt, elapsed_s=elapsed, provider=self.provider
            )
            first = getattr(getattr(self.view, "state", None), "first_token", None)  # the view's clock
            if self.transcript.timings.first_token_s is None and first is not None:  # interrupted: no turn's ttft
                self.transcript.timings.first_token_s = round(first, 4)
            self.transcript.next_cell = next_cell
            self.transcript.alias = self.alias
            self.transcript.masked = dict(self.masked)
            draw_artifacts(self.transcript, self.log.artifacts)

        data, metadata = bundle(self.transcript, markdown=self.markdown.html)
        update_display(data, raw=True, metadata=metadata, display_id=self.display_id)
        keep_saved_output(self.view, data, metadata)
        if hasattr(
            self.view, "end"
        ):  # after the update: only a page reopened mid-run still has the view (live_widget.py)
            self.view.end(data[MIME_TYPE], (data, metadata))
        if hasattr(self.view, "close"):
            self.view.close()
        return self.transcript


def comparison_bundle(record: ComparisonRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a ``%%compare`` output: the comparison JSON and its fallbacks;
    metadata ``{"ipyagent": {"record": "comparison"}}``."""
    return _bundle(record, COMPARISON_MIME_TYPE, "comparison", (comparison_to_html, comparison_to_text))


def show_live(view: Any, display_id: str | None = None) -> str:
    """Display a live view (its ``widget``) under `display_id` (None: a new one), and return the id.
    The output is marked live (saved_outputs.live_metadata), so a page that missed the run's end
    can ask the kernel for the saved output that replaced it."""


    display_id = display_id or f"ipyagent-{uuid.uuid4().hex}"
    model_id = _model_id(view)
    if model_id is not None:
        saved_outputs.SAVED.started(model_id)
    display(getattr(view, "widget", view), display_id=display_id, metadata=saved_outputs.live_metadata())
    return display_id


def keep_saved_output(view: Any, data: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The saved output (`data`, `metadata`) replaced the live `view` (its ``widget``) shown by
    `show_live`: kept for a page that missed the update (saved_outputs.py)."""
    model_id = _model_id(view)
    if model_id is not None:
        saved_outputs.SAVED.finished(model_id, data, metadata)


def _model_id(view: Any) -> str | None:
    """The model id of the widget `view` shows (None: no widget)."""
    model_id = getattr(getattr(view, "widget", view), "model_id", None)
    return model_id if isinstance(model_id, str) else None


def finish_comparison(
    display_id: str, comparison: Any, *, prompt: str | None = None, view: Any = None, titles: list[str] | None = None
) -> ComparisonRecord:
    """Replace the live comparison `view` shown under `display_id` with its saved record (see the module doc)."""

    table = table_data(list(comparison.providers), list(comparison.figures), int(getattr(comparison, "runs", 1) or 1))
    selected = view.selected_runs() if hasattr(view, "selected_runs") else None  # kept as the user left them
    record = comparison_record(comparison, prompt=prompt, table=table, titles=titles, selected=selected)
    data, metadata = comparison_bundle(record)
    update_display(data, raw=True, metadata=metadata, display_id=display_id)
    keep_saved_output(view, data, metadata)
    if hasattr(view, "end"):  # after the update: only a page reopened mid-run still has the view (live_widget.py)
        view.end(data[COMPARISON_MIME_TYPE], (data, metadata))
    return record
