"""Saved records drawn with rich for terminal IPython: a transcript (``%agent history``'s
turns; a ``%%compare`` run under its pane's header) and a comparison's figures table.

Used on a colour terminal only (`terminal.colour_enabled`: a TTY without ``NO_COLOR``); a
pipe, a file or ``NO_COLOR`` get the plain text (`transcript_render.to_text`,
`compare_view.table_text`). Both walk the transcript with `transcript_render.text_pieces`,
so they say the same things. rich is imported when something is drawn, never before.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, TextIO

from ...core import ComparisonTable, Transcript, redact, redact_data, visible_controls
from ..views.terminal import console_for, footer_text
from .transcript import footer_figures, text_pieces

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
    out.append(footer_text(footer_figures(t)))
    return out


def figures_table(table: ComparisonTable, *, caption: str | None = None) -> Any:
    """A comparison's figures (`compare_view.table_data`) as one rich table: a provider's row
    bold, its runs' rows under it indented and dim, an error cell red; figures right-aligned.
    A column empty in every row (no run failed: the error column) is left out."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    data = ComparisonTable.model_validate(redact_data(table.model_dump(mode="json")))
    shown = [n for n in range(len(data.columns)) if any(n < len(row) and row[n] for row in data.rows)]
    grid = Table(caption=caption, header_style="bold", box=box.SIMPLE_HEAD)
    for n in shown:
        cells = [row[n] for row in data.rows if n < len(row) and row[n]]
        figure = n > 0 and all(_FIGURE.match(c) for c in cells)
        grid.add_column(clean(data.columns[n]), justify="right" if figure else "left", overflow="fold")
    keys = data.row_runs or [[None, None]] * len(data.rows)
    for cells, key in zip(data.rows, keys):
        run = key[1] if len(key) > 1 else None
        texts = []
        for n in shown:
            cell = clean(cells[n]) if n < len(cells) else ""
            if n == 0:
                texts.append(Text("  " + cell, style="dim") if run is not None else Text(cell, style="bold"))
            else:
                texts.append(Text(cell, style="red" if n == len(data.columns) - 1 and cell else ""))
        grid.add_row(*texts)
    return grid


def header(title: str, note: str = "") -> Any:
    """A pane's header: its title bold, `note` (the ``provider:model``, the run) dim."""
    from rich.rule import Rule
    from rich.text import Text

    return Rule(Text.assemble((clean(title), "bold cyan"), (f" {clean(note)}" if note else "", "dim")),
                align="left", style="cyan")


def print_rendered(stream: TextIO, renderables: Iterable[Any]) -> None:
    """Draw `renderables` on `stream` (a colour terminal) one under the other, then flush."""
    console = console_for(stream)
    for item in renderables:
        console.print(item)
    stream.flush()
