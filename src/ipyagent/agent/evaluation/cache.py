"""The evaluation cache: each run keyed by its exact request, kept in the run store.

The key is a SHA-256 of the request the driver would send first (provider,
model, base URL, path and JSON body: messages, tools, output schema, settings),
plus what shapes the rest of the run (``max_steps``, the ReAct mode). Within an
evaluation only the prompt changes from cell to cell, so the request is built
once per provider around `PLACEHOLDER` (`request_key`), and each cell's key
hashes that digest with its prompt (`prompt_key`): as exact, and a cached
re-run of a thousand rows does not build a thousand requests. A run
that ended ``ok`` is a row of the store's ``runs`` table with that key, its
answer text and structured output in its metadata, so serving it needs one
indexed read and no request. The store is a file: the cache outlives the kernel.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from ...core import PromptStack
from ...drivers import with_rule_instruction
from ...memory import RunStore, message_json
from ..options import RunOptions

if TYPE_CHECKING:  # the matrix imports this module
    from ..agent import Agent
    from .matrix import _Cell
    from .plan import Variant

#: Seconds a finished run may wait to be committed to the run store, at most (under load).
COMMIT_S = 0.25
#: The user prompt of the request a provider's digest is built from.
PLACEHOLDER = "\x00ipyagent:prompt\x00"


def request_key(driver: Any, stack: PromptStack, extra: dict[str, Any]) -> str | None:
    """The cache key of a run whose first request is `stack` on `driver`; None when the
    driver refuses the request before sending (that run fails, and is not cached)."""
    try:
        driver.check_capabilities(stack)
        if driver.output_strategy(stack) == "rule":
            stack = with_rule_instruction(stack)
        path, body = driver.build_request(stack)
    except Exception:  # noqa: BLE001 - the run itself reports it
        return None
    doc = {"v": 1, "provider": driver.provider, "model": driver.model, "base_url": driver.base_url,
           "path": path, "body": body, **extra}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str, separators=(",", ":")).encode()).hexdigest()


def prompt_key(digest: str | None, prompt: str, repeat: int = 0) -> str | None:
    """The cache key of the `repeat`-th run (0-based) of the request `digest` stands for, with
    `prompt` as its user prompt (None when there is no digest: the driver refuses the request).
    Each repeat has its own key; the first's is the key of a run without repeats."""
    if digest is None:
        return None
    tail = f"\x00{repeat}" if repeat else ""
    return hashlib.sha256(f"{digest}\x00{prompt}{tail}".encode()).hexdigest()


def json_output(output: Any) -> Any:
    """A structured output as JSON data (a pydantic instance dumped)."""
    return output.model_dump(mode="json") if hasattr(output, "model_dump") else output


class CacheWriter:
    """Commits finished runs to `store` by group commits on the event loop: every run that ends
    in one turn of the loop goes into one transaction, written by a callback scheduled for the
    loop's next turn (no thread: a writer thread would take the GIL from the loop at each run).
    So a run is in the store a transaction after it ended (milliseconds; `COMMIT_S` at most
    under load), and the caller may wait for it (`add`'s future): an evaluation's worker awaits its
    last run's commit before its next run counts as finished, and that commit goes before the next
    run's claim (both queued for the same turn), so a killed kernel loses no more finished runs
    than it had in flight.

    Never raises: a store that fails stops the writing and keeps the reason in `error`.
    """

    def __init__(self, store: RunStore | None, *, session: str | None = None) -> None:
        self.store, self.session = store, session
        self.pending: list[tuple[float, dict[str, Any], asyncio.Future[None] | None]] = []  # (queued, record, done)
        self.error: str | None = None
        self.written = 0
        self.commits = 0
        self.max_lag_s = 0.0  # the longest a run waited from `add` to its commit
        self._scheduled = False

    def add(self, *, key: str | None, provider: str, prompt: str, status: str, result: Any, figures: dict[str, Any],
            metadata: dict[str, Any], run_id: str | None = None,
            claim: str | None = None) -> asyncio.Future[None] | None:
        """Queue one run for the next commit: `result` an `AgentResult` (None: the run never
        started); `figures` duration_s, usage, cost, error; `metadata` what the cache serves back
        (text, output, ...); `run_id` its id (None: one is made); `claim` the cache key this process claimed
        for it (`RunStore.claim`), released with the commit. On an event loop, returns a
        future done once the run is committed (or the store failed), the commit scheduled for the
        loop's next turn; None without a store (or a loop: then `flush` commits)."""
        if self.store is None or self.error is not None:
            return None
        name, _, model = provider.partition(":")
        nodes: list[dict[str, Any]] = []
        if result is not None:
            for message in result.messages:
                nodes.append({"kind": "message", "role": message.role, "data": message_json(message),
                              "provider": name if message.role == "assistant" else None})
        record = {"run": {"id": run_id, "thread": "evaluation", "session": self.session, "provider": name,
                          "model": model,
                          "status": status, "prompt": prompt, "cache_key": key if status == "ok" else None,
                          "metadata": metadata, **figures},
                  "nodes": nodes, "claim": claim}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.pending.append((time.monotonic(), record, None))
            return None
        done = loop.create_future()
        self.pending.append((time.monotonic(), record, done))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.flush)
        return done

    def flush(self) -> None:
        """Commit every queued run now, in one transaction."""
        self._scheduled = False
        batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            if self.error is None and self.store is not None:
                self.store.add_finished_runs([record for _, record, _ in batch])
                self.written += len(batch)
                self.commits += 1
                self.max_lag_s = max(self.max_lag_s, time.monotonic() - batch[0][0])
        except Exception as exc:  # noqa: BLE001 - the store must never break the evaluation
            self.error = f"the run store stopped recording the evaluation: {type(exc).__name__}: {exc}"
        finally:
            for _, _, done in batch:
                if done is not None and not done.done():
                    done.set_result(None)

    def close(self) -> None:
        """Commit what is queued (the end of the evaluation, or an interrupt)."""
        self.flush()


class ClaimQueue:
    """Claims of cache keys in `store` taken in one transaction per turn of the event loop (the runs
    an evaluation's lanes start together), as `CacheWriter` commits the runs that end together: one
    commit for them all, not one per run. `claim` returns when the claim is decided."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.pending: list[tuple[str, float, asyncio.Future[tuple[bool, dict[str, Any] | None]]]] = []
        self.transactions = 0

    def claim(self, key: str, lease_s: float) -> asyncio.Future[tuple[bool, dict[str, Any] | None]]:
        """A future of (True when `key` is now this process's for `lease_s` seconds, the run stored
        under it meanwhile or None); the claim is taken with the others of this turn of the loop
        (`RunStore.claim_many`). The store's exception, if it fails."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        if not self.pending:
            loop.call_soon(self.flush)
        self.pending.append((key, lease_s, done))
        return done

    def flush(self) -> None:
        """Take every queued claim now, in one transaction; then read the runs stored under those
        that are ours (another process may have stored one since the matrix was queued)."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            taken = self.store.claim_many([(key, lease) for key, lease, _ in batch])
            self.transactions += 1
            hits = self.store.cached_runs(sorted(taken)) if taken else {}
        except Exception:  # noqa: BLE001 - one at a time, as without the queue (a lost connection)
            for key, lease, done in batch:
                self._one(key, lease, done)
            return
        for key, _, done in batch:
            if not done.done():
                done.set_result((key in taken, hits.get(key) if key in taken else None))

    def _one(self, key: str, lease_s: float, done: asyncio.Future[tuple[bool, dict[str, Any] | None]]) -> None:
        try:
            ours = self.store.claim(key, lease_s)
            result = (ours, self.store.cached_runs([key]).get(key) if ours else None)
        except Exception as exc:  # noqa: BLE001 - the claimer decides what a failing store means
            if not done.done():
                done.set_exception(exc)
            return
        if not done.done():
            done.set_result(result)


#: Seconds between two looks at the store while another process sends a run's request (`CacheClaims._wait_for`).
CLAIM_POLL_S = 0.1
#: Seconds a claim outlives its run's deadline (a process that died holding it: then another sends it).
CLAIM_MARGIN_S = 60.0


class CacheClaims:
    """A mixin of `matrix._Run`: each cell's cache key, and the claims by which processes sharing a
    store send each request once. Uses the run's `run_options`, `cache`, `store`, `claims`, `digests`,
    `twins`, `claimed` and `uncommitted`."""

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

    # -- claims: processes sharing a store send each request once ----------------------------

    async def _claim(self, job: _Cell) -> bool:
        """Claim the cell's request in the store for this process (`RunStore.claim_many`, with the other
        runs starting in this turn of the loop: `ClaimQueue`); True when it is ours (or cannot be claimed:
        no key, no cache, a store that fails), then served from the store when another process has stored
        its run meanwhile; False while another process sends it."""
        if job.hit is not None or job.key is None or not self.cache or self.claims is None:
            return True
        deadline = self.run_options.get("timeout") or (job.lane.prototype.timeout if job.lane.prototype else None)
        try:
            ours, hit = await self.claims.claim(job.key, (deadline or 600.0) + CLAIM_MARGIN_S)
        except Exception:  # noqa: BLE001 - a store that fails: the run is sent (the writer reports it)
            return True
        if not ours:
            return False
        self.claimed.add(job.key)
        job.hit = hit  # stored since the matrix was queued
        return True

    async def _after_last_commit(self) -> None:
        """Before a run's request: the worker's last run committed. A claim's turn comes after that commit's
        (both queued in the same turn, the commit first); with the cache off no claim is taken (`_claim`
        returns at once), so the commit is awaited here: a killed kernel has sent at most one finished run a
        worker that is not in the store."""
        if not self.cache and self.store is not None:
            last = self.uncommitted.get(asyncio.current_task())
            if last is not None and not last.done():
                await last

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
            if job.hit is not None or await self._claim(job):
                return

    def _release(self) -> None:
        """Give up the claims left (runs not committed: an interrupt, a store that failed)."""
        if self.claimed and self.store is not None:
            try:
                self.store.release(sorted(self.claimed))
            except Exception:  # noqa: BLE001 - they run out with their lease
                pass
            self.claimed.clear()
