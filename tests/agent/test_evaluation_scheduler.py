"""The matrix's scheduler (`agent/evaluation/scheduler.py`) on hand-made jobs: the shared `Budget`'s
reservations, waits, refusals and settlements to the cent, a `Lane`'s limits, and the `Scheduler`'s
workers (jobs in order, at most `concurrency` at once, skipped on the budget, timed on the first start and
the last end, all cancelled together)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest

from ipyagent.agent.evaluation import scheduler as scheduler_module
from ipyagent.agent.evaluation.scheduler import Budget, Lane, Scheduler
from ipyagent.drivers import RateGate


def test_a_budget_starts_empty_and_refuses_a_negative_limit() -> None:
    budget = Budget(0)
    assert (budget.limit, budget.spent, budget.reserved, budget.in_flight, budget.refused) == (0, 0.0, 0.0, 0, 0)
    assert budget.stopped is False and budget._settled is None
    with pytest.raises(ValueError, match=r"^the budget must be 0 or more USD, not -0\.5$"):
        Budget(-0.5)


def test_no_limit_fits_anything_and_a_refusal_stops_the_budget() -> None:
    async def go() -> None:
        free = Budget(None)
        assert await free.reserve(lambda: 1e9) == 1e9 and free.hold(1e9) is True
        assert free.reserved == 2e9 and free.in_flight == 1 and not free.stopped
        tight = Budget(1.0)
        assert await tight.reserve(lambda: 1.5) is None
        assert tight.refused == 1 and tight.stopped is True and tight.reserved == 0.0 and tight.in_flight == 0

    asyncio.run(go())


def test_the_limit_is_reached_exactly_with_a_rounding_tolerance_not_passed() -> None:
    async def go() -> None:
        budget = Budget(0.3)
        assert await budget.reserve(lambda: 0.1) == 0.1
        assert await budget.reserve(lambda: 0.2) == 0.2  # 0.1 + 0.2 is 0.30000000000000004: fits
        assert budget.reserved == pytest.approx(0.3) and budget.in_flight == 2
        budget.settle(0.1, 0.1)
        budget.settle(0.2, 0.2)
        assert await budget.reserve(lambda: 1e-6) is None  # past the limit by more than rounding
        edge = Budget(1.0)
        edge.spent = 0.25
        assert await edge.reserve(lambda: 0.75) == 0.75  # spent + estimate == limit fits
        over = Budget(1.0)
        over.spent = 0.5
        assert await over.reserve(lambda: 0.5000001) is None  # spent counts, not only reservations
        held = Budget(1.0)
        held.reserved = 0.5
        assert await held.reserve(lambda: 0.6) is None  # reservations count too (nothing in flight: refused)
        assert await held.reserve(lambda: 0.7) is None and held.refused == 2  # each refusal counts
        # Up to the limit and its tolerance inclusive: a job of unknown price (0) runs under a $0 budget.
        assert await Budget(0).reserve(lambda: 0.0) == 0.0
        assert await Budget(1.0).reserve(lambda: 1.0 * (1 + 1e-9)) == 1.0 * (1 + 1e-9)

    asyncio.run(go())


def test_a_waiting_job_asks_its_estimate_again_after_each_settlement() -> None:
    async def go() -> None:
        budget = Budget(1.0)
        await budget.reserve(lambda: 0.5)
        await budget.reserve(lambda: 0.4)
        asked = []

        def estimate() -> float:
            asked.append(len(asked))
            return 0.9 if len(asked) < 3 else 0.5

        waiting = asyncio.ensure_future(budget.reserve(estimate))
        await asyncio.sleep(0)
        assert not waiting.done() and asked == [0] and isinstance(budget._settled, asyncio.Event)
        budget.settle(0.4, 0.3)  # 0.8 spent and reserved: 0.9 still does not fit, and one is in flight
        assert budget._settled is None and budget.reserved == pytest.approx(0.5) and budget.in_flight == 1
        await asyncio.sleep(0)
        assert not waiting.done() and asked == [0, 1]
        budget.settle(0.5, None)  # the unknown cost counts as its estimate: 0.8 spent, nothing in flight
        assert budget.reserved == 0.0 and budget.spent == pytest.approx(0.8)
        assert await waiting is None and asked == [0, 1, 2] and budget.refused == 1

    asyncio.run(go())


def test_settling_replaces_the_estimate_by_the_cost_and_never_goes_below_zero() -> None:
    async def go() -> None:
        budget = Budget(10.0)
        await budget.reserve(lambda: 2.0)
        await budget.reserve(lambda: 3.0)
        budget.settle(2.0, 0.5)
        assert budget.in_flight == 1 and budget.reserved == 3.0 and budget.spent == 0.5
        budget.reserved = 1.0  # less than the estimate settled next, with one more in flight
        await budget.reserve(lambda: 0.0)
        budget.settle(3.0, 0.0)
        assert budget.reserved == 0.0 and budget.spent == 0.5 and budget.in_flight == 1
        budget.reserved = 0.25
        budget.settle(0.0, None)  # the last one in flight: nothing stays reserved
        assert budget.reserved == 0.0 and budget.in_flight == 0 and budget.spent == 0.5

    asyncio.run(go())


def test_hold_and_release_work_sent_outside_the_lanes() -> None:
    budget = Budget(1.0)
    assert budget.hold(0.6) is True and budget.reserved == 0.6 and budget.in_flight == 0
    assert budget.hold(0.5) is False and budget.refused == 1 and budget.reserved == 0.6
    assert budget.hold(0.45) is False and budget.refused == 2  # each refusal counts
    assert budget.hold(0.4) is True and budget.reserved == pytest.approx(1.0)
    budget.release(0.6, 0.1)
    assert budget.reserved == pytest.approx(0.4) and budget.spent == 0.1
    budget.release(0.4, None)
    assert budget.reserved == pytest.approx(0.0, abs=1e-12) and budget.spent == pytest.approx(0.5)
    budget.release(0.3, 0.2)  # more than is reserved: none stays
    assert budget.reserved == 0.0 and budget.spent == pytest.approx(0.7)
    budget.add(None)
    budget.add(0.25)
    assert budget.spent == pytest.approx(0.95) and budget.reserved == 0.0


def test_a_lane_has_its_own_gate_and_queue_and_needs_one_worker() -> None:
    one, two = Lane("a", 1), Lane("b", 2)
    assert isinstance(one.gate, RateGate) and one.gate is not two.gate and one.jobs is not two.jobs
    assert (one.name, one.concurrency, list(one.jobs), one.running, one.started_at, one.finished_at) == (
        "a", 1, [], 0, None, None)
    with pytest.raises(ValueError, match=r"^concurrency must be 1 or more, not 0$"):
        Lane("c", 0)


class Clock:
    """`time` for the scheduler: monotonic() counts its calls."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_a_lane_runs_its_jobs_in_order_concurrency_at_a_time(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(scheduler_module, "time", clock)
    lane = Lane("a", 2, jobs=deque(range(5)))
    other = Lane("b", 1, jobs=deque(["x"]))
    started, at_once, costs = [], [], {0: 0.5, 1: None, 2: 0.25, 3: 0.0, 4: 1.0}
    estimated, skipped = [], []

    async def run(job: Any) -> float | None:
        started.append(job)
        at_once.append((lane.running, other.running))
        await asyncio.sleep(0)
        return costs.get(job, 0.0)

    def estimate(job: Any) -> float:
        estimated.append(job)
        return 0.125

    budget = Budget(None)
    asyncio.run(Scheduler([lane, other], budget, estimate=estimate, run=run,
                          skip=lambda job, why: skipped.append((job, why))).run())
    assert started[:2] == [0, 1] and [job for job in started if job != "x"] == [0, 1, 2, 3, 4] and "x" in started
    assert max(running for running, _ in at_once) == 2 and max(running for _, running in at_once) == 1
    assert lane.running == 0 and other.running == 0 and not lane.jobs and skipped == []
    assert sorted(map(str, estimated)) == sorted(map(str, started))
    assert budget.spent == pytest.approx(0.5 + 0.125 + 0.25 + 0.0 + 1.0 + 0.0) and budget.in_flight == 0
    assert budget.reserved == 0.0
    assert lane.started_at is not None and lane.finished_at is not None
    assert lane.started_at < lane.finished_at and other.started_at is not None
    assert lane.started_at == min(lane.started_at, other.started_at)  # set by its first job, kept after


def test_the_first_start_is_kept_and_the_last_end_is_taken(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(scheduler_module, "time", clock)
    lane = Lane("a", 1, jobs=deque([1, 2, 3]))

    async def run(job: Any) -> float | None:
        return None

    asyncio.run(Scheduler([lane], Budget(None), estimate=lambda job: 0.0, run=run, skip=lambda j, w: None).run())
    # Each job reads the clock once as it ends; only the first also reads it as it starts.
    assert (lane.started_at, lane.finished_at, clock.now) == (1.0, 4.0, 4.0)


def test_a_job_over_the_budget_is_skipped_and_the_rest_go_on() -> None:
    lane = Lane("a", 1, jobs=deque(["cheap", "dear", "cheap2"]))
    ran, skipped = [], []

    async def run(job: Any) -> float | None:
        ran.append(job)
        return 0.1

    budget = Budget(1.0)
    asyncio.run(Scheduler([lane], budget, estimate=lambda job: 5.0 if job == "dear" else 0.1, run=run,
                          skip=lambda job, why: skipped.append((job, why))).run())
    assert ran == ["cheap", "cheap2"] and skipped == [("dear", "budget")] and budget.refused == 1
    assert lane.started_at is not None and budget.spent == pytest.approx(0.2)


def test_a_failing_job_still_settles_and_the_error_goes_up() -> None:
    lane = Lane("a", 1, jobs=deque(["boom"]))

    async def run(job: Any) -> float | None:
        raise RuntimeError("boom")

    budget = Budget(1.0)
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(Scheduler([lane], budget, estimate=lambda job: 0.3, run=run, skip=lambda j, w: None).run())
    assert budget.in_flight == 0 and budget.spent == pytest.approx(0.3) and lane.running == 0
    assert lane.finished_at is not None


def test_cancelling_the_run_cancels_every_worker() -> None:
    lanes = [Lane("a", 2, jobs=deque([1, 2, 3])),
             Lane("b", 1, jobs=deque([4]))]
    cancelled = []

    async def run(job: Any) -> float | None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(3):  # a clean-up taking turns of the loop: run() waits for it
                await asyncio.sleep(0)
            cancelled.append(job)
            raise
        return None

    async def go() -> None:
        task = asyncio.ensure_future(Scheduler(lanes, Budget(None), estimate=lambda job: 0.0, run=run,
                                               skip=lambda j, w: None).run())
        for _ in range(5):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(cancelled) == [1, 2, 4]  # every worker ended before run() did

    asyncio.run(go())
    assert list(lanes[0].jobs) == [3]


def test_a_worker_failing_cancels_the_others_before_the_error_goes_up() -> None:
    lanes = [Lane("a", 1, jobs=deque(["slow"])),
             Lane("b", 1, jobs=deque(["bad"]))]
    cancelled = []

    async def run(job: Any) -> float | None:
        if job == "bad":
            await asyncio.sleep(0)
            raise RuntimeError("bad")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(3):
                await asyncio.sleep(0)
            cancelled.append(job)
            raise
        return None

    async def go() -> None:
        with pytest.raises(RuntimeError, match="bad"):
            await Scheduler(lanes, Budget(None), estimate=lambda job: 0.0, run=run, skip=lambda j, w: None).run()
        assert cancelled == ["slow"]  # cancelled and waited for, its clean-up done, before the error goes up

    asyncio.run(go())
