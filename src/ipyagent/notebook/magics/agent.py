"""``%%agent`` (and ``%tools``): a cell sent as a user message, its reply streamed into the cell.

The magic is thin: the work is done by `ipyagent.Agent`, on the cell's conversation thread.
Errors a user can fix (unknown provider, missing key, bad arguments) are one short line.
``%provider`` is `provider.ProviderMagics`; the options shared with ``%%compare`` are in `options`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ...agent import (MAX_TOOL_CALLS_CEILING, Agent, AgentResult, RunOptions, Thread, Turn, current_default,
                      run_sync)
from ...core import ConfigurationError, Message, provider_title
from ...drivers import BasePromptDriver, create_driver, resolve_alias
from ...memory import DEFAULT_BUDGET
from ...tools import MCPServer, MCPServerError, NotebookTools, Toolbox, close_all
from ..context.notebook import FIX_INSTRUCTION, template_namespace
from ..context.masking import masked_counts, warn_masked
from ..context.template import TemplateError, interruptible, render_template
from ..outcomes import resolved, run_cell
from ..redacted_io import redacted_output
from .. import render, views  # their names used here load at first use: HTML is a kernel's
from ..session import Session
from ..views.run_view import make_view
from ..workspace import approval_with_preview, notebook_tools
from .cell_inputs import CellInputs
from .mcp_read import prompt_messages
from .options import check_out_name, parse_line, print_error, run_arguments
from .provider import ProviderMagics

#: Seconds between SSE events when replaying a cassette in a notebook, so it streams as it did live.
REPLAY_DELAY = 0.01

#: ``%%agent``'s own options (with `options.run_arguments`, those it shares with ``%%compare``).
_AGENT_CELL = (
    argument("-p", "--provider", help="PROVIDER:MODEL for this cell (default: the %%provider one)"),
    argument("--system-budget", type=int, metavar="TOKENS",
             help="tokens the system blocks may take: dynamic blocks are dropped, lowest priority first, to fit"),
    argument("--max-tool-calls", type=int, metavar="N",
             help="tool calls the run may make at most (default 128; %%agent settings max_tool_calls=N for all)"),
    argument("--new", action="store_true", help="start the thread's conversation afresh"),
    argument("--thread", metavar="NAME", help="the conversation thread to continue (default: the default thread)"),
    argument("--max-history", type=int, metavar="N", help="send at most the last N turns of the thread"),
    argument("--context-window", type=int, metavar="TOKENS",
             help="the model's context window, when ipyagent does not know it; the oldest turns are left out to fit"),
    argument("--no-store", action="store_true", help="do not record this run in the run store"),
    argument("--react", action="store_true",
             help="describe tools in the prompt and parse calls from text (models without native tool calling)"),
    argument("--compare", metavar="ID,ID",
             help="send the cell to these providers at once, side by side (as %%%%compare)"),
    argument("--error", action="store_true",
             help="send the last exception (traceback, failing cell) and ask to explain and fix it (as %%agent fix)"),
    argument("--with", dest="with_", metavar="NAME[,NAME]", action="append",
             help="attach variables (or attribute paths: df.dtypes) summarized for the model "
             "(DataFrame schema and head, array shape, ...), or an MCP server's resource: mcp:NAME/URI"),
    argument("--prompt", dest="mcp_prompt", nargs="+", metavar=("NAME/PROMPT", "ARG=VALUE"),
             help="an MCP server's prompt (%%mcp prompts NAME lists them), its messages before the cell's text"),
    argument("--cells", type=int, metavar="N", help="attach the N previous cells' sources and text outputs"),
    argument("--context-budget", type=int, metavar="TOKENS",
             help=f"tokens each attached summary may take at most (default {DEFAULT_BUDGET})"),
    argument("--notebook", action="store_true",
             help="the model may list, read, insert, edit and run this notebook's cells (each change and run "
             "asks for your approval)"),
    argument("--approve-notebook", action="store_true",
             help="with --notebook: inserts and edits go without asking (runs still ask)"),
    argument("--approve-runs", action="store_true",
             help="with --notebook: runs of cells go without asking too (a run no browser shows, such as "
             "nbclient or papermill, has no one to approve them)"),
    argument("--code", nargs="?", const="python", metavar="LANG",
             help="put the answer's first Python code block (LANG: another language; all: every block) "
             "into a new cell below, not run"),
)


def _agent_cell_arguments(func: Any) -> Any:
    for add in reversed(_AGENT_CELL):
        func = add(func)
    return func


def _stopped_result(agent: Agent) -> AgentResult:
    """The result of `agent`'s run that was just interrupted: the one `Agent` kept (`interrupted`
    set, the partial reply as its message), or an empty interrupted one when it was stopped
    before it began (the cell's agent is its own: its last result is this run's)."""
    last = agent.results[-1] if agent.results else None
    if last is not None and last.interrupted:
        return last
    return AgentResult(agent.provider, Message(role="assistant"), interrupted=True)


@magics_class
class AgentMagics(Magics):
    """``%%agent`` and ``%tools``, and the session state the other magics share: the cells'
    threads, Task Memory and run store (`session`), the drivers made so far, the ``%mcp add``
    servers and the last result. `providers` is ``%provider``'s (`ProviderMagics`)."""

    def __init__(self, shell: Any, providers: ProviderMagics) -> None:
        super().__init__(shell)
        self.providers = providers
        #: ``%%compare``'s magics (`CompareMagics`), for ``%%agent --compare``; the extension loads them on first use.
        self.compare_magics: Callable[[], Any] = lambda: self.shell.magics_manager.registry["CompareMagics"]
        self.session = Session()  # threads, Task Memory, run store (shared with %agent: magics/session.py)
        self._drivers: dict[tuple[str, tuple[tuple[str, Any], ...]], BasePromptDriver] = {}  # one HTTP client each
        self.mcp_servers: dict[str, MCPServer] = {}  # %mcp add NAME ... (magics/mcp.py)
        self.inputs = CellInputs(shell, self.mcp_servers)  # what a cell's options name in the namespace
        self.last_result: AgentResult | None = None
        self.mcp_served: Any = None  # %agent serve-mcp's server (serve_mcp.py)

    @property
    def messages(self) -> list[Message]:
        """The default thread's history as the next request would carry it."""
        return self.session.threads.get().compose().messages

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        thread = self.session.threads.get()
        thread.reset()
        if value:
            thread.add(Turn(list(value)))

    @property
    def system(self) -> str | None:
        """The default thread's system prompt."""
        return self.session.threads.get().system

    @system.setter
    def system(self, value: str | None) -> None:
        self.session.threads.get().system = value

    # -- helpers ----------------------------------------------------------------------

    def _agent(self, provider_id: str | None, thread: Thread | None = None) -> Agent:
        """A cell's agent for `provider_id` (default: the ``%provider`` one), on a driver kept for the
        session, with the session's settings as they are now, continuing `thread` (the cell's). What
        the cell asks for (tools, history limits...) goes into the run's `RunOptions`, never onto the agent."""
        provider_id, options = self.providers.driver_options(provider_id)
        key = (provider_id, tuple(sorted(options.items())))
        driver = self._drivers.get(key)
        if driver is None:
            extra = {"chunk_delay": REPLAY_DELAY} if provider_id.startswith("replay:") else {}
            driver = self._drivers[key] = create_driver(provider_id, **options, **extra)
            self.providers.note_shutdown(driver)
        return Agent(driver, thread=thread)

    def _widgets(self) -> bool:
        """Whether a run draws widgets: in a kernel, with ipywidgets installed (else the text view)."""
        if getattr(self.shell, "kernel", None) is None:
            return False
        return importlib.util.find_spec("ipywidgets") is not None

    def close(self) -> None:
        """Close every driver's HTTP client and every MCP server (``%unload_ext``)."""
        try:
            run_sync(close_all())
        except Exception:  # closing must not fail the unload
            pass
        self.mcp_servers.clear()
        if self.mcp_served is not None:
            self.mcp_served.server.stop()
            self.mcp_served = None
        for driver in self._drivers.values():
            try:
                run_sync(driver.close())
            except Exception:  # closing must not fail the unload
                pass
        self._drivers.clear()

    # -- %tools -----------------------------------------------------------------------

    @line_magic
    @redacted_output
    def tools(self, line: str) -> None:
        """List the tools in your namespace and of MCP servers, with their JSON Schemas
        (use with ``%%agent --tools``)."""
        found = {n: v for n, v in self.inputs.namespace_tools().items() if not isinstance(v, MCPServer)}
        servers = self.inputs.mcp_servers()
        if not found and not servers:
            print(
                "no tools in the namespace: define a function with @activity or a BaseTool subclass, or %mcp "
                "add a server"
            )
            return
        sources = []
        for name, value in found.items():
            try:
                tool = Toolbox([value]).tools[0]
            except (TypeError, ValueError) as exc:
                sources.append(render.ToolSource(name, type(value).__name__, error=str(exc)))
                continue
            sources.append(render.ToolSource(name, type(tool).__name__, tool.tool_definitions()))
        for name, server in servers.items():  # MCP servers start here (first use)
            kind = f"MCP server: {server.target}"
            try:
                run_sync(server.start())
            except MCPServerError as exc:
                sources.append(render.ToolSource(name, kind, error=str(exc)))
                continue
            sources.append(render.ToolSource(name, kind, server.toolset().tool_definitions()))
        display(render.tools_bundle(sources), raw=True)

    # -- %%agent ----------------------------------------------------------------------

    @magic_arguments(name="%agent")  # usage lines say %%agent
    @_agent_cell_arguments
    @run_arguments(out="the result (.text, .output, .message, .usage, .cost, .tool_calls, .stop_reason)",
                   system="system prompt for this conversation from now on: text, or a variable holding "
                   "SystemBlock objects", tools="the model")
    @cell_magic
    def agent(self, line: str, cell: str) -> Any:
        """Send the cell as a user message and stream the reply.

        The cell is a Jinja2 template over your variables (``{{ df.shape }}``).
        Successive cells continue one conversation; ``--new`` starts another.
        The cell shows no ``Out[n]``: ``-o VAR`` binds the `AgentResult`, and the
        last one is always ``%agent last`` (or ``ipyagent.last_result()``).
        """
        args = parse_line(self.agent, line)
        outcome = self._agent_cell(args, cell)
        if args.await_in_kernel and not inspect.isawaitable(outcome):
            return resolved(outcome)  # the kernel awaits whatever the cell returns
        return outcome

    def _agent_cell(self, args: Any, cell: str) -> Any:
        self._check_cell_args(args)
        if args.compare:  # an alias of %%compare (compare_magics.py)
            return self.compare_magics().run(
                [args.compare],
                cell,
                system=args.system,
                out=args.out,
                raw=args.raw,
                await_in_kernel=args.await_in_kernel,
                run_options=self.inputs.run_options(args),
            )
        prompt, context, masked, prompt_turn = self._cell_prompt(args, cell)
        run_options = replace(self.inputs.run_options(args), context=tuple(context))
        if args.notebook:  # the notebook as the agent's workspace (workspace.py)
            workspace = notebook_tools(approve_edits=args.approve_notebook, approve_runs=args.approve_runs,
                                       shell=self.shell)
            run_options = replace(run_options, tools=Toolbox([*run_options.tools.tools, workspace]))
        self.session.last_context = [b.describe() for b in context]
        self.session.last_masked = masked_counts(masked, context)
        thread = self.session.threads.get(args.thread)
        if args.new:
            thread.reset()
        if args.system is not None:
            thread.system = self.inputs.system_value(args.system)
        if prompt_turn:  # --prompt: the server prompt's messages, ahead of this run's user message
            thread.add(Turn(prompt_turn))
        try:
            agent = self._agent(args.provider, thread)
        except ConfigurationError as exc:
            print_error(str(exc))
            return None
        return self._run_agent_cell(agent, prompt, run_options, args)

    @staticmethod
    def _check_cell_args(args: Any) -> None:
        """Raises `UsageError` for a count under its least value, a bad ``-o`` name, or options
        that do not go with ``--compare``."""
        for name in ("max_steps", "max_history", "context_window", "cells", "context_budget", "system_budget",
                     "max_tool_calls"):
            value = getattr(args, name, None)
            least = 0 if name in ("max_history", "system_budget", "max_tool_calls") else 1
            if value is not None and value < least:
                raise UsageError(f"--{name.replace('_', '-')} must be {least} or more, not {value}")
        if (args.max_tool_calls or 0) > MAX_TOOL_CALLS_CEILING:
            raise UsageError(f"--max-tool-calls must be {MAX_TOOL_CALLS_CEILING:,} or less, not {args.max_tool_calls}")
        check_out_name(args.out)
        if args.compare and (args.error or args.with_ or args.cells or args.code or args.mcp_prompt or args.notebook):
            raise UsageError("--error, --with, --cells, --code, --notebook and --prompt are not available with "
                             "--compare; use %%agent without it")
        for flag in ("approve_notebook", "approve_runs"):
            if getattr(args, flag) and not args.notebook:
                raise UsageError(f"--{flag.replace('_', '-')} goes with --notebook")

    def _cell_prompt(self, args: Any, cell: str) -> tuple[str, list[Any], int, list[Message]]:
        """(the prompt, the context blocks attached to it, values masked, the ``--prompt`` messages
        that go before it): the cell rendered as a template (unless ``--raw``), ``--error``'s
        instruction before it. Raises `UsageError` for a template error, an interrupt while
        summarizing, a bad ``--prompt``, or an empty cell (without ``--prompt``)."""
        masked = 0
        try:
            if args.raw:
                prompt = cell.strip()
            else:
                redacting = current_default().redact_context
                namespace = {"mcp_resource": self.inputs.mcp_resource, **template_namespace(self.shell)}
                prompt, masked = render_template(cell, namespace, redacting=redacting)
                prompt = prompt.strip()
            with interruptible():  # summaries call the user's objects (a slow __repr__)
                context = self.inputs.context(args)
        except TemplateError as exc:
            raise UsageError(str(exc)) from None
        except KeyboardInterrupt:
            raise UsageError("interrupted while summarizing the cell's context; nothing was sent") from None
        if args.error:
            prompt = f"{FIX_INSTRUCTION}\n\n{prompt}".strip()
        prompt, turn, masked = self._server_prompt(args, prompt, masked)
        if not prompt.strip():
            raise UsageError("the cell is empty: write the prompt below the %%agent line")
        warn_masked(masked_counts(masked, context))
        return prompt, context, masked, turn

    def _server_prompt(self, args: Any, prompt: str, masked: int) -> tuple[str, list[Message], int]:
        """``--prompt NAME/PROMPT [ARG=VALUE ...]``: (the run's prompt, the server prompt's messages
        before it, values masked so far): with an empty cell the prompt's last user message is the
        run's prompt. The prompt used is said in one line (the cell's output, with its transcript)."""
        if not args.mcp_prompt:
            return prompt, [], masked
        spec, messages, count = prompt_messages(self.inputs.mcp_servers(), args.mcp_prompt,
                                                redacting=current_default().redact_context)
        sent = f"mcp: prompt {spec} ({len(messages)} message{'s' * (len(messages) != 1)})"
        if prompt:
            print(f"{sent}, then the cell's text")
        elif messages and messages[-1].role == "user":
            print(f"{sent}, alone (the cell is empty)")
            prompt = messages.pop().text
        else:
            raise UsageError(f"--prompt {spec}: the prompt does not end with a user message; write one in the cell")
        return prompt, messages, masked + count

    def _run_agent_cell(self, agent: Agent, prompt: str, run_options: RunOptions, args: Any) -> Any:
        """Run `prompt` on the cell's thread, streaming into a view; the result is kept (``%agent last``, ``-o``)."""
        metadata = {"tools": run_options.tools.names(), "max_steps": args.max_steps,
                    **({"mcp_prompt": args.mcp_prompt[0]} if args.mcp_prompt else {}),
                    "context": self.session.last_context,
                    **({"masked": self.session.last_masked} if self.session.last_masked else {})}
        active = self.session.begin(agent, prompt, run_options, record=not args.no_store, metadata=metadata)
        alias = args.provider if args.provider and resolve_alias(args.provider) != args.provider else None
        view = make_view(provider_title(agent.provider, alias), widgets=self._widgets(),
                         masked=self.session.last_masked)
        # the view asks the user: tool approval (a notebook change with its diff), MCP sampling and elicitation
        workspace = next((t for t in run_options.tools.tools if isinstance(t, NotebookTools)), None)
        approve = view.request_approval
        if workspace is not None:
            approve = approval_with_preview(view.request_approval, workspace)
        options = replace(active.options, approve=approve, approve_sampling=view.request_sampling,
                          elicit=view.request_elicitation, max_history=args.max_history,
                          context_window=args.context_window)
        # Shows the live view; when the run ends, replaces it with the saved transcript (transcript_output.py).
        live = (views.LiveTranscript(view, provider=agent.provider, prompt=prompt, masked=self.session.last_masked,
                               alias=alias) if self._widgets() else None)

        async def run() -> AgentResult:
            try:
                on_event = active.wrap(live.feed if live is not None else view.feed)  # the run store, then the view
                return await agent.arun(active.user, options, on_event=on_event)
            except asyncio.CancelledError:
                active.interrupted()
                view.mark_interrupted()
                if live is not None:
                    active.keep_transcript(live.finish(None))  # the partial run, marked interrupted
                keep(_stopped_result(agent))  # -o binds whatever the end
                raise
            finally:
                if workspace is not None:  # the notebook's comm, opened for this cell
                    workspace.notebook.close()

        def keep(result: AgentResult) -> None:
            self.last_result = result
            if args.out:
                self.shell.user_ns[args.out] = result

        def done(result: AgentResult) -> None:
            active.finish(result)
            code = self.inputs.next_cell(result, args.code)
            if live is not None:
                active.keep_transcript(live.finish(result, next_cell=code))
            keep(result)

        # In a kernel the cell awaits (see extension.await_agent_cells): the kernel stays free
        # for widget events such as Approve / Deny, and an interrupt cancels the run.
        return run_cell(run(), done, await_in_kernel=args.await_in_kernel)
