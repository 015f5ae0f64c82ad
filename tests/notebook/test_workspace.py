"""The kernel side of the notebook as the agent's workspace (workspace.py): terminal IPython's
history as cells, a cell run by the kernel with its outputs captured, ``%%agent --notebook`` options,
and ``%agent serve-mcp`` read by an MCP client of the official SDK."""

import asyncio
from typing import Any

import httpx2
import pytest
from IPython.core.error import UsageError
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ipyagent.notebook.workspace import HistoryNotebook, output_texts, run_here
from ipyagent.tools import NotebookTools, NotebookUnsupported


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


def test_serve_mcp_offers_the_notebook_to_an_mcp_client(ip: Any) -> None:
    run(ip, "total = sum(range(5))\ntotal")
    served = ip.run_line_magic("agent", "serve-mcp")
    try:
        assert isinstance(served.server.tool, NotebookTools) and served.server.token in repr(served)
        with pytest.raises(UsageError, match="already running"):
            ip.run_line_magic("agent", "serve-mcp")
        names, text = asyncio.run(_read_first_cell(served.server.url, served.server.token))
    finally:
        ip.run_line_magic("agent", "serve-mcp stop")
    assert "notebook_run_cell" in names
    head, source, outputs = text.split("\n", 1)[0], text.split("\n")[1:3], text.split("outputs:\n")[1]
    assert head.endswith("(code) In [" + head.split("In [")[1]) and source == ["total = sum(range(5))", "total"]
    assert outputs.strip().endswith("10")
