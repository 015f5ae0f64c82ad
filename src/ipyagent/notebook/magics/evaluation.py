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
import math
import os
import re
import sys
from typing import Any

from IPython.core.error import UsageError

from ...agent import (
    Evaluation,
    TemplateError,
    aevaluate,
    build_judges,
    current_default,
    leave_or_cancel,
    make_variants,
    normalize_rows,
    parse_assertion,
    provider_keys,
)
from ...core import ConfigurationError
from ...drivers import parse_provider_id, resolve_alias
from ..cli.gates import parse_gate
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


#: A line of the cell that starts a prompt variant: ``--- variant NAME ---``.
VARIANT_LINE = re.compile(r"^---\s*variant\s+(\S+)\s*---\s*$", re.M)
JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.S)


def _named_strings(shell: Any, items: list[str] | None, option: str) -> dict[str, str]:
    """``NAME=VAR`` items -> {NAME: the string VAR holds}.

    Raises:
        UsageError: an item without ``=``, a name given twice, VAR undefined or not a string.
    """
    named: dict[str, str] = {}
    for item in items or ():
        name, sep, var = item.partition("=")
        name, var = name.strip(), var.strip()
        if not sep or not name or not var:
            raise UsageError(f"{option} takes NAME=VAR (VAR a string in your namespace), not {item!r}")
        if name in named:
            raise UsageError(f"{option}: the variant {name!r} is given twice")
        value = shell.user_ns.get(var)
        if not isinstance(value, str):
            what = "is not defined" if var not in shell.user_ns else f"is a {type(value).__name__}, not a string"
            raise UsageError(f"{option} {item}: {var!r} {what}; make it a string holding the prompt first")
        named[name] = value
    return named


def variants_of(shell: Any, args: Any, cell: str) -> tuple[str | None, dict[str, str], dict[str, str]]:
    """(the prompt template, or None; prompt variants; system variants) of the cell: its body split
    at ``--- variant NAME ---`` lines, ``--variant NAME=VAR`` and ``--system-variant NAME=VAR``.

    Raises:
        UsageError: text above the first variant line, a variant named twice, an empty variant,
            the cell's prompt beside ``--variant``, or no prompt at all.
    """
    prompts = _named_strings(shell, args.variant, "--variant")
    systems = _named_strings(shell, args.system_variant, "--system-variant")
    parts = VARIANT_LINE.split(cell)
    # A body of Jinja comments only is no prompt: IPython wants a body, --variant gives the prompts.
    template: str | None = parts[0].strip() if JINJA_COMMENT.sub("", parts[0]).strip() else None
    if len(parts) > 1:
        if template is not None:
            raise UsageError("the cell has text above its first '--- variant NAME ---' line: put it in a variant")
        for name, body in zip(parts[1::2], parts[2::2]):
            if name in prompts:
                raise UsageError(f"the variant {name!r} is given twice")
            if not body.strip():
                raise UsageError(f"the variant {name!r} is empty: write its prompt under its '--- variant' line")
            prompts[name] = body.strip()
    if template is not None and prompts:
        raise UsageError("the cell's prompt and --variant: make the cell's prompt a variant too "
                         "(a '--- variant NAME ---' line above it), or leave only a {# comment #} in the cell")
    if template is None and not prompts:
        raise UsageError("the cell is empty: write the prompt template below the %%compare line, "
                         "e.g. {{ row.question }}")
    try:
        make_variants(template, prompts, systems)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return template, prompts, systems


def _check_options(args: Any) -> None:
    if args.runs != 1:
        raise UsageError("--runs goes without --over; an evaluation runs each row once per column "
                         "(--repeat N: N times)")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be 1 or more, not {args.repeat}")
    if not args.check_timeout > 0:
        raise UsageError(f"--check-timeout must be more than 0 seconds, not {args.check_timeout}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be 1 or more, not {args.concurrency}")
    if args.budget is not None and not 0 <= args.budget < math.inf:  # nan and inf too: no budget is no --budget
        raise UsageError(f"--budget must be a number of USD, 0 or more (leave it out for no limit), not {args.budget}")
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be 1 or more, not {args.max_steps}")


def _judges(magics: Any, checks: list[Any]) -> dict[str, Any]:
    """The agent of each ``--assert judge:ID``, by ID, built now: a judge that cannot be (its API key
    not set, ...) is one line before any request, not a failed verdict on every row.

    Raises:
        UsageError: a judge's provider cannot be built; the line names the check and what to set.
    """
    def judge(provider_id: str) -> Any:  # a judge gets neither the cell's system prompt nor its tools
        return magics._build(provider_id, system=None, max_steps=1)

    try:
        return build_judges(checks, judge)
    except ValueError as exc:
        raise UsageError(f"--assert {exc}") from None


def _gates(args: Any) -> list[str]:
    """The cell's ``--gate`` options, each checked now (`cli.parse_gate`), as given.

    Raises:
        UsageError: one does not parse (unknown metric, not ``[COLUMN:]METRIC OP VALUE``).
    """
    for text in args.gate or ():
        try:
            parse_gate(text)
        except ValueError as exc:
            raise UsageError(f"--gate: {exc}") from None
    return list(args.gate or ())


def _provider_ids(args: Any) -> list[str]:
    """The columns' provider ids as given (ids or aliases, comma-separated or not).

    Raises:
        UsageError: one is neither ``PROVIDER:MODEL`` nor an alias: no column of the matrix is
            sent, rather than one column failing on every row with the reason in its cells only.
    """
    providers = [p.strip() for item in args.providers for p in item.split(",") if p.strip()]
    for provider in providers:
        try:
            parse_provider_id(provider)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
    return providers


def _analysis_options(ev: Evaluation, providers: list[str], args: Any, shell: Any) -> Evaluation:
    """The evaluation's name in the run store (`cell_name`) and ``--baseline`` (checked: a column,
    as `Evaluation.column` reads it: a provider id or its alias)."""
    ev.name = cell_name(shell, args)
    if args.baseline is None:
        return ev
    ev.labels = {key: given for key, given in zip(ev.providers, providers) if given != key}
    try:
        ev.baseline = ev.column(args.baseline)
    except KeyError as exc:
        raise UsageError(f"--baseline: {exc.args[0]}") from None
    return ev


def cell_name(shell: Any, args: Any) -> str:
    """What the run store keeps this cell's evaluation under, so its next run says what changed:
    the notebook, the cell's id (JupyterLab sends it; else the ``-o`` variable) and the ``--over``
    variable. The dataset is part of it: the same cell over another variable is another series
    (it once said "2 new rows, 2 rows gone" of unrelated rows); a prompt, check or column edited
    is the same series, its changes the point of the comparison."""
    kernel = getattr(shell, "kernel", None)
    parent = kernel.get_parent("shell") if kernel is not None and hasattr(kernel, "get_parent") else None
    cell = ((parent or {}).get("metadata") or {}).get("cellId") or (f"-o {args.out}" if args.out else "")
    notebook = os.environ.get("JPY_SESSION_NAME") or ""
    return f"{notebook}#{cell} --over {args.over}" if cell else f"{notebook}#--over {args.over}"


def run_evaluation(magics: Any, args: Any, cell: str) -> Any:
    """The body of ``%%compare --over`` (`magics`: the `CompareMagics`); returns None (or, in a
    kernel, a coroutine the cell awaits). ``-o VAR`` gets the `Evaluation`."""
    shell, agent_magics = magics.shell, magics.agent_magics
    _check_options(args)
    providers = _provider_ids(args)
    rows = _rows(shell, args.over)
    template, prompts, systems = variants_of(shell, args, cell)
    run_options = agent_magics.inputs.run_options(args)  # --tools, --schema, --image, settings
    try:
        checks = [parse_assertion(spec, namespace=shell.user_ns, rubric=args.rubric,
                                  has_schema=run_options.output_schema is not None) for spec in args.asserts or ()]
    except ValueError as exc:
        raise UsageError(f"--assert: {exc}") from None
    if args.rubric and not any(c.name.startswith("judge:") for c in checks):
        raise UsageError("--rubric goes with a judge: --assert judge:PROVIDER:MODEL")

    judges = _judges(magics, checks)

    def factory(provider_id: str) -> Any:
        return magics._build(provider_id, system=args.system, tools=run_options.tools, max_steps=args.max_steps)

    ev = _analysis_options(Evaluation(provider_keys([*map(resolve_alias, providers)]), rows,
                                      variants=list(dict.fromkeys([*prompts, *systems])), repeat=args.repeat),
                           providers, args, shell)  # variants and repeats: the progress line's total
    session = agent_magics.session
    view = EvaluationView(ev, widgets=agent_magics._widgets(), gates=_gates(args), background=args.background,
                          out=args.out, limit=session.eval_output_max)
    store = (session.store if session.store_path is not None else None) or False  # False: no store, no cache
    redacting = current_default().redact_context  # the values the prompts take are context (%agent settings)

    async def evaluated() -> Evaluation:
        try:
            return await aevaluate(providers, template, rows, prompts=prompts, systems=systems, repeat=args.repeat,
                                   check_timeout=args.check_timeout, assertions=checks, rubric=args.rubric,
                                   concurrency=args.concurrency, budget=args.budget, cache=not args.no_cache,
                                   store=store, namespace=shell.user_ns, raw=args.raw, factory=factory,
                                   redact_context=redacting, judge_factory=judges.__getitem__, on_result=view.update,
                                   evaluation=ev, output_schema=run_options.output_schema,
                                   output_strategy=run_options.output_strategy, images=list(run_options.images) or None,
                                   settings=run_options.settings, timeout=run_options.timeout,
                                   batch={"on_progress": view.update} if args.batch else False)
        except asyncio.CancelledError:
            done(ev)
            _left_running(ev)
            raise
        except TemplateError as exc:  # no row could be rendered: nothing was sent
            view.discard()
            raise UsageError(f"{exc}; fields are {{{{ row.NAME }}}}, or use --raw") from None

    def done(result: Evaluation) -> None:
        if not getattr(view, "_closed", False):
            view.finish()
            if not args.background:  # bound when it started (VAR may name another evaluation by now)
                _bind(magics, args, result)

    if args.background:
        return in_background(magics, args, ev, view, evaluated(), done)
    return run_cell(evaluated(), done, await_in_kernel=args.await_in_kernel)  # a stop keeps what finished, quietly


def _left_running(ev: Evaluation) -> None:
    """An interrupted ``--batch`` evaluation: its batches stay at the provider (nobody answers a question
    in a notebook cell); one line says so and how to collect them."""
    left = leave_or_cancel(ev, ask=False)
    if left:
        print(left, file=sys.stderr)


def _bind(magics: Any, args: Any, ev: Evaluation) -> None:
    """`ev` is the cell's evaluation: ``-o VAR`` and ``%agent grade``'s last one."""
    magics.last_evaluation = ev
    if args.out:
        magics.shell.user_ns[args.out] = ev


def in_background(magics: Any, args: Any, ev: Evaluation, view: EvaluationView, run: Any, done: Any) -> None:
    """``--background``: `run` (the cell's evaluation) goes on on ipyagent's loop and the cell ends
    now, ``-o VAR`` bound to the running `Evaluation`; when it ends, `done` draws it in the cell's
    view (finished or cancelled), or the view says why it could not start (no row rendered).
    Nothing awaits it, so an interrupt of another cell does not stop it; ``VAR.cancel()``,
    ``%unload_ext`` and the kernel's end do (the finished runs kept)."""

    async def background() -> Evaluation:
        try:
            result = await run
        except UsageError as exc:
            view.fail(str(exc))
            raise
        done(result)
        return result

    _bind(magics, args, ev)
    ev.run_in_background(background())
    if view.display_id is None:  # a terminal: no view until it ends
        name = args.out
        print(f"ipyagent: evaluating {ev.total:,} runs in the background"
              + (f"; {name}.progress, {name}.wait(), {name}.cancel()" if name else "; give -o VAR to follow it"),
              file=sys.stderr)
