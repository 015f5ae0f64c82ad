"""Evaluation: a prompt template over rows × providers, each cell a fresh run, with assertions.

    >>> ev = ipyagent.evaluate(["openai:gpt-6-luna", "anthropic:claude-sonnet-5-5"],
    ...                        "Capital of {{ row.country }}? One word.", rows,
    ...                        assertions=["icontains:{{ row.capital }}"], concurrency=8)
    >>> ev.summary()          # a DataFrame, one row per column: pass rate and its interval, time, tokens, cost
    >>> ev.summary(full=True) # every figure: percentiles, scores, the verdict against the baseline
    >>> ev.to_dataframe()     # one row per row × provider

Every cell of the matrix is its own conversation (nothing is shared between
rows). The scheduler (`scheduler`) gives each provider a lane with its own
concurrency and 429 back-off, under one budget. Each run is keyed by its exact
request (`eval_cache`): a finished run is served again from the run store
without a request (``cached``), unless ``cache=False``. Failures never raise:
they are cells with an error. Results keep the answer's text, not the run's
messages (those are in the run store, under the cell's ``run_id``).
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core import (
    DeltaMessage,
    Event,
    ProviderError,
    Usage,
    coerce_settings,
    system_text,
)
from ...drivers import resolve_alias
from ...memory import RunStore, StoreError, default_store_path, estimate_text, new_run_id, store_location
from ..agent import Agent, AgentResult
from ..compare import provider_keys
from ..inputs.images import image_blocks
from ..loop_thread import run_in_background, run_sync
from ..options import RunOptions
from ..telemetry.trace_spans import cell_attributes, cell_checks, evaluation_span
from .history import keep
from .cache import PLACEHOLDER, CacheWriter, json_output, prompt_key, request_key
from .checks import Assertion, CallableAssertion, JudgeAssertion, Outcome, parse_assertion
from .results import EvalResult, Evaluation, _tokens
from .scheduler import Budget, Lane, Scheduler
from .batch import BatchRunner, leave_or_cancel
from .limits import CHECK_TIMEOUT_S, Stoppable
from .plan import Plan, Variant, make_plan
from .templates import normalize_rows, row_fields

#: Output tokens assumed for a run's cost estimate until the lane has finished runs to go by.
DEFAULT_OUTPUT_TOKENS = 256
#: Seconds between two looks at the store while another process sends a run's request (`_Run._wait_for`).
CLAIM_POLL_S = 0.1
#: Seconds a claim outlives its run's deadline (a process that died holding it: then another sends it).
CLAIM_MARGIN_S = 60.0


# -- running ---------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Cell:
    lane: "_Lane"
    result: EvalResult
    row: Any
    variant: Variant
    key: str | None = None
    hit: dict[str, Any] | None = None
    deferred: bool = False  # put back in its lane's queue: another process was sending its request


@dataclass(eq=False)
class _Lane(Lane):
    prototype: Agent | None = None
    error: BaseException | None = None
    rates: tuple[float, float] | None = None  # USD per input token, per output token
    outputs: list[int] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    deferred: int = 0  # jobs of `jobs` put back (`_Cell.deferred`)


class _Run:
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
        self.owned: list[Agent] = []  # agents built here: their drivers are closed at the end
        self.judge_lanes: dict[str, tuple[Agent | None, BaseException | None, asyncio.Semaphore]] = {}
        self.digests: dict[tuple[int, str | None], str | None] = {}  # (id(agent), variant) -> digest (`_key`)
        self.twins: dict[str, int] = {}  # a request's digest -> the columns that send it so far (`_key`)
        self.claimed: set[str] = set()  # cache keys this evaluation claimed in the store (`_claim`)
        self.threads = Stoppable()  # synchronous python: checks run there
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

    def _key(self, prototype: Agent, prompt: str, variant: Variant | None = None, repeat: int = 0) -> str | None:
        """The cache key of the `repeat`-th run of `prompt` on `prototype` in `variant` (its system
        prompt) (`cache.prompt_key`): the request the driver builds around a placeholder prompt is
        hashed once per agent and variant, then each prompt and repeat with it."""
        system = variant.system if variant is not None else None
        slot = (id(prototype), system)
        if slot not in self.digests:
            get = self.run_options.get
            options = RunOptions(system=system, settings=get("settings"), output_schema=get("output_schema"),
                                 output_strategy=get("output_strategy"))
            stack = prototype.prompt_stack(PLACEHOLDER, options)
            images = get("images")
            if images:
                stack.messages[-1].content.extend(images)
            digest = request_key(
                prototype.driver, stack, {"max_steps": prototype.max_steps, "react": prototype.uses_react}
            )
            self.digests[slot] = self._own_digest(digest)
        return prompt_key(self.digests[slot], prompt, repeat)

    def _own_digest(self, digest: str | None) -> str | None:
        """`digest`, or for the n-th column sending the very same request (one model named twice, or
        by two aliases of one server) a digest of its own: its runs are samples of their own, and a
        re-run served from the cache gives each column its answers, not one column's to both."""
        if digest is None:
            return None
        twin = self.twins.get(digest, 0)
        self.twins[digest] = twin + 1
        return digest if not twin else hashlib.sha256(f"{digest}\x00column {twin + 1}".encode()).hexdigest()

    def _judge(self, provider: str) -> tuple[Agent | None, BaseException | None, asyncio.Semaphore]:
        if provider not in self.judge_lanes:
            try:
                agent, error = self.judge_factory(provider), None
                agent.driver.rate_gate = Lane(f"judge {provider}", self.concurrency).gate
                self.owned.append(agent)
            except Exception as exc:  # noqa: BLE001 - reported in every judge outcome
                agent, error = None, exc
            self.judge_lanes[provider] = (agent, error, asyncio.Semaphore(self.concurrency))
        return self.judge_lanes[provider]

    # -- one run -----------------------------------------------------------------------

    async def _agent_run(
        self, agent: Agent, prompt: str, options: dict[str, Any]
    ) -> tuple[AgentResult | None, BaseException | None, float, float | None]:
        """(result, exception, seconds, seconds to the first delta) of one fresh run."""
        first: list[float] = []

        def seen(event: Event) -> None:
            if not first and isinstance(event, DeltaMessage):
                first.append(time.monotonic())

        started = time.monotonic()
        result: AgentResult | None = None
        error: BaseException | None = None
        try:
            result = await agent.arun(prompt, on_event=seen, **options)
        except (ProviderError, ValueError, TypeError, OSError) as exc:  # refused before sending
            error = exc
        return result, error, time.monotonic() - started, (first[0] - started) if first else None

    def _record(
        self,
        key: str | None,
        provider: str,
        prompt: str,
        cell: EvalResult | None,
        result: AgentResult | None,
        metadata: dict[str, Any],
        *,
        text: str,
        output: Any,
        ok: bool,
        cost: float | None,
        seconds: float,
        ttft: float | None,
        error: dict[str, Any] | None,
        usage: Any,
    ) -> asyncio.Future[None] | None:
        """Queue the run for the store (`CacheWriter.add`); the future done once it is committed."""
        run_id = None
        if cell is not None and self.store is not None:  # the cell knows its run (graded against it)
            run_id = cell.run_id = new_run_id()
        return self.writer.add(
            run_id=run_id,
            key=key,
            claim=key if key in self.claimed else None,
            provider=provider,
            prompt=prompt,
            status="ok" if ok else "failed",
            result=result,
            figures={"duration_s": seconds, "usage": usage, "cost": cost, "error": error},
            metadata={
                **metadata,
                "text": text,
                "output": json_output(output),
                "ttft_s": ttft,
                "tool_calls": cell.tool_calls if cell is not None else [],
            },
        )

    async def _judge_run(self, judge: JudgeAssertion, prompt: str) -> tuple[str, float | None, str | None]:
        """One judge run: (reply text, USD or None, error or None); cached by request like any run."""
        agent, error, limit = self._judge(judge.provider)
        if agent is None:
            return "", None, str(error)
        key = self._key(agent, prompt) if self.store is not None else None
        if key is not None and self.cache:
            self.writer.flush()  # the same judgement may be waiting in the buffer
            hit = self.store.cached_runs([key]).get(key) if self.store is not None else None
            if hit is not None:
                return (hit.get("metadata") or {}).get("text") or "", None, None
        async with limit:
            result, exc, seconds, ttft = await self._agent_run(self._fresh(agent), prompt, {})
        if result is None or not result.ok:
            message = str(exc) if result is None else (result.error.message if result.error else "interrupted")
            return "", _cost(result), message
        cost = _cost(result)
        self._record(
            key,
            agent.provider,
            prompt,
            None,
            result,
            {"evaluation": self.ev.id, "judge": True},
            text=result.text,
            output=None,
            ok=True,
            cost=cost,
            seconds=seconds,
            ttft=ttft,
            error=None,
            usage=result.usage.model_dump(),
        )
        self.budget.add(cost)
        return result.text, cost, None

    async def _outcome(self, check: Assertion, cell: EvalResult, row: Any, end: float) -> Outcome:
        """`check`'s verdict on `cell`, by `end` (monotonic seconds): an instant check (contains,
        equals, JSON, schema) always runs; a regex keeps to its own limit while that fits; any other
        (a function, a judge), or a regex that would not fit, is stopped at `end` and fails "timed
        out" (its thread stopped, its request closed)."""
        if check.instant:
            return await check.check(cell, row)
        left = end - time.monotonic()
        if check.bounded and left >= self.check_timeout:
            return await check.check(cell, row)
        if left <= 0:
            return Outcome(check.name, False, reason="timed out: no time was left before the run's deadline")
        try:
            return await asyncio.wait_for(check.check(cell, row), left)
        except TimeoutError:
            return Outcome(check.name, False, reason=f"timed out: the check ran past {left:.3g} s")

    async def _check(self, cell: EvalResult, row: Any, deadline: float) -> None:
        """Run every check of `cell`; together they end by the run's `deadline`, or one check timeout
        after they start when that is later: a cell ends by then whatever its checks do."""
        if cell.ok:
            end = max(deadline, time.monotonic() + self.check_timeout)
            cell.outcomes = [await self._outcome(a, cell, row, end) for a in self.assertions]
            judged = [o.cost for o in cell.outcomes if o.cost is not None]
            cell.judge_cost = sum(judged) if judged else None
            cell.passed = all(o.passed for o in cell.outcomes)
        else:
            cell.outcomes = [Outcome(a.name, False, reason="not checked: the run failed") for a in self.assertions]
            cell.passed = False

    def _finish(self, cell: EvalResult) -> None:
        self.ev.results.append(cell)
        self.ev.finished_s[cell.provider] = time.monotonic() - self.ev.started
        if self.on_result is not None:
            self.on_result(cell)

    # -- claims: processes sharing a store send each request once ----------------------------

    def _claim(self, job: _Cell) -> bool:
        """Claim the cell's request in the store for this process (`RunStore.claim`); True when it is ours
        (or cannot be claimed: no key, no cache, a store that fails), then served from the store when another
        process has stored its run meanwhile; False while another process sends it."""
        if job.hit is not None or job.key is None or not self.cache or self.store is None:
            return True
        deadline = self.run_options.get("timeout") or (job.lane.prototype.timeout if job.lane.prototype else None)
        try:
            if not self.store.claim(job.key, (deadline or 600.0) + CLAIM_MARGIN_S):
                return False
            self.claimed.add(job.key)
            job.hit = self.store.cached_runs([job.key]).get(job.key)  # stored since the matrix was queued
        except Exception:  # noqa: BLE001 - a store that fails: the run is sent (the writer reports it)
            pass
        return True

    async def _wait_for(self, job: _Cell) -> None:
        """While another process sends the cell's request: its run once stored (`job.hit`), or the claim
        once given up without a stored run (then the request is sent here)."""
        assert self.store is not None and job.key is not None
        while True:
            await asyncio.sleep(CLAIM_POLL_S)
            try:
                job.hit = self.store.cached_runs([job.key]).get(job.key)
            except Exception:  # noqa: BLE001 - a store that fails: the run is sent here
                return
            if job.hit is not None or self._claim(job):
                return

    async def run_cell(self, job: _Cell) -> float | None:
        """Run (or serve from the cache) one cell, check it, record it; returns the USD spent once the
        run is committed to the store (so the lane starts no run while a finished one is not). With
        tracing on, inside the cell's span, the run's own spans its children (`trace_spans`).

        A cell whose request another process sends now (the same matrix on a shared store) is put back
        at the end of its lane's queue while the lane has other work, else waits for that run."""
        cell, lane = job.result, job.lane
        if job.deferred:
            job.deferred, lane.deferred = False, lane.deferred - 1
        if not self._claim(job):
            if len(lane.jobs) > lane.deferred:
                job.deferred, lane.deferred = True, lane.deferred + 1
                lane.jobs.append(job)
                return 0.0
            await self._wait_for(job)
        with evaluation_span(f"evaluate {cell.provider}", cell_attributes(self.ev.id, cell), cell_checks(cell)):
            return await self._run_cell(job)

    async def _run_cell(self, job: _Cell) -> float | None:
        cell, lane = job.result, job.lane
        spent: float | None = 0.0
        committed: asyncio.Future[None] | None = None
        assert lane.prototype is not None
        deadline = time.monotonic() + (self.run_options.get("timeout") or lane.prototype.timeout)
        if job.hit is not None:
            _from_cache(cell, job.hit, self.run_options.get("output_schema"))
        else:
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
        self._finish(cell)
        if committed is not None:
            await committed
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
            hits = self.store.cached_runs([c.key for c in cells if c.key])
            for job in cells:
                job.hit = hits.get(job.key) if job.key else None
        for job in cells:
            if job.hit is None:
                job.lane.jobs.append(job)
        return [job for job in cells if job.hit is not None]

    def _unsent(self, cell: EvalResult, template_error: str | None, lane_error: BaseException | None) -> None:
        """A run that is never sent: its row could not be rendered, or its provider could not be built."""
        if template_error is not None:
            cell.status, cell.error_type, cell.error = "template_error", "template", template_error
        else:
            _fill(cell, None, lane_error, 0.0, None)
            cell.outcomes = [Outcome(a.name, False, reason="not checked: the run failed") for a in self.assertions]
            cell.passed = False
        self._finish(cell)

    async def run(self, entries: list[Agent | str], rows: list[Any]) -> Evaluation:
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
            for job in cached:  # served from the store: no request, no lane
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

    def _release(self) -> None:
        """Give up the claims left (runs not committed: an interrupt, a store that failed)."""
        if self.claimed and self.store is not None:
            try:
                self.store.release(sorted(self.claimed))
            except Exception:  # noqa: BLE001 - they run out with their lease
                pass
            self.claimed.clear()

    async def close(self) -> None:
        self.threads.close()
        for agent in self.owned:
            try:
                await agent.aclose()
            except Exception:  # noqa: BLE001 - closing must not hide the results
                pass


def _cost(result: AgentResult | None) -> float | None:
    cost = getattr(result, "cost", None)
    return float(cost) if cost is not None else None


def _fill(
    cell: EvalResult, result: AgentResult | None, exc: BaseException | None, seconds: float, ttft: float | None
) -> None:
    """Copy what a run gave into its cell (text, output, tokens, cost, times, error)."""
    cell.total_s, cell.ttft_s = seconds, ttft
    if result is not None:
        cell.text, cell.output = result.text, result.output
        cell.input_tokens, cell.output_tokens = _tokens(result.usage)
        cell.cost = _cost(result)
        cell.tool_calls = [
            {
                "name": a.native_name,
                "input": a.input,
                "output": a.output.to_text()[:500] if a.output is not None else None,
            }
            for a in result.tool_calls
        ] or ()
        if result.error is not None:
            cell.status, cell.error_type, cell.error = "failed", result.error.type, result.error.message
        elif result.interrupted:
            cell.status, cell.error_type, cell.error = "failed", "cancelled", "interrupted"
    if exc is not None:
        cell.status = "failed"
        cell.error_type = exc.type if isinstance(exc, ProviderError) else type(exc).__name__
        cell.error = str(exc) or type(exc).__name__


def _from_cache(cell: EvalResult, run: dict[str, Any], schema: Any) -> None:
    meta = run.get("metadata") or {}
    cell.cached, cell.run_id = True, run["id"]
    cell.text = meta.get("text") or ""
    output = meta.get("output")
    if output is not None and isinstance(schema, type) and hasattr(schema, "model_validate"):
        try:
            output = schema.model_validate(output)
        except Exception:  # noqa: BLE001 - the schema changed shape: keep the stored JSON
            pass
    cell.output = output
    cell.input_tokens, cell.output_tokens = _tokens(run.get("usage"))
    cell.cost, cell.total_s, cell.ttft_s = run.get("cost"), run.get("duration_s"), meta.get("ttft_s")
    cell.tool_calls = meta.get("tool_calls") or ()


def _rates(agent: Agent) -> tuple[float, float]:
    """(USD per input token, USD per output token) of the agent's model; zeros when unknown."""
    million = 1_000_000
    try:
        per_in = agent.driver.price(Usage(input_tokens=million))
        per_out = agent.driver.price(Usage(output_tokens=million))
    except Exception:  # noqa: BLE001 - an unknown price is not an error
        return 0.0, 0.0
    if per_in is None or per_out is None:
        return 0.0, 0.0
    return float(per_in) / million, float(per_out) / million


def _open_store(store: RunStore | str | Path | bool | None, cache: bool) -> tuple[RunStore | None, bool, str | None]:
    """(store, whether we opened it, a note when it cannot be used)."""
    if isinstance(store, RunStore):
        return store, False, None
    if store is False:
        return None, False, ("caching is off: there is no run store" if cache else None)
    path = store_location(store) if store is not None else default_store_path()
    if path is None:
        return None, False, ("caching is off: no run store ($IPYAGENT_RUN_STORE is off)" if cache else None)
    try:
        return RunStore(path), True, None
    except StoreError as exc:
        return None, False, f"{exc}; runs are neither cached nor recorded"


def _check_arguments(providers: Sequence[Any], concurrency: int, budget: float | None, repeat: int = 1,
                     check_timeout: float = CHECK_TIMEOUT_S) -> None:
    if not providers:
        raise ValueError("evaluate needs at least one provider")
    if concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, not {concurrency}")
    if budget is not None and budget < 0:
        raise ValueError(f"the budget must be 0 or more USD, not {budget}")
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a whole number, 1 or more, not {repeat!r}")
    if not check_timeout > 0:
        raise ValueError(f"the check timeout must be more than 0 seconds, not {check_timeout!r}")


def _run_options(
    output_schema: Any, output_strategy: str | None, images: Any, settings: Any, timeout: float | None
) -> dict[str, Any]:
    """What every run of the matrix is given besides its prompt (`Agent.arun` keywords), those set."""
    options = {
        k: v
        for k, v in (
            ("output_schema", output_schema),
            ("output_strategy", output_strategy),
            ("images", images),
            ("settings", coerce_settings(settings) if settings else None),
            ("timeout", timeout),
        )
        if v
    }
    if "images" in options:
        options["images"] = image_blocks(images)
    return options


async def _run_matrix(
    ev: Evaluation,
    entries: list[Agent | str],
    rows: list[Any],
    *,
    store: RunStore | str | Path | bool | None,
    cache: bool,
    **run: Any,
) -> Evaluation:
    """`aevaluate`'s work on ipyagent's loop: open the store, run the matrix, and whatever happens
    (an interrupt included) note the wall time, close the agents built here and the store opened here."""
    opened, owned, note = _open_store(store, cache)
    if note:
        ev.notes.append(note)
    if opened is not None:  # a grade given while it runs (its live matrix) is kept there, and read back at the end
        ev.store_path = str(opened.path)
    matrix = _Run(ev, store=opened, cache=cache, **run)
    ev.started = time.monotonic()
    try:
        with evaluation_span("evaluation", {"gen_ai.operation.name": "evaluate", "ipyagent.evaluation.id": ev.id,
                                            "ipyagent.evaluation.rows": len(rows),
                                            "ipyagent.evaluation.columns": list(ev.providers)}):
            return await matrix.run(entries, rows)
    except asyncio.CancelledError:
        ev.interrupted = True
        raise
    finally:
        ev.wall_s = time.monotonic() - ev.started
        await matrix.close()
        if owned and opened is not None:
            opened.close()


def _describe(ev: Evaluation, providers: Sequence[Agent | str], keys: list[str], rows: list[Any],
              checks: list[Assertion], variants: list[Variant], repeat: int, budget: float | None) -> Evaluation:
    """Set what the evaluation `ev` is over: providers (and the names they were given by), rows, checks,
    variants, repeats, budget; `ev`."""
    ev.providers, ev.rows, ev.assertions, ev.budget = keys, rows, [a.name for a in checks], budget
    ev.variants, ev.repeat = [v.name for v in variants if v.name is not None], repeat
    ev.labels = {key: given for key, given in zip(keys, providers) if isinstance(given, str) and given != key}
    return ev


def make_variants(
    template: str | None, prompts: dict[str, str] | None, systems: dict[str, str] | None
) -> list[Variant]:
    """The prompt variants: one per name of `prompts` and `systems` (in that order), each with its
    prompt template (`template` when `prompts` has none for it) and system prompt (None: the
    agent's); no names: `template` alone, no variant axis.

    Raises:
        ValueError: no template for a variant (or at all), both `template` and `prompts`, or a
            name that is empty or holds a ``/`` or white space (it names a column ``provider/NAME``).
    """
    prompts, systems = dict(prompts or {}), dict(systems or {})
    if prompts and template is not None:
        raise ValueError("give the prompt as template or as prompts={name: template}, not both (template=None)")
    names = list(dict.fromkeys([*prompts, *systems]))
    for name in names:
        if not isinstance(name, str) or not name or "/" in name or any(c.isspace() for c in name):
            raise ValueError(
                f"a variant's name is one word without '/' (it names a column provider/NAME), not {name!r}"
            )
    variants = [Variant(name, prompts.get(name, template), systems.get(name))  # type: ignore[arg-type]
                for name in names]
    variants = variants or [Variant(None, template)]  # type: ignore[arg-type]
    missing = [v.name or "the prompt" for v in variants if not isinstance(v.template, str)]
    if missing:
        raise ValueError(f"no prompt template for {', '.join(map(str, missing))}; give template= or prompts=")
    return variants


def evaluation_run(providers: Sequence[Agent | str], template: str | None, rows: Any, *,
                    prompts: dict[str, str] | None = None, systems: dict[str, str] | None = None, repeat: int = 1,
                    assertions: Sequence[Any] = (), rubric: str | None = None, check_timeout: float = CHECK_TIMEOUT_S,
                    concurrency: int = 4, budget: float | None = None, cache: bool = True, redact_context: bool = False,
                    store: RunStore | str | Path | bool | None = None, system: str | None = None, batch: Any = False,
                    tools: list[Any] | None = None, max_steps: int = 10, output_schema: Any = None,
                    output_strategy: str | None = None, images: Any = None, settings: Any = None,
                    timeout: float | None = None, namespace: dict[str, Any] | None = None, raw: bool = False,
                    factory: Callable[[str], Agent] | None = None, judge_factory: Callable[[str], Agent] | None = None,
                    on_start: Callable[[EvalResult], Any] | None = None, on_result: Callable[..., Any] | None = None,
                    evaluation: Evaluation | None = None, baseline: str | None = None, seed: int | None = None,
                    name: str | None = None, **driver_options: Any) -> Coroutine[Any, Any, Evaluation]:
    """`template` over `rows` on every column (provider × prompt variant), each cell `repeat` times, each
    run a fresh conversation checked by `assertions`: every argument checked now, the matrix run by the
    coroutine returned, on ipyagent's loop (`aevaluate` awaits it; `evaluate(background=True)` does not).

    Args:
        providers: ``provider:model`` ids (built with `factory`) or `Agent` objects (their
            driver, system prompt and tools; never their conversation).
        template: the prompt, a Jinja2 template with the row as ``row`` (``{{ row.question }}``;
            ``{{ row }}`` for a string row) and `namespace`'s names; `raw`: sent as it is. None with `prompts`.
        rows: a pandas or polars DataFrame, a list of dicts or strings; `redact_context`: values pass the context rule.
        prompts, systems: prompt variants: name -> prompt template, name -> system prompt (`make_variants`).
        repeat: runs per cell (>= 1), each its own request and cache key.
        assertions: spec strings (``contains:TEXT``, ``regex:P``, ``equals:{{ row.answer }}``, ``json``,
            ``schema``, ``python:NAME``, ``judge:PROVIDER:MODEL``: `checks`), callables
            ``(result, row) -> bool | score``, or `Assertion`s; `rubric`: what judges grade against.
        check_timeout: seconds a check may take (a function or a judge: until the run's deadline, at least this).
        concurrency: runs in flight per provider (>= 1); budget: USD no run may take spending past.
        cache: serve runs whose exact request already ran from `store` (False: send all; each is stored);
            store: a `RunStore` or a path (False: none); default ``$IPYAGENT_RUN_STORE`` or ``.ipyagent/runs.sqlite``.
        system, tools, max_steps, **driver_options: for agents built from ids (as `Agent`).
        output_schema, output_strategy, images, settings, timeout: as `Agent.arun`, for every run
            (everything sent goes into the cache key; `timeout`: seconds a run may take, partial text kept).
        factory, judge_factory: build an agent (a judge's: no system prompt, no tools) from an id.
        on_start(result), on_result(result): called on ipyagent's loop as a run starts, as a run ends.
        evaluation: an `Evaluation` to fill (a caller keeps what finished if cancelled); baseline, seed, name set on it.
        batch: True, or `BatchRunner`'s options (poll_s, on_progress): through the providers' batch APIs (`batch`).

    Returns the coroutine, which gives the `Evaluation` (a provider's failure, a row not rendered: runs with an error),
    or raises `TemplateError` (no row rendered: nothing sent), `asyncio.CancelledError` (`evaluation` keeps the rest).

    Raises:
        ValueError: no providers, concurrency or repeat < 1, a negative budget, a bad assertion, variant or baseline.
        TypeError: rows of the wrong type.
    """
    _check_arguments(providers, concurrency, budget, repeat, check_timeout)
    rows, variants = normalize_rows(rows), make_variants(template, prompts, systems)
    schema = output_schema is not None
    checks = [parse_assertion(a, namespace=namespace, rubric=rubric, has_schema=schema) for a in assertions]
    keys = provider_keys([resolve_alias(e) if isinstance(e, str) else e.provider for e in providers])
    ev = _describe(evaluation or Evaluation(keys, rows), providers, keys, rows, checks, variants, repeat, budget)
    _analysis_options(ev, baseline, seed, name)
    make = factory or (lambda pid: Agent(pid, system=system, tools=tools, max_steps=max_steps, **driver_options))
    return _run_matrix(
        ev, list(providers), rows, store=store, cache=cache, variants=variants, repeat=repeat,
        check_timeout=check_timeout, assertions=checks, concurrency=concurrency, budget=budget, factory=make,
        judge_factory=judge_factory or (lambda pid: Agent(pid, **driver_options)),
        run_options=_run_options(output_schema, output_strategy, images, settings, timeout), namespace=namespace,
        raw=raw, redacting=redact_context, on_start=on_start, on_result=on_result, batch=batch)


async def aevaluate(providers: Sequence[Agent | str], template: str | None, rows: Any, **options: Any) -> Evaluation:
    """Run an evaluation and return its `Evaluation`; awaitable from any loop (a notebook cell's):
    the matrix runs on ipyagent's loop. Arguments and errors: `evaluation_run` (``TemplateError``:
    no row can be rendered; ``asyncio.CancelledError``: cancelled, `evaluation` keeps what finished)."""
    return await run_in_background(evaluation_run(providers, template, rows, **options))


def _show_batch(progress: Any) -> None:
    """The batch progress line on stderr, rewritten in place; a new line once no batch runs."""
    print(f"\r{str(progress):<{len(str(progress)) + 8}}", end="" if progress.in_progress else "\n", file=sys.stderr,
          flush=True)  # the padding rubs out the end of a longer line before


def _analysis_options(ev: Evaluation, baseline: str | None, seed: int | None, name: str | None) -> None:
    """The evaluation's baseline (checked: a column), seed and name (those given)."""
    if baseline is not None:
        try:
            ev.baseline = ev.column(baseline)
        except KeyError as exc:
            raise ValueError(f"baseline: {exc.args[0]}") from None
    if seed is not None:
        ev.seed = seed
    if name is not None:
        ev.name = name


def evaluate(providers: Sequence[Agent | str], template: str | None, rows: Any, *, background: bool = False,
             **options: Any) -> Evaluation:
    """Blocking `aevaluate` (works inside a running notebook loop too); same arguments (`evaluation_run`).

    An interrupt (Ctrl-C, the kernel's stop button) stops every run at once and returns
    the `Evaluation` of what finished, marked ``interrupted``, with a line on stderr.

    `background`: check the arguments, start the matrix on ipyagent's loop and return its
    `Evaluation` at once; it fills while other cells run (`Background`: ``ev.done``,
    ``ev.progress``, ``ev.wait()``, ``ev.cancel()``); an interrupt of another cell does not stop it.
    """
    ev = options.pop("evaluation", None) or Evaluation([], [])
    if options.get("batch") is True and not background:  # the progress line on stderr
        options["batch"] = {"on_progress": _show_batch}
    if background:
        return ev.run_in_background(evaluation_run(providers, template, rows, evaluation=ev, **options))
    try:
        return run_sync(aevaluate(providers, template, rows, evaluation=ev, **options))
    except KeyboardInterrupt:
        ev.interrupted = True
        print(
            f"ipyagent: evaluation interrupted: {len(ev.results)} of {ev.total} runs finished; "
            "the returned Evaluation holds them",
            file=sys.stderr,
        )
        left = leave_or_cancel(ev, ask=bool(sys.stdin is not None and sys.stdin.isatty()))
        if left:
            print(left, file=sys.stderr)
        return ev
