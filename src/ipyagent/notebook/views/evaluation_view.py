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

import asyncio
import sys
import threading
import time
from typing import Any

from IPython.display import display, update_display

from ...agent import EvalResult, Evaluation
from ..grading import shown
from ..render.evaluation import MIME_TYPE, bundle, progress_html
from ..render.evaluation_saved import DEFAULT_OUTPUT_MAX
from ..render.text.evaluation import evaluation_renderables
from ..render.text.records import print_rendered
from . import live_widget
from .evaluation_pages import Pager
from .live_widget import close_widgets
from .terminal import StatusLine, colour_enabled, tty_of
from .transcript_output import keep_saved_output, show_live

#: Seconds between two redraws of the progress table at most.
FRAME_S = 0.1


def show_in_terminal(data: dict[str, Any], metadata: dict[str, Any], stream: Any = None) -> None:
    """Terminal IPython: on a TTY the evaluation drawn with rich for its width
    (`render.text.evaluation`: summary, matrix one line per row, failures with their reasons),
    coloured unless ``NO_COLOR``; elsewhere (a pipe, a file) its plain text, as displayed."""
    stream = stream or sys.stdout
    if tty_of(stream) is None:
        return display(data, raw=True, metadata=metadata)
    print_rendered(stream, evaluation_renderables(data[MIME_TYPE]), colour=colour_enabled(stream))


def _later(wait: float, frame: Any) -> None:
    """Call `frame` in `wait` seconds: on the running loop when there is one (ipyagent's, where
    results end: no thread started per frame), else on a timer thread."""
    try:
        asyncio.get_running_loop().call_later(wait, frame)
    except RuntimeError:
        threading.Timer(wait, frame).start()


class EvaluationView:
    """Progress of one evaluation in a notebook (a widget under a display id: a progress line over a
    table per provider) or a terminal (on a TTY, the progress line rewritten in place on `stream`;
    nothing elsewhere until the end). `update` may be called from any thread, as often as results
    come. `background`: the evaluation runs in the background (``--background``, bound to `out`):
    the widget says so, and a terminal gets one line when it ends instead of the matrix."""

    def __init__(self, ev: Evaluation, *, widgets: bool, gates: list[str] | None = None, background: bool = False,
                 out: str | None = None, stream: Any = None, limit: int = DEFAULT_OUTPUT_MAX) -> None:
        self.ev = ev
        self.gates = gates  # the cell's --gate options, kept in the saved output's metadata
        self.background, self.out = background, out
        self.limit = limit  # bytes the saved output takes at most (%agent settings eval_output_max)
        self.name = out or "ev"  # the cell's -o variable, which the saved output's note names
        self.widget: Any = None
        self.display_id: str | None = None
        self.status: StatusLine | None = None  # the terminal's progress line
        self.frames = 0
        self._lock = threading.Lock()
        self._scheduled = False
        self._closed = False
        self._last = 0.0
        self.pager: Pager | None = None  # the live matrix's page (evaluation_pages.py), where anywidget draws it
        if widgets:
            self.widget = self._live_widget()
            self.display_id = show_live(self)  # marked live: a page that misses the end asks for it
        elif not background and (tty := tty_of(stream or sys.stdout)) is not None:
            self.status = StatusLine(tty)

    def _live_widget(self) -> Any:
        """The live matrix, a page at a time (`evaluation_pages`), gradable on any page; without the
        built front end or anywidget, the progress table (an HTML widget)."""
        if not live_widget.available():
            import ipywidgets

            return ipywidgets.HTML(value=self._html())
        self.pager = Pager(self.ev, note=self._note(), line=self._line)
        widget = live_widget.live_widget(kind="evaluation")
        widget.on_msg(self._on_msg)
        shown(self.ev, limit=self.limit, name=self.name)  # a grade clicked in a page finds it
        self.ev.listeners.append(self._graded)
        return widget

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        """A front end asked for a page (on the kernel's thread): sent at once."""
        if self.pager is not None and self.pager.ask(content):
            self._send()

    def _graded(self, result: EvalResult) -> None:
        """A run was graded while the live matrix shows: its row is sent again if on the page."""
        self.update(result)

    def _drawing(self) -> bool:
        """Frames are drawn: until the end, and after it for a background evaluation's live matrix."""
        return not self._closed or (self.background and self.pager is not None)

    def _send(self) -> None:
        with self._lock:
            if not self._drawing():
                return
            message = self.pager.message()  # type: ignore[union-attr]
        self.widget.send(message)

    def _html(self) -> str:
        """The widget's frame: the progress line (`Evaluation.progress`), the table per provider and,
        in the background, how to wait for it or stop it."""
        return progress_html(self.ev.provider_progress(), line=self._line(), note=self._note())

    def _note(self) -> str:
        """In the background: how to wait for it or stop it."""
        name = self.out or "ev"
        return (f"running in the background: {name}.wait() waits for it, {name}.cancel() stops it"
                if self.background else "")

    def _line(self) -> str:
        """The progress line (`Evaluation.progress`), and in batch mode how far the batches are
        (`Evaluation.batch_progress`: submitted, in progress, done, failed, cost at batch prices)."""
        batches = self.ev.batch_progress
        return f"{self.ev.progress} · {batches}" if batches is not None else str(self.ev.progress)

    def update(self, result: EvalResult | Any = None) -> None:
        """A cell ended (or started), or the batches moved on: redraw now if the last frame is `FRAME_S`
        old, else once later."""
        if self.widget is None and self.status is None:
            return
        if self.pager is not None and isinstance(result, EvalResult):
            self.pager.changed(result.row)
        with self._lock:
            if self._scheduled:
                return
            wait = self._last + FRAME_S - time.monotonic()
            if wait > 0:
                self._scheduled = True
                _later(wait, self._frame)
                return
        self._frame()

    def _frame(self) -> None:
        with self._lock:
            self._scheduled = False
            self._last = time.monotonic()
            if not self._drawing():
                return
            if self.status is not None:  # drawn under the lock: `finish` rubs out the last one
                self.frames += 1
                self.status.draw(f"evaluating · {self._line()}")
                return
        self.frames += 1
        if self.pager is not None:
            self.widget.send(self.pager.message())
        else:
            self.widget.value = self._html()

    def discard(self) -> None:
        """The evaluation did not start (no row could be rendered): the progress table goes."""
        with self._lock:
            self._closed = True
        if self.display_id is not None:
            update_display({"text/plain": ""}, raw=True, display_id=self.display_id)

    def fail(self, message: str) -> None:
        """A background evaluation ended with an error before it ran (no row could be rendered): its
        progress gives way to the one line saying so (stderr in a terminal)."""
        with self._lock:
            self._closed = True
        if self.display_id is not None:
            update_display({"text/plain": message}, raw=True, display_id=self.display_id)
        else:
            print(f"ipyagent: {message}", file=sys.stderr)

    def _ended_in_background(self) -> None:
        """A terminal's background evaluation ended: one line (not the matrix amid what the user types)."""
        name = self.out or "ev"
        print(f"\nipyagent: the background evaluation {name} ended: {self.ev.progress}; "
              f"{name}.summary() and {name}.to_dataframe() show it", file=sys.stderr)

    def finish(self) -> None:
        """Replace the progress with the saved matrix and summary (or print them in a terminal)."""
        with self._lock:
            self._closed = True
            if self.status is not None:
                self.status.erase()
        shown(self.ev, limit=self.limit, name=self.name)  # gradable from its matrix, and %agent grade's default
        self.ev.listeners.append(self.regrade)
        data, metadata = bundle(self.ev, self.gates, limit=self.limit, name=self.name)
        if self.display_id is not None:
            update_display(data, raw=True, metadata=metadata, display_id=self.display_id)

            keep_saved_output(self, data, metadata)
            self._end_live(data)
        elif self.background:
            self._ended_in_background()
        else:
            show_in_terminal(data, metadata)

    def _end_live(self, data: dict[str, Any]) -> None:
        """The saved output replaced the live view. In the foreground the live matrix closes. A
        background evaluation ended after its cell: JupyterLab applies a display update only while
        the cell that displayed it runs (its output area hears its own execution's messages), so
        its widget, which any front end keeps drawing, stays: the live matrix, its last page sent
        again and still paging; the progress table's widget shows the saved matrix's HTML."""
        if self.pager is None:
            if self.background:
                self.widget.value = data["text/html"]
            return
        if self.background:
            self.pager.ended = True
            self.pager.ask({"type": "hello"})
            self._send()
            return
        if self._graded in self.ev.listeners:
            self.ev.listeners.remove(self._graded)
        close_widgets(self.widget)

    def regrade(self, result: EvalResult) -> None:
        """A run was graded: draw the saved matrix again in place (nothing in a terminal)."""
        if self.display_id is None:
            return
        data, metadata = bundle(self.ev, self.gates, limit=self.limit, name=self.name)
        update_display(data, raw=True, metadata=metadata, display_id=self.display_id)
        keep_saved_output(self, data, metadata)
