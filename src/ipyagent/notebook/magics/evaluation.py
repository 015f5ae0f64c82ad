"""``%%compare ID ... --over VAR``: the cell as a template over VAR's rows, every row × provider a fresh run.

The work is `ipyagent.agent.evaluation.aevaluate`; this module checks the
options (one clear line for each mistake, before anything runs), builds the
providers as ``%%compare`` does (aliases, ``%provider`` options, tools,
schema), and shows `EvaluationView`. The run store of the session is the
cache. An interrupt stops every run, keeps what finished (shown, and bound to
``-o VAR``) and closes the connections.
"""

from __future__ import annotations

import asyncio
from typing import Any

from IPython.core.error import UsageError

from ...agent import (
    Evaluation,
    TemplateError,
    aevaluate,
    normalize_rows,
    parse_assertion,
    provider_keys,
    render_template,
)
from ...drivers import resolve_alias
from ..outcomes import run_cell
from ..views.evaluation_view import EvaluationView


def _rows(shell: Any, name: str) -> list[Any]:
    if name not in shell.user_ns:
        raise UsageError(
            f"--over: {name!r} is not defined; make it a DataFrame, a list of dicts or a list of strings first"
        )
    try:
        rows = normalize_rows(shell.user_ns[name])
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    if not rows:
        raise UsageError(f"--over: {name!r} has no rows")
    return rows


def _check_options(args: Any) -> None:
    if args.runs != 1:
        raise UsageError("--runs goes without --over; an evaluation runs each row once per provider")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be 1 or more, not {args.concurrency}")
    if args.budget is not None and args.budget < 0:
        raise UsageError(f"--budget must be 0 or more USD, not {args.budget}")
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be 1 or more, not {args.max_steps}")


def run_evaluation(magics: Any, args: Any, cell: str) -> Any:
    """The body of ``%%compare --over`` (`magics`: the `CompareMagics`); returns None (or, in a
    kernel, a coroutine the cell awaits). ``-o VAR`` gets the `Evaluation`."""
    shell, agent_magics = magics.shell, magics.agent_magics
    _check_options(args)
    providers = [p.strip() for item in args.providers for p in item.split(",") if p.strip()]
    rows = _rows(shell, args.over)
    template = cell.strip()
    if not template:
        raise UsageError("the cell is empty: write the prompt template below the %%compare line, "
                         "e.g. {{ row.question }}")
    if not args.raw:
        for n, row in enumerate(rows):
            try:
                render_template(template, row, shell.user_ns)
            except TemplateError as exc:
                raise UsageError(f"row {n}: {exc}; fields are {{{{ row.NAME }}}}, or use --raw") from None
    run_options = agent_magics._run_options(args)  # --tools, --schema, --image, settings
    try:
        checks = [parse_assertion(spec, namespace=shell.user_ns, rubric=args.rubric,
                                  has_schema=run_options.output_schema is not None) for spec in args.asserts or ()]
    except ValueError as exc:
        raise UsageError(f"--assert: {exc}") from None
    if args.rubric and not any(c.name.startswith("judge:") for c in checks):
        raise UsageError("--rubric goes with a judge: --assert judge:PROVIDER:MODEL")

    def factory(provider_id: str) -> Any:
        return magics._build(provider_id, system=args.system, tools=run_options.tools, max_steps=args.max_steps)

    def judge_factory(provider_id: str) -> Any:  # a judge gets neither the cell's system prompt nor its tools
        return magics._build(provider_id, system=None, max_steps=1)

    ev = Evaluation(provider_keys([resolve_alias(p) for p in providers]), rows)
    view = EvaluationView(ev, widgets=agent_magics._widgets())
    session = agent_magics.session
    store = (session.store if session.store_path is not None else None) or False  # False: no store, no cache

    async def evaluated() -> Evaluation:
        try:
            return await aevaluate(providers, template, rows, assertions=checks, rubric=args.rubric,
                                   concurrency=args.concurrency, budget=args.budget, cache=not args.no_cache,
                                   store=store, namespace=shell.user_ns, raw=args.raw, factory=factory,
                                   judge_factory=judge_factory, on_result=view.update,
                                   evaluation=ev, output_schema=run_options.output_schema,
                                   output_strategy=run_options.output_strategy, images=list(run_options.images) or None,
                                   settings=run_options.settings, timeout=run_options.timeout)
        except asyncio.CancelledError:
            done(ev)
            raise

    def done(result: Evaluation) -> None:
        if getattr(view, "_closed", False):
            return
        view.finish()
        magics.last_evaluation = result
        if args.out:
            shell.user_ns[args.out] = result

    # A stop keeps what finished (done(ev) above) and ends the cell quietly, as %%agent does.
    return run_cell(evaluated(), done, await_in_kernel=args.await_in_kernel)
