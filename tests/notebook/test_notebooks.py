"""Real kernels: the quickstart notebook under nbclient, and a kernel interrupt mid-stream.

The model is a local server on 127.0.0.1 serving the bytes of the quickstart
cassette (real OpenAI streaming format) or a slow recorded stream.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from ipyagent.notebook.render.html import markdown_to_html

from ..support.kernels import view_html as _view_html
from ..support.kernels import wait_reply as _wait_reply
from ..support.stub_server import FIXTURES, Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"
CASSETTE = ROOT / "notebooks" / "quickstart.cassette.jsonl"


def _sse_text_and_usage(body: str) -> tuple[str, dict]:
    text, usage = [], {}
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                text.append(choice["delta"].get("content") or "")
    return "".join(text), usage


def test_quickstart_streams_into_saved_widgets(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    exchanges = [json.loads(line) for line in CASSETTE.read_text().splitlines() if line.strip()]
    replies = [
        Reply(pieces=[p.encode() + b"\n\n" for p in e["response"]["body"].split("\n\n") if p]) for e in exchanges
    ]
    with StubServer(*replies) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-quickstart")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        nb = nbformat.read(QUICKSTART, as_version=4)
        NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(QUICKSTART.parent)}}).execute()

    # The kernel really talked to the server, with the key, continuing one conversation.
    assert len(server.requests) == len(exchanges)
    assert all(r["headers"]["Authorization"] == "Bearer sk-test-quickstart" for r in server.requests)
    assert [len(r["body"]["messages"]) for r in server.requests] == [1, 3, 5]
    assert "Lisbon, Oslo, Nairobi" in server.requests[2]["body"]["messages"][-1]["content"]  # Jinja rendered

    agent_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%agent")]
    assert len(agent_cells) == len(exchanges)
    for cell, exchange in zip(agent_cells, exchanges):
        text, usage = _sse_text_and_usage(exchange["response"]["body"])
        body, footer = _view_html(nb, cell)
        assert body == markdown_to_html(text)
        assert f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out tokens" in footer
        assert "first token" in footer and "total" in footer
        assert "replayed" not in footer
    last = nb.cells[-2]
    assert last.outputs[0]["text"].startswith("end_turn")


def test_a_replayed_cell_run_again_gives_the_same_answer(monkeypatch):
    """Without a key the quickstart replays its cassette; running its cells again, in any
    order and in the same kernel, serves the same recorded answers (no "not in the cassette")."""
    import nbformat
    from nbclient import NotebookClient

    from ..support.kernels import transcript_of

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    nb = nbformat.read(QUICKSTART, as_version=4)
    client = NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(QUICKSTART.parent)}}
    )
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        agent = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("%%agent")]
        first = [transcript_of(c) for _, c in agent]
        assert all(doc["status"] == "completed" and doc["replayed"] and _answer(doc) for doc in first)
        for round_ in (list(reversed(agent)), agent):
            for index, cell in round_:
                client.execute_cell(cell, index)
                again = transcript_of(cell)
                before = first[[i for i, _ in agent].index(index)]
                assert again["status"] == "completed", again.get("error")
                assert _answer(again) == _answer(before) and _answer(again)
                assert again["usage"] == before["usage"]


def _answer(doc: dict) -> str:
    return "".join(
        p["text"] for m in doc["messages"] if m["role"] == "assistant" for p in m["parts"] if p["type"] == "text"
    )


# An %%agent cell awaits in the kernel (ipykernel cancels it; the cell fails as RunStopped, with no
# traceback output); Agent.run() blocks in run_sync, whose KeyboardInterrupt handler must cancel
# the run (TOOLCHAIN.md §3c).
@pytest.mark.parametrize(
    "cell, ename",
    [
        ("%%agent\nWhat is the weather in San Francisco?", "RunStopped"),
        (
            "from ipyagent.notebook.views.run_view import TextView\nfrom ipyagent import Agent\n"
            "a = Agent('openai:gpt-4.1-mini', base_url=URL)\nv = TextView('x')\n"
            "try:\n    a.run('What is the weather?', on_event=v.feed)\nfinally:\n    body = v.state.text",
            "KeyboardInterrupt",
        ),
    ],
    ids=["magic-awaits", "agent-run-blocks"],
)
def test_kernel_interrupt_cancels_the_stream(monkeypatch, cell, ename):
    from jupyter_client.manager import start_new_kernel

    path = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
    slow = Reply.sse_file(path, delay=0.25)
    quick = Reply.sse_file(path)
    with StubServer(slow, quick) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-interrupt")
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            def run(code: str, timeout: float = 30) -> tuple[dict, list[dict]]:
                msg_id = kc.execute(code)
                return _wait_reply(kc, msg_id, timeout)

            reply, _ = run(
                f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1\nURL = '{server.url}/v1'"
            )
            assert reply["content"]["status"] == "ok"

            msg_id = kc.execute(cell)
            # the role piece, "I'm", " unable", then more: under way
            assert server.wait_for(lambda: server.pieces_sent >= 4)
            km.interrupt_kernel()
            reply, iopub = _wait_reply(kc, msg_id, 20)
            assert reply["content"]["status"] == "error"
            assert reply["content"]["ename"] == ename

            # The connection is closed at the interrupt: the server sees it before writing the whole body.
            assert server.wait_for(lambda: server.hangups or server.completed)
            assert server.hangups and not server.completed, "the server wrote the whole body: the stream was not closed"

            if cell.startswith("%%agent"):
                # No traceback: nothing but the view's own outputs (the cell still fails, so "Run all" stops).
                assert not [m for m in iopub if m["msg_type"] in ("error", "stream")], "something was printed"
                final = [m["content"]["data"]["application/vnd.ipyagent.transcript+json"] for m in iopub
                         if m["msg_type"] == "update_display_data"]
                assert final and final[-1]["status"] == "interrupted", "the view was not marked interrupted"
                text = "".join(p["text"] for m in final[-1]["messages"] for p in m["parts"] if p["type"] == "text")
                assert "unable" in text  # the partial text stays visible ("I'm unable to provide...")
            else:
                reply, iopub = run("print(body[:20])")
                out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
                assert out.strip() and "I'm unable to provide".startswith(out.strip()[:20])

            reply, _ = run("%%agent\nAnd tomorrow?")
            assert reply["content"]["status"] == "ok"
            reply, iopub = run(
                "import ipyagent\nprint(len(ipyagent.last_result().text) > 0, ipyagent.last_result().error)"
            )
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
            assert out.strip() == "True None"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def test_out_is_bound_however_the_run_ends(monkeypatch):
    """``%%agent -o VAR`` binds the result when the run is interrupted mid-stream (``interrupted`` set,
    the partial text) and when it passes its ``--timeout`` on a stalled stream (``error`` set)."""
    from jupyter_client.manager import start_new_kernel

    path = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
    whole, _ = _sse_text_and_usage(path.read_text())
    stopped, stalled = Reply.sse_file(path, hold_after=4), Reply.sse_file(path, hold_after=4)
    with StubServer(stopped, stalled) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-interrupt")
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            def run(code: str) -> tuple[dict, str]:
                reply, iopub = _wait_reply(kc, kc.execute(code), 60)
                return reply, "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")

            run(f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1")
            msg_id = kc.execute("%%agent -o r\nWhat is the weather in San Francisco?")
            assert stopped.held.wait(30)  # the role piece and some text have gone out
            km.interrupt_kernel()
            reply, _ = _wait_reply(kc, msg_id, 20)
            assert reply["content"]["ename"] == "RunStopped"
            _, out = run("import json; print(json.dumps([r.interrupted, r.error, r.text]))")
            interrupted, error, text = json.loads(out)
            assert interrupted is True and error is None and text and whole.startswith(text) and len(text) < len(whole)

            reply, _ = run("%%agent -o t --timeout 1\nAnd tomorrow?")
            assert stalled.held.is_set() and reply["content"]["status"] == "ok"
            _, out = run("print(json.dumps([t.interrupted, t.error.type, t.text]))")
            interrupted, error, text = json.loads(out)
            assert (
                interrupted is False
                and error == "timeout"
                and text
                and whole.startswith(text)
                and len(text) < len(whole)
            )
        finally:
            stopped.release.set()
            stalled.release.set()
            kc.stop_channels()
            km.shutdown_kernel(now=True)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_each_shipped_notebook_is_valid_nbformat_with_cell_ids(path: Path) -> None:
    """nbformat 4.5 gives every cell an id: a cell without one is a warning today, an error later."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert [n for n, cell in enumerate(raw["cells"]) if "id" not in cell] == []
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
