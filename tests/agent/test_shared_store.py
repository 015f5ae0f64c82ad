"""A run store shared by processes (a team's PostgreSQL database, or one SQLite file): two
processes running the same matrix at once send each request once between them (claims), a run
one of them finished is a cache hit for the other, and a claim left by a process that stopped
does not hold the others back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent, evaluate
from ipyagent.memory.store import RunStore

from ..support.evaluation import last_user_text
from ..support.stub_server import StubServer, openai_text_reply

ROOT = Path(__file__).resolve().parents[2]
ROWS = 100
CONCURRENCY = 4

WORKER = textwrap.dedent('''
    import json, sys
    from ipyagent import Agent, evaluate

    location, url, rows, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    agent = Agent("openai:m", base_url=url)
    print("ready", flush=True)
    sys.stdin.readline()  # both start when the test says go, after their imports
    ev = evaluate([agent], "Capital of {{ row }}?", [f"country {n}" for n in range(rows)], store=location,
                  concurrency=concurrency, assertions=["contains:capital"])
    print(json.dumps({"ok": sum(r.ok for r in ev.results), "passed": sum(bool(r.passed) for r in ev.results),
                      "sent": sum(not r.cached for r in ev.results),
                      "texts": {r.prompt: r.text for r in ev.results}, "notes": ev.notes}))
''')


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_two_processes_running_one_matrix_send_each_request_once(store_location: Any) -> None:
    overlapped = threading.Event()  # set once more requests are in flight than one process sends at once
    lock = threading.Lock()
    in_flight = [0]

    def respond(body: dict[str, Any]) -> Any:
        with lock:
            in_flight[0] += 1
            if in_flight[0] > CONCURRENCY:
                overlapped.set()
        overlapped.wait(timeout=60)  # the first requests wait for the other process's (a guard, not a bound)
        with lock:
            in_flight[0] -= 1
        return openai_text_reply(f"The capital of {last_user_text(body)}.")

    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    with StubServer(responder=respond) as server:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(store_location), server.url, str(ROWS),
                                   str(CONCURRENCY)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env) for _ in range(2)]
        assert [p.stdout.readline() for p in procs] == ["ready\n", "ready\n"]  # type: ignore[union-attr]
        for p in procs:
            p.stdin.write("go\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
        outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    asked = Counter(last_user_text(r["body"]) for r in server.requests)
    prompts = {f"Capital of country {n}?" for n in range(ROWS)}
    assert set(asked) == prompts and set(asked.values()) == {1}  # every request sent once, by one of the two
    assert overlapped.is_set()  # both were sending at the same time
    assert [r["ok"] for r in results] == [ROWS, ROWS] and [r["passed"] for r in results] == [ROWS, ROWS]
    assert sum(r["sent"] for r in results) == ROWS  # what one sent, the other was served from the store
    assert results[0]["texts"] == results[1]["texts"] == {p: f"The capital of {p}." for p in prompts}
    assert not [n for r in results for n in r["notes"] if "store" in n]  # the store never failed
    store = RunStore(store_location)
    try:
        assert store.count("runs") == ROWS and store._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    finally:
        store.close()


def test_a_claim_is_held_against_other_processes_until_released_or_stale(store_location: Any) -> None:
    mine, theirs = RunStore(store_location), RunStore(store_location)  # two connections
    try:
        assert mine.claim("k1", 60) and mine.claim("k1", 60)  # ours, and ours again
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        theirs.pid = int(dead.stdout)  # a process of this host that has ended
        assert theirs.claim("k2", 60)
        other = RunStore(store_location)
        other.pid, other.host = 1, "another-host"  # a live process elsewhere
        try:
            assert not other.claim("k1", 60)  # held by mine, alive
            assert mine.claim("k2", 60)  # its holder's process is gone: taken over
            assert other.claim("k3", -1) and mine.claim("k3", 60)  # a lease that ran out is taken over
            assert not other.claim("k3", 60)
            mine.release(["k1", "k2", "k3"])
            assert other.claim("k1", 60)
            assert mine.claim("k4", 60) and not other.claim("k4", 60)
            mine.add_finished_runs([{"run": {"status": "ok", "cache_key": "k4"}, "claim": "k4"}])  # released with it
            assert other.claim("k4", 60) and not mine.claim("k4", 60)
        finally:
            other.close()
    finally:
        mine.close()
        theirs.close()


def test_claims_taken_together_decide_each_key_as_one_claim_would(store_location: Any) -> None:
    mine, other = RunStore(store_location), RunStore(store_location)
    other.pid, other.host = 1, "another-host"  # a live process elsewhere
    try:
        assert other.claim_many([("held", 60), ("ran-out", -1)]) == {"held", "ran-out"}
        mine.add_finished_runs([{"run": {"status": "ok", "cache_key": "stored"}}])
        taken = mine.claim_many([("held", 60), ("ran-out", 60), ("free", 60), ("stored", 60), ("free", 60)])
        assert taken == {"ran-out", "free", "stored"}  # "held": another process sends it now
        assert mine.claim_many([]) == set()
    finally:
        mine.close()
        other.close()


def test_the_claims_of_one_loop_turn_are_one_transaction(store_location: Any) -> None:
    """Runs a matrix starts together claim their requests in one transaction (`ClaimQueue`), each told
    whether the request is its own and, when another process stored its run meanwhile, that run."""
    import asyncio

    from ipyagent.agent.evaluation.cache import ClaimQueue

    store, other = RunStore(store_location), RunStore(store_location)
    other.pid, other.host = 1, "another-host"
    calls: list[list[tuple[str, float]]] = []
    claim_many = store.claim_many
    store.claim_many = lambda claims: calls.append(claims) or claim_many(claims)  # type: ignore[method-assign]
    try:
        assert other.claim("theirs", 60)
        store.add_finished_runs([{"run": {"status": "ok", "cache_key": "done", "metadata": {"text": "hi"}}}])

        async def three() -> list[tuple[bool, Any]]:
            queue = ClaimQueue(store)
            return list(await asyncio.gather(*(queue.claim(k, 60) for k in ("new", "theirs", "done"))))

        (new, new_hit), (theirs, _), (done, done_hit) = asyncio.run(three())
        assert calls == [[("new", 60), ("theirs", 60), ("done", 60)]]  # one call (in SQLite one transaction)
        assert (new, new_hit, theirs, done) == (True, None, False, True)
        assert done_hit is not None and done_hit["metadata"]["text"] == "hi"
    finally:
        store.close()
        other.close()
