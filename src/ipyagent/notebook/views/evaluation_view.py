"""The output of ``%%compare --over``: live progress while it runs, then the saved matrix.

While the evaluation runs, the cell shows a progress table (per provider:
done/total, failures, cost so far, elapsed and estimated time left), redrawn at
most every `FRAME_S` seconds whatever the rate of results; a frame costs the
same for the thousandth result as for the first (it reads counters, not
answers). When it ends (finished, stopped by the budget or interrupted), the
display is replaced by the static bundle: the evaluation's JSON
(`evaluation_render.MIME_TYPE`) with HTML, Markdown and plain-text fallbacks,
secrets redacted, so a saved notebook shows the matrix without a kernel. A grade given later
(`Evaluation.grade`: a click in the matrix, ``ev.grade``, ``%agent grade``) redraws that output
the same way (`regrade`), so the saved notebook keeps the grades too.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from IPython.display import display, update_display

from ...agent import EvalResult, Evaluation
from ..grading import shown
from ..render.evaluation import MIME_TYPE, bundle, progress_html
from ..render.evaluation_terminal import evaluation_renderables
from ..render.terminal_records import print_rendered
from .terminal import colour_enabled
from .transcript_output import keep_saved_output, show_live

#: Seconds between two redraws of the progress table at most.
FRAME_S = 0.1


def show_in_terminal(data: dict[str, Any], metadata: dict[str, Any], stream: Any = None) -> None:
    """Terminal IPython: on a TTY the evaluation drawn with rich for its width
    (`evaluation_terminal`: summary, matrix one line per row, failures with their reasons),
    coloured unless ``NO_COLOR``; elsewhere (a pipe, a file) its plain text, as displayed."""
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return display(data, raw=True, metadata=metadata)
    print_rendered(stream, evaluation_renderables(data[MIME_TYPE]), colour=colour_enabled(stream))


class EvaluationView:
    """Progress of one evaluation in a notebook (a widget under a display id) or a terminal (nothing
    until the end). `update` may be called from any thread, as often as results come."""

    def __init__(self, ev: Evaluation, *, widgets: bool, gates: list[str] | None = None) -> None:
        self.ev = ev
        self.gates = gates  # the cell's --gate options, kept in the saved output's metadata
        self.widget: Any = None
        self.display_id: str | None = None
        self.frames = 0
        self._lock = threading.Lock()
        self._scheduled = False
        self._closed = False
        self._last = 0.0
        if widgets:
            import ipywidgets


            self.widget = ipywidgets.HTML(value=progress_html(ev.progress()))
            self.display_id = show_live(self)  # marked live: a page that misses the end asks for it

    def update(self, result: EvalResult | None = None) -> None:
        """A cell ended (or started): redraw now if the last frame is `FRAME_S` old, else once later."""
        if self.widget is None:
            return
        with self._lock:
            if self._scheduled:
                return
            wait = self._last + FRAME_S - time.monotonic()
            if wait > 0:
                self._scheduled = True
                threading.Timer(wait, self._frame).start()
                return
        self._frame()

    def _frame(self) -> None:
        with self._lock:
            self._scheduled = False
            self._last = time.monotonic()
            if self._closed:
                return
        self.frames += 1
        self.widget.value = progress_html(self.ev.progress())

    def discard(self) -> None:
        """The evaluation did not start (no row could be rendered): the progress table goes."""
        with self._lock:
            self._closed = True
        if self.display_id is not None:
            update_display({"text/plain": ""}, raw=True, display_id=self.display_id)

    def finish(self) -> None:
        """Replace the progress with the saved matrix and summary (or print them in a terminal)."""
        with self._lock:
            self._closed = True
        shown(self.ev)  # gradable from its matrix, and %agent grade's default
        self.ev.listeners.append(self.regrade)
        data, metadata = bundle(self.ev, self.gates)
        if self.display_id is not None:
            update_display(data, raw=True, metadata=metadata, display_id=self.display_id)

            keep_saved_output(self, data, metadata)
        else:
            show_in_terminal(data, metadata)

    def regrade(self, result: EvalResult) -> None:
        """A run was graded: draw the saved matrix again in place (nothing in a terminal)."""
        if self.display_id is None:
            return
        data, metadata = bundle(self.ev, self.gates)
        update_display(data, raw=True, metadata=metadata, display_id=self.display_id)
        keep_saved_output(self, data, metadata)
