"""The matrix of an evaluation in progress (`_Run`, the body of `aevaluate`): a lane per provider
(`scheduler`), each cell queued in its lane or served from the run store, run live or through the
providers' batch APIs (`batch`), under one budget. A cell's own run and checks are `cells`; its
cache key and claim are `cache`."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ...core import ProviderError, system_text
from ...memory import RunStore, cached_run, estimate_text
from ..agent import Agent
from ..compare import provider_keys
from ..options import RunOptions
from ..telemetry.tracing import current as current_tracing
from ..telemetry.trace_spans import cell_attributes, cell_checks, evaluation_span
from .batch import BatchRunner
from .cache import CacheClaims, CacheWriter, ClaimQueue
from .cells import CellRuns, _fill, _from_cache, _rates, checked_at_once
from .checks import Assertion, CallableAssertion, JudgeAssertion, Stoppable
from .history import keep
from .plan import Plan, Variant, make_plan
from .results import EvalResult, Evaluation
from .scheduler import Budget, Lane, Scheduler
from .templates import row_fields

#: Output tokens assumed for a run's cost estimate until the lane has finished runs to go by.
DEFAULT_OUTPUT_TOKENS = 256


@dataclass(slots=True, eq=False)
class _Cell:
    lane: "_Lane"
    result: EvalResult
    row: Any
    variant: Variant
    key: str | None = None
    #: the run the store has for `key`: decoded (a claim's), or its row until served (`RunStore.stored_runs`)
    hit: dict[str, Any] | tuple[Any, ...] | None = None
    deferred: bool = False  # put back in its lane's queue: another process was sending its request


@dataclass(eq=False)
class _Lane(Lane):
    prototype: Agent | None = None
    error: BaseException | None = None
    rates: tuple[float, float] | None = None  # USD per input token, per output token
    outputs: list[int] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    deferred: int = 0  # jobs of `jobs` put back (`_Cell.deferred`)


class _Run(CellRuns, CacheClaims):
    """One evaluation in progress (the body of `aevaluate`)."""

    def __init__(
        self,
        evaluation: Evaluation,
        *,
        variants: list[Variant],
        repeat: int,
        check_timeout: float,
        assertions: list[Assertion],
        concurrency: int,
        budget: float | None,
        cache: bool,
        store: RunStore | None,
        factory: Callable[[str], Agent],
        judge_factory: Callable[[str], Agent],
        run_options: dict[str, Any],
        namespace: dict[str, Any] | None,
        raw: bool,
        redacting: bool,
        on_start: Callable[[EvalResult], Any] | None,
        on_result: Callable[[EvalResult], Any] | None,
        batch: Any = False,
    ) -> None:
        self.ev, self.variants, self.assertions = evaluation, variants, assertions
        self.repeat, self.check_timeout = repeat, check_timeout
        self.concurrency, self.cache, self.store, self.factory = concurrency, cache, store, factory
        self.judge_factory = judge_factory
        self.run_options, self.namespace, self.raw, self.redacting = run_options, namespace, raw, redacting
        self.on_start, self.on_result = on_start, on_result
        # None: live; else `BatchRunner`'s keywords (poll_s, on_progress)
        self.batch: dict[str, Any] | None = (batch if isinstance(batch, dict) else {}) if batch else None
        self.budget = Budget(budget)
        self.writer = CacheWriter(store, session=evaluation.id)
        self.claims = ClaimQueue(store) if store is not None else None  # claims taken per turn of the loop
        self.owned: list[Agent] = []  # agents built here: their drivers are closed at the end
        self.judge_lanes: dict[str, tuple[Agent | None, BaseException | None, asyncio.Semaphore]] = {}
        self.digests: dict[tuple[int, str | None], str | None] = {}  # (id(agent), variant) -> digest (`_key`)
        self.twins: dict[str, int] = {}  # a request's digest -> the columns that send it so far (`_key`)
        self.claimed: set[str] = set()  # cache keys this evaluation claimed in the store (`_claim`)
        self.uncommitted: dict[asyncio.Task[Any] | None, asyncio.Future[None]] = {}  # a worker's last commit
        self.threads = Stoppable()  # synchronous python: checks run there
        self.checked_at_once = checked_at_once(assertions)  # a cell from the store served without a coroutine
        for check in assertions:
            check.timeout = check_timeout
            if isinstance(check, CallableAssertion):
                check.threads = self.threads

    # -- set-up ------------------------------------------------------------------------

    def _lane(self, key: str, entry: Agent | str) -> _Lane:
        lane = _Lane(key, self.concurrency)
        try:
            lane.prototype = self.factory(entry) if isinstance(entry, str) else entry
        except Exception as exc:  # noqa: BLE001 - a missing key, an unknown provider: this lane only
            lane.error = exc
            return lane
        if isinstance(entry, str):
            self.owned.append(lane.prototype)
        return lane

    def _fresh(self, prototype: Agent) -> Agent:
        """A new conversation with everything else the prototype's (`Agent.fresh`)."""
        return prototype.fresh()

    async def run_cell(self, job: _Cell) -> float | None:
        """Run (or serve from the cache) one cell, check it, record it; returns the USD spent. With
        tracing on, inside the cell's span, the run's own spans its children (`trace_spans`). A run's
        commit (the loop's next turn) goes before the worker's next claim and request, and is awaited
        before that next run counts as finished: one finished run a worker at most is not in the store.
        A cell whose request another process sends now (the same matrix on a shared store) is put back
        at the end of its lane's queue while the lane has other work, else waits for that run."""
        cell, lane = job.result, job.lane
        if job.deferred:
            job.deferred, lane.deferred = False, lane.deferred - 1
        if not await self._claim(job):
            if len(lane.jobs) > lane.deferred:
                job.deferred, lane.deferred = True, lane.deferred + 1
                lane.jobs.append(job)
                return 0.0
            await self._wait_for(job)
        if current_tracing() is None:  # no span: nothing of it made per cell (a re-run serves thousands)
            return await self._run_cell(job)
        with evaluation_span(f"evaluate {cell.provider}", cell_attributes(self.ev.id, cell), cell_checks(cell)):
            return await self._run_cell(job)

    async def _run_cell(self, job: _Cell) -> float | None:
        cell, lane = job.result, job.lane
        spent: float | None = 0.0
        committed: asyncio.Future[None] | None = None
        assert lane.prototype is not None
        deadline = time.monotonic() + (self.run_options.get("timeout") or lane.prototype.timeout)
        if job.hit is not None:
            hit = job.hit if isinstance(job.hit, dict) else cached_run(job.hit)
            _from_cache(cell, hit, self.run_options.get("output_schema"))
        else:
            await self._after_last_commit()
            if self.on_start is not None:
                self.on_start(cell)
            options = self.run_options
            if job.variant.system is not None:
                options = {**options, "options": RunOptions(system=job.variant.system)}
            result, exc, seconds, ttft = await self._agent_run(self._fresh(lane.prototype), cell.prompt, options)
            _fill(cell, result, exc, seconds, ttft)
            note = (result.metadata or {}).get("price_note") if result is not None and cell.cost is None else None
            if note and note not in self.ev.notes:  # why the cost is unknown, once per evaluation
                self.ev.notes.append(note)
            spent = cell.cost
            lane.outputs.append(cell.output_tokens)
            if cell.cost is not None:
                lane.costs.append(cell.cost)
            committed = self._record(
                job.key,
                lane.prototype.provider,
                cell.prompt,
                cell,
                result,
                {"evaluation": self.ev.id, "row": cell.row, "provider_key": cell.provider, "variant": cell.variant,
                 "repeat": cell.repeat},
                text=cell.text,
                output=cell.output,
                ok=cell.ok,
                cost=cell.cost,
                seconds=seconds,
                ttft=ttft,
                error={"type": cell.error_type, "message": cell.error} if not cell.ok else None,
                usage=result.usage.model_dump() if result is not None else None,
            )
        await self._check(cell, job.row, deadline)
        worker = asyncio.current_task()  # its last run committed before this one counts as finished
        before = self.uncommitted.pop(worker, None)
        if before is not None and not before.done():
            await before
        self._finish(cell)
        if committed is not None:
            self.uncommitted[worker] = committed
        return spent

    def estimate(self, job: _Cell) -> float:
        """USD a cell's run may cost: the mean cost of the lane's finished runs; before there is one,
        the prompt's estimated tokens in and ``max_output_tokens`` out (`DEFAULT_OUTPUT_TOKENS`
        when not set) at the model's price."""
        lane = job.lane
        if job.hit is not None or self.budget.limit is None or lane.prototype is None:
            return 0.0
        if lane.costs:
            return statistics.fmean(lane.costs)
        if lane.rates is None:
            lane.rates = _rates(lane.prototype)
        if lane.rates == (0.0, 0.0):
            return 0.0
        settings = lane.prototype.settings.merged(self.run_options.get("settings"))
        if lane.outputs:
            out = statistics.fmean(lane.outputs)
        else:  # before any run ended: the longest reply allowed, else a usual one
            out = settings.max_output_tokens or DEFAULT_OUTPUT_TOKENS
        if settings.max_output_tokens:  # the reply can be no longer
            out = min(out, settings.max_output_tokens)
        tokens_in = estimate_text(system_text(lane.prototype.system) + job.result.prompt)
        return tokens_in * lane.rates[0] + out * lane.rates[1]

    def skip(self, job: _Cell, reason: str) -> None:
        cell = job.result
        cell.status, cell.error_type, cell.passed = "skipped", reason, None
        cell.error = (
            f"not run: it would take the spending past the budget of ${self.budget.limit:g}"
            if reason == "budget"
            else f"not run: {reason}"
        )
        self.ev.budget_stopped = self.ev.budget_stopped or reason == "budget"
        self._finish(cell)

    # -- the whole matrix ----------------------------------------------------------------

    def _lanes(self, entries: list[Agent | str]) -> list[_Lane]:
        """One lane per provider, named by what was built (a replayed cassette by its recorded
        provider:model) before any result."""
        lanes = [self._lane(key, entry) for key, entry in zip(self.ev.providers, entries)]
        self.ev.providers = provider_keys(
            [lane.prototype.provider if lane.prototype is not None else lane.name for lane in lanes]
        )
        for lane, key in zip(lanes, self.ev.providers):
            lane.name = key
        return lanes

    def _queue(self, lanes: list[_Lane], rows: list[Any], plan: Plan) -> list[_Cell]:
        """Every run into its lane's queue (row by row, each variant, each repeat), with its cache key;
        returns the runs the store has (served without a lane). A run whose row could not be rendered,
        or whose lane's agent could not be built, ends at once (``template_error``, ``failed``)."""
        cells: list[_Cell] = []
        fields = [row_fields(row) for row in rows]  # one per row, shared by its cells
        for lane in lanes:
            for n, row in enumerate(rows):
                for variant in plan.variants:
                    prompt, error = plan.prompts[variant.name][n], plan.errors[variant.name][n]
                    for repeat in range(self.repeat):
                        cell = EvalResult(n, lane.name, prompt, fields[n], variant=variant.name, repeat=repeat)
                        if error is not None or lane.error is not None:
                            self._unsent(cell, error, lane.error)
                            continue
                        job = _Cell(lane, cell, row, variant)
                        if self.store is not None:
                            job.key = self._key(lane.prototype, prompt, variant, repeat)  # type: ignore[arg-type]
                        cells.append(job)
        if self.cache and self.store is not None:
            hits = self.store.stored_runs([c.key for c in cells if c.key])
            for job in cells:
                job.hit = hits.get(job.key) if job.key else None
        for job in cells:
            if job.hit is None:
                job.lane.jobs.append(job)
        return [job for job in cells if job.hit is not None]

    async def run(self, entries: list[Agent | str], rows: list[Any], *, frozen: bool = False) -> Evaluation:
        ev = self.ev
        plan = make_plan(self.variants, rows, self.assertions, namespace=self.namespace, raw=self.raw,
                         redacting=self.redacting)
        if plan.note():
            ev.notes.append(plan.note())  # type: ignore[arg-type]
        for assertion in self.assertions:
            if isinstance(assertion, JudgeAssertion):
                assertion.run = lambda prompt, judge=assertion: self._judge_run(judge, prompt)
        base = ev.columns.index(ev.baseline) if ev.baseline is not None else None
        lanes = self._lanes(entries)
        if base is not None:  # the columns are named by what was built (a cassette by its recorded model)
            ev.baseline = ev.columns[base]
        cached = self._queue(lanes, rows, plan)
        if frozen:  # the heap before it is (`runner.frozen_heap`): so is the matrix queued, which lives on
            gc.freeze()
        built = [lane for lane in lanes if lane.prototype is not None]
        previous = [lane.prototype.driver.rate_gate for lane in built]  # type: ignore[union-attr]
        for lane in built:
            lane.prototype.driver.rate_gate = lane.gate  # type: ignore[union-attr]
        unknown = [
            lane.name for lane in built if self.budget.limit is not None and _rates(lane.prototype) == (0.0, 0.0)
        ]  # type: ignore[arg-type]
        if unknown:
            ev.notes.append(
                f"budget: no known price for {', '.join(unknown)}; their runs count only when they report a cost"
            )
        finished = False
        try:
            cached.reverse()
            at_once = self.checked_at_once and current_tracing() is None  # else each cell in its span (`run_cell`)
            while cached:  # served from the store: no request, no lane; each let go once served
                job = cached.pop()
                if at_once:  # the decoded run let go with the call
                    hit: Any = job.hit
                    self._serve(job.result, hit if isinstance(hit, dict) else cached_run(hit), job.row)
                else:
                    await self.run_cell(job)
            live = Scheduler(lanes, self.budget, estimate=self.estimate, run=self.run_cell, skip=self.skip)
            if self.batch is None:
                await live.run()
            else:
                await self._batched(built, live)
            finished = True
        finally:
            for lane, gate in zip(built, previous):
                lane.prototype.driver.rate_gate = gate  # type: ignore[union-attr]
            ev.spent, ev.reserved = self.budget.spent, self.budget.reserved
            self.writer.close()  # what finished is committed, an interrupt too
            self.uncommitted.clear()
            if self.writer.error:
                ev.notes.append(self.writer.error)
            self._release()
            if self.store is not None and not self.writer.error:
                note = keep(ev, self.store, finished=finished)  # grades read back; what changed since the last run
                if note:
                    ev.notes.append(note)
        return ev

    async def _batched(self, lanes: list[_Lane], live: Scheduler) -> None:
        """Batch mode: the lanes whose provider has a batch API send their runs there (`BatchRunner`),
        the others run live meanwhile. A batch API that fails leaves its batches running (a note says
        how to collect them)."""
        batches = BatchRunner(self, **self.batch)  # type: ignore[arg-type]

        async def batched(step: Callable[[], Coroutine[Any, Any, None]]) -> bool:
            try:
                await step()
            except ProviderError as exc:
                self.ev.notes.append(f"batch: {exc}; run the same evaluation again (batch=True, the same run "
                                     "store) to collect the batches sent")
                return False
            return True

        if await batched(lambda: batches.take(lanes)):  # the batched runs leave their lanes before any goes live
            await asyncio.gather(batched(batches.collect), live.run())
        else:
            await live.run()

    async def close(self) -> None:
        self.threads.close()
        for agent in self.owned:
            try:
                await agent.aclose()
            except Exception:  # noqa: BLE001 - closing must not hide the results
                pass
