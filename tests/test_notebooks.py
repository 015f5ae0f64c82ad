"""Real kernels: the quickstart notebook under nbclient, and a kernel interrupt mid-stream.

The model is a local server on 127.0.0.1 serving the bytes of the quickstart
cassette (real OpenAI streaming format) or a slow recorded stream.
"""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path

import pytest

from ipyagent.notebook.render import markdown_to_html

from .stub_server import FIXTURES, Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
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


def _widget_values(nb) -> dict[str, dict]:
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return {model_id: model["state"] for model_id, model in state.items()}


def _view_html(nb, cell) -> tuple[str, str]:
    """(body HTML, footer HTML) of the agent view displayed by `cell`."""
    states = _widget_values(nb)
    (view_id,) = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for o in cell.outputs
                  if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    children = [c.removeprefix("IPY_MODEL_") for c in states[view_id]["children"]]
    return states[children[1]]["value"], states[children[-1]]["value"]


def test_quickstart_streams_into_saved_widgets(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    exchanges = [json.loads(line) for line in CASSETTE.read_text().splitlines() if line.strip()]
    replies = [Reply(pieces=[p.encode() + b"\n\n" for p in e["response"]["body"].split("\n\n") if p]) for e in exchanges]
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


def test_kernel_interrupt_cancels_the_stream(monkeypatch):
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

            reply, _ = run(f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1")
            assert reply["content"]["status"] == "ok"

            msg_id = kc.execute("%%agent\nWhat is the weather in San Francisco?")
            deadline = time.monotonic() + 10
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # a few slow pieces have gone out
            interrupted_at = time.monotonic()
            km.interrupt_kernel()
            reply, iopub = _wait_reply(kc, msg_id, 20)
            assert reply["content"]["status"] == "error"
            assert reply["content"]["ename"] == "KeyboardInterrupt"

            deadline = time.monotonic() + 3
            while not server.hangups and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.hangups, "the server never saw the connection closed"
            assert server.hangups[0] - interrupted_at < 2.0

            bodies = [m["content"]["data"]["state"]["value"] for m in iopub
                      if m["msg_type"] == "comm_msg" and "value" in m["content"]["data"].get("state", {})]
            final = [b for b in bodies if "ipyagent-status" in b]
            assert final, "the view was not marked interrupted"
            assert "unable" in final[-1]  # the partial text stays visible ("I'm unable to provide...")

            reply, _ = run("%%agent\nAnd tomorrow?")
            assert reply["content"]["status"] == "ok"
            reply, iopub = run("print(len(_.text) > 0, _.error)")
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
            assert out.strip() == "True None"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def _wait_reply(kc, msg_id: str, timeout: float) -> tuple[dict, list[dict]]:
    """The shell reply to `msg_id` and the iopub messages it caused (until idle)."""
    deadline = time.monotonic() + timeout
    iopub: list[dict] = []
    reply = None
    idle = False
    while time.monotonic() < deadline and not (reply and idle):
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.05)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
        try:
            while True:
                msg = kc.get_iopub_msg(timeout=0.05)
                if msg["parent_header"].get("msg_id") == msg_id or msg["msg_type"] == "comm_msg":
                    iopub.append(msg)
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle" \
                        and msg["parent_header"].get("msg_id") == msg_id:
                    idle = True
        except queue.Empty:
            pass
    assert reply is not None, f"no reply within {timeout} s"
    return reply, iopub
