"""notebooks/memory.ipynb under nbclient against a local server serving its cassette: off-prompt
artifacts as collapsed entries in the saved widget state, threads, history and replay."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ipyagent.memory.store import RunStore
from ipyagent.notebook.render.html import compact

from ..support.stub_server import Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "memory.ipynb"
CASSETTE = ROOT / "notebooks" / "memory.cassette.jsonl"


def _tools_cell(nb: Any) -> dict[str, Any]:
    """The notebook's tools, run here: the expected outputs come from the same code."""
    scope: dict[str, Any] = {}
    tools = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("# The tools"))
    exec(tools, scope)  # noqa: S102
    return scope


def _text(cell: Any) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)


def test_memory_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    exchanges = [json.loads(line) for line in CASSETTE.read_text().splitlines() if line.strip()]
    replies = [
        Reply(pieces=[p.encode() + b"\n\n" for p in e["response"]["body"].split("\n\n") if p]) for e in exchanges
    ]
    with StubServer(*replies) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-memory-notebook")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        nb = nbformat.read(NOTEBOOK, as_version=4)
        NotebookClient(nb, timeout=90, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    # The kernel sent exactly what the cassette recorded, in order.
    assert [r["body"] for r in server.requests] == [e["request"]["body"] for e in exchanges]
    tools = _tools_cell(nb)
    page = tools["docs"].fetch_page("https://intranet.example.com/annual-report-2025")
    rows = tools["sales"].table(2025)
    chart = tools["sales"].chart(2025)
    conversation = [json.dumps(r["body"]) for r in server.requests if r["body"].get("tools")]
    assert len(conversation) == 4
    for body in conversation:  # the outputs stay off-prompt: the page's other sections, the table's rows
        assert "item 1." not in body and "item 20." not in body
        assert json.dumps(rows[5])[:-1] not in body
    assert all("fetch_page-1" in body for body in conversation[1:])

    code = [c for c in nb.cells if c.cell_type == "code"]
    agent_cells = [c for c in code if c.source.startswith("%%agent")]
    first = agent_cells[0]
    [transcript_output] = [o for o in first.outputs if "application/vnd.ipyagent.transcript+json" in o.get("data", {})]
    # As the live view and the labextension draw them (the saved HTML fallback holds the same entries).
    body = transcript_output["data"]["text/html"]
    drawn = [a["html"] for a in transcript_output["data"]["application/vnd.ipyagent.transcript+json"]["artifacts"]]
    assert all(compact(html) in body for html in drawn)  # the fallback is written compactly (on one line)

    # Three collapsed artifact entries: name, type, size, producing tool; content by type.
    entries = re.findall(
        r'<details class="ipyagent-artifact"><summary><b>([^<]+)</b> <span '
        r'class="ipyagent-footer">([^<]+)</span></summary>',
        body,
    )
    assert entries == [
        ("fetch_page-1", f"text · {len(page):,} chars · from Docs.fetch_page · off-prompt"),
        ("table-2", f"table · {len(rows)} rows × {len(rows[0])} columns · from Sales.table · off-prompt"),
        ("chart-3", f"image · {len(chart)} bytes · from Sales.chart · off-prompt"),
    ]
    assert '<details class="ipyagent-artifact" open' not in body
    assert "<h1>Annual report 2025" in body  # the text as Markdown
    assert f"<th>{'<th>'.join(rows[0])}</thead>" in body and f"show {len(rows) - 10} more rows" in body  # </th> implied
    assert f'<img src="data:image/png;base64,{base64.b64encode(chart).decode()}"' in body

    # %agent memory lists them; ipyagent.memory[...] returns the artifact
    memory_cell = next(c for c in code if c.source == "%agent memory")
    listing = _text(memory_cell)
    assert all(ns in listing for ns, _ in entries)
    assert any('class="ipyagent-artifact"' in o.get("data", {}).get("text/html", "") for o in memory_cell.outputs)
    accessor = next(c for c in code if 'ipyagent.memory["table-2"]' in c.source)
    assert repr(list(rows[0])) in _text(accessor) and repr(rows[0]) in _text(accessor)

    # threads and history
    threads = _text(next(c for c in code if c.source == "%agent threads"))
    assert "research: 2 turns" in threads
    history = _text(next(c for c in code if c.source.startswith("%agent history")))
    assert "thread 'research': 2 turns" in history and history.count("── turn") == 2
    assert '[tool Docs_fetch_page({"url": "https://intranet.example.com/annual-report-2025"})' in history
    assert "[tool TaskMemory_search(" in history and "user: In one sentence" in history

    # %agent replay draws the first run again, from the store, as it was
    replay = next(c for c in code if "%agent replay" in c.source)
    # ... and, as a live run, leaves a static transcript in the saved notebook, not a widget
    [saved] = [o for o in replay.outputs if "application/vnd.ipyagent.transcript+json" in o.get("data", {})]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in replay.outputs)
    assert [a["html"] for a in saved["data"]["application/vnd.ipyagent.transcript+json"]["artifacts"]] == drawn
    assert saved["data"]["application/vnd.ipyagent.transcript+json"]["status"] == "completed"
    # the same transcript as the original cell: figures (tokens, first token, total), tool statuses
    original = transcript_output["data"]["application/vnd.ipyagent.transcript+json"]
    replayed = saved["data"]["application/vnd.ipyagent.transcript+json"]
    for key in ("usage", "timings", "cost", "stop_reason", "attempts", "artifacts", "messages"):
        assert replayed[key] == original[key], key
    assert [p["status"] for m in replayed["messages"] for p in m["parts"] if p["type"] == "tool_call"] == ["ok"] * 5
    assert replayed["timings"]["turns"] == 3 and replayed["usage"]["input_tokens"] > 0
    assert saved["data"]["text/html"] == transcript_output["data"]["text/html"]
    header = next(o["data"]["text/html"] for o in replay.outputs if "text/html" in o.get("data", {}))
    assert "replay of run" in header and "research" in header
    assert replay.outputs[0]["data"]["text/plain"].startswith("replay of run")  # not an object's repr

    # the run store beside the notebook (here: the test's store) has both runs
    store = RunStore(os.environ["IPYAGENT_RUN_STORE"])
    try:
        runs = store.runs(thread="research")
        assert [r["status"] for r in runs] == ["ok", "ok"]
        assert f"run {runs[-1]['id']}" in history and runs[-1]["id"] in header
        kinds = [n["kind"] for n in store.nodes(runs[-1]["id"])]
        assert kinds.count("artifact") == 3 and kinds.count("request") == 3
    finally:
        store.close()
