"""Model text -> safe, inert HTML: Markdown rendered by markdown-it-py, then sanitized by nh3.

Model output is untrusted. Raw HTML in the Markdown is escaped by the
renderer, and whatever HTML results passes nh3 (Ammonia) with an allowlist of
tags and attributes, and links limited to http, https and mailto: no
``<script>``, no event-handler attributes, no ``javascript:`` URLs.

Rendering never loads anything (a prompt-injected model could otherwise send
data out in an image URL): an image is drawn only from a ``data:`` URL of a
raster type (`INLINE_IMAGE`); any other image (remote, protocol-relative
``//host/…``, same-origin ``/api/…``, relative) becomes a link showing its alt
text, fetched only if clicked. Every link gets ``rel="noopener noreferrer
nofollow"`` and ``referrerpolicy="no-referrer"``. The labextension's renderer
(``labextension/src/inert.ts``) applies the same rules.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
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
URL_SCHEMES = {"http", "https", "mailto", "data"}  # data: only for images of `INLINE_IMAGE` (`_attribute_filter`)
STYLE_PROPERTIES = {"text-align"}
#: The only images drawn: inline raster data (no SVG, which may reference other resources).
INLINE_IMAGE = re.compile(r"data:image/(?:png|jpe?g|gif|webp);base64,[A-Za-z0-9+/=\s]*", re.I)
LINK_REL = "noopener noreferrer nofollow"
LINK_ATTRIBUTES = {"referrerpolicy": "no-referrer"}
IMAGE_LINK_CLASS = "ipyagent-image-link"


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """markdown-it image rule: an inline raster image as is, anything else as a link to it."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env)
    if INLINE_IMAGE.fullmatch(src):
        return f'<img src="{escape(src)}" alt="{escape(alt)}">'
    return f'<a href="{escape(src)}" class="{IMAGE_LINK_CLASS}">🖼 {escape(alt or "image")}</a>'


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """nh3 hook: an image's source must be inline raster data; a link may not be a data: URL."""
    if tag == "img" and attribute == "src":
        return value if INLINE_IMAGE.fullmatch(value) else None
    if tag == "a" and attribute == "href" and value.strip().lower().startswith("data:"):
        return None
    return value


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # html=False: raw HTML in model text is escaped, never passed through.
    md = (
        MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": False})
        .enable("table")
        .enable("strikethrough")
    )
    md.add_render_rule("image", _image_as_link)
    return md


def sanitize(fragment: str) -> str:
    """Sanitize an HTML fragment: nh3 allowlist; images only from inline raster data; links get
    ``rel="noopener noreferrer nofollow"`` and ``referrerpolicy="no-referrer"``."""
    import nh3

    return nh3.clean(
        fragment,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        filter_style_properties=STYLE_PROPERTIES,
        link_rel=LINK_REL,
        set_tag_attribute_values={"a": LINK_ATTRIBUTES},
        attribute_filter=_attribute_filter,
    )


def markdown_to_html(text: str) -> str:
    """Render untrusted Markdown to sanitized HTML."""
    return sanitize(_markdown().render(text))


_PRE = re.compile(r"(<pre[\s>].*?</pre>)", re.S)


def one_line(fragment: str) -> str:
    """`fragment` (HTML) on one line, drawn the same: line breaks between tags (and around a
    ``<pre>``) dropped, those in running text made spaces (a soft break is white space), those
    inside ``<pre>`` written as ``&#10;``. A saved notebook stores text outputs line by line, at
    ~12 more characters a line; an answer's HTML has a line per block, table cell and list item."""
    parts = _PRE.split(fragment)
    for i, part in enumerate(parts):
        parts[i] = part.replace("\n", "&#10;") if i % 2 else part.strip("\n").replace(">\n<", "><").replace("\n", " ")
    return "".join(parts)


#: End tags HTML lets a writer leave out (HTML 4.01 and HTML5 "optional tags"), only where the next
#: tag closes the element for every parser, htmlparser2 included (JupyterLab's sanitizer for
#: untrusted outputs): a cell before the next cell or its row's end, a row before the next row or
#: its section's end, a list item before the next item or its list's end, a table body at its table's end.
_OPTIONAL_END = re.compile(
    r"</th>(?=<t[dh][\s>]|</tr>)|</td>(?=<td[\s>]|</tr>)|</tr>(?=<tr[\s>]|</t(?:body|head|able)>)"
    r"|</li>(?=<li[\s>]|</[ou]l>)|</tbody>(?=</table>)"
)
#: Shorter forms drawn the same: markdown-it's fence label as a class (nothing in a viewer
#: without the extension reads it); ``<strong>`` as ``<b>``; a link's ``rel="noreferrer nofollow"``
#: alone (``noreferrer`` sends no Referer and implies ``noopener``, so ``referrerpolicy`` adds nothing).
_SHORTER = re.compile(
    r'<code class="language-[^"]*">|<(/?)strong>| referrerpolicy="no-referrer" rel="noopener noreferrer nofollow"'
)


def _shorter(m: re.Match[str]) -> str:
    if m.group(0).startswith("<code"):
        return "<code>"
    return f"<{m.group(1)}b>" if m.group(0).endswith("strong>") else ' rel="noreferrer nofollow"'


def compact(fragment: str) -> str:
    """`fragment` (sanitized HTML) as a saved output keeps it, drawn the same: on one line
    (`one_line`), without the end tags a parser infers (``</td>``, ``</li>``...) and without the
    code blocks' language classes. Only for HTML that came out of nh3 or our own markup, where
    every ``<`` of text is escaped, so these patterns can only be tags."""
    return _OPTIONAL_END.sub("", _SHORTER.sub(_shorter, one_line(fragment)))


def escape(text: str) -> str:
    return html.escape(text, quote=True)
