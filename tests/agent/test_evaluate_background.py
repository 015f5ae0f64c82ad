"""`evaluate(..., background=True)`: the matrix runs on ipyagent's loop while the caller goes on;
`done`, `progress`, `wait`, `cancel`; a stop (cancel, the extension's unload) keeps the finished
runs in the run store. Replies are held by events, never timed."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from ipyagent import Agent, Evaluation, aevaluate, evaluate
from ipyagent.agent import run_in_background, stop_detached
from ipyagent.agent.evaluation import TemplateError, background
from ipyagent.agent.evaluation.background import Progress
from ipyagent.memory.store import RunStore

from ..support.evaluation import last_user_text
from ..support.stub_server import StubServer, openai_text_reply

ROWS = [f"q{n}" for n in range(6)]


def _stored(store: RunStore, ev: Evaluation) -> list[str]:
    """The prompts of `ev`'s runs in the store, sorted."""
    return sorted(run["prompt"] for run in store.runs(session=ev.id, limit=1000))


def _held(gate: threading.Event, quick: tuple[str, ...] = ()):
    """A responder: rows in `quick` answer at once, every other reply stops after its first piece
    until `gate` is set (a stream surely under way)."""
    def reply(body):
        text = last_user_text(body)
        return openai_text_reply(f"answer to {text}", piece=4, **({} if text in quick else
                                                                   {"hold_after": 1, "release": gate}))
    return reply


def test_background_returns_at_once_and_fills_while_other_work_runs(store) -> None:
    gate = threading.Event()
    with StubServer(responder=_held(gate)) as slow, StubServer(responder=_held(gate, quick=tuple(ROWS))) as quick:
        ev = evaluate([Agent("openai:a", base_url=slow.url), Agent("openai:b", base_url=slow.url)], "{{ row }}", ROWS,
                      concurrency=6, store=store, background=True)
        # returned before any reply: the runs are held by the server until the gate opens
        assert isinstance(ev, Evaluation) and not ev.done and ev.progress.total == 12
        other = evaluate([Agent("openai:c", base_url=quick.url)], "{{ row }}", ROWS, store=store)  # "another cell"
        assert len(other.results) == 6 and other.done
        assert not ev.done and ev.progress.finished == 0 and "(running in the background)" in repr(ev)
        assert ev.wait(timeout=0) is False
        gate.set()
        assert ev.wait() is True and ev.done
    assert len(ev.to_dataframe()) == 12 and all(r.ok for r in ev.results)
    assert ev.progress.finished == 12 and ev.progress.eta_s == 0.0
    assert len(_stored(store, ev)) == 12 and not ev.interrupted


def test_cancel_stops_the_runs_in_flight_and_keeps_the_finished_in_the_store(store) -> None:
    gate, two = threading.Event(), threading.Event()
    ended: list[str] = []

    def on_result(result):
        ended.append(result.prompt)
        if len(ended) == 2:
            two.set()

    with StubServer(responder=_held(gate, quick=("q0", "q1"))) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ROWS, concurrency=6, store=store,
                      on_result=on_result, background=True)
        assert two.wait(30)
        assert ev.cancel() is True and ev.done
        gate.set()  # the server's held streams end (the client hung up already)
    assert ev.interrupted and sorted(r.prompt for r in ev.results) == ["q0", "q1"]
    assert _stored(store, ev) == ["q0", "q1"]  # committed as it stopped
    assert ev.wait() is True and ev.cancel() is True  # nothing left to stop


def test_the_extensions_unload_stops_every_background_run_and_keeps_what_finished(store) -> None:
    gate, one = threading.Event(), threading.Event()
    with StubServer(responder=_held(gate, quick=("q0",))) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ROWS, concurrency=6, store=store,
                      on_result=lambda r: one.set(), background=True)
        assert one.wait(30)
        assert stop_detached() == 1 and ev.done and ev.interrupted
        gate.set()
    assert _stored(store, ev) == ["q0"] and stop_detached() == 0


def test_cancelling_another_awaited_evaluation_leaves_the_background_one_running(store) -> None:
    """An interrupt of another cell cancels that cell's evaluation (`run_in_background`), not this one."""
    gate, other_started = threading.Event(), threading.Event()
    with StubServer(responder=_held(gate)) as server:
        ev = evaluate([Agent("openai:a", base_url=server.url)], "{{ row }}", ROWS[:2], store=store, background=True)

        async def another_cell():
            task = asyncio.ensure_future(run_in_background(aevaluate(
                [Agent("openai:b", base_url=server.url)], "{{ row }}", ROWS[2:], store=store,
                on_start=lambda r: other_started.set())))
            await asyncio.get_running_loop().run_in_executor(None, other_started.wait, 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(another_cell())
        assert not ev.done
        gate.set()
        assert ev.wait() and not ev.interrupted and len(ev.results) == 2


def test_bad_arguments_raise_at_once_and_a_failed_run_raises_from_wait(store) -> None:
    with pytest.raises(ValueError, match="concurrency must be 1 or more"):
        evaluate(["openai:m"], "{{ row }}", ROWS, concurrency=0, background=True)
    ev = evaluate(["openai:m"], "{{ row.country }}", ROWS, store=store, background=True)
    with pytest.raises(TemplateError):
        ev.wait()
    assert ev.done and ev.results == []


def test_progress_counts_what_ended_since_last_time_and_reads_as_one_line(monkeypatch) -> None:
    clock = SimpleNamespace(monotonic=lambda: 110.0)
    monkeypatch.setattr(background, "time", clock)
    ev = Evaluation(["openai:m"], [f"r{n}" for n in range(20)], started=100.0)

    def ran(cost, cached=False, judge=None):
        return SimpleNamespace(cost=cost, cached=cached, judge_cost=judge, status="ok")

    ev.results = [ran(0.002), ran(0.004, judge=0.001), ran(None), ran(0.5, cached=True), ran(0.008)]
    p = ev.progress
    assert p == Progress(5, 20, pytest.approx(0.015), 10.0, 0.5, 30.0)
    assert str(p) == "5 / 20 runs · 0.5 runs/s · 30 s left · $0.015 spent"
    ev.results.append(ran(0.005))
    ev.results[0].cost = 99.0  # counted already: not read again
    assert ev.progress.spent == pytest.approx(0.020)
    ev.results = [ran(0.001)]  # replaced: counted anew
    assert ev.progress.spent == pytest.approx(0.001)
    clock.monotonic = lambda: 100.0 + 3 * 3600
    assert str(ev.progress) == "1 / 20 runs · 9.26e-05 runs/s · 57 h 00 min left · $0.001 spent"
    ev.wall_s, ev.spent = 12.0, 2.5  # ended: its wall time, the budget's count of what it spent
    assert ev.progress.elapsed_s == 12.0 and str(ev.progress).endswith("$2.50 spent")
    assert Evaluation([], []).done and Evaluation([], []).wait() and Evaluation([], []).cancel()
