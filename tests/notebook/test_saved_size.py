"""What a run costs in a saved notebook: the transcript once, an HTML fallback that draws all of it
for front ends without the extension, a short plain text, no widget state; measured on a
23,000-character Markdown answer streamed by a local server into a real kernel (nbclient)."""

from __future__ import annotations

import json
import sys
from html import unescape
from pathlib import Path

import pytest

from ipyagent.notebook.render.transcript import SOURCE_NOTE

from ..support.kernels import drain_iopub, lab_like_client, transcript_of, wait_reply, widget_state_left
from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
MIME_TYPE = "application/vnd.ipyagent.transcript+json"
#: The issue's target: a saved answer costs at most this many times its text.
TARGET = 2.5


def _answer(chars: int) -> str:
    """A long Markdown answer as models write them: sections of prose paragraphs, with lists,
    code blocks and a few tables between them."""
    blocks, n = [], 0
    while sum(map(len, blocks)) < chars:
        n += 1
        blocks.append(f"## {n}. Part {n} of the report")
        for p in range(2):
            blocks.append(
                f"The {'first' if p == 0 else 'second'} point of part {n} is that a **long answer** keeps its "
                "structure "
                f"when it is saved: headings, `inline code`, [references](https://example.com/part/{n}) and lists "
                "all stay readable in any viewer. This sentence adds the kind of detail a model tends to write, "
                "with numbers such as 12.5% or 3,400 rows, and a caveat or two about what was left out."
            )
        if n % 2 == 0:
            blocks.append(
                "\n".join(
                    f"- Step {i}: check the {w} before the next run"
                    for i, w in enumerate(("inputs", "limits", "cache", "budget"), 1)
                )
            )
        if n % 3 == 0:
            blocks.append(
                f"```python\nimport pandas as pd\n\ndef summarize_{n}(df: pd.DataFrame) -> pd.DataFrame:\n"
                f'    """Totals per region for part {n}."""\n    out = df.groupby("region")["sales"].sum()\n'
                "    return out.sort_values(ascending=False).to_frame()\n```"
            )
        if n % 5 == 0:
            blocks.append(
                "| region | sales | change |\n|---|---:|---:|\n"
                + "\n".join(
                    f"| {r} | {1000 + 37 * n * i:,} | {i - 2:+d}% |"
                    for i, r in enumerate(("North", "South", "East", "West"))
                )
            )
    return "\n\n".join(blocks)[:chars]


def _dense_answer(chars: int) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from render_path import (
            answer,
        )  # the benchmarks' reply: a heading, a list, code and a table every ~260 characters
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return answer(chars)


@pytest.mark.parametrize("kind", ["typical", "dense"])
def test_a_saved_23k_answer_costs_at_most_2_5_times_its_text(kind, tmp_path, monkeypatch):
    """Typical: sections of prose with lists, code and tables now and then; dense: a heading, a
    list, code and a table every ~260 characters, whose HTML fallback is its Markdown source."""
    import nbformat

    text = _answer(23_000) if kind == "typical" else _dense_answer(23_000)
    with StubServer(openai_text_reply(text, piece=64)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-saved-size")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell("%load_ext ipyagent\n%provider openai:gpt-4.1-mini"),
                nbformat.v4.new_code_cell("%%agent\nWrite the long report."),
            ]
        )
        lab_like_client(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute()

    saved, bare = tmp_path / "saved.ipynb", tmp_path / "bare.ipynb"
    nbformat.write(nb, saved)
    cell = nb.cells[1]
    (output,) = cell.outputs  # the run's display, nothing else (no Out[n], no stderr)
    doc = transcript_of(cell)
    assert doc["status"] == "completed" and _text(doc) == text
    cell.outputs = []
    nbformat.write(nb, bare)
    cost = saved.stat().st_size - bare.stat().st_size
    figures = {
        "answer": kind,
        "answer_chars": len(text),
        "saved_output_bytes": cost,
        "ratio": round(cost / len(text), 2),
        **{k: len(json.dumps(v)) for k, v in output["data"].items()},
    }
    print("\nsaved size:", json.dumps(figures))
    assert cost <= TARGET * len(text), figures

    # One copy of the transcript: in data, not again in the output's metadata.
    assert set(output["data"]) == {MIME_TYPE, "text/html", "text/plain"}
    assert len(json.dumps(output["metadata"])) < 200
    # The HTML fallback draws the whole answer (its last section, its tables), or the dense one's source ...
    html = output["data"]["text/html"]
    last = text.rsplit("\n## ", 1)[1].split("\n", 1)[0]
    if kind == "typical":
        assert f"<h2>{last}</h2>" in html and html.count("<table>") == text.count("|---|---:|---:|")
    else:
        assert "<h2>" not in html and text in unescape(html) and SOURCE_NOTE in html
    # ... and a text-only reader gets the start, how much more there is, and the footer.
    plain = output["data"]["text/plain"]
    head = plain.split(" … (", 1)[0]
    assert text.startswith(head) and 100 <= len(head) <= 200 and len(plain) < 1_400
    assert "more characters" in plain and plain.rstrip().endswith("]") and "in / " in plain.splitlines()[-1]
    # No widget state is left behind for the finished run.
    assert widget_state_left(nbformat.read(saved, as_version=4)) == []


def _text(doc: dict) -> str:
    return "".join(
        p["text"] for m in doc["messages"] if m["role"] == "assistant" for p in m["parts"] if p["type"] == "text"
    )


def test_a_run_stopped_after_a_page_reopened_leaves_no_widget_and_shows_the_transcript(monkeypatch):
    """A page reopened mid-run says hello to the live widget and is caught up (a snapshot); the
    run is then stopped (kernel interrupt, as the toolbar's Stop): the reopened page, which has no
    display id to update, is sent the transcript, and every widget the run opened is closed, so
    no widget state is left to save."""
    from jupyter_client.manager import start_new_kernel

    text = _answer(4_000)
    with StubServer(openai_text_reply(text, piece=16, delay=0.05)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-reopened")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            reply, _ = wait_reply(kc, kc.execute("%load_ext ipyagent\n%provider openai:gpt-4.1-mini"), 60)
            assert reply["content"]["status"] == "ok"
            msg_id = kc.execute("%%agent\nWrite the report.")
            opened: dict[str, str] = {}
            closed: set[str] = set()
            custom: list[dict] = []
            finals: list[dict] = []
            order: list[str] = []

            def handle(msg: dict) -> None:
                kind, content = msg["msg_type"], msg["content"]
                if kind == "comm_open":
                    opened[content["comm_id"]] = content["data"]["state"].get("_model_name", "")
                elif kind == "comm_close":
                    closed.add(content["comm_id"])
                elif kind == "comm_msg" and content["data"].get("method") == "custom":
                    custom.append(content["data"]["content"])
                    order.append(content["data"]["content"].get("type"))
                elif kind == "update_display_data" and MIME_TYPE in content["data"]:
                    finals.append({"data": content["data"], "metadata": content["metadata"]})
                    order.append("update")

            drain_iopub(kc, handle, lambda: len(server.requests) > 0 and bool(opened), 30)
            live = next((cid for cid, name in opened.items() if name == "AnyModel"), None)
            assert live is not None, opened
            # The reopened page's widget says hello (a custom message, as anywidget's model.send does).
            hello = {"comm_id": live, "data": {"method": "custom", "content": {"type": "hello"}}}
            kc.shell_channel.send(kc.session.msg("comm_msg", hello))
            def shown() -> str:  # the answer's text the reopened page was sent so far
                ops = [op for m in custom for op in (m.get("ops") or (m.get("doc") or {}).get("ops") or [])]
                return "".join(op[2] for op in ops if op[0] == "text" and isinstance(op[2], str))

            drain_iopub(kc, handle, lambda: any(m.get("type") == "snapshot" for m in custom) and len(shown()) > 100, 20)
            assert any(m.get("type") == "snapshot" for m in custom), "the reopened page was not caught up"
            assert text.startswith(shown()) and shown()
            km.interrupt_kernel()  # Stop
            reply, iopub = wait_reply(kc, msg_id, 30)
            for msg in iopub:
                handle(msg)
            drain_iopub(kc, handle, lambda: set(opened) <= closed and bool(finals), 10)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    assert reply["content"]["ename"] == "RunStopped"  # the cell fails quietly, so "Run all" stops
    (end,) = [m for m in custom if m.get("type") == "end"]
    assert end["doc"]["status"] == "interrupted" and finals and finals[-1]["data"][MIME_TYPE] == end["doc"]
    # The reopened page, which the update cannot reach, is sent the whole saved output to put in
    # place itself (live.ts), after the update (a page the update reached has dropped its view).
    assert {"data": {**end["output"]["fallbacks"], end["output"]["mime"]: end["doc"]},
            "metadata": end["output"]["metadata"]} == finals[-1]
    assert order.index("update") < order.index("end")
    assert end["output"]["model_id"] == live  # which outputs the reopened page replaces
    assert 0 < len(_text(end["doc"])) < len(text)  # the partial text stays
    assert set(opened) <= closed, f"widgets left open: {sorted(opened[c] for c in set(opened) - closed)}"
