"""The HTML fallback of a saved run, as a viewer without the ipyagent extension draws it: the
notebook exported by nbconvert (what nbviewer serves) opened in Chromium. The fallback is written
on one line (a saved notebook stores text line by line); the page must still show the answer's
headings, list items, table rows and each line of its code."""

from __future__ import annotations

import nbformat
import pytest

from ipyagent.core.transcript import TextPart, Transcript, TranscriptMessage
from ipyagent.notebook.views.transcript_output import bundle

from .conftest import SCREENSHOTS

pytestmark = pytest.mark.browser

CODE = 'def total(rows):\n    """Sum the rows."""\n    return sum(r["sales"] for r in rows)\n\nprint(total([]))'
ANSWER = (f"## Totals\n\nA soft\nbreak, **bold** and a [link](https://example.com/a).\n\n- one\n- two\n\n"
          f"```python\n{CODE}\n```\n\n| region | sales |\n|---|---:|\n| North | 1,000 |\n| South | 1,925 |\n")


def test_the_one_line_html_fallback_reads_as_the_answer_in_a_browser(page, tmp_path):
    from nbconvert import HTMLExporter

    transcript = Transcript(
        provider="openai:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=ANSWER)])]
    )
    data, metadata = bundle(transcript)
    assert "\n" not in data["text/html"]
    output = nbformat.v4.new_output("display_data", data=data, metadata=metadata)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%agent\nTotals?", outputs=[output])])
    html, _ = HTMLExporter().from_notebook_node(nb)
    path = tmp_path / "export.html"
    path.write_text(html)
    page.goto(path.as_uri())
    fallback = page.locator(".ipyagent-transcript")
    assert fallback.locator("h2").inner_text() == "Totals"
    assert fallback.locator("p").first.inner_text() == "A soft break, bold and a link."
    assert fallback.locator("li").all_inner_texts() == ["one", "two"]
    assert fallback.locator("pre code").inner_text() == CODE + "\n"  # each line of the code, as written
    assert [r.inner_text().split("\t") for r in fallback.locator("tbody tr").all()] == [
        ["North", "1,000"],
        ["South", "1,925"],
    ]
    assert fallback.locator("a").get_attribute("rel") == "noreferrer nofollow"  # noreferrer: no Referer, no opener
    assert "out tokens" in fallback.locator(".ipyagent-footer").inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    fallback.screenshot(path=str(SCREENSHOTS / "html-fallback-nbconvert.png"))


def test_the_extension_draws_a_compact_transcript_as_one_saved_with_every_field(lab):
    """Transcripts are saved without their default-valued fields; one saved by an older version
    has them all (and no footer figures, which the Python side now writes). JupyterLab's renderer
    draws both the same (tool states, reasoning), the older one's footer its provider and state; a
    call the run's end cut off reads "interrupted", one never started "not run"."""
    import json

    from ipyagent.core.transcript import ReasoningPart, Timings, ToolCallPart, TranscriptUsage

    t = Transcript(
        provider="openai:m",
        status="interrupted",
        messages=[
            TranscriptMessage(
                role="assistant",
                parts=[
                    ReasoningPart(text="think"),
                    TextPart(text=ANSWER),
                    ToolCallPart(id="c1", name="f", arguments={"x": 1}, status="ok", result="1", duration_s=0.5),
                    ToolCallPart(id="c2", name="g"),
                    ToolCallPart(
                        id="c3",
                        name="h",
                        status="error",
                        result="interrupted while the tool ran",
                        duration_s=0.25,
                        stopped="interrupted",
                    ),
                ],
            )
        ],
        usage=TranscriptUsage(input_tokens=3, output_tokens=4),
        timings=Timings(total_s=1.0),
    )
    compact, full = t.to_json(), t.model_dump(mode="json")
    assert len(json.dumps(compact)) < len(json.dumps(full))
    outputs = [
        nbformat.v4.new_output(
            "display_data", data={"application/vnd.ipyagent.transcript+json": doc, "text/plain": "run"}
        )
        for doc in (compact, full)
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%agent\nTotals?", outputs=outputs)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "forms.ipynb")
    lab.open("forms.ipynb", wait_kernel=False)
    drawn = lab.cell(0).locator(".jp-ipyagent-renderer")
    drawn.nth(1).wait_for(state="attached", timeout=60000)
    new, old = (drawn.nth(i).inner_text() for i in range(2))
    footer = "openai:m · 3 in / 4 out tokens · total 1.00 s · interrupted"
    assert new.replace(footer, "openai:m · interrupted") == old
    assert "c1 · done in 0.50 s" in new and "c2 · not run" in new and "c3 · interrupted after 0.25 s" in new
    assert "openai:m · 3 in / 4 out tokens · total 1.00 s · interrupted" in new
