"""Model text -> safe HTML: Markdown rendered by markdown-it-py, then sanitized by nh3.

Model output is untrusted. Raw HTML in the Markdown is escaped by the
renderer, and whatever HTML results passes nh3 (Ammonia) with an allowlist of
tags and attributes, and links limited to http, https and mailto: no
``<script>``, no event-handler attributes, no ``javascript:`` URLs.
"""

from __future__ import annotations

import html
from functools import lru_cache
from typing import Any

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "span": {"class"},
    "div": {"class"},
    "details": {"open", "class"},
    # markdown-it writes table column alignment as style="text-align:..."; only that property is kept.
    "td": {"align", "style"},
    "th": {"align", "style"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}
STYLE_PROPERTIES = {"text-align"}


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # html=False: raw HTML in model text is escaped, never passed through.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": False}).enable("table").enable("strikethrough")


def sanitize(fragment: str) -> str:
    """Sanitize an HTML fragment (nh3 allowlist; links get ``rel="noopener noreferrer"``)."""
    import nh3

    return nh3.clean(
        fragment,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        filter_style_properties=STYLE_PROPERTIES,
        link_rel="noopener noreferrer",
    )


def markdown_to_html(text: str) -> str:
    """Render untrusted Markdown to sanitized HTML."""
    return sanitize(_markdown().render(text))


def escape(text: str) -> str:
    return html.escape(text, quote=True)
