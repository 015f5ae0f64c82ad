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
import gc
import math
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...core import coerce_settings
from ...drivers import resolve_alias
from ...memory import RunStore, StoreError, default_store_path, store_location
from ..agent import Agent
from ..compare import provider_keys
from ..inputs.images import image_blocks
from ..loop_thread import run_in_background, run_sync
from ..telemetry.trace_spans import evaluation_span
from .batch import leave_or_cancel
from .cache import CLAIM_MARGIN_S, CLAIM_POLL_S  # noqa: F401 - the names this module had
from .checks import CHECK_TIMEOUT_S, Assertion, build_judges, parse_assertion
from .matrix import DEFAULT_OUTPUT_TOKENS, _Run  # noqa: F401 - the names this module had
from .plan import Variant
from .results import EvalResult, Evaluation
from .templates import normalize_rows


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
    if budget is not None and not 0 <= budget < math.inf:
        raise ValueError(f"budget must be a number of USD, 0 or more (leave it out for no limit), not {budget}")
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


#: Evaluations running under `frozen_heap`'s freeze (all run on ipyagent's loop thread).
_frozen_for = [0]


@contextmanager
def frozen_heap() -> Iterator[bool]:
    """The heap from before the evaluations that run now, frozen while they run (``gc.freeze``): their
    full collections do not go over the notebook's data and earlier evaluations again and again. Thawed
    when the last one ends (a nested or background evaluation shares the freeze); only garbage of the
    old heap waits for the thaw. A freeze the user made is left as it is (``gc.unfreeze`` would undo
    it): nothing is done. Yields whether the freeze is this module's."""
    if not _frozen_for[0] and gc.get_freeze_count():
        yield False
        return
    if not _frozen_for[0]:
        gc.freeze()
    _frozen_for[0] += 1
    try:
        yield True
    finally:
        _frozen_for[0] -= 1
        if not _frozen_for[0]:
            gc.unfreeze()


async def _run_matrix(
    ev: Evaluation,
    entries: list[Agent | str],
    rows: list[Any],
    *,
    store: RunStore | str | Path | bool | None,
    cache: bool,
    **run: Any,
) -> Evaluation:
    """`aevaluate`'s work on ipyagent's loop: open the store, run the matrix (the heap before it frozen:
    `frozen_heap`), and whatever happens (an interrupt included) note the wall time, close the agents
    built here and the store opened here."""
    opened, owned, note = _open_store(store, cache)
    if note:
        ev.notes.append(note)
    if opened is not None:  # a grade given while it runs (its live matrix) is kept there, and read back at the end
        ev.store_path = str(opened.path)
    matrix = _Run(ev, store=opened, cache=cache, **run)
    ev.started = time.monotonic()
    try:
        attributes = {"gen_ai.operation.name": "evaluate", "ipyagent.evaluation.id": ev.id,
                      "ipyagent.evaluation.rows": len(rows), "ipyagent.evaluation.columns": list(ev.providers)}
        with frozen_heap() as frozen, evaluation_span("evaluation", attributes):
            return await matrix.run(entries, rows, frozen=frozen)
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
        ValueError: no providers, concurrency or repeat < 1, a bad budget, assertion, judge, variant or baseline.
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
        judge_factory=build_judges(checks, judge_factory or (lambda pid: Agent(pid, **driver_options))).__getitem__,
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
