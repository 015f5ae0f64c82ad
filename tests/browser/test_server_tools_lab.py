"""Provider-side tools and citations in JupyterLab, as a person sees them: the workspace notebook's
replayed web search (OpenAI Responses) shows its card with the query and pages found while it
streams, then the answer with numbered footnote markers and a sources list whose links send no
referrer; its code execution (Gemini) shows a card with the code and output and the chart inline.
Nothing is fetched from the sources' hosts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .lab import renderer_of, write_notebook

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CELLS = ("%load_ext ipyagent",
         "%%agent -p replay:workspace-search.cassette.jsonl --builtin web_search --thread search\n"
         "Who won Euro 2024, and where was the final played? Cite your sources.",
         "%%agent -p replay:workspace-code.cassette.jsonl --builtin code_execution --thread code\n"
         "Plot the first ten square numbers and tell me their sum.")


def test_a_cited_search_and_a_chart(lab):
    for name in ("workspace-search.cassette.jsonl", "workspace-code.cassette.jsonl"):
        shutil.copy(ROOT / "notebooks" / name, lab.root)
    write_notebook(lab.root / "builtin.ipynb", *CELLS)
    requests: list[str] = []
    lab.page.on("request", lambda r: requests.append(r.url))
    lab.open("builtin.ipynb")
    lab.command("notebook:run-all-cells")

    search = lab.cell(1)
    card = search.locator("details.ipyagent-server-tool").first
    card.wait_for(state="attached", timeout=60000)  # the live card, before the answer ends
    body = renderer_of(search)
    body.wait_for(state="attached", timeout=60000)
    summary = body.locator("details.ipyagent-server-tool summary").inner_text()
    assert summary.startswith("web search") and "Euro 2024 final winner venue" in summary and "2 sources" in summary
    assert body.locator(".ipyagent-text sup.ipyagent-cite").all_inner_texts() == ["[1]", "[2]"]
    links = body.locator(".ipyagent-sources a")
    assert links.all_inner_texts() == ["Spain 2-1 England: final report", "UEFA Euro 2024 final - Wikipedia"]
    for n in range(links.count()):
        assert links.nth(n).get_attribute("rel") == "noopener noreferrer nofollow"
        assert links.nth(n).get_attribute("referrerpolicy") == "no-referrer"
    search.scroll_into_view_if_needed()
    lab.screenshot(search, "builtin-web-search.png")

    code = lab.cell(2)
    body = renderer_of(code)
    body.wait_for(state="attached", timeout=60000)
    card = body.locator("details.ipyagent-server-tool")
    assert card.locator("summary").inner_text().startswith("code execution")
    card.locator("summary").click()
    assert "plt.bar" in card.locator("pre").first.inner_text() and "385" in card.locator("pre").nth(1).inner_text()
    image = body.locator("img.ipyagent-image")
    assert image.count() == 1 and image.get_attribute("src").startswith("data:image/png;base64,")
    code.scroll_into_view_if_needed()
    lab.screenshot(code, "builtin-code-execution.png")
    assert not [u for u in requests if "uefa.com" in u or "wikipedia.org" in u]  # nothing loaded from a source
