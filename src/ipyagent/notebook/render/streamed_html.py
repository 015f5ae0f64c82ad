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
