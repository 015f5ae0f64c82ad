"""Saved records drawn with rich for terminal IPython: a transcript (``%agent history``'s
turns; a ``%%compare`` run under its pane's header) and a comparison's figures table.

Used on a colour terminal only (`terminal.colour_enabled`: a TTY without ``NO_COLOR``); a
pipe, a file or ``NO_COLOR`` get the plain text (`transcript_render.to_text`,
`compare_view.table_text`). Both walk the transcript with `transcript_render.text_pieces`,
so they say the same things. rich is imported when something is drawn, never before.
"""

from __future__ import annotations

import re
import shutil
from typing import Any, Iterable, TextIO

from ....core import ComparisonTable, Transcript, redact, redact_data, visible_controls
from .terminal import console_for, fit_figures, footer_text
from ..transcript import footer_figures, text_pieces

#: Styles of a transcript's pieces (`text_pieces` kinds); text and prompts are Markdown.
STYLES = {"title": "bold", "reasoning": "dim italic", "tool": "cyan", "tool_ok": "green", "tool_error": "red",
          "tool_denied": "yellow", "other": "magenta", "artifact": "magenta", "error": "bold red",
          "interrupted": "bold yellow", "next_cell": "dim", "server": "cyan", "sources": "blue"}
#: A figure cell: a number, a cost, a median with its range, or "—" (right-aligned).
_FIGURE = re.compile(r"^(—|\$?[0-9][0-9.,]*( \(.*\))?)$")


def clean(text: str) -> str:
    """`text` redacted, its control characters shown, not run (a model's ``\\x1b[2J`` is ``␛[2J``)."""
    return visible_controls(redact(text))


def transcript_renderables(t: Transcript) -> list[Any]:
    """`t` as rich renderables, in order: its title, each prompt (``you``) and answer as
    Markdown (code highlighted), reasoning dimmed, one coloured line per tool call (green done,
    red failed, yellow denied), artifacts, error, interruption, then the coloured footer."""
    from rich.markdown import Markdown
    from rich.text import Text

    t = Transcript.model_validate(redact_data(t.to_json()))
    out: list[Any] = []
    for kind, text in text_pieces(t):
        text = clean(text)
        if kind == "text":
            out.append(Markdown(text, code_theme="monokai"))
        elif kind == "prompt":
            out.append(Text.assemble(("you ", "bold blue"), (text, "bold")))
        elif kind == "reasoning":
            out.append(Text(text or "[reasoning redacted by the provider]", style=STYLES["reasoning"]))
        elif kind == "title":
            from rich.rule import Rule

            out.append(Rule(Text(text, style=STYLES["title"]), align="left", style="dim"))
        else:
            out.append(Text(text, style=STYLES.get(kind, "")))
    out.append(footer_text(fit_figures(footer_figures(t), max(shutil.get_terminal_size().columns, 20))))
    return out


class _FiguresTable:
    """A figures table laid out for the width it is drawn at (see `figures_table`)."""

    def __init__(self, data: ComparisonTable, shown: list[int], caption: str | None, titles: list[str] | None) -> None:
        self.data, self.shown, self.caption, self.titles = data, shown, caption, titles

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich import box
        from rich.cells import cell_len
        from rich.table import Table

        data, last = self.data, len(self.data.columns) - 1
        keys = data.row_runs or [[None, None]] * len(data.rows)
        rows = [[_figures_cell(n, cells, list(key), self.titles, last=last) for n in self.shown]
                for cells, key in zip(data.rows, keys)]
        widest = [max([cell_len(r[i].plain) for r in rows] or [0]) for i in range(len(self.shown))]
        titles = [clean(data.columns[n]) for n in self.shown]
        # figures keep their width (their titles wrap between words when the screen is narrow);
        # the provider and the error share the rest
        give = [i for i, n in enumerate(self.shown) if n in (0, last)]
        fixed = [max(widest[i], cell_len(titles[i])) for i in range(len(self.shown))]
        room = options.max_width - 3 * len(self.shown) - sum(w for i, w in enumerate(fixed) if i not in give)
        if room < sum(min(widest[i], 24) for i in give):
            fixed = [max(widest[i], *(cell_len(w) for w in titles[i].split())) for i in range(len(self.shown))]
            room = options.max_width - 3 * len(self.shown) - sum(w for i, w in enumerate(fixed) if i not in give)
        widths: dict[int, int] = {}
        error = widest[self.shown.index(last)] if last in self.shown and last != 0 else 0
        if 0 in self.shown:  # all it needs, unless the error then gets less than half
            widths[0] = max(8, min(widest[0], max(room - error, room // 2) if error else room))
        if last in self.shown and last != 0:
            i = self.shown.index(last)
            widths[i] = max(8, min(widest[i], room - widths.get(0, 0)))
        grid = Table(caption=self.caption, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False)
        for i, n in enumerate(self.shown):
            cells = [row[n] for row in data.rows if n < len(row) and row[n]]
            figure = n > 0 and all(_FIGURE.match(c) for c in cells)
            grid.add_column(titles[i], justify="right" if figure else "left", width=widths.get(i, fixed[i]))
        for row in rows:
            grid.add_row(*row)
        yield grid


def figures_table(table: ComparisonTable, *, caption: str | None = None, titles: list[str] | None = None) -> Any:
    """A comparison's figures (`compare_view.table_data`) as one rich table: a provider's row
    bold, its runs' rows under it indented and dim, an error cell red; figures right-aligned.

    Every column that has a value in some row is kept (the error column when a run failed; a
    cost column of unknown prices only, "—", has none). Each cell is one line: the figures keep
    their width (their titles wrap between words) and the provider and error cells share the
    rest of the screen, cut with ``…`` (the run's pane above shows its whole error).
    `titles`: per provider index the name the user gave it (an alias), shown before its id."""
    data = ComparisonTable.model_validate(redact_data(table.model_dump(mode="json")))
    cost = data.columns.index("cost") if "cost" in data.columns else None
    shown = [n for n in range(len(data.columns))
             if any(n < len(row) and row[n] and (n != cost or row[n] != "—") for row in data.rows)]
    return _FiguresTable(data, shown, caption, titles)


def _figures_cell(n: int, cells: list[str], key: list[Any], titles: list[str] | None, *, last: int) -> Any:
    """Cell `n` of a figures row, one line (cut with ``…``): the provider's (its alias first,
    bold; a run's indented, dim), the error (red), or a figure."""
    from rich.text import Text

    cell = clean(cells[n]) if n < len(cells) else ""
    index, run = (key + [None, None])[:2]
    if n == 0 and run is not None:
        return Text("  " + cell, style="dim", no_wrap=True, overflow="ellipsis")
    if n == 0:
        title = titles[index] if titles and index is not None and index < len(titles) else None
        if title and title != cell.split(" · ")[0]:  # an alias: it first, bold, then the id
            return Text.assemble((clean(title), "bold"), (" · " + cell, "dim"), no_wrap=True, overflow="ellipsis")
        return Text(cell, style="bold", no_wrap=True, overflow="ellipsis")
    if n == last:  # the error wraps within its column: all of it is read
        return Text(cell, style="red" if cell else "", overflow="fold")
    return Text(cell, no_wrap=True, overflow="ellipsis")


def header(title: str, note: str = "") -> Any:
    """A pane's header: its title bold, `note` (the ``provider:model``, the run) dim."""
    from rich.rule import Rule
    from rich.text import Text

    return Rule(Text.assemble((clean(title), "bold cyan"), (f" {clean(note)}" if note else "", "dim")),
                align="left", style="cyan")


def print_rendered(stream: TextIO, renderables: Iterable[Any], *, colour: bool = True,
                   width: int | None = None) -> None:
    """Draw `renderables` on `stream` (a terminal) one under the other, then flush; without
    `colour` (``NO_COLOR``) as plain text, no escape codes, laid out the same; `width` columns
    (None: the terminal's)."""
    console = console_for(stream)
    if width is not None:
        console.width = width
    if not colour:
        from rich.console import Console

        console = Console(file=stream, width=console.width, color_system=None, highlight=False, soft_wrap=False)
    for item in renderables:
        console.print(item)
    stream.flush()
