"""The notebook as context in a real kernel (nbclient) against a local server on 127.0.0.1:
``%agent fix`` after a ``ZeroDivisionError``, ``--code`` as a ``set_next_input`` payload in the
execute reply with insert/copy buttons in the saved transcript, ``--cells 2``, a missing
``Out[n]``; and notebooks/context.ipynb replayed from its cassette."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
CODE = "per_unit = [p / c if c else 0.0 for p, c in zip(prices, counts)]"
ANSWER = f"`counts` holds a zero, so `p / c` divides by zero. Skip or guard the zero count:\n\n```python\n{CODE}\n```\n"
TRANSCRIPT = "application/vnd.ipyagent.transcript+json"


def _execute(nb, tmp_path: Path) -> list[dict]:
    """Execute `nb` in a fresh kernel; returns each code cell's execute_reply content, in order."""
    from nbclient import NotebookClient

    replies: list[dict] = []
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
        on_cell_executed=lambda cell, cell_index, execute_reply: replies.append(execute_reply["content"]),
    )
    client.execute()
    return replies


def _cell(source: str, *, raises: bool = False):
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    if raises:
        cell.metadata["tags"] = ["raises-exception"]
    return cell


def _stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_fix_code_and_cells_in_a_kernel(tmp_path, monkeypatch) -> None:
    import nbformat

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-context")
    monkeypatch.setenv("IPYAGENT_RUN_STORE", "off")
    with StubServer(openai_text_reply(ANSWER)) as server:
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            _cell("%load_ext ipyagent"),
            _cell(f"%provider openai:gpt-4.1-mini --base-url {server.url}/v1"),
            _cell("%agent fix", raises=True),  # 3: no exception yet
            _cell("prices = [12.0, 15.5, 9.25]\ncounts = [3, 0, 4]"),
            _cell("per_unit = [p / c for p, c in zip(prices, counts)]", raises=True),  # 5
            _cell("%agent fix --code"),  # 6
            _cell("best = max(prices)\nprint('best price:', best)"),  # 7
            _cell("sum(prices) / len(prices)"),  # 8
            _cell("%%agent --cells 2\nWhat do the two cells above compute?"),  # 9
            _cell("%%agent\nSummarize {{ Out[7] }}", raises=True),  # 10: cell 7 printed, returned nothing
        ]
        replies = _execute(nb, tmp_path)
    cells = nb.cells

    # No exception yet: the message, and no request.
    assert "UsageError: no exception in this session yet: run the failing cell first" in _stream_text(cells[2])
    fix, cells_run = server.requests[0], server.requests[1]
    assert len(server.requests) == 2  # the missing Out[7] sent nothing either

    # %agent fix: the exception type, IPython's traceback line, the failing cell's source.
    user = fix["body"]["messages"][-1]["content"]
    assert user.startswith(
        '<context source="error" name="error" type="ZeroDivisionError">\nZeroDivisionError: float division by zero\n'
    )
    assert "raised by cell In[5]:\n```python\nper_unit = [p / c for p, c in zip(prices, counts)]\n```" in user
    assert "Cell In[5], line 1\n----> 1 per_unit = [p / c for p, c in zip(prices, counts)]" in user
    assert "\x1b[" not in user and "ipyagent" not in user.split("traceback:")[1]

    # --code: the payload in the execute reply, and the buttons in the saved transcript.
    assert replies[5]["payload"] == [{"source": "set_next_input", "text": CODE, "replace": False}]
    (saved,) = [o for o in cells[5].outputs if TRANSCRIPT in o.get("data", {})]
    assert {"language": "python", **saved["data"][TRANSCRIPT]["next_cell"]} == {
        "language": "python",
        "source": CODE,
    }  # a default is left out
    html = saved["data"]["text/html"]
    assert '<button class="ipyagent-insert"' in html and '<button class="ipyagent-copy"' in html
    assert f"<code>{CODE}</code>" in html

    # --cells 2: both previous cells' sources and outputs.
    user = cells_run["body"]["messages"][-1]["content"]
    assert (
        '<context source="cell" name="In[7]" type="cell">\n```python\nbest = max(prices)\nprint(\'best price:\', '
        'best)\n```\n'
        "output:\nbest price: 15.5\n</context>"
    ) in user
    assert ('<context source="cell" name="In[8]" type="cell">\n```python\nsum(prices) / len(prices)\n```\n'
            "Out[8]:\nfloat: 12.25\n</context>") in user
    assert user.endswith("What do the two cells above compute?")

    # A missing Out[n]: one clear line naming the cell.
    assert ("UsageError: Out[7] does not exist: cell In[7] produced no result (it returned None or ended with ';'); "
            "use {{ In[7] }} for its source") in _stream_text(cells[9])
    errors = [n for n, c in enumerate(cells) for o in c.outputs if o.output_type == "error"]
    assert errors == [4]  # the failing cell's own traceback; none from ipyagent


def test_context_notebook_replays_from_its_cassette(tmp_path, monkeypatch) -> None:
    import nbformat

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    path = ROOT / "notebooks" / "context.ipynb"
    nb = nbformat.read(path, as_version=4)
    from nbclient import NotebookClient

    replies: list[dict] = []
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=lambda cell, cell_index, execute_reply: replies.append(execute_reply["content"]),
    ).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    transcripts = [o["data"][TRANSCRIPT] for c in code for o in c.outputs if TRANSCRIPT in o.get("data", {})]
    assert len(transcripts) == 3 and all(t["status"] == "completed" and t["replayed"] for t in transcripts)
    assert transcripts[0]["next_cell"]["source"].endswith("per_unit.append(p / c if c else float(\"nan\"))")
    assert any(r.get("payload") and r["payload"][0]["source"] == "set_next_input" for r in replies)
    inspect = next(c for c in code if c.source.startswith("%agent inspect"))
    text = _stream_text(inspect)
    assert "context: 2 blocks" in text and "cell In[" in text
    assert not any(
        o.output_type == "error"
        for c in code
        for o in c.outputs
        if "raises-exception" not in c.metadata.get("tags", [])
    )


def test_an_interrupted_fix_ends_quietly_and_is_not_the_next_error(monkeypatch) -> None:
    """``%agent fix`` awaits in a kernel like a ``%%agent`` cell: an interrupt stops it with no
    traceback, and the interrupt does not become "the last exception"."""
    from jupyter_client.manager import start_new_kernel

    from ..support.kernels import wait_reply

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-context")
    monkeypatch.setenv("IPYAGENT_RUN_STORE", "off")
    with StubServer(openai_text_reply("word " * 400, piece=4, delay=0.05)) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            wait_reply(kc, kc.execute(f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}/v1"), 30)
            wait_reply(kc, kc.execute("1 / 0"), 10)
            msg_id = kc.execute("%agent fix")
            assert server.wait_for(lambda: server.requests)  # streaming has begun
            km.interrupt_kernel()
            reply, iopub = wait_reply(kc, msg_id, 30)
            assert reply["content"]["status"] == "ok"
            assert not [m for m in iopub if m["msg_type"] == "error"]
            server.script(openai_text_reply("ok"))
            reply, _ = wait_reply(kc, kc.execute("%agent fix"), 30)
            assert reply["content"]["status"] == "ok"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    again = server.requests[-1]["body"]["messages"][-1]["content"]
    assert again.startswith('<context source="error" name="error" type="ZeroDivisionError">')
