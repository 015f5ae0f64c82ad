"""Run one prompt against several agents at once and measure each run.

Provider-neutral: an entry is an `Agent` or a ``provider:model`` id turned into
one by a factory. All agents run concurrently on ipyagent's background loop,
so a comparison takes as long as its slowest provider, not the sum. The runs of
one provider (``runs=N``) follow each other, each from the same starting
conversation. A provider that fails (bad key, 429, timeout, even a
configuration error when its agent is built) gets an error figure; the others
go on.

    >>> cmp = ipyagent.compare(["openai:gpt-6-luna", "anthropic:claude-sonnet-5-5"], "Say hi", runs=3)
    >>> cmp.summary()            # one dict per provider: median, min, max of each figure
    >>> cmp.to_dataframe()       # one row per run (needs pandas)
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..core import Event, ModelStarted, ProviderError, Timings, Transcript, TranscriptError, plural
from .agent import Agent, AgentResult
from .inputs.images import image_blocks
from .loop_thread import run_in_background, run_sync
from .options import RunOptions
from .transcript import RunLog, transcript_of

#: (field of `RunFigures`, column title) in the order a table shows them.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("provider", "provider:model"),
    ("ttft_s", "first token (s)"),
    ("total_s", "total (s)"),
    ("input_tokens", "in tokens"),
    ("output_tokens", "out tokens"),
    ("tokens_per_s", "out tokens/s"),
    ("cost", "cost"),
    ("stop_reason", "stop"),
    ("error", "error"),
)
#: The columns summarized as median / min / max.
NUMERIC = ("ttft_s", "total_s", "input_tokens", "output_tokens", "tokens_per_s", "cost")


@dataclass
class RunFigures:
    """What one run of one provider measured.

    Attributes:
        provider: the agent's ``provider:model`` (or the id it was asked for).
        index: the provider's position in the comparison.
        run: 0-based run number of this provider.
        ttft_s: seconds from the first request to its first streamed delta (text, reasoning
            or tool call), as the driver measured it; None when nothing streamed.
        total_s: seconds the run took (a one-turn run: the driver's own figure; with tool
            turns: from the first request to the end).
        input_tokens, output_tokens: billed by the provider, summed over the run's model turns.
        tokens_per_s: output tokens per second of streaming, i.e.
            ``output_tokens / (total_s - ttft_s)``; None when that is undefined.
        cost: the run's cost (USD) when it is known, else None.
        stop_reason: why the model stopped (``end_turn``, ``max_tokens``, ...); None on failure.
        error_type: `ProviderError.type` (``authentication``, ``rate_limit``, ...), or the
            exception's class name for any other failure; None when the run succeeded.
        error: the error message (safe to show: drivers redact keys), None on success.
        result: the `AgentResult`, None when the agent could not even be built.
        transcript: the run as a `core.transcript.Transcript`: the one record of its figures
            (the times, tokens and cost above are read from it, so a pane's footer and the
            table agree), and what a notebook saves.
    """

    provider: str
    index: int
    run: int
    ttft_s: float | None = None
    total_s: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_per_s: float | None = None
    cost: float | None = None
    stop_reason: str | None = None
    error_type: str | None = None
    error: str | None = None
    result: AgentResult | None = field(default=None, repr=False)
    transcript: Transcript | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def as_row(self, prompt: str | None = None) -> dict[str, Any]:
        """The figures as a flat dict (no result object), for tables and data frames: ``provider``,
        ``run``, ``prompt``, ``output`` (the answer's text; None without a result), the figures,
        ``error_type``, ``error``."""
        return {"provider": self.provider, "run": self.run, "prompt": prompt,
                "output": self.result.text if self.result is not None else None,
                **{k: getattr(self, k) for k, _ in COLUMNS[1:-1]}, "error_type": self.error_type, "error": self.error}


class Stat(NamedTuple):
    """Median, minimum and maximum of one figure over a provider's successful runs."""

    median: float
    min: float
    max: float


@dataclass
class Comparison:
    """The outcome of `compare`: every run's figures, in the order the runs finished.

    Attributes:
        providers: the entries' ids, in the order given.
        runs: runs per provider.
        figures: one `RunFigures` per run.
        prompt: the prompt sent to every provider.
        wall_s: seconds the whole comparison took (about the slowest provider's time).
        interrupted: True when it was stopped (a kernel interrupt): `figures` holds the runs
            that had finished and, marked ``cancelled``, the ones stopped midway.
    """

    providers: list[str]
    runs: int
    figures: list[RunFigures] = field(default_factory=list)
    wall_s: float = 0.0
    prompt: str | None = None
    interrupted: bool = False

    @property
    def results(self) -> dict[str, list[AgentResult | None]]:
        """Each provider's results, in run order (None: its agent could not be built).
        A provider named twice is keyed ``id #2``."""
        out: dict[str, list[AgentResult | None]] = {}
        for index, key in enumerate(provider_keys(self.providers)):
            runs = sorted((f for f in self.figures if f.index == index), key=lambda f: f.run)
            out[key] = [f.result for f in runs]
        return out

    def __getitem__(self, provider: str) -> list[AgentResult | None]:
        return self.results[provider]

    def summary(self) -> list[dict[str, Any]]:
        """One dict per provider: ``provider``, ``runs`` (finished), ``ok`` (succeeded),
        a `Stat` (or None) for each numeric figure over the successful runs,
        ``stop_reason`` (the distinct values, comma-separated), ``errors`` (error types
        of the failed runs, in run order) and ``error`` (the last failure's message)."""
        return summarize(self.providers, self.figures)

    def to_dataframe(self) -> Any:
        """One row per run (`RunFigures.as_row`, with the prompt and the answer's text).

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        rows = sorted((f for f in self.figures), key=lambda f: (f.index, f.run))
        return dataframe([f.as_row(self.prompt) for f in rows])

    def __repr__(self) -> str:
        failed = sum(not f.ok for f in self.figures)
        stopped = ", interrupted" if self.interrupted else ""
        return (f"<Comparison {plural(len(self.providers), 'provider')} x {plural(self.runs, 'run')}: "
                f"{len(self.figures) - failed} ok, {failed} failed, wall {self.wall_s:.2f} s{stopped}>")


def dataframe(records: list[dict[str, Any]]) -> Any:
    """`records` as a pandas DataFrame.

    Raises:
        ImportError: pandas is not installed (``pip install pandas``).
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe() needs pandas: pip install pandas") from None
    return pd.DataFrame(records)


def provider_keys(providers: Sequence[str]) -> list[str]:
    """Each provider's key: its id, ``id #2`` when named again."""
    seen: dict[str, int] = {}
    keys = []
    for p in providers:
        seen[p] = seen.get(p, 0) + 1
        keys.append(p if seen[p] == 1 else f"{p} #{seen[p]}")
    return keys


def summarize(providers: Sequence[str], figures: Sequence[RunFigures]) -> list[dict[str, Any]]:
    """`Comparison.summary` over any list of figures (a table that fills in as runs finish)."""
    rows = []
    for index, provider in enumerate(providers):
        mine = sorted((f for f in figures if f.index == index), key=lambda f: f.run)
        ok = [f for f in mine if f.ok]
        row: dict[str, Any] = {"provider": mine[-1].provider if mine else provider, "runs": len(mine), "ok": len(ok)}
        for name in NUMERIC:
            values = [getattr(f, name) for f in ok if getattr(f, name) is not None]
            row[name] = Stat(statistics.median(values), min(values), max(values)) if values else None
        row["stop_reason"] = ", ".join(dict.fromkeys(f.stop_reason for f in ok if f.stop_reason))
        failed = [f for f in mine if not f.ok]
        row["errors"] = [f.error_type for f in failed]
        row["error"] = failed[-1].error if failed else None
        rows.append(row)
    return rows


def _figures(provider: str, index: int, run: int, elapsed: float, log: RunLog, prompt: str,
             result: AgentResult | None, exc: BaseException | None) -> RunFigures:
    """One run's figures, read from its transcript (built here, once, from the result and what
    its events said, `log`: the same record a pane draws), `elapsed` seconds from its first request."""
    fig = RunFigures(provider, index, run, result=result)
    if result is not None:
        fig.provider = result.provider
        transcript = transcript_of(result, log=log, prompt=prompt, elapsed_s=elapsed)
        if result.error is not None:
            fig.error_type, fig.error = result.error.type, result.error.message
        elif result.interrupted:
            fig.error_type, fig.error = "cancelled", "interrupted"
    if exc is not None:
        fig.error_type = exc.type if isinstance(exc, ProviderError) else type(exc).__name__
        fig.error = str(exc) or type(exc).__name__
    if result is None or exc is not None:
        transcript = Transcript(provider=fig.provider, status="failed", timings=Timings(total_s=round(elapsed, 4)),
                                error=TranscriptError(type=str(fig.error_type or "error"),
                                                      message=fig.error or "the run failed"))
    fig.transcript = transcript
    fig.ttft_s, fig.total_s = transcript.timings.first_token_s, transcript.timings.total_s
    fig.input_tokens, fig.output_tokens = transcript.usage.input_tokens, transcript.usage.output_tokens
    fig.cost = transcript.cost.total_usd if transcript.cost is not None else None
    fig.stop_reason = transcript.stop_reason if result is not None and exc is None else None
    if fig.ok and fig.ttft_s is not None and fig.total_s is not None and fig.total_s > fig.ttft_s and fig.output_tokens:
        fig.tokens_per_s = fig.output_tokens / (fig.total_s - fig.ttft_s)
    return fig


async def _compare(
    entries: Sequence[Agent | str],
    prompt: str,
    runs: int,
    factory: Callable[[str], Agent],
    on_start: Callable[[int, int], Any] | None,
    on_event: Callable[[int, int, Event], Any] | None,
    on_finish: Callable[[RunFigures], Any] | None,
    on_stop: Callable[[Comparison], Any] | None,
    run_options: RunOptions,
) -> Comparison:
    ids = [e if isinstance(e, str) else e.provider for e in entries]
    comparison = Comparison(ids, runs, prompt=prompt)
    started = time.monotonic()

    def record(fig: RunFigures) -> None:
        comparison.figures.append(fig)
        if on_finish is not None:
            on_finish(fig)

    async def one_provider(index: int, entry: Agent | str) -> None:
        try:
            agent = factory(entry) if isinstance(entry, str) else entry
        except Exception as exc:  # a missing key, an unknown provider: this provider only
            for run in range(runs):
                if on_start is not None:
                    on_start(index, run)
                record(_figures(ids[index], index, run, 0.0, [], prompt, None, exc))
            return
        options = run_options if run_options.history is not None else replace(run_options, history=list(agent.messages))
        for run in range(runs):
            if on_start is not None:
                on_start(index, run)
            record(await _one_run(agent, index, run, prompt, options, on_event, record))

    try:
        await asyncio.gather(*(one_provider(i, e) for i, e in enumerate(entries)))
    except asyncio.CancelledError:
        comparison.interrupted, comparison.wall_s = True, time.monotonic() - started
        if on_stop is not None:
            on_stop(comparison)
        raise
    comparison.wall_s = time.monotonic() - started
    return comparison


async def _one_run(
    agent: Agent,
    index: int,
    run: int,
    prompt: str,
    options: RunOptions,
    on_event: Callable[[int, int, Event], Any] | None,
    record: Callable[[RunFigures], Any],
) -> RunFigures:
    """One run of one provider, measured. A stopped run is recorded as it stood (marked
    interrupted) before the CancelledError goes on; any other failure is in the figures."""
    began = [time.monotonic()]  # then the first request's time (as the %%agent footer counts)
    log = RunLog()  # what the run's transcript reads from its events (no delta kept)

    def seen(event: Event) -> None:
        if isinstance(event, ModelStarted) and not log.turns:
            began[0] = time.monotonic()
        log.feed(event)
        if on_event is not None:
            on_event(index, run, event)

    result, error = None, None
    results = getattr(agent, "results", [])  # Agent keeps a stopped run's result there
    before = len(results)
    try:
        result = await agent.arun(prompt, options, on_event=seen)
    except asyncio.CancelledError:  # stopped: the run as it stood is kept, marked interrupted
        stopped = results[-1] if len(results) > before else None
        record(
            _figures(
                agent.provider,
                index,
                run,
                time.monotonic() - began[0],
                log,
                prompt,
                stopped,
                None if stopped is not None else ProviderError("cancelled", "interrupted"),
            )
        )
        raise
    except Exception as exc:  # e.g. a capability check failing before sending
        error = exc
    return _figures(agent.provider, index, run, time.monotonic() - began[0], log, prompt, result, error)


async def acompare(
    entries: Sequence[Agent | str],
    prompt: str,
    *,
    runs: int = 1,
    factory: Callable[[str], Agent] | None = None,
    on_start: Callable[[int, int], Any] | None = None,
    on_event: Callable[[int, int, Event], Any] | None = None,
    on_finish: Callable[[RunFigures], Any] | None = None,
    on_stop: Callable[[Comparison], Any] | None = None,
    options: RunOptions | None = None,
    output_schema: Any = None,
    output_strategy: str | None = None,
    images: Any = None,
    settings: Any = None,
    timeout: float | None = None,
    **agent_options: Any,
) -> Comparison:
    """Send `prompt` to every entry concurrently, `runs` times each, and measure each run.

    Args:
        entries: `Agent` objects, or ``provider:model`` ids built with `factory`.
        prompt: the user message, the same for all.
        runs: runs per provider (>= 1), one after the other, each from the agent's
            conversation as it was before (given as the run's `history`: the
            conversation is left unchanged).
        factory: builds an agent from an id (default: ``Agent(id, **agent_options)``,
            e.g. ``system=``, ``tools=``, ``max_steps=``). A factory error fails that
            provider only.
        on_start(index, run), on_event(index, run, event), on_finish(figures): called on
            ipyagent's background loop when a run starts, for each of its events, and
            when it ends (``index``: the entry's position).
        on_stop(comparison): called when the comparison is cancelled (a kernel interrupt),
            before `asyncio.CancelledError` goes on, with what it had: the finished runs and
            the stopped ones (``cancelled``, their partial text kept), ``interrupted`` True.
        options: the `RunOptions` of every run (its `history` is each agent's conversation).
        output_schema, output_strategy, images, settings: as for `Agent.arun`, the same for
            every run (`ModelSettings`: each provider gets them under its own wire names).
        timeout: each run's deadline, seconds (as for `Agent.arun`): a provider past it ends
            as ``timeout`` with its text so far while the others go on.

    Returns:
        `Comparison`. Failures never raise; they are in the figures.

    Raises:
        ValueError: no entries, or `runs` < 1.
        asyncio.CancelledError: the caller was cancelled (every run is cancelled).
    """
    if not entries:
        raise ValueError("compare needs at least one provider")
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    make = factory or (lambda provider: Agent(provider, **agent_options))
    blocks = image_blocks(images) if images is not None else None
    options = (options or RunOptions()).merged(
        output_schema=output_schema, output_strategy=output_strategy, images=blocks, settings=settings, timeout=timeout
    )
    return await run_in_background(
        _compare(list(entries), prompt, runs, make, on_start, on_event, on_finish, on_stop, options)
    )


def compare(entries: Sequence[Agent | str], prompt: str, **options: Any) -> Comparison:
    """Blocking `acompare` (works inside a running notebook loop too); same arguments."""
    return run_sync(acompare(entries, prompt, **options))
