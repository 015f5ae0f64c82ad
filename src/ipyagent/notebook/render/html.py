"""Model text -> safe, inert HTML: Markdown rendered by markdown-it-py, then sanitized by nh3.

Model output is untrusted. Raw HTML in the Markdown is escaped by the
renderer, and whatever HTML results passes nh3 (Ammonia) with the allowlist of
tags and attributes of ``policy.json`` (`render.policy`), and links limited to its
URL schemes or relative: no ``<script>``, no event-handler attributes, no
``javascript:`` URLs.

Rendering never loads anything (a prompt-injected model could otherwise send
data out in an image URL): an image is drawn only from a ``data:`` URL of a
raster type (`INLINE_IMAGE`); any other image (remote, protocol-relative
``//host/…``, same-origin ``/api/…``, relative), in Markdown or in raw HTML,
becomes `image_link`: a link to its source showing its alt text, fetched only if
clicked. Every link gets ``rel="noopener noreferrer nofollow"`` and
``referrerpolicy="no-referrer"``. The labextension's renderer
(``labextension/src/safe_html.ts``) applies the same policy, read from the same file.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

from .policy import (
    ALLOWED_ATTRIBUTES,
    ALLOWED_TAGS,
    IMAGE_DEFAULT_ALT,
    IMAGE_LINK_CLASS,
    IMAGE_LINK_LABEL,
    INLINE_IMAGE,
    LINK_REFERRER_POLICY,
    LINK_REL,
    STYLE_PROPERTIES,
    URL_SCHEMES,
    safe_url,
)

#: nh3's arguments, from the policy (sets made once: `sanitize` runs on every frame of a live answer's HTML).
_NH3 = {"tags": set(ALLOWED_TAGS), "attributes": {tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        "url_schemes": {*URL_SCHEMES, "data"},  # data: only for images of `INLINE_IMAGE` (`_inert_images`)
        "filter_style_properties": set(STYLE_PROPERTIES), "link_rel": LINK_REL,
        "set_tag_attribute_values": {"a": {"referrerpolicy": LINK_REFERRER_POLICY}}}


def image_link(src: str, alt: str) -> str:
    """What stands for an image that would load from outside: a link to its source (kept only
    when it is a safe URL, `policy.safe_url`) labelled ``🖼 alt``, with the link rules applied.
    The TypeScript `imageLink` (safe_html.ts) builds the same element."""
    href = f' href="{escape(src)}"' if src and safe_url(src) else ""
    return (f'<a{href} class="{IMAGE_LINK_CLASS}" referrerpolicy="{LINK_REFERRER_POLICY}" rel="{LINK_REL}">'
            f"{escape(IMAGE_LINK_LABEL + (alt or IMAGE_DEFAULT_ALT))}</a>")


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """markdown-it image rule: an inline raster image as is, anything else as `image_link`."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env)
    if INLINE_IMAGE.fullmatch(src):
        return f'<img src="{escape(src)}" alt="{escape(alt)}">'
    return image_link(src, alt)


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """nh3 hook: a link may not be a data: URL (an image's source is checked after, `_inert_images`)."""
    if tag == "a" and attribute == "href" and value.strip().lower().startswith("data:"):
        return None
    return value


#: An <img> as nh3 writes it: attributes double-quoted, their ``"<>&`` escaped.
_IMG = re.compile(r'<img((?: [\w:-]+="[^"]*")*) ?/?>')
_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')


def _inert_image(m: re.Match[str]) -> str:
    attributes = {name: html.unescape(value) for name, value in _ATTRIBUTE.findall(m.group(1))}
    src = attributes.get("src", "")
    return m.group(0) if INLINE_IMAGE.fullmatch(src) else image_link(src, attributes.get("alt", ""))


def _inert_images(fragment: str) -> str:
    """Every <img> of sanitized `fragment` not drawn from inline raster data, as `image_link`."""
    return _IMG.sub(_inert_image, fragment) if "<img" in fragment else fragment


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
    md.core.ruler.push("numeric_columns", _numeric_columns)
    return md


#: A table cell that reads as a number: a sign, a currency, digits with separators, a decimal part,
#: then ``%`` or a short unit (``12 ms``). The same expression as markdown.ts's `NUMBER`.
_NUMBER = re.compile(r"[-+\u2212]?[$\u20ac\u00a3\u00a5]?\d[\d,]*(?:\.\d+)?(?:%|\s?[a-zA-Z\u00b5]{1,3})?")
#: A cell that says nothing (empty, a dash): neither a number nor text.
_BLANK = re.compile(r"[-\u2013\u2014]?")


def _numeric_columns(state: Any) -> None:
    """markdown-it core rule: the columns of a Markdown table whose body cells are all numbers
    (blanks aside) and which have no alignment of their own (``:--:``) are right-aligned
    (``style="text-align:right"`` on their ``th`` and ``td``). As markdown.ts's `numericColumns`."""
    tokens, k = state.tokens, 0
    while k < len(tokens):
        if tokens[k].type != "table_open":
            k += 1
            continue
        columns: dict[int, list[Any]] = {}
        numeric: dict[int, bool] = {}
        column = 0
        while tokens[k].type != "table_close":
            token = tokens[k]
            if token.type == "tr_open":
                column = 0
            elif token.type in ("th_open", "td_open"):
                columns.setdefault(column, []).append(token)
                text = tokens[k + 1].content.strip() if tokens[k + 1].type == "inline" else ""
                if token.type == "td_open" and not _BLANK.fullmatch(text):
                    numeric[column] = numeric.get(column, True) and bool(_NUMBER.fullmatch(text))
                column += 1
            k += 1
        for index, cells in columns.items():
            if numeric.get(index) and not cells[0].attrGet("style"):
                for cell in cells:
                    cell.attrSet("style", "text-align:right")


def sanitize(fragment: str) -> str:
    """Sanitize an HTML fragment: nh3 with the policy's allowlist; images only from inline raster
    data, others as `image_link`; links get ``rel="noopener noreferrer nofollow"`` and
    ``referrerpolicy="no-referrer"``."""
    import nh3

    return _inert_images(nh3.clean(fragment, attribute_filter=_attribute_filter, **_NH3))


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


def with_titles(rows: list[list[str]], row_runs: list[list[Any]] | None, titles: list[str] | None) -> list[list[str]]:
    """`rows` of a figures table with each provider's row named as the user named it: an alias
    first, then the cell (``small · openai:gpt-6-luna``); a run's row and a provider named by
    its id unchanged."""
    if not titles or not row_runs:
        return rows
    out = []
    for cells, key in zip(rows, row_runs):
        index, run = (list(key) + [None, None])[:2]
        title = titles[index] if index is not None and index < len(titles) else None
        if run is None and cells and title and title != cells[0].split(" · ")[0]:
            cells = [f"{title} · {cells[0]}", *cells[1:]]
        out.append(cells)
    return out + rows[len(out):]


def without_unknown_cost(columns: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """(`columns`, `rows`) less the cost column when no run's price is known ("—" or empty in
    every row): an unknown price is said once under the table (`render.transcript.price_notes`)."""
    if "cost" not in columns:
        return columns, rows
    n = columns.index("cost")
    if any(n < len(r) and r[n] not in ("", "—") for r in rows):
        return columns, rows
    return columns[:n] + columns[n + 1:], [r[:n] + r[n + 1:] for r in rows]


def cells_to_html(columns: list[str], rows: list[list[str]], marks: list[Any] | None = None) -> str:
    """A figures table as HTML, every cell escaped; the last column (the error) marked; a figure of
    `marks` (`ComparisonMark`: the fastest, cheapest, fewest tokens) in bold; a cost column no run
    knows is left out (`without_unknown_cost`), the marks after it moved one column left."""
    shown, rows = without_unknown_cost(columns, rows)
    gone = columns.index("cost") if len(shown) < len(columns) else len(columns)
    columns = shown
    head = "".join(f"<th>{escape(title)}</th>" for title in columns)
    best = {(m.row, m.column - (m.column > gone)) for m in marks or () if m.column != gone}
    body = []
    for r, cells in enumerate(rows):
        tds = [f"<td><b>{escape(c)}</b></td>" if (r, i) in best else f"<td>{escape(c)}</td>"
               for i, c in enumerate(cells[:-1])]
        tds.append(f'<td class="ipyagent-error">{escape(cells[-1])}</td>' if cells and cells[-1] else "<td></td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f'<table class="ipyagent-compare-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
