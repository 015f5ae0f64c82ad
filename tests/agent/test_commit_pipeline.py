"""A worker of an evaluation's lane does not wait for its last run's commit before it sends its next
request (that wait was a turn of the loop a run), yet its next run counts as finished only once the
last one is committed: at most one finished run a worker is not in the store (issue 25's "after
kill -9, the re-run sends at most `concurrency` requests for runs that had finished")."""

from __future__ import annotations

import asyncio
from typing import Any

from ipyagent import Agent, evaluate
from ipyagent.agent.evaluation import cache, cells, matrix

from ..support.evaluation import answering
from ..support.stub_server import StubServer


class _Commit:
    """A run's commit future as the matrix sees it, logging when a worker waits for it."""

    def __init__(self, future: asyncio.Future[None], prompt: str, log: list[tuple[str, str]]) -> None:
        self.future, self.prompt, self.log = future, prompt, log

    def done(self) -> bool:
        return self.future.done()

    def __await__(self) -> Any:
        self.log.append(("wait", self.prompt))
        return self.future.__await__()


def test_a_worker_sends_its_next_request_before_its_last_run_is_committed(store, monkeypatch) -> None:
    log: list[tuple[str, str]] = []
    flush, add, agent_run, finish = (cache.CacheWriter.flush, cache.CacheWriter.add, cells.CellRuns._agent_run,
                                     cells.CellRuns._finish)

    def held(self: cache.CacheWriter) -> None:
        """The commit held until the next run has ended or a worker waits for it (no clock: turns)."""
        if self.pending and not {"ran q1", "wait q0"} & {f"{e} {p}" for e, p in log}:
            asyncio.get_running_loop().call_soon(held, self)
            return
        log.extend(("commit", record["run"]["prompt"]) for _, record, _ in self.pending)
        flush(self)

    def added(self: cache.CacheWriter, **kw: Any) -> Any:
        done = add(self, **kw)
        return done if done is None else _Commit(done, kw["prompt"], log)

    async def run(self: Any, agent: Any, prompt: str, options: Any) -> Any:
        log.append(("send", prompt))
        out = await agent_run(self, agent, prompt, options)
        log.append(("ran", prompt))
        return out

    def finished(self: Any, cell: Any) -> None:
        log.append(("finish", cell.prompt))
        finish(self, cell)

    monkeypatch.setattr(cache.CacheWriter, "flush", held)
    monkeypatch.setattr(cache.CacheWriter, "close", flush)
    monkeypatch.setattr(cache.CacheWriter, "add", added)
    monkeypatch.setattr(matrix._Run, "_agent_run", run)
    monkeypatch.setattr(matrix._Run, "_finish", finished)
    with StubServer(responder=answering(lambda q: "ok")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["q0", "q1", "q2"], concurrency=1,
                      store=store)
    assert [r.status for r in ev.ordered()] == ["ok"] * 3
    at = {f"{event} {prompt}": n for n, (event, prompt) in reversed(list(enumerate(log)))}
    assert at["send q1"] < at["commit q0"], log  # the next request did not wait for the last commit
    assert at["commit q0"] < at["finish q1"], log  # nor counts the next run as finished before it
    assert at["finish q0"] < at["send q1"], log
    assert sorted(row["prompt"] for row in store._db.execute("SELECT prompt FROM runs")) == ["q0", "q1", "q2"]


def test_without_the_cache_a_workers_next_request_waits_for_its_last_commit(store, monkeypatch) -> None:
    """With ``cache=False`` no claim is taken (whose turn comes after the commit's): the worker waits for its
    last run's commit before it sends the next request, so a killed kernel has sent at most one finished run a
    worker that is not in the store, as with the cache on."""
    log: list[tuple[str, str]] = []
    flush, agent_run = cache.CacheWriter.flush, cells.CellRuns._agent_run

    def logged(self: cache.CacheWriter) -> None:
        log.extend(("commit", record["run"]["prompt"]) for _, record, _ in self.pending)
        flush(self)

    async def run(self: Any, agent: Any, prompt: str, options: Any) -> Any:
        log.append(("send", prompt))
        return await agent_run(self, agent, prompt, options)

    monkeypatch.setattr(cache.CacheWriter, "flush", logged)
    monkeypatch.setattr(cache.CacheWriter, "close", logged)
    monkeypatch.setattr(matrix._Run, "_agent_run", run)
    with StubServer(responder=answering(lambda q: "ok")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["q0", "q1", "q2"], concurrency=1,
                      store=store, cache=False)
    assert [r.status for r in ev.ordered()] == ["ok"] * 3
    at = {f"{event} {prompt}": n for n, (event, prompt) in enumerate(log)}
    assert at["commit q0"] < at["send q1"] and at["commit q1"] < at["send q2"], log
