"""The scheduler of an evaluation's matrix: one lane per provider, a shared budget.

A lane runs at most `concurrency` jobs at once (that many workers take jobs in
order from its queue). Its driver carries the lane's `RateGate`: a 429 holds
every request of the lane for the ``Retry-After`` the provider asked, while the
other lanes go on. A job that fails is recorded by the job itself (the driver
has already retried what its rules allow); it never stops the rest.

The `Budget` is shared: before a job starts, its estimated cost is reserved and
when it ends the reservation is settled at its real cost; a job whose estimate
would take spending (settled plus reserved) past the limit waits for the jobs in
flight to settle, and is skipped when, with none in flight, it still would.
Cancelling `Scheduler.run` cancels every worker at once (an interrupt); what
finished before stays finished.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ...drivers import RateGate


class Budget:
    """A spending limit in USD shared by every lane (None: no limit), held by reservations.

    A job reserves its estimated cost before it starts and settles it when it ends (its real
    cost replaces the estimate). A job whose reservation would take spending (settled plus
    reserved) past the limit waits while other jobs are in flight (they may settle for less);
    with nothing in flight it is refused. So spending stays within the limit when the estimates
    are right, and passes it by at most the in-flight jobs' costs over their estimates.

    Attributes:
        spent: USD of finished work (actual cost, or the estimate when the price is unknown).
        reserved: USD estimated for work in flight.
        refused: jobs refused (not started).
    """

    def __init__(self, limit: float | None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"the budget must be 0 or more USD, not {limit}")
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self.in_flight = 0  # reservations not settled yet
        self.refused = 0
        self._settled: asyncio.Event | None = None  # set when a reservation is settled

    @property
    def stopped(self) -> bool:
        """True once a job was refused."""
        return self.refused > 0

    def _fits(self, estimate: float) -> bool:
        return self.limit is None or self.spent + self.reserved + estimate <= self.limit * (1 + 1e-9)

    async def reserve(self, estimate: Callable[[], float]) -> float | None:
        """Reserve what `estimate()` says (USD) for a job about to start, asked again after each wait
        (the estimate learns from the jobs that ended); returns the USD reserved, or None (refused)
        when it does not fit and nothing in flight could settle to make room."""
        usd = estimate()
        while not self._fits(usd):
            if not self.in_flight:
                self.refused += 1
                return None
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()
            usd = estimate()
        self.reserved += usd
        self.in_flight += 1
        return usd

    def settle(self, estimate: float, cost: float | None) -> None:
        """A job that reserved `estimate` ended having cost `cost` (None: unknown, the estimate counts)."""
        self.in_flight -= 1
        self.reserved = max(0.0, self.reserved - estimate) if self.in_flight else 0.0
        self.spent += estimate if cost is None else cost
        settled, self._settled = self._settled, None
        if settled is not None:
            settled.set()  # every waiting job looks again

    def hold(self, usd: float) -> bool:
        """Reserve `usd` for work sent at once, outside the lanes (a run in a provider's batch): True
        when it fits, else refused (counted in `refused`)."""
        if not self._fits(usd):
            self.refused += 1
            return False
        self.reserved += usd
        return True

    def release(self, usd: float, cost: float | None) -> None:
        """Work `hold` reserved `usd` for ended having cost `cost` (None: unknown, the estimate counts)."""
        self.reserved = max(0.0, self.reserved - usd)
        self.spent += usd if cost is None else cost

    def add(self, cost: float | None) -> None:
        """Spending not reserved ahead (a judge's run)."""
        self.spent += cost or 0.0


@dataclass(eq=False)
class Lane:
    """One provider's queue of jobs and its limits.

    Attributes:
        name: the provider's key in the matrix.
        concurrency: jobs in flight at most.
        gate: the lane's 429 back-off, shared by its driver's requests.
        started_at, finished_at: monotonic seconds of the first job's start and the last one's end.
    """

    name: str
    concurrency: int
    gate: RateGate = field(default_factory=RateGate)
    jobs: deque[Any] = field(default_factory=deque)
    running: int = 0
    started_at: float | None = None
    finished_at: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be 1 or more, not {self.concurrency}")


#: ``estimate(job) -> USD`` and ``run(job) -> (USD spent or None)``; ``skip(job, reason)`` records a job not run.
Estimate = Callable[[Any], float]
Run = Callable[[Any], Awaitable[float | None]]
Skip = Callable[[Any, str], None]


class Scheduler:
    """Runs every lane's jobs, each lane with its own workers, under one `Budget`."""

    def __init__(self, lanes: list[Lane], budget: Budget, *, estimate: Estimate, run: Run, skip: Skip) -> None:
        self.lanes, self.budget = lanes, budget
        self._estimate, self._run, self._skip = estimate, run, skip

    async def _worker(self, lane: Lane) -> None:
        while lane.jobs:
            job = lane.jobs.popleft()
            estimate = await self.budget.reserve(lambda: self._estimate(job))
            if estimate is None:
                self._skip(job, "budget")
                continue
            lane.running += 1
            if lane.started_at is None:
                lane.started_at = time.monotonic()
            cost: float | None = None
            try:
                cost = await self._run(job)
            finally:
                lane.running -= 1
                self.budget.settle(estimate, cost)
                lane.finished_at = time.monotonic()

    async def run(self) -> None:
        """Run until every job is done or skipped. Cancelling this cancels every worker."""
        workers = [asyncio.ensure_future(self._worker(lane)) for lane in self.lanes
                   for _ in range(min(lane.concurrency, max(1, len(lane.jobs))))]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
