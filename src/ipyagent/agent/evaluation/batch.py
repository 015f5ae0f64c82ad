"""Batch mode: a lane's runs sent through its provider's batch API (``evaluate(..., batch=True)``,
``%%compare ... --batch``), at the batch price, answered within the provider's window (a day).

Each run is one model turn, its request the body a live run sends (`drivers.BatchAPI.body`), its
custom id the run's cache key (`cache.prompt_key`), so a run store that holds the key's batch
(``batches`` table: `RunStore.add_batch`) lets a restarted kernel, or another process running the
same matrix, collect that batch instead of sending it again. The answers are read by the driver's
own decoder and committed, checked and shown as live runs are (`_Run._record`, `_Run._check`,
`_Run._finish`). A lane runs live instead, with a note, when its provider has no batch API here
(Ollama, a local server that does not serve one) or its runs are more than one turn (tools, an
output schema). While the batches run, `BatchProgress` says how far they are.

An interrupt leaves the batches running at the provider (`Evaluation.pending_batches`): the same
evaluation again on the same store collects them; `cancel_batches` cancels them.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ...core import ProviderError, Usage, format_usd, system_text
from ...drivers import BatchAnswer, BatchAPI, BatchState, batch_api
from ...memory import estimate_text
from ..loop_thread import run_sync
from ..options import RunOptions

if TYPE_CHECKING:  # the runner imports this module
    from .matrix import _Cell, _Lane, _Run

#: Seconds between two looks at a batch's state (the providers answer within hours; `poll_s` in tests).
POLL_S = 30.0
#: The status of a batch its provider no longer knows (a 404: deleted, or past its retention).
GONE = "unknown to the provider"
#: Output tokens assumed per run in the cost estimate, when `max_output_tokens` is not set.
ESTIMATED_OUTPUT_TOKENS = 256


@dataclass(slots=True)
class BatchProgress:
    """How far an evaluation's batches are (`Evaluation.batch_progress`), over every batched lane.

    Attributes:
        submitted: runs sent in a batch (this time or by an earlier process, then collected here).
        in_progress: runs whose batch has not ended.
        done, failed: runs answered, failed (errored, expired, cancelled) so far.
        estimate: USD the runs are expected to cost at the batch price (their real cost once answered).
        batches: the batch ids.
    """

    submitted: int = 0
    in_progress: int = 0
    done: int = 0
    failed: int = 0
    estimate: float = 0.0
    batches: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        """``batch: 200 submitted · 150 in progress · 45 done · 5 failed · ~$0.0123 at batch prices``."""
        return (f"batch: {self.submitted:,} submitted · {self.in_progress:,} in progress · {self.done:,} done · "
                f"{self.failed:,} failed · ~{format_usd(self.estimate)} at batch prices")


@dataclass(eq=False)
class _Batched:
    """One lane's batches: the API, its jobs by custom id, each batch's custom ids."""

    lane: "_Lane"
    api: BatchAPI
    jobs: dict[str, "_Cell"] = field(default_factory=dict)
    stacks: dict[str, Any] = field(default_factory=dict)  # custom id -> the prompt stack sent
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom id -> the request body
    batches: dict[str, list[str]] = field(default_factory=dict)  # batch id -> custom ids
    estimates: dict[str, float] = field(default_factory=dict)  # custom id -> USD held in the budget
    started: float = field(default_factory=time.monotonic)


def _stack(run: "_Run", job: "_Cell") -> Any:
    """The first request of the job's run (as `_Run._key` builds it, with the prompt itself)."""
    get = run.run_options.get
    options = RunOptions(system=job.variant.system, settings=get("settings"), output_schema=get("output_schema"),
                         output_strategy=get("output_strategy"))
    stack = job.lane.prototype.prompt_stack(job.result.prompt, options)  # type: ignore[union-attr]
    if get("images"):
        stack.messages[-1].content.extend(get("images"))
    return stack


async def _batch_api(run: "_Run", lane: "_Lane") -> BatchAPI | None:
    """The lane's batch API, or None with a note saying why its runs go live."""
    driver = lane.prototype.driver  # type: ignore[union-attr]
    api = batch_api(driver)
    why = None
    if api is None or not await api.available():
        why = f"{driver.provider} has no batch API at {driver.base_url}"
    elif run.run_options.get("output_schema") is not None or _multi_turn(run, lane):
        why = "a batch sends one model turn a run, and these runs may take more (tools, an output schema)"
    if why is None:
        return api
    run.ev.notes.append(f"batch: {lane.name} runs live: {why}")
    return None


def _multi_turn(run: "_Run", lane: "_Lane") -> bool:
    """Whether the lane's runs may take more than one model turn: tools (native, ReAct or provider-side)."""
    stack = _stack(run, lane.jobs[0])
    return bool(stack.tools or stack.builtin_tools or lane.prototype.uses_react)  # type: ignore[union-attr]


def _estimate(run: "_Run", batched: _Batched, key: str) -> float:
    """USD the run of `key` may cost at the batch price: its prompt's tokens in, `max_output_tokens`
    (else `ESTIMATED_OUTPUT_TOKENS`) out."""
    prototype = batched.lane.prototype
    settings = prototype.settings.merged(run.run_options.get("settings"))  # type: ignore[union-attr]
    tokens_in = estimate_text(system_text(prototype.system) + batched.jobs[key].result.prompt)  # type: ignore
    usage = Usage(input_tokens=tokens_in, output_tokens=settings.max_output_tokens or ESTIMATED_OUTPUT_TOKENS)
    try:
        cost = prototype.driver.price(usage, batch=True)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - an unknown price is not an error
        cost = None
    return float(cost or 0.0)


class BatchRunner:
    """The batched lanes of one evaluation (`_Run.run` hands them over before the live scheduler)."""

    def __init__(self, run: "_Run", *, poll_s: float = POLL_S,
                 on_progress: Callable[[BatchProgress], Any] | None = None) -> None:
        self.run, self.poll_s, self.on_progress = run, poll_s, on_progress
        self.progress = BatchProgress()
        self.lanes: list[_Batched] = []

    async def take(self, lanes: list["_Lane"]) -> None:
        """Take the queued runs of each lane that can go in a batch (the others stay for the live
        scheduler), and submit those no stored batch holds."""
        for lane in lanes:
            if lane.prototype is None or not lane.jobs:
                continue
            api = await _batch_api(self.run, lane)
            if api is None:
                continue
            batched = _Batched(lane, api)
            live = [job for job in lane.jobs if not self._add(batched, job)]
            lane.jobs.clear()
            lane.jobs.extend(live)
            if batched.jobs:
                self.lanes.append(batched)
                await self._submit(batched)
        if self.lanes:
            self.run.ev.batch_progress = self.progress

    def _add(self, batched: _Batched, job: "_Cell") -> bool:
        """Put `job` in the lane's batch (False: its request cannot be built: it runs live and fails there)."""
        key = job.key or self.run._key(job.lane.prototype, job.result.prompt, job.variant,  # type: ignore[arg-type]
                                        job.result.repeat)
        if key is None:
            return False
        try:
            stack = _stack(self.run, job)
            batched.bodies[key] = batched.api.body(stack)
        except Exception:  # noqa: BLE001 - refused before sending: the live run reports it
            return False
        job.key, batched.jobs[key], batched.stacks[key] = key, job, stack
        return True

    async def _submit(self, batched: _Batched) -> None:
        """Collect the lane's runs a stored batch holds; send the rest in batches within the API's limits,
        noting each batch in the store; runs past the budget are skipped."""
        run, store = self.run, self.run.store
        stored = store.batched(list(batched.jobs)) if store is not None else {}
        for key, batch_id in stored.items():
            batched.batches.setdefault(batch_id, []).append(key)
        fresh, over = [], []
        for key in batched.jobs:
            if key not in stored:
                batched.estimates[key] = _estimate(run, batched, key)
                (fresh if run.budget.hold(batched.estimates[key]) else over).append(key)
        for key in over:
            run.skip(batched.jobs.pop(key), "budget")
        self.progress.estimate += sum(batched.estimates.get(key) or _estimate(run, batched, key)
                                      for key in batched.jobs)
        lines = [(key, batched.bodies[key]) for key in fresh]
        for chunk in batched.api.chunks(lines):
            ids = [line_id(line) for line in chunk]
            batch_id = await batched.api.submit(chunk)
            batched.batches[batch_id] = ids
            run.ev.pending_batches = [*run.ev.pending_batches, (batched.api, batch_id)]  # an interrupt names it
            if store is not None:
                store.add_batch(batch_id, batched.lane.name, ids)
        self.progress.submitted += len(batched.jobs)
        self.progress.in_progress += len(batched.jobs)
        self.progress.batches.extend(batched.batches)

    async def collect(self) -> None:
        """Poll every batch until it ends, then fill, check and commit its runs (`_Run` path)."""
        pending = [(b, batch_id) for b in self.lanes for batch_id in b.batches]
        self.run.ev.pending_batches = [(b.api, batch_id) for b, batch_id in pending]
        self._report()
        while pending:
            still = []
            for batched, batch_id in pending:
                state = await _poll(batched.api, batch_id)
                if state.ended:
                    await self._finish(batched, state)
                else:
                    still.append((batched, batch_id))
            pending = still
            self.run.ev.pending_batches = [(b.api, batch_id) for b, batch_id in pending]
            self._report()
            if pending:
                await asyncio.sleep(self.poll_s)

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)

    async def _finish(self, batched: _Batched, state: BatchState) -> None:
        """An ended batch: each of its runs filled from its answer (or failed without one), checked,
        recorded; the batch dropped from the store once they are committed."""
        ids = batched.batches[state.id]
        answers = {a.custom_id: a for a in await batched.api.answers(state, ids)} if state.status != GONE else {}
        waits = []
        for key in ids:
            job = batched.jobs.get(key)
            if job is None:
                continue
            answer = answers.get(key) or BatchAnswer(
                key, error=f"the batch ended ({state.status}) without an answer for this request",
                error_type="timeout" if "expire" in state.status.lower() else "provider_error")
            waits.append(await self._cell(batched, job, answer, state))
        self.run.writer.flush()
        for done in waits:
            if done is not None:
                await done
        if self.run.store is not None and not self.run.writer.error:
            self.run.store.drop_batch(state.id)

    async def _cell(self, batched: _Batched, job: "_Cell", answer: BatchAnswer, state: BatchState) -> Any:
        """Fill `job`'s cell from `answer`, record it, check it and show it; the commit's future."""
        run, cell, lane = self.run, job.result, batched.lane
        stack = batched.stacks[job.key]  # type: ignore[index]
        seconds = time.monotonic() - batched.started
        cell.total_s, cell.ttft_s, result = seconds, None, None
        if answer.body is not None:
            try:
                decoded = batched.api.decode(answer.body)
            except ProviderError as exc:
                answer = BatchAnswer(answer.custom_id, error=exc.message, error_type=exc.type)
            else:
                cell.text, cell.output, cell.tool_calls = decoded.message.text, None, ()
                cell.input_tokens, cell.output_tokens = decoded.usage.input_tokens, decoded.usage.output_tokens
                cell.cost = float(decoded.cost) if decoded.cost is not None else None
                result = SimpleNamespace(messages=[*stack.messages[-1:], decoded.message])
        if answer.error is not None:
            cell.status, cell.error_type, cell.error = "failed", answer.error_type, answer.error
        self.progress.in_progress -= 1
        if cell.ok:
            self.progress.done += 1
        else:
            self.progress.failed += 1
        held = batched.estimates.pop(job.key, None)  # type: ignore[arg-type]
        self.progress.estimate += (cell.cost or 0.0) - (held if held is not None else _estimate(
            run, batched, job.key))  # type: ignore[arg-type]
        run.budget.release(held or 0.0, cell.cost if cell.ok else 0.0)
        committed = run._record(
            job.key, lane.prototype.provider, cell.prompt, cell, result,  # type: ignore[union-attr]
            {"evaluation": run.ev.id, "row": cell.row, "provider_key": cell.provider, "variant": cell.variant,
             "repeat": cell.repeat, "batch": state.id},
            text=cell.text, output=None, ok=cell.ok, cost=cell.cost, seconds=seconds, ttft=None,
            error={"type": cell.error_type, "message": cell.error} if not cell.ok else None,
            usage=decoded.usage.model_dump() if result is not None else None,
        )
        await run._check(cell, job.row, time.monotonic() + run.check_timeout)
        run._finish(cell)
        return committed


async def _poll(api: BatchAPI, batch_id: str) -> BatchState:
    """The batch as its provider describes it now; ended, `GONE`, when the provider no longer knows it
    (its runs then fail, and the store forgets it: the next run sends them again).

    Raises:
        ProviderError: the batch API failed otherwise (a network error, a 5xx, a key refused).
    """
    try:
        return await api.poll(batch_id)
    except ProviderError as exc:
        if exc.type != "not_found":
            raise
        return BatchState(batch_id, GONE, True)


def line_id(line: dict[str, Any]) -> str:
    """The custom id of a batch line, whatever the API's shape (``custom_id``, ``metadata.key``)."""
    return str(line.get("custom_id") or (line.get("metadata") or {}).get("key"))


def leave_or_cancel(ev: Any, ask: bool) -> str:
    """After an interrupt: cancel the evaluation's batches still running when `ask` and the person
    answers yes, else leave them; the line saying what happened and how to resume."""
    pending = list(getattr(ev, "pending_batches", None) or ())
    if not pending:
        return ""
    ids = ", ".join(batch_id for _, batch_id in pending)
    if ask:
        try:
            answer = input(f"ipyagent: cancel the batch(es) {ids} at the provider? [y/N] ")
        except (EOFError, KeyboardInterrupt, RuntimeError):
            answer = ""
        if answer.strip().lower() in ("y", "yes"):
            cancel_batches(ev)
            return f"ipyagent: batch(es) {ids} cancelled; answered runs were not collected"
    return (f"ipyagent: batch(es) {ids} left running at the provider; run the same evaluation again "
            "with batch=True on the same run store to collect them (ev.cancel_batches() cancels them)")


def cancel_batches(ev: Any) -> list[str]:
    """Cancel the evaluation's batches still running at their providers; the ids cancelled."""
    done = []
    for api, batch_id in list(getattr(ev, "pending_batches", None) or ()):
        try:
            run_sync(api.cancel(batch_id))
        except ProviderError as exc:
            print(f"ipyagent: batch {batch_id} not cancelled: {exc}", file=sys.stderr)
            continue
        done.append(batch_id)
    ev.pending_batches = [p for p in ev.pending_batches if p[1] not in done]
    return done
