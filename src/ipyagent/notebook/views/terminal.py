"""Terminal IPython's output of a run: the answer streams as text, then shows rendered with rich.

On a colour terminal (`colour_enabled`: the stream is a TTY and ``NO_COLOR`` is
not set) the answer's text is written as it arrives; each Markdown block, once
complete, is erased and drawn again by rich (headings, lists, tables, code
highlighted). A block is complete when a later top-level block starts on a
complete line (CommonMark reads block structure line by line), so the work per
delta is bounded by the block still arriving, never by the whole answer.
Reasoning streams dimmed; tool lines and the footer are coloured. A block taller
than the screen cannot be erased (it has scrolled away), so it stays as streamed.

Anywhere else (a pipe, a file, a test, ``NO_COLOR``) it is plain text, no escape codes.
rich is imported on the first colour output only.

Model and tool output is untrusted: every piece has its control characters replaced by
visible forms (`core.visible_controls`: ``␛[2J``) before it is written, on either path, so an
escape sequence, a carriage return or a bell from a model never acts on the terminal (rich
strips only BEL, BS, VT, FF and CR, and passes ESC); newlines and tabs stay.
"""

from __future__ import annotations

import shutil
from typing import Any, TextIO

from ...core import StreamRedactor, redact, visible_controls
from ..render.text.terminal import (  # noqa: F401 - the names this view's tests and callers know it by
    FENCE,
    FOOTER_STYLES,
    HEADING_STYLES,
    colour_enabled,
    complete_prefix,
    console_for,
    fit_figures,
    footer_text,
    rows,
)

#: ANSI "dim" and "reset" for reasoning while it streams.
DIM, RESET = "\x1b[2m", "\x1b[0m"


def tty_of(stream: Any) -> Any:
    """`stream` when it is a terminal (where a line can be rewritten in place), else None: a
    pipe, a file or a notebook gets no progress line."""
    isatty = getattr(stream, "isatty", None)
    return stream if callable(isatty) and isatty() else None


class StatusLine:
    """One line of progress on a terminal, rewritten in place with spaces over the last one (no
    escape code: ``NO_COLOR`` terminals too), cut to the screen's width less one (a wrapped line
    could not be rewritten); `erase` rubs it out, the cursor back at its start."""

    def __init__(self, tty: TextIO) -> None:
        self.tty = tty
        self.width = 0  # the line's length on screen (0: none shown)

    def draw(self, line: str) -> None:
        room = max(shutil.get_terminal_size().columns - 1, 10)
        line = line if len(line) <= room else line[: room - 1] + "…"
        self.tty.write("\r" + line.ljust(self.width))
        self.tty.flush()
        self.width = len(line)

    def erase(self) -> None:
        if self.width:
            self.tty.write("\r" + " " * self.width + "\r")
            self.tty.flush()
            self.width = 0


class TerminalOutput:
    """What a `TextView` writes to: answer text, reasoning, notes (tool lines, errors), the footer.

    Every piece passes the one redactor: streamed text and streamed notes (a tool call's
    arguments) through a `StreamRedactor` (a secret split across deltas is caught; the word
    held back is released when the block ends), other notes whole.
    """

    def __init__(self, stream: TextIO, *, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = colour_enabled(stream) if colour is None else colour
        self._redactor = StreamRedactor()
        self._kind: str | None = None  # "text" / "reasoning" / "part" (a streamed note) while one streams
        self._part_style: str | None = None  # the style of the streamed note
        self._pending = ""  # the answer's text not yet drawn by rich (colour only)
        self._column = 0  # where the cursor is on its row (0: at the start of a row)
        self._console: Any = None
        self._fence: str | None = None  # the pending text opens with this fence, not yet closed
        self._scanned = 0  # where to look for its closing line next

    # -- streamed pieces --------------------------------------------------------------

    def text(self, piece: str) -> None:
        self._switch("text")
        self._stream(visible_controls(self._redactor.feed(piece)))
        if self.colour and "\n" in piece:
            self._draw_complete()

    def reasoning(self, piece: str) -> None:
        self._switch("reasoning")
        piece = visible_controls(self._redactor.feed(piece))
        self._write(f"{DIM}{piece}{RESET}" if self.colour and piece else piece)

    def part(self, piece: str, style: str | None = None) -> None:
        """Anything else, written as it comes (a tool call's name, a result, an error), in `style`
        on a colour terminal; the answer's text so far is drawn first."""
        self._switch(None)
        self._styled(visible_controls(redact(piece)), style)

    def line(self, piece: str, style: str | None = None) -> None:
        """`part`, starting on a row of its own (after a tool call's arguments, say)."""
        self._switch(None)
        self.part(("\n" if self._column else "") + piece, style)

    def streamed_part(self, piece: str, style: str | None = None) -> None:
        """A piece of a note that streams (a tool call's arguments), written as it comes in
        `style`; a secret split between pieces is masked, as in text."""
        self._switch("part")
        self._part_style = style
        self._styled(visible_controls(self._redactor.feed(piece)), style)

    def _styled(self, piece: str, style: str | None) -> None:
        if self.colour and style and piece:
            self._rich().print(piece, style=style, markup=False, highlight=False, end="")
            tail = piece.rsplit("\n", 1)[-1]
            self._column = len(tail) if "\n" in piece else self._column + len(piece)
        else:
            self._write(piece)

    def footer(self, figures: list[str]) -> None:
        """The run's footer on a line of its own: on a terminal no wider than the screen
        (`fit_figures`), so it never wraps; whole on a pipe."""
        self._switch(None)
        figures = [visible_controls(redact(f)) for f in figures]
        if getattr(self.stream, "isatty", lambda: False)():
            figures = fit_figures(figures, self._size()[0])
        if self.colour:
            from rich.text import Text

            self._rich().print(Text("\n" if self._column else "") + footer_text(figures), highlight=False)
            self._column = 0
        else:
            self._write(f"\n[{' · '.join(figures)}]\n")
        self.flush()

    def flush(self) -> None:
        self.stream.flush()

    # -- internals --------------------------------------------------------------------

    def _switch(self, kind: str | None) -> None:
        """A new kind of piece: the last one's held-back word is released and its text drawn."""
        if kind == self._kind:
            return
        rest = visible_controls(self._redactor.flush())
        if self._kind == "reasoning":
            self._write(f"{DIM}{rest}{RESET}\n" if self.colour else rest)
        elif self._kind == "part":
            self._styled(rest, self._part_style)
        elif self._kind == "text":
            self._stream(rest)
            if self.colour:
                self._draw(len(self._pending.split("\n")))
        self._kind = kind
        if kind == "text" and self.colour and self._column:
            self._write("\n")  # the answer starts on a row of its own, so it can be erased

    def _stream(self, piece: str) -> None:
        if self.colour:
            self._pending += piece
        self._write(piece)

    def _write(self, piece: str) -> None:
        if piece:
            self.stream.write(piece)
            tail = piece.rsplit("\n", 1)[-1]
            self._column = len(tail) if "\n" in piece else self._column + len(piece)

    def _draw_complete(self) -> None:
        if self._in_open_fence():
            return  # nothing in it can end before the fence closes: no parse per line
        lines = complete_prefix(self._pending)
        if lines:
            self._draw(lines)

    def _in_open_fence(self) -> bool:
        """True while the pending text is a code fence still open (checked on new lines only,
        so a long code block costs one pass, not one parse per line)."""
        pending = self._pending
        if self._fence is None:
            m = FENCE.match(pending)
            if not m or "\n" not in pending:
                return False
            self._fence, self._scanned = m.group(1), pending.index("\n") + 1
        end = pending.rfind("\n")
        fence = self._fence
        for line in pending[self._scanned : end].split("\n"):
            closing = line.strip()
            if (
                closing.startswith(fence[0] * len(fence))
                and not closing.strip(fence[0])
                and len(line) - len(line.lstrip(" ")) < 4
            ):
                self._fence = None
                return False
        self._scanned = max(self._scanned, end + 1)
        return True

    def _draw(self, lines: int) -> None:
        """Erase the pending text, draw its first `lines` lines with rich, write the rest again."""
        from rich.markdown import Markdown

        pending = self._pending
        if not pending:
            return
        split = pending.split("\n")
        block, rest = "\n".join(split[:lines]), "\n".join(split[lines:])
        width, height = self._size()
        taken = rows(pending, width)
        if taken < height and block.strip():  # still on the screen: replace it
            up = f"\x1b[{taken - 1}A" if taken > 1 else ""
            self.stream.write(f"\r{up}\x1b[J")
            self._column = 0
            self._write_rendered(Markdown(block.strip("\n"), code_theme="monokai"))
            if rest and not split[lines - 1].strip():
                self._write("\n")  # the blank line between blocks
            self._write(rest)
        # else: scrolled away (or only blank lines), it stays as streamed
        self._pending = rest
        self._fence, self._scanned = None, 0
        self.flush()

    def _write_rendered(self, renderable: Any) -> None:
        """`renderable` drawn by rich, without the blank rows it adds around a block (the
        source's blank lines separate blocks) or the spaces that pad each row to the width."""
        console = self._rich()
        with console.capture() as captured:
            console.print(renderable)
        lines = [line.rstrip(" ") for line in captured.get().split("\n")]
        while lines and not lines[0]:
            lines.pop(0)
        while lines and not lines[-1]:
            lines.pop()
        self._write("\n".join(lines) + "\n" if lines else "")

    def _size(self) -> tuple[int, int]:
        size = shutil.get_terminal_size()
        return max(size.columns, 20), max(size.lines, 2)

    def _rich(self) -> Any:
        if self._console is None:
            self._console = console_for(self.stream)
        return self._console
