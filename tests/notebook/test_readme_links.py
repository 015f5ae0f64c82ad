"""The README says which link attributes each output carries: the saved HTML (`render.html.compact`)
and the live view / the extension's renderer (``policy.json``'s links, which ``safe_html.ts`` sets
on every link). break-s12 section 10: it promised the long form in the saved HTML too."""

from __future__ import annotations

import re
from pathlib import Path

from ipyagent.notebook.render.html import compact, markdown_to_html
from ipyagent.notebook.render.policy import LINK_REFERRER_POLICY, LINK_REL

README = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())


def test_the_readme_names_the_link_attributes_of_the_saved_html() -> None:
    [saved] = re.findall(r"<a [^>]*>", compact(markdown_to_html("[a](https://example.org/)")))
    rel = re.search(r'rel="([^"]*)"', saved)
    assert rel is not None and "referrerpolicy" not in saved
    assert f'the saved HTML, shorter, carries `rel="{rel.group(1)}"`' in README


def test_the_readme_names_the_link_attributes_of_the_live_view() -> None:
    assert (f'in the live view and the extension\'s renderer every link carries `rel="{LINK_REL}"` and '
            f'`referrerpolicy="{LINK_REFERRER_POLICY}"` and opens in a new tab') in README
    assert 'rel="noopener noreferrer"`)' not in README  # the citations' old claim
