"""Views of a comparison: a grid of live panes (one `WidgetView` per provider) over a
table that fills in as runs finish; a text view for terminal IPython.

Every method is called on ipyagent's background loop (the callbacks of
`ipyagent.agent.compare.acompare`).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..agent.compare import COLUMNS, RunFigures, Stat, summarize
from ..core import Event, Message, ModelFailed, ProviderError, ToolAction
from ..core.redact import redact
from .render import escape
from .view import RunState, TextView, WidgetView

TABLE_STYLE = """<style>
.ipyagent-compare-table{border-collapse:collapse;margin-top:6px;font-size:var(--jp-ui-font-size1,13px)}
.ipyagent-compare-table th,.ipyagent-compare-table td{border:1px solid var(--jp-border-color2,#ddd);padding:2px 8px;text-align:right}
.ipyagent-compare-table td:first-child,.ipyagent-compare-table td:last-child,.ipyagent-compare-table th{text-align:left}
.ipyagent-compare-table .ipyagent-error{border-left:none;padding-left:8px}
.ipyagent-pane-title{font-weight:bold}
</style>"""

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
    """The summary table's cells (header excluded), one row per provider."""
    rows = []
    for row in summarize(providers, figures):
        cells = [cell_text(name, row, runs) for name, _ in COLUMNS]
        if runs > 1:
            cells[0] += f" ({row['runs']}/{runs} runs)" if row["runs"] < runs else f" ({runs} runs)"
        rows.append(cells)
    return rows


def table_columns(runs: int) -> list[str]:
    """The summary table's column titles."""
    return [title + (" median (min–max)" if runs > 1 and name in _DECIMALS else "") for name, title in COLUMNS]


def cells_to_html(columns: list[str], rows: list[list[str]]) -> str:
    """A figures table as HTML, every cell escaped; the last column (the error) marked."""
    head = "".join(f"<th>{escape(title)}</th>" for title in columns)
    body = []
    for cells in rows:
        tds = [f"<td>{escape(c)}</td>" for c in cells[:-1]]
        tds.append(f'<td class="ipyagent-error">{escape(cells[-1])}</td>' if cells and cells[-1] else "<td></td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f'<table class="ipyagent-compare-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def table_html(providers: list[str], figures: list[RunFigures], runs: int) -> str:
    """The summary table as HTML (every cell escaped)."""
    return TABLE_STYLE + cells_to_html(table_columns(runs), table_rows(providers, figures, runs))


def table_text(providers: list[str], figures: list[RunFigures], runs: int) -> str:
    """The summary table as aligned plain text (terminal IPython, logs)."""
    rows = [[title for _, title in COLUMNS], *table_rows(providers, figures, runs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows).rstrip()


def _fail(view: Any, fig: RunFigures) -> None:
    """Show a run that failed without events (its agent could not be built) as a failed run."""
    if not view.state.finished:
        view.feed(ModelFailed(ProviderError(fig.error_type or "invalid_request", fig.error or ""),  # type: ignore[arg-type]
                              Message(role="assistant")))


class CompareWidgetView:
    """A grid of panes, one per provider, each a live `WidgetView` of its current run, over the table."""

    def __init__(self, providers: list[str], runs: int, resolved: list[str] | None = None) -> None:
        """`providers`: the panes' titles as the user typed them (aliases); `resolved`: the
        ``provider:model`` each stands for, shown under a title that differs from it."""
        import ipywidgets as widgets

        self.providers, self.runs = list(providers), runs
        self.resolved = list(resolved or providers)
        self.figures: list[RunFigures] = []
        self.views: list[WidgetView] = [WidgetView(p) for p in self.providers]
        self.titles = [widgets.HTML(value=self._title(i, 0)) for i in range(len(self.providers))]
        self.panes = [widgets.VBox([t, v.widget], layout=widgets.Layout(min_width="0", overflow="hidden"))
                      for t, v in zip(self.titles, self.views)]
        columns = min(len(self.providers), 3)
        self.grid = widgets.GridBox(self.panes, layout=widgets.Layout(
            grid_template_columns=f"repeat({columns}, minmax(0, 1fr))", grid_gap="6px 12px", width="100%"))
        self.table = widgets.HTML(value=table_html(self.providers, [], runs))
        self.widget = widgets.VBox([self.grid, self.table])
        self.widget.add_class("ipyagent-compare")

    def _title(self, index: int, run: int) -> str:
        extra = f" · run {run + 1} of {self.runs}" if self.runs > 1 else ""
        resolved = self.resolved[index]
        under = f'<div class="ipyagent-footer">{escape(resolved)}</div>' if resolved != self.providers[index] else ""
        return f'<div class="ipyagent-pane-title">{escape(self.providers[index])}{escape(extra)}</div>{under}'

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def start(self, index: int, run: int) -> None:
        if run > 0:  # a fresh pane for each run; the table keeps the earlier runs' figures
            self.views[index].close()
            view = self.views[index] = WidgetView(self.providers[index])
            self.panes[index].children = (self.titles[index], view.widget)
        self.titles[index].value = self._title(index, run)

    def feed(self, index: int, run: int, event: Event) -> None:
        self.views[index].feed(event)

    async def request_approval(self, index: int, action: ToolAction) -> bool:
        return await self.views[index].request_approval(action)

    def finish(self, fig: RunFigures) -> None:
        _fail(self.views[fig.index], fig)
        self.figures.append(fig)
        self.table.value = redact(table_html(self.providers, self.figures, self.runs))

    def mark_interrupted(self) -> None:
        for view in self.views:
            if not view.state.finished:
                view.mark_interrupted()

    def close(self) -> None:
        """Close every widget of the comparison (its saved record has replaced it)."""
        from .live_widget import close_widgets

        for view in self.views:
            view.close()
        close_widgets(self.widget)


class CompareTextView:
    """Terminal view: each run's reply printed as a block when it ends, then the table."""

    def __init__(self, providers: list[str], runs: int, stream: TextIO | None = None) -> None:
        self.providers, self.runs = list(providers), runs
        self.stream = stream or sys.stdout
        self.figures: list[RunFigures] = []
        self.states = [RunState(p) for p in self.providers]

    def start(self, index: int, run: int) -> None:
        self.states[index] = RunState(self.providers[index])

    def feed(self, index: int, run: int, event: Event) -> None:
        self.states[index].add(event)

    async def request_approval(self, index: int, action: ToolAction) -> bool:
        return await TextView(self.providers[index], self.stream).request_approval(action)

    def finish(self, fig: RunFigures) -> None:
        self.figures.append(fig)
        run = f" · run {fig.run + 1} of {self.runs}" if self.runs > 1 else ""
        state = self.states[fig.index]
        body = state.text if fig.ok else f"[error] {fig.error_type}: {fig.error}"
        self.stream.write(redact(f"── {fig.provider}{run} ──\n{body}\n"))
        self.stream.flush()

    def mark_interrupted(self) -> None:
        self.stream.write("[interrupted]\n")

    def show_table(self) -> None:
        self.stream.write(redact(table_text(self.providers, self.figures, self.runs)) + "\n")
        self.stream.flush()
