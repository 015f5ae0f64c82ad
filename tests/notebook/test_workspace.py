"""The kernel side of the notebook as the agent's workspace (workspace.py): terminal IPython's
history as cells, a cell run by the kernel with its outputs captured, ``%%agent --notebook`` options,
and ``%agent serve-mcp`` read by an MCP client of the official SDK."""

import asyncio
import io
import json
import stat
from pathlib import Path
from typing import Any

import httpx2
import pytest
from IPython.core.error import UsageError
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ipyagent.core import ModelStarted, ToolAction, ToolCallDelta, add_secret, redact
from ipyagent.core.redact import MASK
from ipyagent.notebook.views.run_view import TextView, WidgetView
from ipyagent.notebook.workspace import FrontEndNotebook, HistoryNotebook, KernelNotebook, output_texts, run_here
from ipyagent.tools import NotebookTools, NotebookUnsupported

from ..support.live_front import FrontEnd, frames_until, run_on_views_clock


def run(ip: Any, source: str) -> Any:
    return ip.run_cell(source, store_history=True)


def test_terminal_history_reads_as_cells(ip: Any) -> None:
    run(ip, "answer = 6 * 7")
    run(ip, "print('the answer is', answer)")
    run(ip, "answer + 1")
    cells = HistoryNotebook(ip).cells()
    assert [c.source for c in cells[-3:]] == ["answer = 6 * 7", "print('the answer is', answer)", "answer + 1"]
    assert cells[-2].outputs == ["the answer is 42\n"] and [o.strip()[-2:] for o in cells[-1].outputs] == ["43"]
    assert cells[-1].execution_count == cells[-1].index + 1
    run(ip, "%pwd")
    assert HistoryNotebook(ip).cells()[-1].source == "%pwd"  # as typed, not the call IPython made of it


def test_terminal_ipython_offers_the_next_input_only(ip: Any) -> None:
    run(ip, "x = 1")
    notebook = HistoryNotebook(ip)
    end = len(notebook.cells())
    assert notebook.insert(end, "x + 1", "code").index == end
    assert ip.rl_next_input == "x + 1"
    with pytest.raises(NotebookUnsupported, match=f"put a new cell at the prompt \\(insert at index {end}\\)"):
        notebook.insert(0, "y", "code")
    with pytest.raises(NotebookUnsupported, match="cannot run cells"):
        notebook.run(0)
    with pytest.raises(NotebookUnsupported, match="cannot edit cells"):
        notebook.edit(0, "y")


def test_a_cell_run_by_the_kernel_keeps_its_outputs_apart(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.display import display  # noqa: F401 - the cell displays

    count = ip.execution_count
    outputs = run_here(ip, "print('hi')\nfrom IPython.display import display\ndisplay('shown')\n6 * 7")
    assert [o["output_type"] for o in outputs] == ["stream", "display_data", "execute_result"]
    assert output_texts(outputs) == ["hi\n", "'shown'", "42"]
    assert ip.execution_count == count and "display('shown')" not in "".join(ip.user_ns["In"])  # no history entry
    failed = run_here(ip, "1 / 0")
    assert failed[-1]["output_type"] == "error" and output_texts(failed) == ["ZeroDivisionError: division by zero"]
    assert capsys.readouterr().out == ""  # nothing went to the cell that asked


def test_notebook_options_are_checked(ip: Any) -> None:
    with pytest.raises(UsageError, match="--approve-notebook goes with --notebook"):
        ip.run_cell_magic("agent", "--approve-notebook", "hello")
    with pytest.raises(UsageError, match="--approve-runs goes with --notebook"):
        ip.run_cell_magic("agent", "--approve-runs", "hello")
    with pytest.raises(UsageError, match="--notebook .*not available with --compare"):
        ip.run_cell_magic("agent", "--notebook --compare a,b", "hello")


async def _read_first_cell(url: str, token: str) -> tuple[list[str], str]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = [t.name for t in (await session.list_tools()).tools]
                cells = (await session.call_tool("notebook_list_cells", {})).content[0].text
                index = int(cells.splitlines()[-1].split(":")[0])
                return names, (await session.call_tool("notebook_read_cell", {"index": index})).content[0].text


def test_serve_mcp_offers_the_notebook_to_an_mcp_client(ip: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    run(ip, "total = sum(range(5))\ntotal")
    served = ip.run_line_magic("agent", "serve-mcp")
    token_file = tmp_path / f"ipyagent-mcp-{served.server.port}.token"
    try:
        assert isinstance(served.server.tool, NotebookTools) and str(token_file) in repr(served)
        with pytest.raises(UsageError, match="already running"):
            ip.run_line_magic("agent", "serve-mcp")
        names, text = asyncio.run(_read_first_cell(served.server.url, token_file.read_text()))
    finally:
        ip.run_line_magic("agent", "serve-mcp stop")
    assert not token_file.exists()
    assert "notebook_run_cell" in names
    head, source, outputs = text.split("\n", 1)[0], text.split("\n")[1:3], text.split("outputs:\n")[1]
    assert head.endswith("(code) In [" + head.split("In [")[1]) and source == ["total = sum(range(5))", "total"]
    assert outputs.strip().endswith("10")


class FakeComm:
    """The kernel's end of the labextension's comm: what the kernel sends, answered by `answer`."""

    def __init__(self, answer: Any) -> None:
        self.answer, self.sent, self.closed = answer, [], False

    def on_msg(self, callback: Any) -> None:
        self.deliver = lambda data: callback({"content": {"data": data}})

    def on_close(self, callback: Any) -> None:
        self.close_from_front = lambda: callback({})

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)
        reply = self.answer(data)
        if reply is not None:
            self.deliver({"request": data["request"], **reply})

    def close(self) -> None:
        self.closed = True


def front_end(ip: Any, monkeypatch: pytest.MonkeyPatch, answer: Any, **kw: Any) -> tuple[FrontEndNotebook, FakeComm]:
    made: list[FakeComm] = []
    monkeypatch.setattr("comm.create_comm", lambda **opened: made.append(FakeComm(answer)) or made[-1])

    async def make() -> FrontEndNotebook:  # on the kernel's thread, in its loop, as a magic makes it
        return FrontEndNotebook(ip, **kw)

    return asyncio.run(make()), made[0]


CELLS = [{"cell_type": "markdown", "source": "# Data", "outputs": [], "execution_count": None, "id": "a"},
         {"cell_type": "code", "source": "print(6 * 7)", "execution_count": 4, "id": "b",
          "outputs": [{"output_type": "stream", "name": "stdout", "text": "42\n"}]}]


def test_the_front_end_answers_for_its_notebook(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(data: dict[str, Any]) -> dict[str, Any]:
        if data["op"] == "cells":
            return {"cells": CELLS}
        if data["op"] == "set_outputs":
            return {"cell": {**CELLS[1], "outputs": data["outputs"], "execution_count": None}}
        return {"cell": {"cell_type": data.get("cell_type", "code"), "source": data["source"], "outputs": []}}

    notebook, comm = front_end(ip, monkeypatch, answer)
    comm.deliver({"hello": {"kind": "JupyterLab"}})
    cells = notebook.cells()
    assert notebook.kind == "JupyterLab" and [c.outputs for c in cells] == [[], ["42\n"]]
    assert notebook.insert(2, "x = 1", "code").source == "x = 1"
    ran = notebook.run(1)  # the kernel runs the source itself (here, on this thread), the front end shows it
    assert ran.outputs == ["42\n"]
    assert [m["op"] for m in comm.sent] == ["cells", "insert", "cells", "set_outputs"]
    assert comm.sent[1] == {"request": "2", "op": "insert", "index": 2, "source": "x = 1", "cell_type": "code"}
    assert comm.sent[3]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]
    notebook.close()
    assert comm.closed


def test_an_answer_that_is_an_error_is_said_to_the_model(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook, comm = front_end(ip, monkeypatch, lambda data: {"error": "there is no cell 9: cells are numbered 0 to 1"})
    comm.deliver({"hello": {"kind": "Jupyter Notebook"}})
    with pytest.raises(NotebookUnsupported, match="there is no cell 9"):
        notebook.edit(9, "x")


@pytest.mark.parametrize("front", ["closed", "silent"])
def test_without_the_labextension_the_history_is_read(ip: Any, monkeypatch: pytest.MonkeyPatch, front: str) -> None:
    """JupyterLab without the plugin closes the comm at once; nbclient never answers (`grace` runs out)."""
    run(ip, "seen = 'from the history'")
    notebook, comm = front_end(ip, monkeypatch, lambda data: None, grace=0)
    if front == "closed":
        comm.close_from_front()
    assert notebook.cells()[-1].source == "seen = 'from the history'" and comm.sent == []
    assert isinstance(notebook.history, KernelNotebook) and notebook.cells() == notebook.history.cells()
    assert notebook.kind == notebook.history.kind  # what list_cells names
    comm.deliver({"hello": {"kind": "JupyterLab"}})  # too late: the kernel's own stays in use
    assert not notebook.front_end() and comm.sent == []
    with pytest.raises(NotebookUnsupported, match="this kernel, which no notebook front end with ipyagent answers for"):
        notebook.edit(0, "x")


def test_without_a_front_end_the_kernel_keeps_the_cells_added_and_runs_them(ip: Any) -> None:
    """nbclient, papermill: the cell added is the kernel's; running it runs it here, its output kept."""
    run(ip, "base = 40")
    ran_on_kernel: list[Any] = []
    notebook = KernelNotebook(ip, lambda work: ran_on_kernel.append(work) or work())
    end = len(notebook.cells())
    with pytest.raises(NotebookUnsupported, match=f"can only add a cell at the end \\(index {end}\\)"):
        notebook.insert(0, "print(base)", "code")
    assert notebook.insert(end, "print(base + 1)", "code").index == end and ip.rl_next_input == "print(base + 1)"
    assert notebook.edit(end, "print(base + 2)").source == "print(base + 2)"
    ran = notebook.run(end)
    assert ran.outputs == ["42\n"] and len(ran_on_kernel) == 1
    assert notebook.cells()[end].outputs == ["42\n"] and notebook.cells()[end - 1].source == "base = 40"
    assert notebook.insert(end + 1, "The answer.", "markdown").cell_type == "markdown"
    with pytest.raises(NotebookUnsupported, match="cannot change the history"):
        notebook.edit(end - 1, "base = 0")
    assert notebook.run(end - 1).outputs == [] and ip.user_ns["base"] == 40  # a history cell runs again too


def test_the_card_shows_a_notebook_change_as_a_redacted_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    add_secret("sk-preview-secret-0123456789")
    action = ToolAction(tag="call_1", name="notebook_edit_cell", input={"index": 0, "source": "y"})
    diff = "--- cell 0 (now)\n+++ cell 0 (after)\n-key = 'sk-preview-secret-0123456789'\n+y"

    async def main() -> list[dict[str, Any]]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        arguments = json.dumps(action.input)
        view.feed(ToolCallDelta(0, call_id="call_1", name="notebook_edit_cell", arguments=arguments))
        asked = asyncio.ensure_future(view.request_approval(action, preview=diff))
        await frames_until(lambda: front.asks)
        shown = list(front.asks.values())
        front.click(next(iter(front.asks)), False)
        assert await asked is False
        return shown

    (ask,) = run_on_views_clock(main, monkeypatch)
    assert ask["preview"].splitlines()[:2] == ["--- cell 0 (now)", "+++ cell 0 (after)"]
    assert "sk-preview-secret" not in ask["preview"] and MASK in ask["preview"]


def test_the_terminal_prints_the_change_before_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.input", lambda question: "n")
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    action = ToolAction(tag="call_1", name="notebook_insert_cell", input={"index": 1, "source": "print(1)"})
    assert asyncio.run(view.request_approval(action, preview="+++ new cell 1 (after)\n+print(1)")) is False
    assert out.getvalue().splitlines()[-2:] == ["+++ new cell 1 (after)", "+print(1)"]


def test_serve_mcp_keeps_its_token_out_of_the_notebook(ip: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """The cell's result names the token's file, never the token: the file is its owner's only, and
    the token is a secret to the redactor from then on."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    served = ip.run_line_magic("agent", "serve-mcp")
    try:
        token = served.server.token
        token_file = tmp_path / "runtime" / f"ipyagent-mcp-{served.server.port}.token"
        assert token not in repr(served) and f"$(cat {token_file})" in repr(served)
        assert token_file.read_text() == token and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert token not in redact(f"the token is {token}")
    finally:
        ip.run_line_magic("agent", "serve-mcp stop")
    assert not token_file.exists()
