"""``%%compare``: the same prompt to several providers at once, side by side.

The work is done by `ipyagent.agent.compare`; this module parses the line,
renders the cell (Jinja, as ``%%agent`` does), builds one agent per provider
and draws the panes and the table (`compare_view`).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.text import DollarFormatter

from ...agent import Agent, Comparison, RunOptions, acompare, current_default
from ...core import ToolAction
from ...drivers import create_driver, example_id
from ..context.masking import masked_counts, warn_masked
from ..context.template import TemplateError, render_template
from ..outcomes import resolved, run_cell
from ..views.compare_view import CompareTextView, CompareWidgetView
from ..views.transcript_output import finish_comparison, show_live
from .agent import REPLAY_DELAY, AgentMagics
from .evaluation import run_evaluation
from .options import check_out_name, parse_line, run_arguments

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def expand_line(line: str, namespace: dict[str, Any]) -> str:
    """`line` with ``{expr}`` and ``$name`` expanded from `namespace`, as IPython expands magic
    lines, except inside Jinja's ``{{ ... }}`` and ``{% ... %}`` (an assertion's row template),
    which stay as written. A line that does not expand is kept as it is (IPython's rule)."""

    kept: list[str] = []

    def hide(match: re.Match[str]) -> str:
        kept.append(match.group(0))
        return f"\x00{len(kept) - 1}\x00"

    masked = _JINJA.sub(hide, line)
    try:
        masked = DollarFormatter().vformat(masked, args=[], kwargs=namespace)
    except Exception:  # noqa: BLE001 - IPython keeps a line it cannot expand
        pass
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], masked)


@magics_class
class CompareMagics(Magics):
    """``%%compare``; shares provider settings, tools lookup and widget detection with `AgentMagics`."""

    def __init__(self, shell: Any, agent_magics: AgentMagics) -> None:
        super().__init__(shell)
        self.agent_magics = agent_magics
        self.last_comparison: Comparison | None = None

    def _driver_options(self, provider_id: str) -> tuple[str, dict[str, Any]]:
        """(provider id, options) for `provider_id`, a ``%provider --alias`` name resolved; with
        the session provider's options (``--base-url``, ...) when it is that provider."""
        return self.agent_magics.providers.driver_options(provider_id)

    def _build(
        self, requested: str, *, system: str | None, approve: Any = None, tools: Any = None, max_steps: int = 10
    ) -> Agent:
        """An agent for one provider of the cell (the session's settings under it); a cell's other
        options travel in each run's `RunOptions`, an evaluation's (which copies agents) here."""
        provider_id, options = self._driver_options(requested)
        if provider_id.startswith("replay:"):
            options.setdefault("chunk_delay", REPLAY_DELAY)
        driver = create_driver(provider_id, **options)
        self.agent_magics.providers.note_shutdown(driver)
        return Agent(driver, system=system, approve=approve, tools=tools, max_steps=max_steps)

    @magic_arguments(name="%compare")  # usage lines say %%compare
    @argument("providers", nargs="+", metavar="ID", help="PROVIDER:MODEL ids (or %%provider aliases) to compare")
    @argument(
        "--runs",
        type=int,
        default=1,
        help="runs per provider, selectable in each pane; "
        "the table shows each run and the median (min–max) (default 1)",
    )
    @argument(
        "--over",
        metavar="VAR",
        help="evaluate over the rows of VAR (a DataFrame, a list of dicts or of strings): "
        "the cell is a template with the row as {{ row }}; one fresh run per row and provider",
    )
    @argument(
        "--assert",
        dest="asserts",
        action="append",
        metavar="SPEC",
        help="with --over, check each answer (repeatable): contains:TEXT, icontains:TEXT, regex:PATTERN, "
        "equals:TEXT, json, schema, python:NAME, judge:PROVIDER:MODEL",
    )
    @argument("--rubric", help="with --over, what judge: assertions grade against")
    @argument(
        "--concurrency", type=int, default=4, metavar="N", help="with --over, runs in flight per provider (default 4)"
    )
    @argument(
        "--budget",
        type=float,
        metavar="USD",
        help="with --over, start no run whose estimated cost would pass USD in total",
    )
    @argument(
        "--no-cache",
        action="store_true",
        help="with --over, run every request anew (finished runs are served from the run store otherwise)",
    )
    @argument("--repeat", type=int, default=1, metavar="N",
              help="with --over, run each row on each column N times, each its own request (default 1)")
    @argument("--variant", action="append", metavar="NAME=VAR",
              help="with --over, a prompt variant (repeatable): VAR a string holding a prompt template; "
              "or split the cell with '--- variant NAME ---' lines. A column is provider x variant")
    @argument("--system-variant", action="append", metavar="NAME=VAR",
              help="with --over, a system prompt variant (repeatable): VAR a string; a column is provider x variant")
    @argument("--check-timeout", type=float, default=1.0, metavar="S",
              help="with --over, seconds a check may take before it fails 'timed out' (default 1)")
    @argument(
        "--baseline",
        metavar="COLUMN",
        help="with --over, the column the others are compared with (default the first): paired difference, verdict",
    )
    @argument("--background", action="store_true",
              help="with --over, run the evaluation in the background: the cell ends at once, -o VAR is the running "
              "evaluation (VAR.done, VAR.progress, VAR.wait(), VAR.cancel()), its view keeps filling")
    @argument("--batch", action="store_true",
              help="with --over, send the runs through each provider's batch API, at the batch price (about "
              "half); answers come within the provider's window (up to a day); a provider without one runs live")
    @argument("--gate", action="append", metavar="[COLUMN:]METRIC OP VALUE",
              help="with --over, a gate 'ipyagent eval' checks on this evaluation (repeatable), "
              "e.g. 'pass_rate>=0.9' or 'COLUMN:pass_rate>=0.9'; kept with the saved matrix")
    @run_arguments(out="the comparison (.results, .figures, .summary(), .to_dataframe())",
                   system="system prompt for every provider", tools="the models")
    @no_var_expand  # expand_line: {var} and $var as IPython does, but --assert 'equals:{{ row.answer }}' as written
    @cell_magic
    def compare(self, line: str, cell: str) -> Any:
        """Send the cell to every provider at once and show the replies side by side.

        Each provider streams into its own pane; the table under them fills in as
        runs finish (first token, total time, tokens, tokens/s, cost, stop reason,
        error). A failing provider shows its error and never stops the others.
        Each run is a fresh conversation: the ``%%agent`` conversation is not used
        or changed. The cell is a Jinja2 template over your variables.
        """
        args = parse_line(self.compare, expand_line(line, self.shell.user_ns))
        check_out_name(args.out)
        if args.over is not None:
            outcome = run_evaluation(self, args, cell)
            return resolved(outcome) if args.await_in_kernel and not inspect.isawaitable(outcome) else outcome
        used = [
            name
            for name, value in (
                ("--assert", args.asserts),
                ("--rubric", args.rubric),
                ("--budget", args.budget),
                ("--no-cache", args.no_cache),
                ("--repeat", args.repeat != 1),
                ("--variant", args.variant),
                ("--system-variant", args.system_variant),
                ("--check-timeout", args.check_timeout != 1.0),
                ("--baseline", args.baseline),
                ("--gate", args.gate),
                ("--background", args.background),
                ("--batch", args.batch),
            )
            if value
        ]
        if used:
            raise UsageError(
                f"{', '.join(used)} go{'es' if len(used) == 1 else ''} with --over VAR (an evaluation over rows)"
            )
        outcome = self.run(
            args.providers,
            cell,
            runs=args.runs,
            system=args.system,
            out=args.out,
            raw=args.raw,
            await_in_kernel=args.await_in_kernel,
            run_options=self.agent_magics.inputs.run_options(args),
        )
        if args.await_in_kernel and not inspect.isawaitable(outcome):
            return resolved(outcome)  # the kernel awaits whatever the cell returns
        return outcome

    def run(self, providers: list[str], cell: str, *, runs: int = 1, system: str | None = None,
            out: str | None = None, raw: bool = False, await_in_kernel: bool = False,
            run_options: RunOptions | None = None) -> Comparison | None:
        """The body of ``%%compare`` (also behind ``%%agent --compare``); arguments as the magic's options,
        `run_options` every run's (tools, max_steps, react, output schema, images, `ModelSettings`:
        the same for every provider, each sent under its own wire names)."""
        providers, prompt = self._providers_and_prompt(providers, cell, runs=runs, raw=raw)
        views: list[Any] = []  # the view, once made: approval buttons go to its pane
        entries, failures = self._entries(providers, system, views)
        built = [entry for entry in entries if not isinstance(entry, str)]
        ids = [e if isinstance(e, str) else e.provider for e in entries]
        widgets = self.agent_magics._widgets()
        # Panes are titled as the user typed them (eight aliases of one model are eight panes), the id under it.
        view: CompareWidgetView | CompareTextView = (CompareWidgetView(providers, runs, ids) if widgets
                                                     else CompareTextView(ids, runs, titles=providers))
        views.append(view)
        # Live panes while it runs; when it ends, the saved comparison replaces them (transcript_output.py).
        display_id = show_live(view) if widgets else None

        def failed(provider_id: str) -> Agent:
            raise failures[provider_id]

        def saved(comparison: Comparison) -> None:
            """The comparison replaces the live panes (a stopped one too: what each provider had)."""
            if display_id is not None:
                finish_comparison(display_id, comparison, prompt=prompt, view=view, titles=providers)
                view.close()  # no widget state is left for a finished comparison
            if isinstance(view, CompareTextView):
                view.show_table()
            self.last_comparison = comparison
            if out:
                self.shell.user_ns[out] = comparison

        def stopped(comparison: Comparison) -> None:
            view.mark_interrupted()
            saved(comparison)

        async def compared() -> Comparison:
            try:
                return await acompare(entries, prompt, runs=runs, factory=failed, on_start=view.start,
                                      on_event=view.feed, on_finish=view.finish, on_stop=stopped, options=run_options)
            finally:
                if isinstance(view, CompareTextView):
                    view.close()  # its status line, whatever ended the comparison
                for agent in built:
                    try:
                        await agent.aclose()
                    except Exception:  # noqa: BLE001 - closing must not hide the results
                        pass

        return run_cell(compared(), saved, await_in_kernel=await_in_kernel)

    def _providers_and_prompt(self, providers: list[str], cell: str, *, runs: int, raw: bool) -> tuple[list[str], str]:
        """(the providers, comma lists split, the prompt rendered from the cell unless `raw`).

        Raises:
            UsageError: no provider, `runs` under 1, a template error or an empty cell.
        """
        providers = [p for item in providers for p in item.split(",") if p.strip()]
        if not providers:
            raise UsageError(f"give the providers to compare: %%compare {example_id()} {example_id('anthropic')}")
        if runs < 1:
            raise UsageError(f"--runs must be at least 1, got {runs}")
        try:
            if raw:
                prompt = cell.strip()
            else:
                text, masked = render_template(cell, self.shell.user_ns, redacting=current_default().redact_context)
                prompt = text.strip()
                warn_masked(masked_counts(masked, ()))
        except TemplateError as exc:
            raise UsageError(str(exc)) from None
        if not prompt:
            raise UsageError("the cell is empty: write the prompt below the %%compare line")
        return providers, prompt

    def _entries(
        self, providers: list[str], system: str | None, views: list[Any]
    ) -> tuple[list[Agent | str], dict[str, Exception]]:
        """(one entry per provider: its agent, or the id as typed when none could be made; why each
        such id failed). A tool call's approval goes to the pane of its provider in ``views[0]``."""
        failures: dict[str, Exception] = {}
        entries: list[Agent | str] = []
        for index, requested in enumerate(providers):

            def approve(action: ToolAction, index: int = index) -> Any:
                return views[0].request_approval(index, action)

            try:
                entries.append(self._build(requested, system=system, approve=approve))
            except Exception as exc:  # noqa: BLE001 - a missing key, an unknown provider: shown in its pane and row
                failures[requested] = exc
                entries.append(requested)
        return entries, failures
