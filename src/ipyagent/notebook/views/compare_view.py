"""Views of a comparison: a grid of live panes (one `WidgetView` per provider) over a
table that fills in as runs finish; a text view for terminal IPython.

Every method is called on ipyagent's background loop (the callbacks of
`ipyagent.agent.compare.acompare`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, TextIO

from IPython.display import display

from ...agent import COLUMNS, NUMERIC, RunFigures, Stat, background_loop, summarize
from ...core import (
    ComparisonMark,
    ComparisonTable,
    Event,
    Message,
    ModelFailed,
    ProviderError,
    TextDelta,
    ToolAction,
    redact,
    redact_data,
    visible_controls,
)
from ..render.html import (  # noqa: F401 - the table's HTML and titles, known here too
    cells_to_html,
    escape,
    with_titles,
    without_unknown_cost,
)
from ..render.memory_html import draw_artifacts
from ..render.text.records import (
    clean,
    figures_table,
    header,
    print_rendered,
    transcript_renderables,
)
from ..render.text.terminal import colour_enabled
from ..render.text.transcript import INTERRUPTED
from ..render.transcript import price_notes
from .live_widget import close_widgets, end_message, live_widget
from .run_view import RunState, TextView, WidgetView
from .terminal import StatusLine, tty_of

#: Seconds between two redraws of a terminal comparison's status line.
FRAME_S = 0.25

_DECIMALS = {"ttft_s": 2, "total_s": 2, "input_tokens": 0, "output_tokens": 0, "tokens_per_s": 1, "cost": 6}


def _number(name: str, value: float) -> str:
    if name == "cost":
        return f"${value:.6f}".rstrip("0").rstrip(".") if value else "$0"
    return f"{value:.{_DECIMALS[name]}f}"


def cell_text(name: str, row: dict[str, Any], runs: int) -> str:
    """One cell of the summary table as text: ``median (min–max)`` when `runs` > 1."""
    if name == "provider":
        return row["provider"]
    if name == "stop_reason":
        return row["stop_reason"] or ("—" if row["runs"] else "")
    if name == "error":
        errors = row["errors"]
        if not errors:
            return ""
        kinds = ", ".join(dict.fromkeys(errors))
        prefix = f"{len(errors)} of {row['runs']} failed: " if runs > 1 else ""
        return f"{prefix}{kinds}: {row['error']}"
    stat: Stat | None = row[name]
    if stat is None:
        return "—" if row["runs"] else ""
    text = _number(name, stat.median)
    if runs > 1 and stat.min != stat.max:
        text += f" ({_number(name, stat.min)}–{_number(name, stat.max)})"
    return text


def table_rows(providers: list[str], figures: list[RunFigures], runs: int) -> list[list[str]]:
    """The summary table's cells (header excluded): per provider a row (``median (min–max)``
    with several runs), then with several runs one row per finished run (``run 2``)."""
    return keyed_table_rows(providers, figures, runs)[0]


def keyed_table_rows(providers: list[str], figures: list[RunFigures],
                     runs: int) -> tuple[list[list[str]], list[tuple[int, int | None]]]:
    """(`table_rows`, each row's (provider index, run): run None for a provider's row).

    A run's own row shows what it recorded, failed or stopped too (the figures its pane's
    footer shows); a provider's median row, with several runs, is over its successful runs."""
    rows: list[list[str]] = []
    keys: list[tuple[int, int | None]] = []
    for index, row in enumerate(summarize(providers, figures)):
        mine = sorted((f for f in figures if f.index == index), key=lambda f: f.run)
        if runs == 1:
            rows.append([cell_text(name, _run_row(mine[0]) if mine else row, 1) for name, _ in COLUMNS])
            keys.append((index, None))
            continue
        cells = [cell_text(name, row, runs) for name, _ in COLUMNS]
        done = f"{row['runs']}/{runs}" if row["runs"] < runs else str(runs)
        cells[0] += f" · median (min–max) of {done} runs"
        rows.append(cells)
        keys.append((index, None))
        for fig in mine:
            cells = [cell_text(name, _run_row(fig), 1) for name, _ in COLUMNS]
            cells[0] = f"run {fig.run + 1}"
            rows.append(cells)
            keys.append((index, fig.run))
    return rows, keys


def _run_row(fig: RunFigures) -> dict[str, Any]:
    """One run's figures in `summarize`'s shape; tokens of a run that ended without usage: none."""
    row: dict[str, Any] = {"provider": fig.provider, "runs": 1, "ok": int(fig.ok)}
    for name in NUMERIC:
        value = getattr(fig, name)
        if name.endswith("_tokens") and not fig.ok and not value:
            value = None
        row[name] = Stat(value, value, value) if value is not None else None
    row["stop_reason"] = fig.stop_reason or ""
    row["errors"] = [] if fig.ok else [fig.error_type]
    row["error"] = fig.error
    return row


def table_data(providers: list[str], figures: list[RunFigures], runs: int) -> ComparisonTable:
    """The figures table as the live view and the saved record both draw it (one source)."""
    rows, keys = keyed_table_rows(providers, figures, runs)
    return ComparisonTable(columns=table_columns(runs), rows=rows, row_runs=[list(k) for k in keys],
                           marks=table_marks(providers, figures, keys))


#: The figures a comparison's table marks as the best among the providers: (key of `COLUMNS`, label).
MARKS = (("total_s", "fastest"), ("cost", "cheapest"), ("output_tokens", "fewest tokens"))


def table_marks(providers: list[str], figures: list[RunFigures],
                keys: list[tuple[int, int | None]]) -> list[ComparisonMark]:
    """Per figure of `MARKS`, the provider rows (of `keys`) whose median over successful runs is
    the lowest; none when fewer than two providers have it, or when they all have the same."""
    medians = summarize(providers, figures)
    names = [name for name, _ in COLUMNS]
    marks = []
    for key, label in MARKS:
        values = {i: row[key].median for i, row in enumerate(medians) if row[key] is not None}
        if len(values) < 2 or len(set(values.values())) < 2:
            continue
        best = min(values.values())
        marks += [ComparisonMark(row=r, column=names.index(key), label=label)
                  for r, (index, run) in enumerate(keys) if run is None and values.get(index) == best]
    return marks


def table_columns(runs: int) -> list[str]:
    """The summary table's column titles (a provider's row says when it holds medians)."""
    return [title for _, title in COLUMNS]


def table_text(providers: list[str], figures: list[RunFigures], runs: int, titles: list[str] | None = None) -> str:
    """The summary table as aligned plain text (terminal IPython, logs); `titles`: the names the
    providers were given (`with_titles`)."""
    cells, keys = keyed_table_rows(providers, figures, runs)
    named = with_titles(cells, [list(k) for k in keys], titles)
    head, cells = without_unknown_cost([title for _, title in COLUMNS], named)
    rows = [head, *cells]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows).rstrip()


def _fail(view: Any, fig: RunFigures) -> None:
    """Show a run that failed without events (its agent could not be built) as a failed run,
    one stopped midway as interrupted."""
    if fig.error_type == "cancelled":
        if not view.state.finished:
            view.mark_interrupted()
    elif not view.state.finished:
        error = ProviderError(fig.error_type or "invalid_request", fig.error or "")  # type: ignore[arg-type]
        view.feed(ModelFailed(error, Message(role="assistant")))


class _PaneLink:
    """One run's channel inside its comparison's widget: the run's messages (live_widget.py's
    protocol) go out tagged with its key, ``"pane/run"`` (Approve / Deny clicks come back so)."""

    def __init__(self, owner: "CompareWidgetView", key: str) -> None:
        self.owner, self.key = owner, key

    def send(self, content: dict[str, Any]) -> None:
        self.owner.live.send({**content, "key": self.key})


class CompareWidgetView:
    """A %%compare cell's live view: ONE widget for the whole cell (its ~280 kB front end is
    sent once, not once per provider), drawn in the browser with the saved comparison's own
    frame (labextension/src/compare.ts, compare_live.ts has the protocol): one pane per
    provider with its runs selectable, and the figures table, filled in as runs end.

    Each run is a `WidgetView` whose messages travel through this widget, tagged with the
    run's key. When a run ends, its pane gets the run's transcript (`RunFigures.transcript`)
    and the table the figures read from that same transcript, so they agree.
    """

    def __init__(self, providers: list[str], runs: int, resolved: list[str] | None = None) -> None:
        """`providers`: the panes' titles as the user typed them (aliases); `resolved`: the
        ``provider:model`` each stands for, shown beside a title that differs from it."""

        self.providers, self.runs = list(providers), runs
        self.resolved = list(resolved or providers)
        self.figures: list[RunFigures] = []
        self.live = live_widget(kind="compare")  # its class: ipyagent-compare
        self.live.on_msg(self._on_msg)
        self.widget = self.live
        self.views: list[WidgetView | None] = [None] * len(self.providers)  # each pane's current run
        self.run_views: dict[tuple[int, int], WidgetView] = {}
        self.ended: dict[tuple[int, int], dict[str, Any]] = {}  # finished runs' transcripts, as sent
        self.selected: dict[int, int] = {}  # pane -> the run the user picked in it (browser -> kernel "select")
        self.table = table_data(self.resolved, [], runs)  # rows named as the saved record names them
        self._synced = self._closed = False

    def pane_titles(self) -> list[dict[str, str]]:
        return [{"title": t, "resolved": r} for t, r in zip(self.providers, self.resolved)]

    def _ipython_display_(self) -> None:
        display(self.widget)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        """A front end said hello (on the kernel's thread): answer on the loop. A click on
        Approve / Deny in a run's card (tagged with the run's key) goes to that run's view; a run
        the user picked in a pane is kept for the saved record."""
        if not isinstance(content, dict):
            return
        if content.get("type") == "select":
            pane, run = content.get("pane"), content.get("run")
            if (type(pane) is int and type(run) is int and 0 <= pane < len(self.providers)
                    and 0 <= run < self.runs):
                self.selected[pane] = run
        elif content.get("type") == "hello":
            background_loop().call_soon_threadsafe(self._hello)
        elif content.get("type") == "approve":
            pane, _, run = str(content.get("key")).partition("/")
            view = self.run_views.get((int(pane), int(run))) if pane.isdigit() and run.isdigit() else None
            if view is not None:
                view._on_msg(widget, content, buffers)

    def selected_runs(self) -> list[int | None]:
        """The run the user picked in each pane (None: not picked), as the saved record keeps it."""
        return [self.selected.get(index) for index in range(len(self.providers))]

    def _hello(self) -> None:
        """The layout and everything so far: finished runs' transcripts, running runs' snapshots."""
        if self._closed:
            return
        self._synced = True
        self.live.send({"type": "compare", "panes": redact_data(self.pane_titles()), "runs": self.runs,
                        "started": [list(k) for k in self.run_views], "table": self._table_doc(), "footer": "",
                        "selected": self.selected_runs()})
        for key, view in self.run_views.items():
            if key in self.ended:
                self.live.send({"type": "end", "key": f"{key[0]}/{key[1]}", "doc": self.ended[key]})
            else:
                view._hello()

    def _table_doc(self) -> dict[str, Any]:
        return redact_data(self.table.model_dump(mode="json"))

    def start(self, index: int, run: int) -> None:
        view = WidgetView(self.resolved[index], link=_PaneLink(self, f"{index}/{run}"))  # its footer as the saved one
        self.views[index] = self.run_views[(index, run)] = view
        if self._synced:
            self.live.send({"type": "run", "pane": index, "run": run})
            view._hello()

    def feed(self, index: int, run: int, event: Event) -> None:
        self.run_views[(index, run)].feed(event)

    async def request_approval(self, index: int, action: ToolAction) -> bool:
        view = self.views[index]
        assert view is not None, "a tool call before its run started"
        return await view.request_approval(action)

    def finish(self, fig: RunFigures) -> None:
        """A run ended: its pane shows its transcript, the table its figures (one record for both)."""
        view = self.run_views.get((fig.index, fig.run))
        if view is None:
            self.start(fig.index, fig.run)
            view = self.run_views[(fig.index, fig.run)]
        _fail(view, fig)
        if fig.transcript is not None:
            # Off-prompt artifacts as %agent memory draws them (the saved record shares this transcript).
            draw_artifacts(fig.transcript, [s.data for s in view.state.segments.values() if s.kind == "artifact"])
            doc = self.ended[(fig.index, fig.run)] = redact_data(fig.transcript.to_json())
            view.end(doc)
        self.figures.append(fig)
        self.table = table_data(self.resolved, self.figures, self.runs)
        if self._synced:
            self.live.send({"type": "table", "table": self._table_doc()})

    def mark_interrupted(self) -> None:
        for view in self.run_views.values():
            if not view.state.finished:
                view.mark_interrupted()

    def end(self, record: dict[str, Any], output: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """The comparison is over: its saved record, once, with the rest of the cell's saved
        `output` (a page reopened mid-run draws it and puts it in its output; live_widget.end_message)."""
        if self._synced and not self._closed:
            self.live.send(end_message(record, output, self.widget))

    def close(self) -> None:
        """Close every widget of the comparison (its saved record has replaced it)."""

        self._closed = True
        for view in self.run_views.values():
            view.close()
        close_widgets(self.widget)


class CompareTextView:
    """Terminal view: each run's reply printed as a block when it ends, then the table.

    On a colour terminal (`terminal.colour_enabled`) drawn with rich (render/text/records.py):
    each run's transcript (the answer as Markdown, tool lines, its coloured footer) under a
    header naming the provider and run, then one table of the figures.

    While runs stream, a TTY shows one status line (`terminal.StatusLine`): per provider the
    characters so far, or done / failed, and the seconds since the first run started; redrawn
    every `FRAME_S` seconds on the loop (a delta only counts its characters), erased before a
    run's block, an approval prompt, the interrupt marker or the table is written."""

    def __init__(self, providers: list[str], runs: int, stream: TextIO | None = None,
                 titles: list[str] | None = None) -> None:
        """`providers`: the ``provider:model`` ids; `titles`: the names the user gave them (aliases),
        shown first wherever a provider is named, the id beside."""
        self.providers, self.runs = list(providers), runs
        self.titles = list(titles or providers)
        self.stream = stream or sys.stdout
        self.colour = colour_enabled(self.stream)
        self.figures: list[RunFigures] = []
        self.states = [RunState(p) for p in self.providers]
        tty = tty_of(self.stream)
        self.status = StatusLine(tty) if tty is not None else None
        self.chars = [0] * len(self.providers)  # the current run's answer so far, per provider
        self.started: float | None = None  # when the first run started (the status line's clock)
        self.frames = 0
        self._timer: asyncio.TimerHandle | None = None
        self._asking = 0  # approval prompts on screen: no status line meanwhile

    def start(self, index: int, run: int) -> None:
        self.states[index] = RunState(self.providers[index])
        self.chars[index] = 0
        if self.started is None:
            self.started = time.monotonic()
        if self.status is not None and self._timer is None:
            self._frame()

    def feed(self, index: int, run: int, event: Event) -> None:
        self.states[index].add(event)
        if isinstance(event, TextDelta):
            self.chars[index] += len(event.text)

    def status_text(self) -> str:
        """``comparing · small 1234 chars · openai:b done 3.1 s · 12 s``: each provider's current
        run (its characters so far, or how it ended and its time), then the seconds so far."""
        parts = []
        for index, title in enumerate(self.titles[: len(self.providers)]):
            ended = [f for f in self.figures if f.index == index]
            if len(ended) == self.runs:
                failed = sum(not f.ok for f in ended)
                took = ended[-1].total_s
                shown = ("failed" if failed and self.runs == 1 else f"done, {failed} failed" if failed
                         else f"done {took:.1f} s" if took is not None else "done")
            else:
                shown = f"{self.chars[index]} chars" if self.chars[index] else "waiting"
                shown = f"run {len(ended) + 1}/{self.runs} {shown}" if self.runs > 1 else shown
            parts.append(f"{title} {shown}")
        elapsed = 0.0 if self.started is None else time.monotonic() - self.started
        return visible_controls(redact(" · ".join(["comparing", *parts, f"{elapsed:.0f} s"])))

    def _running(self) -> bool:
        return len(self.figures) < len(self.providers) * self.runs

    def _frame(self) -> None:
        """Draw the status line and, while runs go on, again in `FRAME_S` seconds on the loop
        (fed outside a loop: drawn at each start only)."""
        self._timer = None
        if self.status is None or not self._running():
            return
        if not self._asking:
            self.frames += 1
            self.status.draw(self.status_text())
        try:
            self._timer = asyncio.get_running_loop().call_later(FRAME_S, self._frame)
        except RuntimeError:
            pass

    def _erase(self) -> None:
        if self.status is not None:
            self.status.erase()

    def close(self) -> None:
        """The comparison is over (ended, failed or stopped), or its table is next: no more status line."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._erase()

    async def request_approval(self, index: int, action: ToolAction) -> bool:
        self._asking += 1
        self._erase()
        try:
            return await TextView(self.providers[index], self.stream).request_approval(action)
        finally:
            self._asking -= 1

    def finish(self, fig: RunFigures) -> None:
        self._erase()  # the next frame draws it again under the block, while runs go on
        self.figures.append(fig)
        if not self._running():
            self.close()
        if self.colour:
            return self._draw_run(fig)
        run = f" · run {fig.run + 1} of {self.runs}" if self.runs > 1 else ""
        state = self.states[fig.index]
        if _stopped(fig):  # what it had answered, then the one marker (as %%agent's)
            body = f"{state.text}\n{INTERRUPTED}" if state.text else INTERRUPTED
        else:
            body = state.text if fig.ok else f"[error] {fig.error_type}: {fig.error}"
        self.stream.write(visible_controls(redact(f"── {self._named(fig)}{run} ──\n{body}\n")))
        self.stream.flush()

    def mark_interrupted(self) -> None:
        """The status line goes; each stopped pane carries the marker already (`finish`), so it is
        written here only when no pane was stopped (the interrupt came before any run started)."""
        self.close()
        if not any(_stopped(fig) for fig in self.figures):
            self.stream.write(f"{INTERRUPTED}\n")

    def _draw_run(self, fig: RunFigures) -> None:
        from rich.text import Text

        title = self.titles[fig.index] if fig.index < len(self.titles) else str(fig.provider)
        note = "".join(([f"· {fig.provider} "] if title != fig.provider else [])
                       + ([f"· run {fig.run + 1} of {self.runs}"] if self.runs > 1 else [])).strip()
        if fig.transcript is not None and (fig.transcript.status == "interrupted" or not _stopped(fig)):
            body = transcript_renderables(fig.transcript)  # a stopped run's text ends with the marker
        elif _stopped(fig):  # stopped before it had an answer
            body = [Text(INTERRUPTED, style="bold yellow")]
        else:
            body = [Text(visible_controls(redact(f"[error] {fig.error_type}: {fig.error}")), style="bold red")]
        print_rendered(self.stream, [header(title, note), *body])

    def _named(self, fig: RunFigures) -> str:
        """``small · openai:gpt-6-luna`` (an alias), else the id."""
        title = self.titles[fig.index] if fig.index < len(self.titles) else str(fig.provider)
        return f"{title} · {fig.provider}" if title != fig.provider else str(fig.provider)

    def show_table(self) -> None:
        self.close()
        if self.colour:
            from rich.text import Text

            table = table_data(self.providers, self.figures, self.runs)
            notes = [Text(clean(note), style="dim") for note in self._price_notes()]
            return print_rendered(self.stream, [figures_table(table, titles=self.titles), *notes])
        table_lines = table_text(self.providers, self.figures, self.runs, self.titles)
        self.stream.write(visible_controls(redact(table_lines)) + "\n")
        self.stream.write("".join(f"{visible_controls(redact(note))}\n" for note in self._price_notes()))
        self.stream.flush()

    def _price_notes(self) -> list[str]:
        """Why the runs' prices are unknown, each note once (under the table: once per cell)."""
        return price_notes(fig.transcript for fig in self.figures if fig.transcript is not None)


def _stopped(fig: RunFigures) -> bool:
    """The run was stopped by an interrupt (`agent.compare`: ``cancelled``), its text partial."""
    return fig.error_type == "cancelled"
