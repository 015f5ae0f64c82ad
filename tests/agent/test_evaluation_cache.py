"""The evaluation cache's keys and its group commits and claims (`agent/evaluation/cache.py`), with a
hand-made driver and store: a request's key and each prompt's and repeat's, the runs that end in one turn
of the loop committed in one transaction, a store that fails, and the claims of one turn taken together
(one at a time when the store fails)."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
from types import SimpleNamespace
from typing import Any

import pytest

from ipyagent.agent.evaluation import cache
from ipyagent.agent.evaluation.cache import CacheWriter, ClaimQueue, json_output, prompt_key, request_key
from ipyagent.core import Message
from ipyagent.core.prompt_stack import to_blocks
from ipyagent.memory import message_json


class Driver:
    provider, model, base_url = "openai", "m1", "http://host/v1"

    def __init__(self, strategy: str = "native", refuse: bool = False) -> None:
        self.strategy, self.refuse = strategy, refuse

    def check_capabilities(self, stack: Any) -> None:
        assert stack is not None
        if self.refuse:
            raise ValueError("no tools on this model")

    def output_strategy(self, stack: Any) -> str:
        assert stack is not None
        return self.strategy

    def build_request(self, stack: Any) -> tuple[str, dict[str, Any]]:
        return "/chat/completions", {"stack": stack, "é": 1}


def test_a_requests_key_is_the_digest_of_its_first_request_and_what_shapes_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"v": 1, "provider": "openai", "model": "m1", "base_url": "http://host/v1", "path": "/chat/completions",
           "body": {"stack": "s", "é": 1}, "max_steps": 3, "when": "2026-12-07"}  # what JSON cannot hold: its str
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    extra = {"max_steps": 3, "when": datetime.date(2026, 12, 7)}
    assert request_key(Driver(), "s", extra) == hashlib.sha256(text.encode()).hexdigest()
    monkeypatch.setattr(cache, "with_rule_instruction", lambda stack: f"{stack} with the rule")
    assert request_key(Driver("rule"), "s", {}) == request_key(Driver(), "s with the rule", {})
    assert request_key(Driver(refuse=True), "s", {}) is None


def test_each_prompt_and_repeat_has_its_own_key_and_no_digest_none() -> None:
    assert prompt_key("d", "p") == hashlib.sha256(b"d\x00p").hexdigest() == prompt_key("d", "p", 0)
    assert prompt_key("d", "p", 2) == hashlib.sha256(b"d\x00p\x002").hexdigest()
    assert prompt_key(None, "p") is None


def test_a_structured_output_is_dumped_as_json_data() -> None:
    assert json_output(SimpleNamespace(model_dump=lambda mode: {"mode": mode})) == {"mode": "json"}
    assert json_output({"a": 1}) == {"a": 1} and json_output(None) is None


class Store:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail, self.commits = fail, []

    def add_finished_runs(self, records: list[dict[str, Any]]) -> None:
        if self.fail is not None:
            raise self.fail
        self.commits.append(records)


def add(writer: CacheWriter, status: str = "ok", result: Any = None, provider: str = "openai:m1") -> Any:
    return writer.add(key="k", provider=provider, prompt="p", status=status, result=result,
                      figures={"cost": 0.5}, metadata={"text": "Paris"}, run_id="r1", claim="k")


def test_a_run_is_recorded_with_its_messages_and_its_key_only_when_ok() -> None:
    store = Store()
    writer = CacheWriter(store, session="e1")  # type: ignore[arg-type]
    messages = [Message(role="user", content=to_blocks("q")), Message(role="assistant", content=to_blocks("Paris"))]
    assert add(writer, result=SimpleNamespace(messages=messages)) is None  # no loop: kept for flush
    assert add(writer, "failed") is None and store.commits == []
    writer.close()
    ok, failed = store.commits[0]
    assert ok["run"] == {"id": "r1", "thread": "evaluation", "session": "e1", "provider": "openai", "model": "m1",
                         "status": "ok", "prompt": "p", "cache_key": "k", "metadata": {"text": "Paris"}, "cost": 0.5}
    assert ok["nodes"] == [{"kind": "message", "role": "user", "data": message_json(messages[0]), "provider": None},
                           {"kind": "message", "role": "assistant", "data": message_json(messages[1]),
                            "provider": "openai"}]
    assert ok["claim"] == "k" and failed["run"]["cache_key"] is None and failed["nodes"] == []
    add(writer, provider="ollama:llama3:8b")
    writer.flush()
    assert (store.commits[1][0]["run"]["provider"], store.commits[1][0]["run"]["model"]) == ("ollama", "llama3:8b")
    assert (writer.written, writer.commits, writer.pending) == (3, 2, [])
    writer.flush()
    assert writer.commits == 2  # nothing queued: no transaction


def test_the_runs_ending_in_one_turn_are_committed_together_the_next_turn() -> None:
    store = Store()
    writer = CacheWriter(store)  # type: ignore[arg-type]

    async def turns() -> list[bool]:
        first, second = add(writer), add(writer)
        seen = [first.done(), len(store.commits) == 0]
        await first
        seen += [second.done(), len(store.commits[0]) == 2]
        await add(writer)
        return seen

    assert asyncio.run(turns()) == [False, True, True, True]
    assert [len(records) for records in store.commits] == [2, 1] and writer.commits == 2 and writer.max_lag_s >= 0


def test_a_store_that_fails_stops_the_writing_and_says_why_and_no_store_writes_nothing() -> None:
    writer = CacheWriter(Store(OSError("disk full")))  # type: ignore[arg-type]

    async def fail() -> Any:
        done = add(writer)
        await done
        return done

    assert asyncio.run(fail()).result() is None
    assert writer.error == "the run store stopped recording the evaluation: OSError: disk full"
    assert add(writer) is None and writer.pending == [] and writer.written == 0
    assert add(CacheWriter(None)) is None


class ClaimStore:
    def __init__(self, taken: set[str], stored: dict[str, Any], fail_many: bool = False) -> None:
        self.taken, self.stored, self.fail_many, self.asked = taken, stored, fail_many, []

    def claim_many(self, claims: list[tuple[str, float]]) -> set[str]:
        self.asked.append(("many", claims))
        if self.fail_many:
            raise ConnectionError("lost")
        return {key for key, _ in claims if key in self.taken}

    def claim(self, key: str, lease: float) -> bool:
        self.asked.append(("one", key, lease))
        if key == "broken":
            raise ConnectionError("gone")
        return key in self.taken

    def cached_runs(self, keys: list[str]) -> dict[str, Any]:
        self.asked.append(("runs", keys))
        return {k: self.stored[k] for k in keys if k in self.stored}


def claims(store: ClaimStore, *keys: str, turns: int = 1) -> list[Any]:
    queue = ClaimQueue(store)  # type: ignore[arg-type]

    async def take() -> list[Any]:
        for _ in range(turns - 1):
            await queue.claim(keys[0], 30.0)
        futures = [queue.claim(key, 30.0) for key in keys]
        return list(await asyncio.gather(*futures, return_exceptions=True))

    out = asyncio.run(take())
    out.append(queue.transactions)
    return out


def test_the_claims_of_one_turn_are_taken_together_with_the_runs_stored_under_those_taken() -> None:
    store = ClaimStore({"a", "c"}, {"c": {"id": "r9"}})
    assert claims(store, "a", "b", "c") == [(True, None), (False, None), (True, {"id": "r9"}), 1]
    assert store.asked == [("many", [("a", 30.0), ("b", 30.0), ("c", 30.0)]), ("runs", ["a", "c"])]
    none = ClaimStore(set(), {})
    assert claims(none, "b") == [(False, None), 1] and none.asked == [("many", [("b", 30.0)])]
    assert claims(none, "b", turns=3)[-1] == 3  # one transaction a turn


def test_a_failing_batch_of_claims_is_taken_one_at_a_time_and_a_failing_one_raises() -> None:
    store = ClaimStore({"a"}, {"a": {"id": "r1"}}, fail_many=True)
    a, b, broken, transactions = claims(store, "a", "b", "broken")
    assert (a, b, transactions) == ((True, {"id": "r1"}), (False, None), 0)
    assert isinstance(broken, ConnectionError) and str(broken) == "gone"
    assert store.asked[1:] == [("one", "a", 30.0), ("runs", ["a"]), ("one", "b", 30.0), ("one", "broken", 30.0)]


class Claims(cache.CacheClaims):
    """What `CacheClaims` reads of `matrix._Run`."""

    def __init__(self, claims: Any = None, cache_on: bool = True, **run_options: Any) -> None:
        self.run_options, self.cache, self.claims = run_options, cache_on, claims
        self.digests, self.twins, self.claimed = {}, {}, set()


def test_a_column_sending_the_very_same_request_again_gets_a_digest_of_its_own() -> None:
    host = Claims()
    assert host._own_digest(None) is None and host.twins == {}
    assert host._own_digest("d") == "d"
    assert host._own_digest("d") == hashlib.sha256(b"d\x00column 2").hexdigest()
    assert host._own_digest("d") == hashlib.sha256(b"d\x00column 3").hexdigest() and host.twins == {"d": 3}


def test_a_cells_key_hashes_its_prompt_with_the_request_built_once_per_agent_and_system() -> None:
    built: list[Any] = []

    def prompt_stack(prompt: str, options: Any) -> Any:
        built.append((prompt, options))
        return SimpleNamespace(messages=[SimpleNamespace(content=["text"])], prompt=prompt)

    agent = SimpleNamespace(prompt_stack=prompt_stack, driver=Driver(), max_steps=4, uses_react=False)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    host = Claims(settings={"temperature": 0}, output_strategy="tool", images=["img"], output_schema=schema)
    variant = SimpleNamespace(system="be terse")
    first = host._key(agent, "q1", variant)  # type: ignore[arg-type]
    assert host._key(agent, "q2", variant, 1) == prompt_key(host.digests[(id(agent), "be terse")], "q2", 1)
    assert len(built) == 1 and built[0][0] == cache.PLACEHOLDER
    options = built[0][1]
    assert (options.system, options.settings, options.output_strategy) == ("be terse", {"temperature": 0}, "tool")
    assert options.output_schema == schema
    stack = SimpleNamespace(messages=[SimpleNamespace(content=["text", "img"])], prompt=cache.PLACEHOLDER)
    digest = request_key(Driver(), stack, {"max_steps": 4, "react": False})
    assert first == prompt_key(digest, "q1")
    host._key(agent, "q1")  # no variant: the agent's own system, another request
    assert len(built) == 2 and built[1][1].system is None and len(host.digests) == 2


def claim_job(key: str | None = "k", hit: Any = None, timeout: float | None = 30.0) -> Any:
    return SimpleNamespace(key=key, hit=hit, lane=SimpleNamespace(prototype=SimpleNamespace(timeout=timeout)))


def test_a_cell_is_claimed_for_its_deadline_and_a_margin_and_served_when_stored_meanwhile() -> None:
    leases: list[Any] = []

    class Queue:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        async def claim(self, key: str, lease: float) -> Any:
            leases.append((key, lease))
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    async def claimed(host: Claims, job: Any) -> bool:
        return await host._claim(job)

    ours = Claims(Queue((True, {"id": "r1"})))
    job = claim_job()
    assert asyncio.run(claimed(ours, job)) is True and job.hit == {"id": "r1"} and ours.claimed == {"k"}
    assert leases == [("k", 30.0 + 60.0)]
    theirs = Claims(Queue((False, None)), timeout=5)
    assert asyncio.run(claimed(theirs, claim_job())) is False and theirs.claimed == set() and leases[-1][1] == 65.0
    assert asyncio.run(claimed(Claims(Queue((True, None))), claim_job(timeout=None))) and leases[-1][1] == 660.0
    no_agent = claim_job()
    no_agent.lane.prototype = None
    assert asyncio.run(claimed(Claims(Queue((True, None))), no_agent)) and leases[-1][1] == 660.0
    assert asyncio.run(claimed(Claims(Queue(OSError("down"))), claim_job())) is True  # a failing store: sent
    for host, job in ((Claims(Queue((False, None))), claim_job(hit={"id": 1})), (ours, claim_job(key=None)),
                      (Claims(Queue((False, None)), cache_on=False), claim_job()), (Claims(None), claim_job())):
        assert asyncio.run(claimed(host, job)) is True
    assert len(leases) == 5


def test_a_cell_another_process_sends_waits_for_its_run_or_its_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "CLAIM_POLL_S", 0)
    looks: list[Any] = []

    def waiting(answers: list[Any], claims: list[bool]) -> tuple[Claims, Any]:
        def cached_runs(keys: list[str]) -> dict[str, Any]:
            looks.append(keys)
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        async def claim(job: Any) -> bool:
            assert job is not None
            return claims.pop(0)

        host = Claims()
        host.store, host._claim = SimpleNamespace(cached_runs=cached_runs), claim  # type: ignore[method-assign]
        return host, claim_job()

    host, job = waiting([{}, {}, {"k": {"id": "r1"}}], [False, False])
    asyncio.run(host._wait_for(job))
    assert job.hit == {"id": "r1"} and looks == [["k"]] * 3
    host, job = waiting([{}, {}], [False, True])
    asyncio.run(host._wait_for(job))
    assert job.hit is None and len(looks) == 5  # its claim given up: sent here
    host, job = waiting([OSError("down")], [])
    asyncio.run(host._wait_for(job))
    assert job.hit is None and len(looks) == 6


def test_the_writer_keeps_the_longest_wait_from_a_runs_end_to_its_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SimpleNamespace(monotonic=lambda: 10.0)
    monkeypatch.setattr(cache, "time", clock)
    writer = CacheWriter(Store())  # type: ignore[arg-type]
    add(writer)
    clock.monotonic = lambda: 10.25
    add(writer)
    clock.monotonic = lambda: 10.5
    writer.flush()
    assert writer.max_lag_s == 0.5  # from the first run queued
    add(writer)
    clock.monotonic = lambda: 10.75
    writer.flush()
    assert writer.max_lag_s == 0.5 and CacheWriter(None).max_lag_s == 0.0


def test_the_claims_left_are_given_up_at_the_end_whatever_the_store_says() -> None:
    released: list[Any] = []

    def release(keys: list[str]) -> None:
        released.append(keys)
        raise OSError("gone")  # they run out with their lease

    host = Claims()
    host.store, host.claimed = SimpleNamespace(release=release), {"b", "a"}
    host._release()
    assert released == [["a", "b"]] and host.claimed == set()
    host._release()  # nothing left: the store is not asked
    host.store, host.claimed = None, {"c"}
    host._release()
    assert released == [["a", "b"]] and host.claimed == {"c"}


def test_with_the_cache_off_a_run_is_sent_only_after_the_workers_last_commit() -> None:
    def order(host: Claims, whose: str = "this worker") -> list[str]:
        log: list[str] = []

        async def worker() -> None:
            commit = asyncio.get_running_loop().create_future()
            host.uncommitted = {asyncio.current_task() if whose == "this worker" else None: commit}
            asyncio.get_running_loop().call_soon(lambda: (log.append("committed"), commit.set_result(None)))
            await host._after_last_commit()
            log.append("sent")
            await commit

        asyncio.run(worker())
        return log

    off = Claims(cache_on=False)
    off.store = object()
    assert order(off) == ["committed", "sent"]
    assert order(off, "another worker") == ["sent", "committed"]
    on = Claims()  # a claim is taken first: its turn comes after the commit's
    on.store = object()
    assert order(on) == ["sent", "committed"]
    unstored = Claims(cache_on=False)
    unstored.store = None
    assert order(unstored) == ["sent", "committed"]

    async def done() -> None:  # a commit already made: nothing to wait for
        commit = asyncio.get_running_loop().create_future()
        commit.set_result(None)
        off.uncommitted = {asyncio.current_task(): commit}
        await off._after_last_commit()

    asyncio.run(done())
