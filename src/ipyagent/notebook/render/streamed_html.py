"""Markdown rendered to sanitized HTML while it streams, so the saved output's HTML fallback
costs only the unfinished end of an answer when the run ends, not the whole answer.

The Python twin of the labextension's `MarkdownStream` (``labextension/src/markdown.ts``):
CommonMark reads block structure line by line and only the last block can absorb new lines, so
the blocks before the last block that starts on a complete line are finished. Every `CHUNK`
characters or so, those are rendered (markdown-it-py + nh3, as `render.markdown_to_html`) and
kept. `StreamedMarkdown.html(text)` is then ``markdown_to_html(text)`` rendering only the rest.

Link reference definitions are the one thing that reaches back: ``[x]`` in an early block is a
link only if ``[x]: url`` is defined anywhere. References defined in the finished part are passed
on (markdown-it's ``env``); a part that defines a reference after the first chunk makes the
stream fall back to rendering the whole text at the end.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable
from typing import Any

from .html import _markdown, markdown_to_html, sanitize

#: Characters of unfinished text before a stream tries to render its finished blocks.
CHUNK = 4096


def _blocks(source: str) -> list[Any]:
    """markdown-it's block tokens of `source`, without its inline parse (the costly half)."""
    from markdown_it.rules_core import StateCore, block, normalize

    state = StateCore(source, _markdown(), {})
    normalize(state)
    block(state)
    return state.tokens


def finished_prefix(source: str) -> int:
    """The length of the head of `source` made of finished blocks: those before the last
    top-level block that starts on a complete line (0: none). As markdown.ts's `finishedPrefix`."""
    starts = [t.map[0] for t in _blocks(source) if t.level == 0 and t.nesting != -1 and t.map]
    complete = source.count("\n")
    for k in range(len(starts) - 1, 0, -1):
        if starts[k - 1] < starts[k] < complete:
            offset = 0
            for _ in range(starts[k]):
                offset = source.index("\n", offset) + 1
            return offset
    return 0


class MarkdownHtmlStream:
    """One Markdown text that grows at its end, its finished blocks rendered to HTML as it grows.
    Cost: each character is parsed about twice over the whole stream, in steps of at least
    `CHUNK` characters (a single block longer than that is tried again only once it doubles)."""

    def __init__(self) -> None:
        self._head: list[str] = []  # the finished text, rendered
        self._html: list[str] = []
        self._pending: list[str] = []
        self._pending_chars = 0
        self._next_try = CHUNK
        self._env: dict[str, Any] = {}
        self._exact = True  # False: a reference defined late; html() renders the whole text

    def append(self, text: str) -> None:
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= self._next_try:
            self._advance()

    def _advance(self) -> None:
        rest = "".join(self._pending)
        cut = finished_prefix(rest)
        if cut == 0:
            self._pending, self._next_try = [rest], 2 * len(rest)
            return
        references = len(self._env.get("references", {}))
        self._html.append(sanitize(_markdown().render(rest[:cut], self._env)))
        if self._head and len(self._env.get("references", {})) != references:
            self._exact = False
        self._head.append(rest[:cut])
        self._pending = [rest[cut:]]
        self._pending_chars = len(rest) - cut
        self._next_try = CHUNK

    def html(self, text: str) -> str | None:
        """``markdown_to_html(text)`` when `text` starts with the finished part; else None."""
        head = "".join(self._head)
        if not self._exact or not head or not text.startswith(head):
            return None
        env = {key: dict(value) if isinstance(value, dict) else value for key, value in self._env.items()}
        references = len(env.get("references", {}))
        tail = sanitize(_markdown().render(text[len(head):], env))
        if len(env.get("references", {})) != references:
            return None  # the rest defines a reference the finished part may use
        return "".join(self._html) + tail


class StreamedMarkdown:
    """The Markdown texts of a run as they stream (one stream per key: a turn's content block),
    and `html`, a drop-in for `render.markdown_to_html` that uses them."""

    def __init__(self) -> None:
        self._streams: dict[Hashable, MarkdownHtmlStream] = {}

    def append(self, key: Hashable, text: str) -> None:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = MarkdownHtmlStream()
        stream.append(text)

    def html(self, text: str) -> str:
        """Sanitized HTML of `text`, equal to ``markdown_to_html(text)``; the finished part of
        a stream that `text` continues is not rendered again."""
        for stream in self._streams.values():
            done = stream.html(text)
            if done is not None:
                return done
        return markdown_to_html(text)


# -- the unfinished end, drawn plainly ------------------------------------------------------------

#: A line that is only a list item's marker, or a heading's: drawn, it would be an empty bullet or heading.
_BARE_MARKER = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)]|#{1,6})[ \t]*\n?")
#: The characters that start or end inline syntax: a backslash before each makes it plain text.
_INLINE_SYNTAX = re.compile(r"[\\`*_~\[\]]")


def settled(source: str) -> str:
    """`source`, the end of a streamed answer, as it may be drawn before the rest arrives: Markdown
    whose unfinished end shows no half-parsed syntax (the twin of markdown.ts's `settled`; both
    give the same text).

    - An emphasis, strong, strikethrough, code span or link still open in the last block is plain
      text from its opening character on (a backslash before each of ``\\ ` * _ ~ [ ]`` there):
      ``**Short`` shows ``**Short``, never a broken ``*<em>Short</em>``, until it closes.
    - A last line that is only a list marker (``-``, ``1.``) or ``#``s is held back: no empty
      bullet or heading.
    - A code fence's opening line still being written (no newline yet) is held back; an open
      fenced or indented code block is left as it is (its text is literal).

    Cost: one block-level parse and one scan of `source`."""
    line_start = source.rfind("\n", 0, max(len(source) - 1, 0)) + 1
    if _BARE_MARKER.fullmatch(source, line_start):
        return source[:line_start]
    last_line = source[: len(source) - source.endswith("\n")].count("\n")
    block = _block_at(source, last_line)
    if block is None or block.type == "code_block":
        return source
    if block.type == "fence":
        return source[:line_start] if block.map[0] == last_line and not source.endswith("\n") else source
    start = 0
    for _ in range(block.map[0]):
        start = source.index("\n", start) + 1
    opened = unclosed_at(source[start:])
    if opened < 0:
        return source
    cut = start + opened
    return source[:cut] + _INLINE_SYNTAX.sub(r"\\\g<0>", source[cut:])


def _block_at(source: str, line: int) -> Any:
    """The innermost block token of `source` holding line `line` (None: none, e.g. a blank line)."""
    for token in reversed(_blocks(source)):
        if token.map and token.nesting != -1 and token.map[0] <= line < token.map[1]:
            return token
    return None


def _space(c: str) -> bool:
    return c == "" or c.isspace()


def _punct(c: str) -> bool:
    return c != "" and unicodedata.category(c)[0] in "PS"


def unclosed_at(text: str) -> int:
    """Where the first inline construct of `text` (a block's source lines) still open at its end
    begins (-1: none): an emphasis / strong (``*``, ``_``) or strikethrough (``~~``) run that can
    open (CommonMark's flanking rules) and is not closed, a code span with no closing backtick run
    of its length, a ``[`` not closed, or a link whose ``(destination`` is not closed."""
    openers: list[list[Any]] = []  # [character, length left, position]
    brackets: list[int] = []

    def at(k: int) -> str:
        return text[k] if 0 <= k < len(text) else ""

    def first(*more: int) -> int:
        return min([o[2] for o in openers] + brackets + list(more), default=-1)

    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c in "`*_~":
            j = i
            while at(j) == c:
                j += 1
            if c == "`":
                close = _closing_ticks(text, j, j - i)
                if close < 0:
                    return first(i)
                j = close
            else:
                _delimiter_run(c, i, j, at(i - 1), at(j), openers)
            i = j
        elif c == "[":
            brackets.append(i)
            i += 1
        elif c == "]" and brackets:
            b = brackets.pop()
            i += 1
            if at(i) == "(":
                i = _destination_end(text, i)
                if i < 0:
                    return first(b)
            elif at(i) == "":
                return first(b)  # `[text]`: a `(destination)` may follow
            while openers and openers[-1][2] > b:
                openers.pop()  # emphasis does not cross a link's text
        else:
            i += 1
    return first()


def _delimiter_run(ch: str, i: int, j: int, before: str, after: str, openers: list[list[Any]]) -> None:
    """A run of `ch` (``text[i:j]``) between `before` and `after`: closes the opener it can, then may open."""
    left = j - i
    if ch == "~" and left != 2:
        return  # strikethrough is exactly `~~`
    left_flanking = not _space(after) and (not _punct(after) or _space(before) or _punct(before))
    right_flanking = not _space(before) and (not _punct(before) or _space(after) or _punct(after))
    can_open = left_flanking and (not right_flanking or _punct(before)) if ch == "_" else left_flanking
    can_close = right_flanking and (not left_flanking or _punct(after)) if ch == "_" else right_flanking
    if can_close:
        for k in range(len(openers) - 1, -1, -1):
            if openers[k][0] != ch:
                continue
            used = min(left, openers[k][1])
            openers[k][1] -= used
            left -= used
            if openers[k][1] == 0:
                del openers[k:]  # closed, with what opened inside it and stayed open
            break
    if left > 0 and can_open:
        openers.append([ch, left, j - left])


def _closing_ticks(text: str, start: int, n: int) -> int:
    """The index after the run of exactly `n` backticks that closes a code span (-1: none)."""
    k = text.find("`", start)
    while k != -1:
        j = k
        while j < len(text) and text[j] == "`":
            j += 1
        if j - k == n:
            return j
        k = text.find("`", j)
    return -1


def _destination_end(text: str, opening: int) -> int:
    """The index after the ``)`` that ends a link destination opened at ``text[opening]`` (-1: not yet)."""
    depth, k = 0, opening
    while k < len(text):
        c = text[k]
        if c == "\\":
            k += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k + 1
        elif c == "\n" and text[k + 1 : k + 2] == "\n":
            return -1
        k += 1
    return -1
