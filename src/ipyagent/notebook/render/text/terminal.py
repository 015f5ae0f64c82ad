"""Text for a terminal: control characters shown, not run (model and tool output is untrusted), whether
a stream takes colour, a rich console and footer line, and how much of a Markdown answer is done
(`complete_prefix`) or how many rows a text takes (`rows`). rich is imported on first use."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, TextIO

from ....core import redact, visible_controls
from ..html import _markdown

#: Styles of the footer figures that say how the run ended (else the footer is dim).
FOOTER_STYLES = {"failed": "bold red", "interrupted": "bold yellow", "streaming…": "yellow"}
#: A fenced code block's opening line (CommonMark: up to 3 spaces, 3 or more ` or ~).
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
#: Markdown headings bold, never underlined or coloured as rich draws them by default (an
#: underlined magenta heading reads as a link).
HEADING_STYLES = {"markdown.h1": "bold", "markdown.h2": "bold", "markdown.h3": "bold", "markdown.h4": "bold italic",
                  "markdown.h5": "italic", "markdown.h6": "dim"}
def colour_enabled(stream: Any) -> bool:
    """True when `stream` is a terminal and ``NO_COLOR`` (https://no-color.org) is not set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def console_for(stream: TextIO) -> Any:
    """A rich console writing to `stream`, a colour terminal, as wide as the terminal."""
    from rich.console import Console
    from rich.theme import Theme

    width = max(shutil.get_terminal_size().columns, 20)
    return Console(file=stream, force_terminal=True, width=width, highlight=False, soft_wrap=False,
                   theme=Theme(HEADING_STYLES))


def _rank(figure: str) -> int:
    """How late a footer figure is left out for room: the run's time and cost last, its tokens
    before them, anything else (first token, turns, retries, settings) first."""
    if figure.startswith(("total ", "$")):
        return 1
    return 2 if figure.endswith(" tokens") else 3


def fit_figures(figures: list[str], width: int) -> list[str]:
    """`figures` as a footer ``[a · b · c]`` no wider than `width` cells: the least telling
    figures (`_rank`) left out first, the last of them first, ``…`` in their place; never the
    provider, nor how the run ended (`FOOTER_STYLES`); a provider too long for the line is cut."""
    from rich.cells import cell_len

    def size(shown: list[str]) -> int:
        return cell_len(" · ".join(shown)) + 2

    shown = list(figures)
    while size(shown) > width:
        kept = [i for i in range(1, len(shown)) if shown[i] not in FOOTER_STYLES and shown[i] != "…"]
        if not kept:
            break
        del shown[max(reversed(kept), key=lambda i: _rank(shown[i]))]
        if "…" not in shown:
            shown.append("…")
    if size(shown) > width:
        room = max(width - size(shown[1:]) - 3, 2) if len(shown) > 1 else max(width - 2, 2)
        shown[0] = shown[0] if cell_len(shown[0]) <= room else shown[0][: room - 1] + "…"
    return shown


def footer_text(figures: list[str]) -> Any:
    """A run's footer line for a colour terminal (rich `Text`): ``[provider · figures]``, the
    provider bold cyan, how the run ended in its colour (`FOOTER_STYLES`), the rest dim."""
    from rich.text import Text

    line = Text("[")
    for n, figure in enumerate(figures):
        line.append(" · " if n else "", style="dim")
        line.append(visible_controls(redact(figure)), style="bold cyan" if n == 0 else FOOTER_STYLES.get(figure, "dim"))
    line.append("]")
    return line


def complete_prefix(text: str) -> int:
    """How many leading lines of Markdown `text` can no longer change: those before the last
    top-level block that starts on a complete line (0: none yet)."""
    complete = text.count("\n")
    starts = [
        t.map[0] for t in _markdown().parse(text) if t.level == 0 and t.map and t.nesting >= 0 and t.map[0] < complete
    ]
    return starts[-1] if len(starts) > 1 else 0


def rows(text: str, width: int) -> int:
    """Terminal rows `text` takes when written from column 0 on a screen `width` cells wide."""
    from rich.cells import cell_len

    return sum(max(1, -(-cell_len(line) // width)) for line in text.split("\n"))
