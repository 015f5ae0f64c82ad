"""The run store, on SQLite and on PostgreSQL (the `store` fixture runs each test on both): rows
for every piece of a run, concurrent writers in two processes, failed and interrupted runs marked
partial, replays that match the original, and a store left readable by a kernel killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agent import run_sync, transcript_of
from ipyagent.core import Message, TextBlock
from ipyagent.memory import TaskMemory
from ipyagent.memory.recorder import RunRecorder, replay_events
from ipyagent.memory.store import RunStore, StoreError
from ipyagent.notebook.views.run_view import WidgetView
from ipyagent.tools import FunctionTool

from ..support.kernels import wait_reply
from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer

ROOT = Path(__file__).resolve().parents[2]
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"
SECRET = "sk-run-store-secret-1a2b3c4d5e6f"


def get_weather(city: str, state: str) -> str:
    """Weather report."""
    return f"Report for {city}, {state}:\n" + "\n".join(f"hour {h}: 61 F" for h in range(200))


def record_run(store: RunStore, server: StubServer, *, tools: list[Any] | None = None, memory: TaskMemory | None = None,
               prompt: str = "Weather in SF?") -> tuple[Any, list[Any], RunRecorder]:
    """One agent run, recorded as the magics record it; returns (result, events, recorder)."""
    agent = Agent("openai:gpt-4.1-mini", base_url=server.url, tools=tools or [], memory=memory)
    recorder = RunRecorder(store, thread="t", provider=agent.provider,
                           prompt=Message(role="user", content=[TextBlock(text=prompt)]))
    events: list[Any] = []

    def feed(event: Any) -> None:
        recorder.feed(event)
        events.append(event)

    try:
        result = run_sync(agent.arun(prompt, on_event=feed))
    finally:
        run_sync(agent.aclose())
    recorder.finish(result)
    return result, events, recorder


def body_of(events: list[Any]) -> list:
    """What the live view shows of `events`: its snapshot for a front end, the footer left out."""
    view = WidgetView("openai:gpt-4.1-mini")
    for event in events:
        if event == "interrupted":
            view.state.interrupted = True
        else:
            view.state.add(event)
    view._final = True  # the run is over: no word held back
    return [op for op in view._snapshot() if op[0] != "status"]


def stored_bytes(store: RunStore) -> bytes:
    """Everything the store keeps, as bytes: the SQLite file and its log, or every PostgreSQL row as text."""
    if store.dialect == "sqlite":
        return b"".join(p.read_bytes() for p in (store.path, Path(f"{store.path}-wal")) if p.exists())
    rows = [store._db.execute(f"SELECT t::text FROM {table} t").fetchall() for table in ("runs", "nodes")]
    return "".join(row[0] for table in rows for row in table).encode()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_every_piece_of_a_run_is_a_row(store: RunStore) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    text_exp = expected_from(TEXT)
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, _, recorder = record_run(
            store, server, tools=[FunctionTool(get_weather, off_prompt=True)], memory=TaskMemory()
        )
    if store.dialect == "sqlite":
        assert store.path.exists() and store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run = store.run(recorder.run_id[:6])  # a prefix is enough
    assert (run["status"], run["thread"], run["provider"], run["model"]) == ("ok", "t", "openai", "gpt-4.1-mini")
    assert (
        run["usage"]["input_tokens"] == result.usage.input_tokens
        and run["usage"]["output_tokens"] == result.usage.output_tokens
    )
    assert run["duration_s"] > 0 and run["prompt"] == "Weather in SF?"
    if result.cost is not None:
        assert run["cost"] == pytest.approx(float(result.cost))
    nodes = store.nodes(run["id"])
    assert [n["seq"] for n in nodes] == list(range(1, len(nodes) + 1))
    kinds = [(n["kind"], n["role"]) for n in nodes]
    assert kinds == [("message", "user"), ("request", None), ("message", "assistant"), ("tool_call", None),
                     ("artifact", None), ("tool_result", None), ("request", None), ("message", "assistant")]
    requests = [n for n in nodes if n["kind"] == "request"]
    assert [r["data"]["url"] for r in requests] == [f"{server.url}/chat/completions"] * 2
    assert [r["data"]["body"] for r in requests] == [r["body"] for r in server.requests]  # the raw request, as sent
    first, last = (n for n in nodes if n["kind"] == "message" and n["role"] == "assistant")
    assert not first["partial"] and not first["failed"] and first["data"]["stop_reason"]["kind"] == "tool_use"
    assert first["attempts"] == 1 and first["latency_s"] > 0 and first["retry"]["waits"] == []
    assert last["data"]["content"] == [{"type": "text", "text": text_exp.text}]
    assert last["usage"]["input_tokens"] == text_exp.usage["prompt_tokens"]
    tool_call = next(n for n in nodes if n["kind"] == "tool_call")["data"]
    assert (tool_call["tag"], tool_call["native_name"], tool_call["input"]) == (call["id"], call["name"], call["input"])
    artifact = next(n for n in nodes if n["kind"] == "artifact")["data"]
    assert artifact["artifact"]["value"] == get_weather(**call["input"]) and artifact["kind"] == "text"
    tool_result = next(n for n in nodes if n["kind"] == "tool_result")["data"]
    assert json.loads(tool_result["result"]["value"])["namespace"] == artifact["namespace"]
    raw = stored_bytes(store)
    assert b"Weather in SF?" in raw and SECRET.encode() not in raw


def test_failed_stream_leaves_a_partial_failed_message(store: RunStore) -> None:
    with StubServer(Reply.sse_file(TEXT, cut_after=4)) as server:
        result, events, recorder = record_run(store, server)
    assert result.error is not None and result.text
    run = store.run(recorder.run_id)
    assert run["status"] == "failed" and run["error"]["type"] == result.error.type
    message = next(n for n in store.nodes(run["id"]) if n["kind"] == "message" and n["role"] == "assistant")
    assert message["partial"] and message["failed"]
    assert message["data"]["content"] == [{"type": "text", "text": result.text}]
    failure = next(n for n in store.nodes(run["id"]) if n["kind"] == "failure")
    assert failure["data"]["error"]["message"] == result.error.message
    assert body_of(replay_events(store.nodes(run["id"]))) == body_of(events)


def test_a_stream_failing_after_its_usage_is_stored_partial_with_that_usage(store: RunStore) -> None:
    recording = FIXTURES / "openai-compatible" / "openrouter-stream-error-chunk-with-comments.sse"
    billed = expected_from(recording).usage  # the error chunk carries what was billed
    with StubServer(Reply.sse_file(recording)) as server:
        result, events, recorder = record_run(store, server)
    assert result.error is not None and result.messages[-1] is result.message and result.message.reasoning
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        billed["prompt_tokens"],
        billed["completion_tokens"],
    )
    run = store.run(recorder.run_id)
    message = next(n for n in store.nodes(run["id"]) if n["kind"] == "message" and n["role"] == "assistant")
    assert message["partial"] and message["failed"] and message["data"]["status"] == "failed"
    assert message["data"]["content"][0]["text"] == result.message.reasoning
    tokens = (billed["prompt_tokens"], billed["completion_tokens"])
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == tokens
    assert (run["usage"]["input_tokens"], run["usage"]["output_tokens"]) == tokens


def test_a_streaming_reply_is_written_once_when_the_run_is_interrupted(store: RunStore) -> None:
    """Nothing is written while a reply streams; an interrupt writes it once, as the driver's
    record of it stood (`ModelStarted.reply`): partial and failed, its status interrupted."""
    from ipyagent.core import ModelStarted, TextDelta
    from ipyagent.drivers import Aggregator

    prompt = Message(role="user", content=[TextBlock(text="hi")])
    recorder = RunRecorder(store, thread="t", provider="openai:m", prompt=prompt)
    reply = Aggregator()
    recorder.feed(ModelStarted("openai", "m", {"url": "u", "body": {}}, reply=reply))
    for delta in (TextDelta(0, "Hel"), TextDelta(0, "lo")):
        reply.add(delta)
        recorder.feed(delta)
    assert [n["kind"] for n in store.nodes(recorder.run_id)] == ["message", "request"]
    reply.add(TextDelta(0, "!"))  # what the record holds when the run stops is what is kept
    recorder.interrupted()
    _, _, message, failure = store.nodes(recorder.run_id)
    assert (message["kind"], message["role"], message["partial"], message["failed"]) == ("message", "assistant", 1, 1)
    assert message["data"]["status"] == "interrupted"
    assert message["data"]["content"] == [{"type": "text", "text": "Hello!"}]
    assert (message["provider"], message["model"]) == ("openai", "m")
    assert failure["kind"] == "failure" and failure["data"]["error"]["type"] == "cancelled"
    assert store.run(recorder.run_id)["status"] == "interrupted"


def test_replay_matches_the_original(store: RunStore) -> None:
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        _, events, recorder = record_run(
            store, server, tools=[FunctionTool(get_weather, off_prompt=True)], memory=TaskMemory()
        )
    replayed = replay_events(store.nodes(recorder.run_id))
    original = body_of(events)
    kinds = [op[2] for op in original if op[0] == "seg"]
    assert "artifact" in kinds and any(op[0] == "seg" and op[3]["name"] == "get_weather" for op in original)
    assert body_of(replayed) == original
    # the same kinds of events, in the same order, deltas aside (a replay sends each block whole)
    deltas = ("text_delta", "tool_call_delta", "reasoning_delta")
    assert [e.type for e in replayed if e.type not in deltas] == [e.type for e in events if e.type not in deltas]


def test_a_run_stored_without_its_transcript_replays_with_the_original_figures(store: RunStore) -> None:
    """A store written before transcripts were kept (or by the terminal): %agent replay rebuilds
    the transcript from the nodes with the run's usage summed over its turns and the tool results."""
    from ipyagent.notebook.magics.session import SessionMagics

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result, events, recorder = record_run(store, server, tools=[FunctionTool(get_weather)])
    original = transcript_of(result, events=events, provider="openai:gpt-4.1-mini")
    nodes = store.nodes(recorder.run_id)
    assert "transcript" not in [n["kind"] for n in nodes]
    rebuilt = SessionMagics._rebuilt_transcript(store.run(recorder.run_id), replay_events(nodes))
    assert rebuilt.usage == original.usage and rebuilt.usage.input_tokens > expected_from(TEXT).usage["prompt_tokens"]
    assert [(c.name, c.status, c.result) for c in rebuilt.tool_calls] == [
        (c.name, c.status, c.result) for c in original.tool_calls
    ]
    assert [c.status for c in rebuilt.tool_calls] == ["ok"]
    assert rebuilt.text == original.text and rebuilt.status == "completed" and rebuilt.timings.turns == 2


def test_the_transcript_a_cell_showed_is_kept_whole(store: RunStore) -> None:
    from ipyagent.core.transcript import Transcript
    from ipyagent.memory.recorder import stored_transcript

    with StubServer(Reply.sse_file(TEXT)) as server:
        result, events, recorder = record_run(store, server)
    shown = transcript_of(result, events=events, elapsed_s=1.25)
    recorder.keep_transcript(shown.to_json())
    assert Transcript.from_json(stored_transcript(store.nodes(recorder.run_id))) == shown


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "runs.sqlite"
    bad.write_text("not a database" * 100)
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(connect(*a, **k)) or opened[-1])
    with pytest.raises(StoreError, match="cannot open the run store"):
        RunStore(bad)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):  # the connection it opened is not left open
        opened[0].execute("SELECT 1")


WRITER = textwrap.dedent("""
    import sys, time
    from ipyagent.core import (Message, ModelCompleted, ModelStarted, StopReason, TextBlock, TextDelta,
                               ToolAction, ToolCallCompleted, TextArtifact, Usage)
    from ipyagent.memory.recorder import RunRecorder
    from ipyagent.memory.store import RunStore

    path, name, other, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = RunStore(path)
    print("ready", flush=True)

    def finished_one(thread):  # each read outside a transaction: what is committed now
        return store._db.execute("SELECT 1 FROM runs WHERE thread = ? AND ended_at IS NOT NULL", (thread,)).fetchone()

    sys.stdin.readline()  # both start writing when the test says go, after their imports
    for n in range(runs):
        if n == runs - 1:  # the last run starts once the other writer has finished one: the two overlap
            while not finished_one(other):
                time.sleep(0.001)
        prompt = Message(role="user", content=[TextBlock(text=f"{name} {n}")])
        rec = RunRecorder(store, thread=name, provider="openai:m", prompt=prompt)
        rec.feed(ModelStarted("openai", "m"))
        for piece in ("a", "b", "c"):
            rec.feed(TextDelta(0, piece))
        message = Message(role="assistant", content=[TextBlock(text="abc")])
        rec.feed(ModelCompleted(message, Usage(input_tokens=1, output_tokens=3), StopReason(kind="end_turn")))
        action = ToolAction(tag=f"{name}-{n}", name="t")
        rec.feed(ToolCallCompleted(action, TextArtifact(value="r"), 0.0))
        assert rec.error is None, rec.error
        usage = Usage(input_tokens=1, output_tokens=3)
        rec.finish(type("R", (), {"interrupted": False, "error": None, "usage": usage, "metadata": {}})())
    print(name, "done")
""")


def test_two_processes_write_one_store_and_lose_nothing(store_location: Any) -> None:
    path = store_location
    runs = 40
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, other, str(runs)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for name, other in (("k1", "k2"), ("k2", "k1"))]
    assert [p.stdout.readline() for p in procs] == ["ready\n", "ready\n"]  # type: ignore[union-attr]
    for p in procs:
        p.stdin.write("go\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    store = RunStore(path)
    try:
        if store.dialect == "sqlite":
            assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for name in ("k1", "k2"):
            rows = store.runs(thread=name, limit=1000)
            assert len(rows) == runs and {r["status"] for r in rows} == {"ok"}
            assert sorted(r["prompt"] for r in rows) == sorted(f"{name} {n}" for n in range(runs))
            for row in rows:
                nodes = store.nodes(row["id"])
                assert [n["kind"] for n in nodes] == ["message", "request", "message", "tool_result"]
                assert [n["seq"] for n in nodes] == [1, 2, 3, 4]
                assert nodes[2]["data"]["content"][0]["text"] == "abc" and not nodes[2]["partial"]
        assert store.count("runs") == 2 * runs and store.count("nodes") == 2 * runs * 4
        # the two writers really overlapped in time
        spans = {n: [(r["started_at"], r["ended_at"]) for r in store.runs(thread=n, limit=1000)] for n in ("k1", "k2")}
        assert min(e for _, e in spans["k1"]) < max(s for s, _ in spans["k2"])
        assert min(e for _, e in spans["k2"]) < max(s for s, _ in spans["k1"])
    finally:
        store.close()


# -- real kernels: an interrupt, and a kill -----------------------------------------------------------


def _start_kernel(env_store: Path, server: StubServer, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(env_store))
    km, kc = start_new_kernel(kernel_name="python3")
    reply, _ = wait_reply(
        kc, kc.execute(f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1"), 30
    )
    assert reply["content"]["status"] == "ok"
    return km, kc


def _output(kc: Any, code: str, timeout: float = 20) -> str:
    reply, iopub = wait_reply(kc, kc.execute(code), timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(m["content"].get("text", "") or m["content"].get("data", {}).get("text/plain", "")
                   for m in iopub if m["msg_type"] in ("stream", "display_data", "execute_result"))


def _partial_text(path: Path) -> str:
    """The text of a partial assistant message node, read by a second connection ("" when there is none)."""
    try:
        with closing(sqlite3.connect(path)) as conn:
            row = conn.execute(
                "SELECT data FROM nodes WHERE kind = 'message' AND role = 'assistant' AND partial = 1"
            ).fetchone()
    except sqlite3.Error:
        return ""
    if not row:
        return ""
    return "".join(b.get("text", "") for b in json.loads(row[0])["content"])


@pytest.mark.notebook
def test_interrupted_run_is_marked_and_skipped_by_the_next_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = expected_from(TEXT)
    path = tmp_path / "runs.sqlite"
    with StubServer(Reply.sse_file(TEXT), Reply.sse_file(TEXT, delay=0.25), Reply.sse_file(TEXT)) as server:
        km, kc = _start_kernel(path, server, monkeypatch)
        try:
            _output(kc, "%%agent\nfirst")
            first = server.pieces_sent
            msg_id = kc.execute("%%agent\nthis one is interrupted")
            # the reply is streaming, a piece every 0.25 s
            assert server.wait_for(lambda: server.pieces_sent >= first + 3, 15)
            assert _partial_text(path) == ""  # nothing is written while it streams
            km.interrupt_kernel()
            reply, _ = wait_reply(kc, msg_id, 20)
            assert reply["content"]["status"] == "error"
            _output(kc, "%%agent\nthird")
            history = _output(kc, "%agent history")
            inspect = _output(
                kc,
                "%agent inspect "
                + _output(kc, "print(get_ipython().find_magic('agent', 'line').__self__.session.run_ids[1])").strip(),
            )
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    # the next prompt skipped the interrupted turn
    assert server.requests[2]["body"]["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": exp.text},
        {"role": "user", "content": "third"},
    ]
    store = RunStore(path)
    try:
        statuses = [r["status"] for r in reversed(store.runs())]
        assert statuses == ["ok", "interrupted", "ok"]
        interrupted = store.runs()[1]
        message = next(n for n in store.nodes(interrupted["id"]) if n["kind"] == "message" and n["role"] == "assistant")
        assert message["partial"] and message["failed"] and message["data"]["status"] == "interrupted"
        partial = message["data"]["content"][0]["text"]
        assert partial and exp.text.startswith(partial) and partial != exp.text
    finally:
        store.close()
    assert (
        "interrupted" in history
        and "[interrupted; the text above is partial]" in history
        and "skipped in the next prompt" in history
    )
    assert f"run {interrupted['id']}" in inspect and "[partial, failed]" in inspect and "cancelled" in inspect
    assert "body (secrets masked): " in inspect and '"this one is interrupted"' in inspect
    assert SECRET not in inspect + history


@pytest.mark.notebook
def test_killed_kernel_leaves_a_readable_store_with_the_run_marked(store_location: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming reply is written once, on an interrupt (not while it streams): a kernel killed
    mid-reply leaves its run and request, which a later session marks interrupted (a SQLite file, a
    PostgreSQL database)."""
    path = store_location
    with StubServer(Reply.sse_file(TEXT, delay=0.25)) as server:
        km, kc = _start_kernel(path, server, monkeypatch)
        try:
            kc.execute("%%agent\nthis kernel is killed mid-run")
            assert server.wait_for(lambda: server.pieces_sent >= 3, 15)
            process = km.provisioner.process
            pid = process.pid
            os.kill(pid, signal.SIGKILL)  # no chance to clean up
            process.wait(timeout=10)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    if isinstance(path, Path):
        with closing(sqlite3.connect(path)) as conn:  # readable as it was left: integrity ok
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reader = RunStore(path)
    try:  # the run still "running", its request written
        assert [tuple(row) for row in reader._db.execute("SELECT status, pid FROM runs")] == [("running", pid)]
    finally:
        reader.close()
    store = RunStore(path)  # a later session on this host sees the process gone (Session.store does this)
    try:
        [run] = store.runs()
        assert store.mark_abandoned() == [run["id"]]
        [run] = store.runs()
        assert run["status"] == "interrupted" and "process stopped" in run["error"]["message"]
        nodes = store.nodes(run["id"])
        assert [(n["kind"], n["role"]) for n in nodes] == [("message", "user"), ("request", None)]
        assert [type(e).__name__ for e in replay_events(nodes)] == ["ModelStarted"]
    finally:
        store.close()


def test_a_grade_is_kept_against_its_run_replaced_and_removed(store_location: Any) -> None:
    path = store_location
    store = RunStore(path)
    (run_id,) = store.add_finished_runs([{"run": {"provider": "openai", "model": "m", "status": "ok", "prompt": "q"}}])
    store.set_grade(run_id, False, f"wrong city; key {SECRET}")
    store.set_grade("another", True)
    now = pytest.approx(time.time(), abs=60)
    assert store.grades([run_id, "another", "none", run_id]) == {
        run_id: {"passed": False, "note": "wrong city; key [redacted]", "graded_at": now},
        "another": {"passed": True, "note": "", "graded_at": now}}
    store.set_grade(run_id, True, "fine after all")  # one grade per run: the last one
    now = pytest.approx(time.time(), abs=60)
    store.close()
    again = RunStore(path)  # kept in the file
    assert again.grades([run_id])[run_id] == {"passed": True, "note": "fine after all", "graded_at": now}
    again.set_grade(run_id, None)
    assert again.grades([run_id]) == {}
    ids = [f"r{n}" for n in range(1200)]  # past SQLite's limit on bound parameters
    for n in (0, 600, 1199):
        again.set_grade(ids[n], n % 2 == 0)
    assert sorted(again.grades(ids)) == ["r0", "r1199", "r600"]
    again.close()


def test_an_evaluation_finds_the_one_before_it_under_the_same_name(store: RunStore) -> None:
    assert store.previous_evaluation("cell-1") is None
    store.add_evaluation("e1", "cell-1", {"cells": [["k", "a", 0, "ok", True, "r1", "d"]]})
    store.add_evaluation("e2", "cell-2", {"cells": []})
    store.add_evaluation("e3", "cell-1", {"cells": []})
    assert store.previous_evaluation("cell-1")["id"] == "e3"
    previous = store.previous_evaluation("cell-1", before="e3")
    assert previous["id"] == "e1" and previous["outcomes"] == {"cells": [["k", "a", 0, "ok", True, "r1", "d"]]}
    assert store.previous_evaluation("cell-3") is None


def test_an_evaluation_is_found_by_its_id_or_a_prefix_naming_it_alone(store: RunStore) -> None:
    for evaluation_id in ("ab12", "ab1", "cd34"):
        store.add_evaluation(evaluation_id, None, {"archive": {"meta": {"id": evaluation_id}}})
    assert store.evaluation("cd")["outcomes"] == {"archive": {"meta": {"id": "cd34"}}}
    assert store.evaluation("ab1")["id"] == "ab1"  # the whole id, though another starts with it
    with pytest.raises(KeyError, match="'ab' names 2 evaluations; give more of the id"):
        store.evaluation("ab")
    for missing in ("ef", "", "%", "a_"):  # no pattern: LIKE's wildcards are plain characters
        with pytest.raises(KeyError, match="no evaluation"):
            store.evaluation(missing)
    assert [e["id"] for e in store.evaluations(limit=2)] == ["cd34", "ab1"]


def test_runs_are_read_by_id_past_sqlites_limit_on_parameters(store: RunStore) -> None:
    records = [{"run": {"id": f"r{n}", "provider": "openai", "model": "m", "status": "ok", "prompt": f"q{n}",
                        "usage": {"input_tokens": n}, "metadata": {"text": f"a{n}"}}, "nodes": []}
               for n in range(1200)]
    store.add_finished_runs(records)
    found = store.runs_by_id([f"r{n}" for n in range(0, 1200, 3)] + ["nope", None])
    assert len(found) == 400 and found["r600"]["metadata"] == {"text": "a600"} and "r601" not in found
    assert found["r3"]["usage"] == {"input_tokens": 3} and found["r3"]["prompt"] == "q3" and "nope" not in found
    assert len(store.runs_by_id([f"r{n}" for n in range(1200)])) == 1200  # more than 500, and no grade in the store


def test_a_store_of_schema_2_gains_the_grades_and_evaluations_tables(tmp_path: Path) -> None:
    from ipyagent.memory import store_schema

    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(store_schema._SCHEMA.split("CREATE TABLE IF NOT EXISTS grades")[0] + "PRAGMA user_version = 2;")
    conn.close()
    store = RunStore(path)
    store.set_grade("r1", True)
    assert store.grades(["r1"])["r1"]["passed"] is True
    assert store._conn.execute("PRAGMA user_version").fetchone()[0] == store_schema.SCHEMA_VERSION
    store.close()


def test_batches_are_kept_per_request_until_collected(store: RunStore, store_location: Any) -> None:
    store.add_batch("batch_1", "openai:gpt-4o-mini", ["k1", "k2", "k3"])
    store.add_batch("batch_2", "openai:gpt-4o-mini", ["k3", "k4"])  # k3 sent again: it is in the newer batch
    again = RunStore(store_location)  # another kernel sees them
    assert again.batched(["k1", "k3", "k4", "k9"]) == {"k1": "batch_1", "k3": "batch_2", "k4": "batch_2"}
    again.drop_batch("batch_1")  # collected
    assert store.batched(["k1", "k2", "k3", "k4"]) == {"k3": "batch_2", "k4": "batch_2"}
    assert len(store.batched([f"k{n}" for n in range(1200)])) == 2  # past SQLite's bound parameters
    again.close()


def test_a_cached_run_is_read_as_a_row_and_decoded_in_one_pass(store: RunStore, monkeypatch) -> None:
    """A cached re-run reads thousands of runs: each comes as a row of text and numbers, and its usage and
    metadata are decoded together, in one pass."""
    store.add_finished_runs([
        {"run": {"status": "ok", "cache_key": "k", "usage": {"input_tokens": 3}, "metadata": {"text": "t"}},
         "nodes": []},
        {"run": {"status": "ok", "cache_key": "n", "metadata": {"text": "u"}}, "nodes": []},
    ])
    rows = store.stored_runs(["k", "n", "missing"])
    assert set(rows) == {"k", "n"} and all(type(row) is tuple for row in rows.values())
    decoded: list[str] = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda text: decoded.append(text) or real(text))
    runs = store.cached_runs(["k", "n"])
    assert runs["k"]["usage"] == {"input_tokens": 3} and runs["k"]["metadata"] == {"text": "t"}
    assert runs["n"]["usage"] is None and runs["n"]["metadata"] == {"text": "u"} and runs["n"]["id"]
    assert len(decoded) == 2  # one decode a run


def test_the_grades_of_many_runs_in_a_store_without_any_take_one_look(tmp_path: Path) -> None:
    """An evaluation reads its runs' grades at its end (30,000 at 10,000 rows x 3): with none in the store,
    one statement, not one per 500 ids; once there is one, each run's is read."""
    store = RunStore(tmp_path / "runs.sqlite")
    ids = [f"r{n}" for n in range(1200)]
    statements: list[str] = []
    store._db.conn.set_trace_callback(statements.append)
    assert store.grades(ids) == {}
    assert len([s for s in statements if "grades" in s]) == 1
    store.set_grade("r1199", True)
    assert list(store.grades(ids)) == ["r1199"]
    store.close()
