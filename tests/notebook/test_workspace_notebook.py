"""notebooks/workspace.ipynb under nbclient, replaying its cassettes (no key, no network): a web
search (OpenAI Responses) answered with numbered footnotes, a code execution (Gemini) that
draws a chart, both saved as cards and footnotes in the transcript and its HTML fallback, and an
agent given the notebook (``%%agent --notebook``, pre-approved: no browser answers here) that adds a
cell, runs it in the kernel and answers with its output. The cassettes' streams follow the
documented shapes (`tests/support/server_tool_streams.py`; tests/drivers/test_cassettes.py checks
each Responses event against the openai SDK; the agent's are the recorded OpenAI Chat chunks')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..support.kernels import transcript_of

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "workspace.ipynb"


def _cell(nb, start: str):
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start))


def test_workspace_notebook_replays_a_cited_search_a_chart_and_an_agent_at_work(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    folder = {"metadata": {"path": str(NOTEBOOK.parent)}}
    NotebookClient(nb, timeout=120, kernel_name="python3", resources=folder).execute()

    search = _cell(nb, "%%agent -p {search}")
    doc = transcript_of(search)
    (reply,) = [m for m in doc["messages"] if m["role"] == "assistant"]
    card, text = reply["parts"]
    assert (card["type"], card["tool"]) == ("server_tool", "web_search")
    assert card["input"] == {"query": "Euro 2024 final winner venue"}
    titles = ["Spain 2-1 England: final report", "UEFA Euro 2024 final - Wikipedia"]
    assert [c["title"] for c in text["citations"]] == titles
    html = next(o["data"]["text/html"] for o in search.outputs if "text/html" in o.get("data", {}))
    assert "Spain won Euro 2024<sup>[1]</sup>" in html and "July 2024.<sup>[2]</sup>" in html
    assert 'rel="noreferrer nofollow"' in html  # saved compacted: noreferrer implies noopener
    assert "replayed from cassette" in html
    printed = "".join(o.get("text", "") for o in _cell(nb, "for c in found.citations").outputs)
    assert printed.splitlines()[0].startswith("'Spain won Euro 2024'") and "<https://en.wikipedia.org/" in printed

    code = _cell(nb, "%%agent -p {coder}")
    (reply,) = [m for m in transcript_of(code)["messages"] if m["role"] == "assistant"]
    parts = reply["parts"]
    (run,) = [p for p in parts if p["type"] == "server_tool"]
    assert run["tool"] == "code_execution" and "plt.bar" in run["input"]["code"] and run["output"] == "385\n"
    (chart,) = [p for p in parts if p["type"] == "other" and p["kind"] == "image"]
    assert chart["mime_type"] == "image/png" and chart["data"]
    html = next(o["data"]["text/html"] for o in code.outputs if "text/html" in o.get("data", {}))
    assert "data:image/png;base64," in html and "<b>code execution</b>" in html
    assert "<strong>385</strong>" in html or "<b>385</b>" in html
    _agent_added_and_ran_a_cell(nb)


def _agent_added_and_ran_a_cell(nb) -> None:
    """The third part: the calls (list, insert, run), the new cell's output, the answer using it."""
    agent = _cell(nb, "%%agent -p {agent} --notebook")
    assert "--approve-notebook --approve-runs" in agent.source.splitlines()[0]  # no one can click Approve here
    messages = transcript_of(agent)["messages"]
    calls = [p for m in messages for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["notebook_list_cells", "notebook_insert_cell", "notebook_run_cell"]
    assert all(c["status"] == "ok" for c in calls)
    assert [c.get("approval") for c in calls] == [None, "preapproved", "preapproved"]  # reading asks nothing
    listed, added, ran = (c["result"] for c in calls)
    end = len(listed.splitlines()) - 1  # the cells before: this kernel's history, this cell last
    assert listed.startswith(f"{end} cells (this kernel, which no notebook front end with ipyagent answers for")
    assert listed.splitlines()[-1].startswith(f"{end - 1}: code In [{end}]: %%agent -p {{agent}} --notebook")
    assert calls[1]["arguments"]["index"] == end and added == f"inserted cell {end} (code)"
    assert calls[2]["arguments"] == {"index": end}
    assert ran.endswith("outputs:\n2 sources: en.wikipedia.org, www.uefa.com\n")  # run in the kernel, on `found`
    answer = messages[-1]["parts"][-1]["text"]
    assert "It printed `2 sources: en.wikipedia.org, www.uefa.com`" in answer
    html = next(o["data"]["text/html"] for o in agent.outputs if "text/html" in o.get("data", {}))
    assert "notebook_run_cell" in html and "2 sources: en.wikipedia.org, www.uefa.com" in html
    assert html.count("approved in advance · done in") == 2
    assert [c.source for c in nb.cells] == [c.source for c in _read(NOTEBOOK).cells]  # no front end: no new cell


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def _streamed_text(sse: str) -> str:
    """The text an OpenAI Chat stream says (its ``delta.content`` pieces)."""
    chunks = [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_workspace_cassettes_hold_the_documented_requests():
    search = json.loads((ROOT / "notebooks" / "workspace-search.cassette.jsonl").read_text().splitlines()[0])
    assert search["request"]["body"]["tools"] == [{"type": "web_search"}]
    assert search["request"]["body"]["include"] == ["web_search_call.action.sources"]
    code = json.loads((ROOT / "notebooks" / "workspace-code.cassette.jsonl").read_text().splitlines()[0])
    assert code["request"]["body"]["tools"] == [{"code_execution": {}}]
    agent = [json.loads(line) for line in (ROOT / "notebooks" / "workspace-agent.cassette.jsonl").open()]
    assert [e["request"]["url"] for e in agent] == ["https://api.openai.com/v1/chat/completions"] * 4
    last = agent[-1]["request"]["body"]["messages"]
    printed = "2 sources: en.wikipedia.org, www.uefa.com"
    assert last[-1]["role"] == "tool" and last[-1]["content"].endswith(f"outputs:\n{printed}\n")
    assert f"It printed `{printed}`" in _streamed_text(agent[-1]["response"]["body"])  # the answer uses the output
