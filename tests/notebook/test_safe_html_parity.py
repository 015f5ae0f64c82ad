"""The two sanitizers hold to one policy (render/policy.json): the same untrusted HTML and
Markdown, sanitized by Python (nh3, render/html.py) and by the labextension (DOMPurify,
safe_html.ts, in Node with jsdom), give the same elements, attributes and text. Only what a
front end adds on its own is left out of the comparison: ``target="_blank"`` (a link opens in a
new tab, never in place of JupyterLab) and highlight.js's spans in code."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ipyagent.core import AUDIO_TYPES as KEPT_AUDIO_TYPES
from ipyagent.core import RASTER_TYPES as KEPT_RASTER_TYPES
from ipyagent.notebook.render import policy
from ipyagent.notebook.render.html import markdown_to_html, sanitize

from ..support.node import MISSING, run_ts

PNG = ("data:image/png;base64,"
       "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

HTML = [
    '<p onclick="x()">hi<script>alert(1)</script></p>',
    '<a href="javascript:alert(1)">a</a><a href="https://ok.example/" title="t">b</a><a href="rel/x">c</a>',
    '<a href="data:text/html,x">d</a><a href="mailto:a@b.example">m</a><a href="//h/x">p</a>',
    f'<img src="{PNG}" alt="dot" onerror="alert(1)"><img src="http://evil/a.png" alt="remote">',
    '<img src="//evil/b.png"><img src="/api/contents?x=1" alt="same"><img src="rel/a.png" alt="rel">',
    '<img src="javascript:alert(1)" alt="js"><img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=" alt="svg">',
    '<iframe src="https://evil.example/"></iframe><div onmouseover="x()" class="c" id="i" data-x="1">d</div>',
    '<table><tbody><tr><td style="text-align:center; background:url(javascript:alert(1))">t</td></tr></tbody></table>',
    '<p style="position:fixed;top:0">p</p><details open class="x"><summary>s</summary>body</details>',
    '<ol start="3"><li>three</li></ol><u>under</u><kbd>k</kbd><sub>2</sub><del>gone</del>',
]
MARKDOWN = [
    "# Title\n\nSome **bold**, *em*, `code` and ~~gone~~.\n\n> quoted\n\n3. three\n4. four\n",
    "[docs](https://example.com/docs?q=1&r=2) and [mail](mailto:a@example.com) and [rel](rel/x)\n",
    "![logo](https://example.com/logo.png) ![p](//evil/p.png) ![s](/api/x) ![r](rel/a.png)\n\n"
    "![ref][r]\n\n[r]: http://e/ref.png\n",
    f"![dot]({PNG}) and <img src=x onerror=alert(1)> and <b>raw</b>\n",
    "| a | b |\n|:--|--:|\n| 1 | 2 |\n",
    "```\nprint('<b>not markup</b>')\n```\n",
]

TS = """import './dom';
import { md } from '../src/markdown';
import { sanitize } from '../src/safe_html';
function main(input: { html: string[]; markdown: string[] }) {
  return { html: input.html.map(sanitize), markdown: input.markdown.map(text => sanitize(md.render(text))) };
}
"""


class _Tree(HTMLParser):
    """Elements (tag, sorted attributes) and text runs, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[object] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kept = {k: (v or "").replace(" ", "") if k == "style" else v or "" for k, v in attrs if k != "target"}
        if tag == "span" and kept.get("class", "").startswith("hljs"):
            return
        self.items.append((tag, sorted(kept.items())))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.items.append(" ".join(data.split()))


def _tree(html: str) -> list[object]:
    parser = _Tree()
    parser.feed(html)
    return parser.items


@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_python_and_typescript_sanitize_to_the_same_elements_and_text() -> None:
    drawn = run_ts(TS, {"html": HTML, "markdown": MARKDOWN})
    for source, python, typescript in [*zip(HTML, map(sanitize, HTML), drawn["html"]),
                                       *zip(MARKDOWN, map(markdown_to_html, MARKDOWN), drawn["markdown"])]:
        assert _tree(python) == _tree(typescript), (source, python, typescript)


def test_the_policy_is_one_file_that_both_sides_read() -> None:
    """Python reads policy.json beside render/policy.py; the TypeScript imports that same file."""
    path = Path(policy.__file__).with_name("policy.json")
    assert policy.POLICY == json.loads(path.read_text(encoding="utf-8"))
    source = (Path(__file__).resolve().parents[2] / "labextension" / "src" / "policy.ts").read_text()
    assert "from '../../src/ipyagent/notebook/render/policy.json'" in source
    # Every image and sound a transcript keeps (core) is one the renderers draw or play.
    assert KEPT_RASTER_TYPES <= policy.RASTER_TYPES
    assert KEPT_AUDIO_TYPES == policy.AUDIO_TYPES
    for kind in policy.RASTER_TYPES:
        assert policy.INLINE_IMAGE.fullmatch(f"data:{kind};base64,AAAA")
    assert not policy.INLINE_IMAGE.fullmatch("data:image/svg+xml;base64,AAAA")


def test_the_evaluation_matrix_takes_its_page_and_columns_from_the_policy() -> None:
    from ipyagent.notebook.render import evaluation

    assert evaluation.PAGE == policy.POLICY["evaluation"]["page_rows"] == 50
    assert [list(c) for c in evaluation.SUMMARY_COLUMNS] == policy.POLICY["evaluation"]["summary_columns"]
