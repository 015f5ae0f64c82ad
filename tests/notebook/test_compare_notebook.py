"""notebooks/compare.ipynb under nbclient: three providers on local servers with different
speeds, one of them failing; the panes stream, the others complete, the tables hold the
right tokens and the failure's error type."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from ipyagent.notebook.render.html import markdown_to_html

from ..support.kernels import drain_iopub, lab_like_client, widget_state_left
from ..support.recordings import expected_from, status_type
from ..support.stub_server import FIXTURES, Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "compare.ipynb"
AUTH_401 = FIXTURES / "anthropic" / "error-401-authentication.json"
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


def _cassette_body(provider: str) -> str:
    (entry,) = [
        json.loads(line) for line in (NOTEBOOK.parent / f"compare-{provider}.cassette.jsonl").read_text().splitlines()
    ]
    return entry["response"]["body"]


def _expected(provider: str) -> tuple[str, int, int]:
    """(text, input tokens, output tokens) of a cassette reply, read with json.loads."""
    text, tokens = [], (0, 0)
    for line in _cassette_body(provider).splitlines():
        if not line.startswith("data: {"):
            continue
        chunk = json.loads(line[6:])
        if provider == "openai":
            text += [c["delta"].get("content") or "" for c in chunk["choices"]]
            if chunk.get("usage"):
                tokens = (chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"])
        else:
            text += [p["text"] for c in chunk["candidates"] for p in c["content"]["parts"]]
            usage = chunk["usageMetadata"]
            tokens = (usage["promptTokenCount"], usage.get("candidatesTokenCount", 0))
    return "".join(text), *tokens


def _reply(provider: str, delay: float) -> Reply:
    return Reply(pieces=[p.encode() + b"\n\n" for p in _cassette_body(provider).split("\n\n") if p], delay=delay)


def _compare_view(nb, cell) -> tuple[list[tuple[str, str, str]], str]:
    """([(pane title, body HTML, footer text) per pane], table HTML) of the comparison saved by `cell`
    (the live panes are replaced by it when the comparison ends, and leave no widget state)."""
    from ipyagent.core.transcript import Transcript
    from ipyagent.notebook.views.compare_view import cells_to_html
    from ipyagent.notebook.render.html import escape
    from ipyagent.notebook.render.transcript import footer_figures

    assert widget_state_left(nb) == []  # the panes' widgets were closed when the comparison ended
    (record,) = [o["data"]["application/vnd.ipyagent.comparison+json"] for o in cell.outputs
                 if "application/vnd.ipyagent.comparison+json" in o.get("data", {})]
    panes = []
    for index, provider in enumerate(record["providers"]):
        entry = [e for e in record["entries"] if e["index"] == index][-1]  # the last run's pane
        t = Transcript.from_json(entry["transcript"])
        title = provider + (
            f" · run {entry.get('run', 0) + 1} of {record.get('runs', 1)}" if record.get("runs", 1) > 1 else ""
        )
        body = markdown_to_html(t.text) + (
            f'<div class="ipyagent-error">⚠ {escape(t.error.message)}</div>' if t.error else ""
        )
        panes.append((title, body, " · ".join(footer_figures(t))))
    return panes, cells_to_html(record["table"]["columns"], record["table"]["rows"])


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for tr in re.findall(r"<tr>(<td>.*?)</tr>", table, re.S):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows[re.split(r" \(| · ", cells[0])[0]] = cells
    return rows


def test_compare_notebook_with_a_failing_provider(monkeypatch):
    import nbformat
    with StubServer(_reply("openai", 0.004)) as openai_server, StubServer(Reply.error_file(
            AUTH_401, AUTH_401.with_name("error-401-authentication.http.json"))) as anthropic_server, \
            StubServer(_reply("gemini", 0.03)) as gemini_server:
        for var, value in [("OPENAI_API_KEY", "sk-test-compare"), ("ANTHROPIC_API_KEY", "sk-ant-test-compare"),
                           ("GEMINI_API_KEY", "gm-test-compare"), ("OPENAI_BASE_URL", f"{openai_server.url}/v1"),
                           ("ANTHROPIC_BASE_URL", anthropic_server.url), ("GEMINI_BASE_URL", gemini_server.url)]:
            monkeypatch.setenv(var, value)
        nb = nbformat.read(NOTEBOOK, as_version=4)
        lab_like_client(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                        resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    # One request for the first cell and three for --runs 3, to each provider; a 401 is not retried.
    assert [len(s.requests) for s in (openai_server, anthropic_server, gemini_server)] == [4, 4, 4]
    assert openai_server.requests[0]["body"]["messages"][-1]["content"] == "In two sentences, what is a Jupyter kernel?"
    assert all(len(r["body"]["messages"]) == 1 for r in openai_server.requests)  # every run a fresh conversation

    error_message = json.loads(AUTH_401.read_text())["error"]["message"]
    ids = {
        "openai": "openai:gpt-6-luna",
        "anthropic": "anthropic:claude-sonnet-5-5",
        "gemini": "gemini:gemini-3.8-flash",
    }
    first, runs3 = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%compare")]

    panes, table = _compare_view(nb, first)
    assert [re.sub(r"<[^>]+>", "", title) for title, _, _ in panes] == list(ids.values())
    rows = _rows(table)
    for n, provider in enumerate(ids):
        title, body, footer = panes[n]
        if provider == "anthropic":
            assert "ipyagent-error" in body and error_message in body and "failed" in footer
            assert rows[ids[provider]][-1].startswith(f"{status_type(401)}: ")
            assert rows[ids[provider]][3:5] == ["—", "—"]
            continue
        text, tokens_in, tokens_out = _expected(provider)
        assert body == markdown_to_html(text)
        assert f"{tokens_in} in / {tokens_out} out tokens" in footer
        assert rows[ids[provider]][3:5] == [str(tokens_in), str(tokens_out)]
        assert rows[ids[provider]][7:] == ["end_turn", ""]

    # The saved output (what any front end without the kernel shows) keeps the same table.
    (saved,) = [o for o in first.outputs if "application/vnd.ipyagent.comparison+json" in o.get("data", {})]
    record = saved["data"]["application/vnd.ipyagent.comparison+json"]
    assert {row[0]: row for row in record["table"]["rows"]} == rows
    assert "<table" in saved["data"]["text/html"] and error_message.split()[0] in saved["data"]["text/html"]
    assert saved["data"]["text/plain"].startswith("provider:model") and "text/markdown" not in saved["data"]

    printed = "".join(o.get("text", "") for o in nb.cells[nb.cells.index(first) + 2].outputs)
    assert re.search(rf"anthropic:claude-sonnet-5-5 +0 tokens out +{status_type(401)}", printed)
    assert re.search(rf"gemini:gemini-3.8-flash +{_expected('gemini')[2]} tokens out +ok", printed)

    panes, table = _compare_view(nb, runs3)
    rows = _rows(table)
    assert all(re.sub(r"<[^>]+>", "", title).endswith("run 3 of 3") for title, _, _ in panes)
    assert rows["anthropic:claude-sonnet-5-5"][0].endswith(" · median (min–max) of 3 runs")
    assert rows["anthropic:claude-sonnet-5-5"][-1].startswith(f"3 of 3 failed: {status_type(401)}: ")
    for provider in ("openai", "gemini"):
        _, tokens_in, tokens_out = _expected(provider)
        assert rows[ids[provider]][3:5] == [str(tokens_in), str(tokens_out)]  # the same every run: no range
        assert re.fullmatch(r"\d+\.\d\d( \(\d+\.\d\d–\d+\.\d\d\))?", rows[ids[provider]][2])


@contextmanager
def _two_providers(monkeypatch, first_delay: float, second_delay: float):
    """A kernel with ipyagent loaded and two providers on their own servers, both sending the
    recorded text: ``openai:quick`` a piece every `first_delay` s, the alias ``slow`` every
    `second_delay` s. Yields (kernel manager, client, (quick server, slow server))."""
    from jupyter_client.manager import start_new_kernel

    from ..support.kernels import wait_reply

    with StubServer(Reply.sse_file(TEXT, delay=first_delay)) as quick, \
            StubServer(Reply.sse_file(TEXT, delay=second_delay)) as slow:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-compare-kernel")
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            reply, _ = wait_reply(
                kc,
                kc.execute(
                    f"%load_ext ipyagent\n%provider openai:quick --base-url {quick.url}/v1\n"
                    f"%provider --alias slow openai:slow --base-url {slow.url}/v1"
                ),
                30,
            )
            assert reply["content"]["status"] == "ok", reply["content"]
            yield km, kc, (quick, slow)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def _wait_for_hangups(*servers: StubServer) -> None:
    # a server sees it when it writes its next piece
    assert all(s.wait_for(lambda s=s: s.hangups, 3) for s in servers), "a provider's connection stayed open"


def test_kernel_interrupt_stops_every_provider(monkeypatch):
    """A %%compare cell awaits in the kernel: an interrupt cancels every stream and closes every connection."""
    from ..support.kernels import wait_reply

    with _two_providers(monkeypatch, 0.2, 0.3) as (km, kc, servers):
        msg_id = kc.execute("%%compare openai:quick slow -o cmp\nWhat is the weather?")
        # a few slow pieces out to both panes
        assert all(s.wait_for(lambda s=s: s.pieces_sent >= 3, 15) for s in servers)
        km.interrupt_kernel()
        reply, iopub = wait_reply(kc, msg_id, 20)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "RunStopped"
        assert not [m for m in iopub if m["msg_type"] in ("error", "stream")], "a traceback was printed"
        _wait_for_hangups(*servers)


def test_a_stopped_comparison_is_saved_and_bound(monkeypatch):
    """Interrupting a one-prompt %%compare keeps a record: the finished provider complete, the
    stopped one's partial answer marked interrupted, both in the output that replaces the live
    panes (what a reopened notebook shows), and -o bound."""
    from ..support.kernels import wait_reply

    with _two_providers(monkeypatch, 0, 0.25) as (km, kc, (_, slow)):
        msg_id = kc.execute("%%compare openai:quick slow -o cmp\nWhat is the weather?")
        assert slow.wait_for(lambda: slow.pieces_sent >= 4, 15)  # the role piece, then some text
        km.interrupt_kernel()
        reply, iopub = wait_reply(kc, msg_id, 20)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "RunStopped"
        assert not [m for m in iopub if m["msg_type"] in ("error", "stream")], "a traceback was printed"
        _wait_for_hangups(slow)

        def records() -> list[dict]:
            return [m["content"] for m in iopub if m["msg_type"] in ("update_display_data", "display_data")
                    and "application/vnd.ipyagent.comparison+json" in m["content"]["data"]]

        # the saved record may be published from ipyagent's loop thread, after the reply
        assert drain_iopub(kc, iopub.append, records, 20), "no comparison replaced the live panes"
        saved = records()
        record = saved[-1]["data"]["application/vnd.ipyagent.comparison+json"]
        reply, iopub = wait_reply(
            kc,
            kc.execute(
                "import json; print(json.dumps([cmp.interrupted,"
                " [(f.index, f.error_type, f.transcript.text) for f in cmp.figures]]))"
            ),
            20,
        )
        printed = "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream")
    text = expected_from(TEXT).text
    assert record["interrupted"] is True
    entries = {e["index"]: e["transcript"] for e in record["entries"]}
    assert entries[0]["status"] == "completed"
    assert "".join(p["text"] for m in entries[0]["messages"] if m["role"] == "assistant" for p in m["parts"]) == text
    assert entries[1]["status"] == "interrupted"
    partial = "".join(p["text"] for m in entries[1]["messages"] if m["role"] == "assistant" for p in m["parts"])
    assert partial and text.startswith(partial) and len(partial) < len(text)
    html = saved[-1]["data"]["text/html"]
    assert "interrupted" in html and partial.split()[0] in html
    interrupted, figures = json.loads(printed)
    assert interrupted is True
    assert sorted(map(tuple, figures)) == [(0, None, text), (1, "cancelled", partial)]


def test_one_widget_per_compare_cell_whose_panes_and_table_read_the_same_figures(monkeypatch):
    """%%compare shows ONE widget for the whole cell (its front end's ES module sent once, not once
    per provider); a front end that says hello gets the layout, each run's messages tagged with its
    key, each finished run's transcript and the table; the pane's footer figures equal its table row."""
    from ipyagent.core.transcript import Transcript
    from ipyagent.notebook.render.transcript import footer_figures

    with _two_providers(monkeypatch, 0, 0.02) as (km, kc, _):
        msg_id = kc.execute("%%compare openai:quick slow --runs 2\nWhat is the weather?")
        opened, custom, updates, idle = [], [], [], []

        def handle(msg: dict) -> None:
            content = msg["content"]
            if msg["msg_type"] == "comm_open":
                opened.append(content)
                if "_esm" in content["data"].get("state", {}):  # the front end loads and says hello
                    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": content["comm_id"], "data": {
                        "method": "custom", "content": {"type": "hello"}}}))
            elif msg["msg_type"] == "comm_msg" and content["data"].get("method") == "custom":
                custom.append(content["data"]["content"])
            elif msg["msg_type"] == "update_display_data":
                updates.append({"data": content["data"], "metadata": content["metadata"]})
            if msg["msg_type"] == "status" and content["execution_state"] == "idle" \
                    and msg["parent_header"].get("msg_id") == msg_id:
                idle.append(msg)

        assert drain_iopub(kc, handle, lambda: bool(idle), 30), "the cell did not finish"
    # The cell's end carries its saved output whole (a page reopened mid-run puts it in place).
    (end,) = [m for m in custom if m["type"] == "end" and "key" not in m]
    assert updates == [{"data": {**end["output"]["fallbacks"], end["output"]["mime"]: end["doc"]},
                        "metadata": end["output"]["metadata"]}]
    # one front end for 2 providers x 2 runs
    assert len([o for o in opened if "_esm" in o["data"].get("state", {})]) == 1
    assert custom[0]["type"] == "compare" and custom[0]["panes"] == [
        {"title": "openai:quick", "resolved": "openai:quick"}, {"title": "slow", "resolved": "openai:slow"}]
    run_ends = {m["key"]: m["doc"] for m in custom if m["type"] == "end" and "key" in m}
    assert sorted(run_ends) == ["0/0", "0/1", "1/0", "1/1"]
    assert {m["key"] for m in custom if m["type"] in ("snapshot", "ops")} <= set(run_ends)
    table = [m["table"] for m in custom if m["type"] == "table"][-1]
    (record,) = [m["doc"] for m in custom if m["type"] == "end" and "key" not in m]
    assert record["table"] == table  # the live table is the saved one
    for key, row in zip(table["row_runs"], table["rows"]):
        if key[1] is None:
            continue
        footer = " · ".join(footer_figures(Transcript.from_json(run_ends[f"{key[0]}/{key[1]}"])))
        assert f"first token {row[1]} s" in footer and f"total {row[2]} s" in footer, (row, footer)
        saved = [e["transcript"] for e in record["entries"] if [e["index"], e.get("run", 0)] == key]
        assert saved == [run_ends[f"{key[0]}/{key[1]}"]]  # the pane live and saved: one transcript
