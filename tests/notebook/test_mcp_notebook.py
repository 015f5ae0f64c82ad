"""MCP in real kernels: notebooks/mcp.ipynb under nbclient (a server written in the notebook's folder,
a replayed model), no server left after the kernel shuts down, and an interrupt during a slow MCP call."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from ..support.kernels import wait_reply
from ..support.processes import children, gone
from ..support.stub_server import StubServer, openai_text_reply
from ..support.mcp_servers import TEST_SERVER, pid_in, received, wrapped_server
from ..support.replies import tool_call_reply
from ..support.waiting import wait_until

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "mcp.ipynb"
CASSETTE = ROOT / "notebooks" / "mcp.cassette.jsonl"
MIME = "application/vnd.ipyagent.transcript+json"


def _outputs_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def test_mcp_notebook_runs_its_own_server_with_a_replayed_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    shutil.copy(NOTEBOOK, tmp_path / NOTEBOOK.name)
    shutil.copy(CASSETTE, tmp_path / CASSETTE.name)
    nb = nbformat.read(tmp_path / NOTEBOOK.name, as_version=4)
    client = NotebookClient(nb, timeout=90, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel():
        kernel_pid = client.km.provisioner.process.pid
        servers = []
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
            servers = servers or children("mcp_demo_server.py", kernel_pid)
        assert len(servers) == 1, "the notebook's server was started once, by the kernel"
    assert gone(servers[0])  # removed in the notebook's last cell, and the kernel is shut down

    assert (tmp_path / "mcp_demo_server.py").exists()  # written in the notebook's folder
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_start = {c.source.split("\n", 1)[0]: c for c in code}
    added = _outputs_text(by_start["import sys"])
    assert added.startswith("mcp: palette running; tools: palette_mix_colors, palette_swatch")
    listing = "".join(
        o["data"]["text/plain"] for o in by_start["%tools"].outputs if o.get("output_type") == "display_data"
    )
    assert "palette_swatch: A square PNG filled with one colour" in listing and '"color"' in listing
    shown = next(c for c in code if c.source.startswith("from IPython.display import Image"))
    assert _outputs_text(shown).startswith("#800080 image/png")
    assert any("image/png" in o.get("data", {}) for o in shown.outputs)
    named = next(c for c in code if c.source.startswith("print(blended"))
    assert _outputs_text(named).strip() == "#800080 is called Twilight Plum"  # the server's sampling, answered
    blend_cell = next(c for c in code if c.source.startswith("%%agent --tools palette -o blended"))
    cards = [p for o in blend_cell.outputs for m in o.get("data", {}).get(MIME, {}).get("messages", [])
             for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["name"] for c in cards] == ["palette_blend", "palette_name_color"]
    assert cards[0]["result"] == "#bf0040, #800080, #4000bf, #0000ff"
    [note] = cards[1]["notes"]
    assert note.startswith("sampling request from palette answered by ") and note.endswith("Twilight Plum")
    # No browser shows the cells here: the server's form (elicitation) is declined, and the card says why.
    ordered = next(c for c in code if c.source.startswith("print(ordered"))
    assert _outputs_text(ordered).strip() == "no paint ordered: the user chose to decline"
    order_cell = next(c for c in code if c.source.startswith("%%agent --tools palette -o ordered"))
    [order] = [p for o in order_cell.outputs for m in o.get("data", {}).get(MIME, {}).get("messages", [])
               for p in m["parts"] if p["type"] == "tool_call"]
    assert order["notes"] == ["palette asked you for input: declined, no front end shows this cell (a run without a "
                              "browser)"]
    assert _outputs_text(by_start["%mcp remove palette"]).strip() == "mcp: removed palette (server stopped)"
    for cell in code:  # the server's stderr and the SDK's logging never reach the cells
        assert not any(o.get("output_type") == "error" for o in cell.outputs), cell.source
        assert "Processing request" not in _outputs_text(cell)


def _kernel(monkeypatch: pytest.MonkeyPatch, record: Path):
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-kernel")
    monkeypatch.setenv("MCP_TEST_RECORD", str(record))
    return start_new_kernel(kernel_name="python3")


def _run(kc, code: str, timeout: float = 60) -> tuple[dict, str]:
    reply, iopub = wait_reply(kc, kc.execute(code), timeout)
    return reply, "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")


def test_interrupt_during_a_slow_mcp_call_cancels_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "calls.jsonl"
    model = StubServer(tool_call_reply([("call_slow", "test_slow", {"seconds": 60})]), openai_text_reply("After."))
    with model:
        km, kc = _kernel(monkeypatch, record)
        try:
            kernel_pid = km.provisioner.process.pid
            reply, out = _run(
                kc,
                f"%load_ext ipyagent\n%provider openai:m --base-url {model.url}/v1\n"
                f"%mcp add test --start --env MCP_TEST_RECORD={record} -- {sys.executable} {TEST_SERVER[1]}",
            )
            assert reply["content"]["status"] == "ok" and "mcp: test running" in out
            [server_pid] = children(TEST_SERVER[1], kernel_pid)

            msg_id = kc.execute("%%agent --tools test.slow\nWait a minute.")
            wait_until(lambda: received(record))
            assert received(record) == [{"tool": "slow", "arguments": {"seconds": 60}}]
            km.interrupt_kernel()
            reply, _ = wait_reply(kc, msg_id, 20)  # the tool would answer in 60 s: the interrupt ended the cell
            assert reply["content"]["status"] == "error"
            wait_until(lambda: len(received(record)) >= 2, 5)
            assert received(record)[1:] == [{"cancelled": "slow"}]  # the server got notifications/cancelled

            reply, out = _run(kc, "%mcp list")  # the kernel and the server keep working
            assert reply["content"]["status"] == "ok" and out.startswith("test  running")
            assert children(TEST_SERVER[1], kernel_pid) == [server_pid]
        finally:
            kc.stop_channels()
            km.shutdown_kernel()
        assert gone(server_pid), "the MCP server outlived the kernel"


def test_kernel_shutdown_stops_servers_never_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    km, kc = _kernel(monkeypatch, tmp_path / "calls.jsonl")
    try:
        kernel_pid = km.provisioner.process.pid
        reply, out = _run(kc, "%load_ext ipyagent\n"
                              f"%mcp add time --start -- {sys.executable} -m mcp_server_time --local-timezone UTC\n"
                              f"from ipyagent.tools import MCPServer\nfrom ipyagent.agent import run_sync\n"
                              f"py = MCPServer('py', ['{sys.executable}', '{TEST_SERVER[1]}'])\nrun_sync(py.start())\n"
                              "print(sorted(py.names.values())[:2])")
        assert reply["content"]["status"] == "ok", out
        assert "mcp: time running" in out and "['py_big', 'py_crash']" in out
        pids = children("mcp_server_time", kernel_pid) + children(TEST_SERVER[1], kernel_pid)
        assert len(pids) == 2
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    assert all(gone(pid) for pid in pids), "an MCP server outlived the kernel"


def test_kernel_shutdown_ends_a_servers_whole_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``sh -c`` wrapper's other child, which never reads the server's stdin, ends with the kernel."""
    pidfile = tmp_path / "child.pid"
    km, kc = _kernel(monkeypatch, tmp_path / "calls.jsonl")
    try:
        kernel_pid = km.provisioner.process.pid
        reply, out = _run(kc, f"%load_ext ipyagent\n%mcp add fam --start -- {shlex.join(wrapped_server(pidfile))}")
        assert reply["content"]["status"] == "ok" and "mcp: fam running" in out, out
        [leader] = children(TEST_SERVER[1], kernel_pid)  # the sh wrapper, the kernel's child
        child = pid_in(pidfile)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    assert gone(leader) and gone(child), "a process of the MCP server outlived the kernel"


def test_mcp_notebook_cassette_matches_the_notebook() -> None:
    """The cassette was made from this notebook's prompt and server (make_cassettes.py mcp)."""
    nb = json.loads(NOTEBOOK.read_text())
    prompt = next("".join(c["source"]) for c in nb["cells"] if "".join(c["source"]).startswith("%%agent")).split(
        "\n", 1
    )[1]
    first = json.loads(CASSETTE.read_text().splitlines()[0])
    assert first["request"]["body"]["messages"][0]["content"] == prompt.strip()
    tools = ["palette_mix_colors", "palette_swatch", "palette_blend", "palette_name_color", "palette_order_paint"]
    assert [t["function"]["name"] for t in first["request"]["body"]["tools"]] == tools
    # every answer the order's form can get is recorded: either finish, decline, cancel
    results = [m["content"] for line in CASSETTE.read_text().splitlines()
               for m in json.loads(line)["request"]["body"]["messages"] if m["role"] == "tool"]
    assert {r for r in results if "paint" in r} == {
        "ordered a tin of #800080 paint, matte finish", "ordered a tin of #800080 paint, gloss finish",
        "no paint ordered: the user chose to decline", "no paint ordered: the user chose to cancel"}
