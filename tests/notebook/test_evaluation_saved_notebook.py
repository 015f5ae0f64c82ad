"""A 3,000 × 2 ``%%compare --over`` in a real kernel (nbclient) against a local server: the saved
notebook stays small (it was 8.5 MB), every failing row is in it, and its note says how many rows
are not (issue 33, item 1)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from ipyagent.notebook.render.evaluation import MIME_TYPE

from ..support.evaluation import last_user_text
from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook

ROWS = 3000
#: The rows the second model answers wrong.
FAILING = set(range(7, ROWS, 61))


def _reply(body: dict):
    n = int(last_user_text(body).split()[-1].rstrip("?"))
    wrong = body["model"] == "m2" and n in FAILING
    text = (f"I would say {n + 1}." if wrong else f"It is {n}.") + " Because" + " and so on" * 20
    return openai_text_reply(text, piece=len(text))


@pytest.mark.timeout(900)
def test_a_3000_by_2_evaluation_saves_under_1_2_mb_with_every_failing_row(tmp_path: Path) -> None:
    with StubServer(responder=_reply) as server:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in (
            f"%load_ext ipyagent\n%agent store off\n%provider --alias one openai:m1 --base-url {server.url}\n"
            f"%provider --alias two openai:m2 --base-url {server.url}\n"
            f"rows = [{{'n': n, 'want': f'It is {{n}}.'}} for n in range({ROWS})]",
            "%%compare one two --over rows --assert 'contains:{{ row.want }}' --concurrency 16 -o ev\n"
            "What is {{ row.n }}?",
            "print(len(ev.results), sum(not r.passed for r in ev.results))")]
        NotebookClient(nb, timeout=840, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[2].outputs[0]["text"].split() == [str(2 * ROWS), str(len(FAILING))]
    size = len(nbformat.writes(nb).encode())
    assert size < 1_200_000, size
    (output,) = [o for o in nb.cells[1].outputs if MIME_TYPE in o.get("data", {})]
    doc = output["data"][MIME_TYPE]
    shown = {r["row"] for r in doc["results"]}
    assert FAILING <= shown < set(range(ROWS))
    assert {r["row"] for r in doc["results"] if not r["passed"]} == FAILING
    note = (f"{len(shown):,} of {ROWS:,} rows shown, failing and disagreeing rows first; "
            f"{ROWS - len(shown):,} rows not shown")
    assert doc["saved"]["note"].startswith(note)
    for mime in ("text/html", "text/markdown", "text/plain"):
        assert note in output["data"][mime]
    assert [s["runs"] for s in doc["summary"]] == [ROWS, ROWS]
    nbformat.write(nb, tmp_path / "evaluation.ipynb")  # for a look: the browser suite opens a smaller one
