"""One cell of an evaluation's matrix: its run (a fresh conversation), the record queued for the
run store, its checks (judges included) under the run's deadline, and what is copied into its
`EvalResult` from a run or from the cache. `CellRuns` is the part of the matrix (`matrix._Run`)
that does this; the functions fill a cell."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ...core import DeltaMessage, Event, ProviderError, Usage
from ...memory import new_run_id
from ..agent import Agent, AgentResult
from .cache import json_output
from .checks import Assertion, CheckError, JudgeAssertion, Outcome, TextAssertion
from .results import EvalResult, _tokens
from .scheduler import Lane


class CellRuns:
    """A mixin of `matrix._Run`: one run of a cell, its record and its checks. Uses the run's
    `ev`, `assertions`, `check_timeout`, `concurrency`, `cache`, `store`, `writer`, `budget`,
    `claimed`, `owned`, `judge_factory`, `judge_lanes`, `on_result`, `checked_at_once` and its `_key`, `_fresh`."""

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
        after they start when that is later: a cell ends by then whatever its checks do. A check that
        gives no verdict (`CheckError`: its judge failed) fails, and makes the cell an error (``failed``,
        ``check``): the summary counts it with the errors, not against the answer."""
        if not cell.ok:
            self._unchecked(cell)
            return
        end = max(deadline, time.monotonic() + self.check_timeout)
        outcomes, errors = [], []
        for check in self.assertions:
            try:
                outcomes.append(await self._outcome(check, cell, row, end))
            except CheckError as exc:
                outcomes.append(Outcome(check.name, False, reason=str(exc), cost=exc.cost))
                errors.append(f"{check.name}: {exc}")
        _conclude(cell, outcomes)
        if errors:  # the answer is kept (its run stored as answered); a judge's failed request is not
            cell.status, cell.error_type, cell.error = "failed", "check", "; ".join(errors)

    def _unchecked(self, cell: EvalResult) -> None:
        cell.outcomes = [Outcome(a.name, False, reason="not checked: the run failed") for a in self.assertions]
        cell.passed = False

    def _unsent(self, cell: EvalResult, template_error: str | None, lane_error: BaseException | None) -> None:
        """A run that is never sent: its row could not be rendered, or its provider could not be built."""
        if template_error is not None:
            cell.status, cell.error_type, cell.error = "template_error", "template", template_error
        else:
            _fill(cell, None, lane_error, 0.0, None)
            self._unchecked(cell)
        self._finish(cell)

    def _serve(self, cell: EvalResult, hit: dict[str, Any], row: Any) -> None:
        """Serve a cell from the store's run `hit` (`cached_run`) and check it without a coroutine,
        when nothing in it can wait (`checked_at_once`; no span to open): a re-run of a matrix serves
        thousands of cells, seven coroutines a cell less."""
        _from_cache(cell, hit, self.run_options.get("output_schema"))
        if cell.ok:
            text = cell.text or ""
            _conclude(cell, [a.check_now(text, row) for a in self.assertions])  # type: ignore[attr-defined]
        else:
            self._unchecked(cell)
        self._finish(cell)

    def _finish(self, cell: EvalResult) -> None:
        self.ev.results.append(cell)
        self.ev.finished_s[cell.provider] = time.monotonic() - self.ev.started
        if self.on_result is not None:
            self.on_result(cell)


def _conclude(cell: EvalResult, outcomes: list[Outcome]) -> None:
    """A checked cell's verdict from its checks' `outcomes`."""
    cell.outcomes = list(outcomes)  # no spare slots (a list grown by appends has): a matrix keeps thousands
    judged = [o.cost for o in outcomes if o.cost is not None]
    cell.judge_cost = sum(judged) if judged else None
    cell.passed = all(o.passed for o in outcomes)


def checked_at_once(assertions: list[Assertion]) -> bool:
    """True when every one of `assertions` gives its verdict without waiting, through
    `TextAssertion.check_now` (contains, icontains, equals; not regex, not a subclass's own `check`)."""
    return all(isinstance(a, TextAssertion) and a.kind != "regex" and type(a).check is TextAssertion.check
               for a in assertions)


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
