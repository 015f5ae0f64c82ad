"""What a headless run keeps of the live views: nbclient (as papermill and nbconvert) keeps every
widget's last state in the notebook, closed or not; a live view's state holds a loader of a few
hundred bytes, never the front end (live_widget.py, labextension/src/live_loader.ts)."""

from __future__ import annotations

import json

import pytest

from ..support.kernels import widget_values
from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook

#: The issue's bound on the widget state that 20 %%agent cells and one %%compare leave.
STATE_LIMIT = 100_000


def test_20_agent_cells_and_a_compare_leave_at_most_100_kb_of_widget_state(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    from ipyagent.notebook.views.live_widget import front_end

    with StubServer(openai_text_reply("Paris is the capital of France. " * 8, piece=16)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-widget-state")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        cells = [nbformat.v4.new_code_cell("%load_ext ipyagent\n%provider openai:gpt-4.1-mini")]
        cells += [nbformat.v4.new_code_cell(f"%%agent\nQuestion {n}: the capital of France?") for n in range(20)]
        cells += [nbformat.v4.new_code_cell("%%compare openai:gpt-4.1-mini openai:gpt-4.1\nThe capital of France?")]
        nb = nbformat.v4.new_notebook(cells=cells)
        NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute()
        assert len(server.requests) == 22  # every cell ran against the server

    states = widget_values(nb)
    live = [s for s in states.values() if s.get("_model_name") == "AnyModel"]
    assert len(live) == 21  # one live view per cell, kept although closed
    size = len(json.dumps(nb.metadata["widgets"]))
    print(f"\nwidget state: {size} bytes for {len(states)} widgets")
    assert size <= STATE_LIMIT
    _, esm, css = front_end()
    for state in live:  # the loader, never the front end or its styles
        assert len(state["_esm"]) < 3_000 and "_css" not in state
        assert esm[:200] not in state["_esm"] and css[:200] not in json.dumps(state)
