"""Citations as numbered footnotes, and provider-side tool calls as cards, in the HTML and text
fallbacks of a transcript (`render.transcript`); the labextension's ``citations.ts`` draws the
same from the same document.

A source (a URL, else a document) gets one number, in the order the answer first cites it. Its
marker, ``[n]`` (``[1,3]`` for several at one place), goes where the cited span ends; the list
under the answer links each URL with ``rel="noopener noreferrer nofollow"`` and loads nothing.
Markers are put into the Markdown as private-use characters, which no renderer touches, and
become ``<sup>`` only after the Markdown was rendered and sanitized: model text can never make one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...core import ServerToolPart, TextPart, Transcript
from .html import escape, sanitize

#: A marker in rendered text: ``\ue000`` numbers ``\ue001``.
MARK = re.compile("\ue000([0-9,]+)\ue001")
#: The marker characters, when the model itself writes them: shown as U+FFFD (same length).
_OWN_MARKS = {0xE000: 0xFFFD, 0xE001: 0xFFFD}
#: How each provider-side tool is called on a card.
TOOL_TITLES = {"web_search": "web search", "web_fetch": "web fetch", "code_execution": "code execution",
               "file_search": "file search", "url_context": "URL context"}


def source_key(citation: Any) -> tuple[str, str]:
    """What makes citations one source (one number): the URL, else the document (or title)."""
    return ("url", citation.url) if citation.url else ("document", citation.document or citation.title or "")


def numbered_sources(t: Transcript) -> dict[tuple[str, str], tuple[int, Any]]:
    """Source key -> (number from 1, its first citation), over the assistant's text in order."""
    found: dict[tuple[str, str], tuple[int, Any]] = {}
    for message in t.messages:
        if message.role != "assistant":
            continue
        for part in message.parts:
            for citation in part.citations if isinstance(part, TextPart) else ():
                found.setdefault(source_key(citation), (len(found) + 1, citation))
    return found


def marked(part: TextPart, numbers: dict[tuple[str, str], tuple[int, Any]]) -> str:
    """`part`'s text with a marker where each cited span ends (the numbers of the sources cited
    there, sorted), placed after the characters of a span that ends inside a word."""
    at: dict[int, set[int]] = {}
    for citation in part.citations:
        end = min(max(citation.end, 0), len(part.text))
        while 0 < end < len(part.text) and part.text[end - 1].isalnum() and part.text[end].isalnum():
            end += 1  # not inside a word
        at.setdefault(end, set()).add(numbers[source_key(citation)][0])
    text = part.text.translate(_OWN_MARKS)  # the model's own private-use characters make no marker
    for end in sorted(at, reverse=True):
        text = text[:end] + "\ue000" + ",".join(str(n) for n in sorted(at[end])) + "\ue001" + text[end:]
    return text


def markers_as_html(html: str) -> str:
    """Rendered (and sanitized) HTML with each marker as ``<sup>[n]</sup>``: numbers and commas only."""
    return MARK.sub(lambda m: f"<sup>[{m.group(1)}]</sup>", html)


def markers_as_text(text: str) -> str:
    return MARK.sub(lambda m: f"[{m.group(1)}]", text)


def sources_html(numbers: dict[tuple[str, str], tuple[int, Any]]) -> str:
    """The numbered list of sources (sanitized): a URL as a link that loads nothing, a document
    by its name and place, each with the text quoted from it."""
    if not numbers:
        return ""
    items = []
    for number, citation in sorted(numbers.values(), key=lambda v: v[0]):
        label = escape(citation.title or citation.url or citation.document or "source")
        head = f'<a href="{escape(citation.url)}">{label}</a>' if citation.url else f"<b>{label}</b>"
        where = f" · {escape(citation.location)}" if citation.location and not citation.url else ""
        quote = f' <span class="ipyagent-meta">“{escape(_short(citation.quote))}”</span>' if citation.quote else ""
        items.append(f"<li>{head}{where}{quote}</li>")  # in number order: the list's own numbers
    listed = "".join(items)
    return sanitize(f'<div class="ipyagent-sources"><div class="ipyagent-meta">sources</div><ol>{listed}</ol></div>')


def sources_text(numbers: dict[tuple[str, str], tuple[int, Any]]) -> list[str]:
    """``[1] Title <https://...>`` lines, for a terminal and text/plain."""
    lines = []
    for number, citation in sorted(numbers.values(), key=lambda v: v[0]):
        label = citation.title or citation.document or citation.url or "source"
        where = f" <{citation.url}>" if citation.url and citation.url != label else ""
        place = f", {citation.location}" if citation.location and not citation.url else ""
        lines.append(f"[{number}] {label}{place}{where}")
    return lines


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- provider-side tool cards ------------------------------------------------------------------


def server_title(part: ServerToolPart) -> str:
    """``web search`` (the neutral tool), or the provider's name for a tool ipyagent does not name."""
    return TOOL_TITLES.get(part.tool, part.name or part.tool or "provider tool")


def server_detail(part: ServerToolPart) -> str:
    """One line after the title: the query, URL or first line of the code, and how it went."""
    given = part.input
    what = (given.get("query") or "; ".join(str(q) for q in given.get("queries") or ()) or given.get("url")
            or ", ".join(str(u) for u in given.get("urls") or ()) or given.get("command")
            or str(given.get("code") or given.get("partial") or "").strip().split("\n", 1)[0])
    state = {"ok": "done", "error": "error", "pending": "running"}[part.status]
    if part.status == "ok" and part.sources:
        state = f"{len(part.sources)} source{'s' if len(part.sources) != 1 else ''}"
    return " · ".join(s for s in (_short(str(what), 100) if what else "", state) if s)


def server_body(part: ServerToolPart) -> list[tuple[str, str]]:
    """The card's sections as (label, text): its input (code, query...), output, error, files."""
    sections = []
    code = part.input.get("code") or part.input.get("command") or part.input.get("partial")
    if code:
        sections.append(("code", str(code)))
    elif part.input:
        sections.append(("input", json.dumps(part.input, ensure_ascii=False, indent=1)))
    if part.output:
        sections.append(("output", part.output))
    if part.error:
        sections.append(("error", part.error))
    if part.files:
        names = [f.get("name") or f.get("id") or f.get("url") or "file" for f in part.files]
        sections.append(("files", "\n".join(str(n) for n in names)))
    return sections


def server_html(part: ServerToolPart) -> str:
    """A provider-side tool call as a collapsed card (not yet sanitized: `render.transcript` does)."""
    css = "ipyagent-tool ipyagent-server-tool" + (" ipyagent-tool-error" if part.status == "error" else "")
    body = "".join(f'<div class="ipyagent-meta">{escape(label)}</div><pre>{escape(text)}</pre>'
                   for label, text in server_body(part))
    if part.sources:
        links = "".join(f'<li><a href="{escape(s.url)}">{escape(s.title or s.url)}</a></li>' if s.url
                        else f"<li>{escape(s.title or '')}</li>" for s in part.sources)
        body += f'<div class="ipyagent-meta">sources</div><ol>{links}</ol>'
    body += "".join(f'<img class="ipyagent-image" alt="image from the tool" src="data:{i["mime_type"]};base64,'
                    f'{_base64(i["data"])}">' for i in part.images)
    return (f'<details class="{css}"><summary><b>{escape(server_title(part))}</b> '
            f'<span class="ipyagent-meta">{escape(server_detail(part))}</span></summary>{body}</details>')


def server_text(part: ServerToolPart) -> str:
    """A provider-side tool call as one bracketed line, for a terminal and text/plain."""
    line = f"[{server_title(part)}: {server_detail(part)}]"
    if part.output:
        line += "\n" + part.output.rstrip()
    return line


def _base64(data: str) -> str:
    return "".join(c for c in data if c.isalnum() or c in "+/=")  # nothing can break out of the attribute
