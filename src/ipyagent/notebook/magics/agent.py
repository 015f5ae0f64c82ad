"""The IPython magics: ``%provider`` and ``%%agent``.

They are thin: the work is done by `ipyagent.Agent`. Errors a user can fix
(unknown provider, missing key, bad arguments) are shown as one short line.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import inspect
import keyword
import os
import re
import sys
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ...agent import (
    DEFAULT_PROVIDER,
    Agent,
    AgentResult,
    RunOptions,
    Thread,
    Turn,
    current_default,
    document_block,
    run_sync,
    session_default,
    set_default,
)
from ...core import BUILTIN_TOOLS, ConfigurationError, Message, NextCell, redact, visible_controls
from ...drivers import (
    ALIASES,
    KEY_FALLBACKS,
    BasePromptDriver,
    create_driver,
    driver_notice,
    format_usd,
    parse_provider_id,
    providers,
    resolve_alias,
    set_alias,
)
from ...memory import DEFAULT_BUDGET, ContextBlock, variable_block
from ...tools import ACTIVITY_ATTR, BaseTool, FunctionTool, MCPServer, MCPServerError, Toolbox
from ..context.code_blocks import next_cell, pick_code
from ..context.notebook import FIX_INSTRUCTION, cell_blocks, error_block, template_namespace
from ..context.masking import masked_counts, warn_masked
from ..context.template import TemplateError, interruptible, render_template
from ..outcomes import resolved, run_cell
from ..redacted_io import redacted_output
from ..session import Session
from ..views.run_view import make_view
from ..views.transcript_output import LiveTranscript
from .options import settings_arguments, settings_from_args, timeout_argument, timeout_from_args

#: Seconds between SSE events when replaying a cassette in a notebook, so it streams as it did live.
REPLAY_DELAY = 0.01


def check_out_name(name: str | None) -> None:
    """``-o VAR``: a variable name that is not a Python keyword; a warning (stderr) before
    shadowing a builtin such as ``print``.

    Raises:
        UsageError: not an identifier, or a keyword.
    """
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(
            f"-o/--out needs a variable name, not {name!r}" + (" (a Python keyword)" if keyword.iskeyword(name) else "")
        )
    if hasattr(builtins, name):
        print(f"ipyagent: -o {name} hides the builtin {name}(); `del {name}` brings it back", file=sys.stderr)


def _stopped_result(agent: Agent) -> AgentResult:
    """The result of `agent`'s run that was just interrupted: the one `Agent` kept (`interrupted`
    set, the partial reply as its message), or an empty interrupted one when it was stopped
    before it began (the cell's agent is its own: its last result is this run's)."""
    last = agent.results[-1] if agent.results else None
    if last is not None and last.interrupted:
        return last
    return AgentResult(agent.provider, Message(role="assistant"), interrupted=True)


def _parse(magic: Any, line: str) -> Any:
    """`parse_argstring`, with the magic's usage line added to a bad-arguments error.

    IPython splits magic lines without removing quotes, so ``--system "Be brief."``
    would arrive as ``"Be brief."``; one pair of surrounding quotes is removed.
    """
    try:
        args = parse_argstring(magic, line)
    except UsageError as exc:
        usage = " ".join(magic.parser.format_usage().replace("::", "", 1).split())
        raise UsageError(f"{exc}\nusage: {usage}") from None

    def unquote(value: Any) -> Any:
        if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            return value[1:-1]
        return value

    for key, value in vars(args).items():  # repeatable options (--assert, --image) are lists
        setattr(args, key, [unquote(v) for v in value] if isinstance(value, list) else unquote(value))
    return args


#: ``--builtin``'s help line.
BUILTIN_HELP = ("provider-side tools the model may use: " + ", ".join(BUILTIN_TOOLS)
                + " (the provider runs them; Python: builtin_tools= with options)")


def builtin_names(value: str | None) -> list[str] | None:
    """``--builtin web_search,code_execution`` as names; None when not given.

    Raises:
        UsageError: a name that is no built-in tool, saying which are.
    """
    if not value:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BUILTIN_TOOLS]
    if unknown:
        raise UsageError(f"--builtin: {', '.join(unknown)} is not a built-in tool; the built-in tools are "
                         f"{', '.join(BUILTIN_TOOLS)}")
    return names


@magics_class
class AgentMagics(Magics):
    """Session state: the default provider, one conversation, the agents used so far."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._provider_set = False  # %provider named one (else the built-in default is in force)
        self._model_lists: dict[tuple[str, str], list[Any]] = {}  # (provider, base URL) -> its models, per session
        self.alias_options: dict[str, dict[str, Any]] = {}  # alias -> the options it was declared with
        self.session = Session()  # threads, Task Memory, run store (shared with %agent: session_magics.py)
        self._drivers: dict[tuple[str, tuple[tuple[str, Any], ...]], BasePromptDriver] = {}  # one HTTP client each
        self.mcp_servers: dict[str, MCPServer] = {}  # %mcp add NAME ... (mcp_magics.py)
        self.last_result: AgentResult | None = None
        self._noticed: set[tuple[str, str]] = set()  # models whose shutdown notice was printed this session

    @property
    def provider_id(self) -> str | None:
        """The ``%provider`` id (the session's default, shared with Python: `ipyagent.set_default`),
        or None while no provider was set and the built-in default is in force."""
        current = session_default().provider
        return current if self._provider_set or current != DEFAULT_PROVIDER else None

    @property
    def provider_options(self) -> dict[str, Any]:
        """The session default's driver options (``base_url``, ``api_key_env``, ``record``)."""
        return dict(session_default().driver_options)

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

    def driver_options(self, provider_id: str | None) -> tuple[str, dict[str, Any]]:
        """(``provider:model``, driver options) for an id, an alias or None (the ``%provider`` one).

        An alias brings the options it was declared with (``--base-url``, ...); the
        ``%provider`` id brings that provider's options, whether named or implied; another
        model of the same provider keeps its base URL and key variable.
        """
        current = current_default()
        if provider_id is None:
            return current.provider, dict(current.driver_options)
        if provider_id in self.alias_options:
            return resolve_alias(provider_id), dict(self.alias_options[provider_id])
        resolved = resolve_alias(provider_id)
        return resolved, current.options_for(resolved)

    def _agent(self, provider_id: str | None, thread: Thread | None = None) -> Agent:
        """A cell's agent for `provider_id` (default: the ``%provider`` one), on a driver kept for the
        session, with the session's settings as they are now, continuing `thread` (the cell's). What
        the cell asks for (tools, history limits...) goes into the run's `RunOptions`, never onto the agent."""
        provider_id, options = self.driver_options(provider_id)
        key = (provider_id, tuple(sorted(options.items())))
        driver = self._drivers.get(key)
        if driver is None:
            extra = {"chunk_delay": REPLAY_DELAY} if provider_id.startswith("replay:") else {}
            driver = self._drivers[key] = create_driver(provider_id, **options, **extra)
            self.note_shutdown(driver)
        return Agent(driver, thread=thread)

    def note_shutdown(self, driver: BasePromptDriver) -> None:
        """One line, once a session per model, when `driver`'s model shuts down within 60 days or
        has shut down (`driver_notice`: its date and the replacement the provider recommends)."""
        key = (driver.provider, driver.model)
        if key in self._noticed:
            return
        self._noticed.add(key)
        notice = driver_notice(driver)
        if notice:
            print(f"note: {notice}")

    def _namespace_tools(self) -> dict[str, Any]:
        """Tools visible in the user namespace: BaseTool instances, BaseTool subclasses defined in
        the notebook (unless an instance is there too), and @activity functions."""
        found: dict[str, Any] = {}
        for name, value in self.shell.user_ns.items():
            if name.startswith("_"):
                continue
            if isinstance(value, (BaseTool, MCPServer)):
                found[name] = value
            elif isinstance(value, type):
                if (
                    issubclass(value, BaseTool)
                    and value not in (BaseTool, FunctionTool)
                    and value.__module__ == "__main__"
                ):
                    found[name] = value
            elif callable(value) and hasattr(value, ACTIVITY_ATTR):
                found[name] = value
        instances = {type(v) for v in found.values() if isinstance(v, BaseTool)}
        return {n: v for n, v in found.items() if not (isinstance(v, type) and v in instances)}

    def _mcp_servers(self) -> dict[str, MCPServer]:
        """MCP servers by name: ``MCPServer`` objects in the namespace, then ``%mcp add`` ones (which win)."""
        found = {n: v for n, v in self.shell.user_ns.items() if isinstance(v, MCPServer) and not n.startswith("_")}
        return {**found, **self.mcp_servers}

    def _toolbox(self, names: str | None) -> Toolbox:
        """The tools named in ``--tools``, looked up among MCP servers (``NAME``, ``NAME.tool``;
        they start here) and in the user namespace; ``*``: every tool in the namespace and every
        ``%mcp add`` server."""
        from .mcp import resolve_tools

        if not names:
            return Toolbox()
        if names.strip().strip("'\"") == "*":
            everything = [v for v in self._namespace_tools().values() if not isinstance(v, MCPServer)]
            toolsets, _ = resolve_tools(self._mcp_servers(), list(self._mcp_servers()))
            return Toolbox([*everything, *toolsets])
        toolsets, rest = resolve_tools(self._mcp_servers(), [n.strip() for n in names.split(",")])
        tools: list[Any] = list(toolsets)
        for name in rest:
            if name not in self.shell.user_ns:
                raise UsageError(f"--tools: {name!r} is not defined; define the function or tool in a cell first")
            value = self.shell.user_ns[name]
            if not (
                isinstance(value, BaseTool)
                or (isinstance(value, type) and issubclass(value, BaseTool))
                or callable(value)
            ):
                raise UsageError(
                    f"--tools: {name!r} is a {type(value).__name__}, not a tool: "
                    "use a function (optionally @activity) or a BaseTool"
                )
            tools.append(value)
        return Toolbox(tools)

    def _run_options(self, args: Any) -> RunOptions:
        """The `RunOptions` of ``--tools``, ``--max-steps``, ``--react``, ``--schema``, ``--strategy`` and
        ``--image``, looked up in the user namespace.

        Raises:
            UsageError: a name that is not defined or not of the right kind.
        """
        from pydantic import BaseModel

        from ...agent import image_blocks

        schema = None
        if args.schema:
            schema = self.shell.user_ns.get(args.schema)
            if not (isinstance(schema, dict) or (isinstance(schema, type) and issubclass(schema, BaseModel))):
                what = "not defined" if args.schema not in self.shell.user_ns else f"a {type(schema).__name__}"
                raise UsageError(
                    f"--schema: {args.schema!r} is {what}; define a pydantic model class "
                    f"(class {args.schema}(BaseModel): ...) in a cell first"
                )
        elif args.strategy:
            raise UsageError("--strategy goes with --schema MODEL")
        images = []
        for item in args.image or ():
            try:
                images += image_blocks(self.shell.user_ns[item] if item in self.shell.user_ns else item)
            except (OSError, ValueError, TypeError) as exc:
                raise UsageError(f"--image {item}: {exc}") from None
        files = []
        for item in getattr(args, "file", None) or ():
            try:
                files.append(document_block(self.shell.user_ns[item] if item in self.shell.user_ns else item))
            except (OSError, ValueError, TypeError) as exc:
                raise UsageError(f"--file {item}: {exc}") from None
        try:
            toolbox = self._toolbox(getattr(args, "tools", None))
        except (ValueError, TypeError) as exc:  # a tool that cannot be declared (bad name, bad config)
            raise UsageError(f"--tools: {exc}") from None
        return RunOptions(
            tools=toolbox,
            builtin_tools=builtin_names(getattr(args, "builtin", None)),
            max_steps=args.max_steps,
            react=True if getattr(args, "react", False) else None,
            output_schema=schema,
            output_strategy=args.strategy,
            images=tuple(images),
            files=tuple(files),
            settings=settings_from_args(args),
            system_budget=getattr(args, "system_budget", None),
            timeout=timeout_from_args(args),
            max_tool_calls=getattr(args, "max_tool_calls", None),
        )

    def _system_value(self, value: str) -> Any:
        """``--system``: a variable holding a `SystemBlock` (or a list of them and text) when it
        names one, else the text itself."""
        from ...core import SystemBlock

        found = self.shell.user_ns.get(value) if value.isidentifier() else None
        if isinstance(found, SystemBlock) or (
            isinstance(found, (list, tuple)) and found and all(isinstance(b, (SystemBlock, str)) for b in found)
        ):
            return list(found) if isinstance(found, (list, tuple)) else [found]
        return value

    def _widgets(self) -> bool:
        if getattr(self.shell, "kernel", None) is None:
            return False
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            return False
        return True

    @staticmethod
    def _error(message: str) -> None:
        print(f"ipyagent: {visible_controls(redact(message))}", file=sys.stderr)

    def close(self) -> None:
        """Close every driver's HTTP client and every MCP server (``%unload_ext``)."""
        from ...tools import close_all

        try:
            run_sync(close_all())
        except Exception:  # closing must not fail the unload
            pass
        self.mcp_servers.clear()
        for driver in self._drivers.values():
            try:
                run_sync(driver.close())
            except Exception:  # closing must not fail the unload
                pass
        self._drivers.clear()

    def _context(self, args: Any) -> list[ContextBlock]:
        """The context blocks of ``--error``, ``--with`` and ``--cells``, in that order.

        Raises:
            TemplateError: no exception yet (``--error``).
            UsageError: a ``--with`` name that is not defined.
        """
        budget = args.context_budget or DEFAULT_BUDGET
        redacting = current_default().redact_context  # %agent settings redact_context=false: sent as they are
        blocks = [error_block(self.shell, budget, redacting=redacting)] if args.error else []
        for name in (n.strip() for group in args.with_ or () for n in group.split(",")):
            if not name:
                continue
            blocks.append(variable_block(name, self._lookup(name), budget, redacting=redacting))
        if args.cells:
            blocks += cell_blocks(self.shell, args.cells, budget, redacting=redacting)
        return blocks

    def _lookup(self, name: str) -> Any:
        """A ``--with`` name: a variable, or an attribute path on one (``df.columns``); nothing is evaluated.

        Raises:
            UsageError: the variable or an attribute is missing.
        """
        base, *attributes = name.split(".")
        if base not in self.shell.user_ns:
            raise UsageError(f"--with: {base!r} is not defined; define it in a cell first (or check the spelling)")
        value = self.shell.user_ns[base]
        for attribute in attributes:
            if attribute.startswith("_") or not hasattr(value, attribute):
                raise UsageError(f"--with: {name!r}: {type(value).__name__} has no attribute {attribute!r}")
            value = getattr(value, attribute)
        return value

    def _next_cell(self, result: AgentResult, language: str | None) -> NextCell | None:
        """``--code``: the answer's code into a new cell below (``set_next_input``); None when
        not asked for or when the answer has no such block (said in one line)."""
        if not language:
            return None
        language = re.sub(r"[^A-Za-z0-9+#._-]", "", language) or "python"
        code = pick_code(result.text, language)
        if code is None:
            what = "code block" if language == "all" else f"{language} code block"
            self._error(f"--code: the answer has no {what}; nothing was put in a new cell")
            return None
        next_cell(self.shell, code)
        return NextCell(language=language, source=code)

    # -- %provider --------------------------------------------------------------------

    @magic_arguments()
    @argument("provider_id", nargs="?", help="PROVIDER:MODEL (openai:gpt-6-luna, ollama:llama3.2) or replay:CASSETTE")
    @argument(
        "--base-url",
        help="API root of an OpenAI-compatible server, e.g. http://localhost:8000/v1; "
        "'default' goes back to the provider's own",
    )
    @argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    @argument("--record", metavar="FILE", help="append every HTTP exchange to this cassette (no keys stored)")
    @argument(
        "--price-as",
        metavar="PROVIDER:MODEL",
        help="price this model's turns as another's "
        "(a model behind your own --base-url has an unknown price otherwise)",
    )
    @argument(
        "--budget",
        type=float,
        metavar="USD",
        help="refuse new runs once the session has spent this much (%%agent cost shows the spending)",
    )
    @argument("--list", action="store_true", help="list the known providers and which API-key variables are set")
    @argument(
        "--models",
        action="store_true",
        help="list the models a provider offers (PROVIDER, or the session's), "
        "with context window and price where known",
    )
    @argument(
        "--alias",
        metavar="NAME",
        help="make NAME a short name for PROVIDER:MODEL (usable in %%provider NAME and %%agent -p NAME)",
    )
    @settings_arguments
    @timeout_argument
    @argument("--clear-settings", action="store_true", help="forget the session's generation settings")
    @line_magic
    @redacted_output
    def provider(self, line: str) -> None:
        """Show or set the default provider of ``%%agent`` cells, and the session's settings.

        ``%provider`` shows it; ``%provider openai:gpt-6-luna`` sets it;
        ``%provider --temperature 0 --max-tokens 256`` sets session defaults for
        every cell and comparison (a cell's own options go over them);
        ``%provider --alias fast openai:gpt-6-luna`` names it;
        ``%provider --list`` lists the providers. Python shares this default:
        ``ipyagent.Agent()`` uses it, ``with ipyagent.using(...)`` switches it for a block.
        """
        args = _parse(self.provider, line)
        settings = settings_from_args(args)
        timeout_from_args(args)
        if args.budget is not None:
            self._set_budget(args.budget)
            if not (
                args.provider_id
                or settings
                or args.clear_settings
                or args.list
                or args.alias
                or args.timeout is not None
            ):
                return
        if args.list:
            self._list_providers()
        elif args.models:
            given = {k: v for k, v in (("base_url", args.base_url), ("api_key_env", args.api_key_env)) if v}
            self._list_models(args.provider_id, given)
        elif args.alias is not None:  # an empty name too: set_alias refuses it, nothing is set
            self._set_alias(args)
        elif not args.provider_id:
            if any((args.base_url, args.api_key_env, args.record, args.price_as)):
                raise UsageError("give PROVIDER:MODEL with --base-url/--api-key-env/--record/--price-as, "
                                 f"e.g. %provider {DEFAULT_PROVIDER} --base-url URL")
            if settings or args.clear_settings or args.timeout is not None:
                set_default(settings=settings, replace_settings=args.clear_settings, timeout=args.timeout)
            self._show_provider()
        else:
            self._set_provider(args, settings)

    @staticmethod
    def _given_options(args: Any) -> dict[str, Any]:
        """The driver options ``%provider`` was given (``--base-url``, ``--api-key-env``, ``--record``,
        ``--price-as``)."""
        return {
            k: v
            for k, v in (
                ("base_url", args.base_url),
                ("api_key_env", args.api_key_env),
                ("record", args.record),
                ("price_as", args.price_as),
            )
            if v
        }

    def _set_alias(self, args: Any) -> None:
        """``%provider --alias NAME PROVIDER:MODEL [options]``: NAME stands for the id, with those options."""
        if not args.provider_id:
            raise UsageError(f"--alias NAME needs the id it stands for: %provider --alias fast {DEFAULT_PROVIDER}")
        options = self._given_options(args)
        try:
            target = set_alias(args.alias, args.provider_id)
        except ConfigurationError as exc:
            self._error(str(exc))
            return
        self.alias_options[args.alias] = options
        where = f" at {options['base_url']}" if options.get("base_url") else ""
        print(f"alias: {args.alias} = {target}{where}")

    def _set_provider(self, args: Any, settings: Any) -> None:
        """``%provider PROVIDER:MODEL [options]``: the session's default, once a driver could be made for it."""
        options = self._given_options(args)
        if not options and args.provider_id in self.alias_options:
            options = dict(self.alias_options[args.provider_id])
        resolved = resolve_alias(args.provider_id)
        options = {**session_default().options_for(resolved), **options}
        if options.get("base_url") == "default":  # back to the provider's own API root
            options["base_url"] = None
        try:
            parse_provider_id(args.provider_id)
            driver = create_driver(args.provider_id, **options)
        except ConfigurationError as exc:
            self._error(str(exc))
            return
        set_default(resolved, settings=settings, replace_settings=args.clear_settings, timeout=args.timeout, **options)
        self._provider_set = True
        note = " (replaying a cassette: no network, no key)" if args.provider_id.startswith("replay:") else ""
        note += f", recording to {args.record}" if args.record else ""
        print(f"provider: {driver.id} at {driver.base_url}{note}")
        self.note_shutdown(driver)
        if session_default().settings:
            print(f"settings: {session_default().settings.describe()}")

    def _list_models(self, target: str | None, given: dict[str, Any] | None = None) -> None:
        """``%provider --models [PROVIDER]``: the provider's models, fetched once per session."""
        from ...core import ProviderError
        from ..render.model_table import model_table

        if target is None:
            provider_id, options = self.driver_options(None)
        elif ":" in target or target in self.alias_options or target in ALIASES:
            provider_id, options = self.driver_options(target)
        else:  # a bare provider name: its models, at the session's base URL for it
            provider_id, options = self.driver_options(f"{target}:*")
        options = {**{k: v for k, v in options.items() if k in ("base_url", "api_key_env")}, **(given or {})}
        try:
            driver = create_driver(provider_id, **options)
        except ConfigurationError as exc:
            self._error(str(exc))
            return
        key = (driver.provider, driver.base_url)
        cached = key in self._model_lists
        if not cached:

            async def fetch() -> list[Any]:
                try:
                    return await driver.list_models()
                finally:
                    await driver.close()

            try:
                self._model_lists[key] = run_sync(fetch())
            except ProviderError as exc:
                self._error(f"could not list the models of {driver.provider}: {exc.message}")
                return
        rows = self._model_lists[key]
        print(
            f"{len(rows)} model{'s' if len(rows) != 1 else ''} from {driver.provider} at {redact(driver.base_url)}"
            + (" (listed earlier this session)" if cached else "")
            + f"; use one as %provider {driver.provider}:MODEL"
        )
        if rows:
            print(model_table(rows))

    @staticmethod
    def _set_budget(usd: float) -> None:
        if usd < 0:
            raise UsageError(f"--budget is in USD, 0 or more, not {usd:g}")
        ledger = session_default().ledger
        ledger.budget = usd
        print(
            f"budget: {format_usd(usd) if usd else '$0'} for this session; spent so far {format_usd(ledger.total)} "
            "(known prices; %agent cost shows it by provider)"
        )

    def _show_provider(self) -> None:
        """``%provider`` alone: the session's provider, where it is, and its settings."""
        current = self.provider_id or f"{DEFAULT_PROVIDER} (default)"
        where = f" at {self.provider_options['base_url']}" if self.provider_options.get("base_url") else ""
        print(f"provider: {current}{where}")
        settings = session_default().settings
        print(f"settings: {settings.describe()}" if settings else "settings: the provider's defaults")
        print(f"timeout: {session_default().timeout:g} s per run")

    @staticmethod
    def _list_providers() -> None:
        rows = []
        for name, spec in sorted(providers().items()):
            env = spec.api_key_env
            fallback = KEY_FALLBACKS.get(env or "")
            if not env:
                key = "no key needed"
            elif os.environ.get(env):
                key = f"{env} set"
            elif fallback and os.environ.get(fallback):
                key = f"{fallback} set"
            else:
                key = f"{env} not set"
            rows.append((name, key, spec.description))
        rows.append(("replay", "no key needed", "replay:CASSETTE serves a recorded cassette offline"))
        rows += [(name, "alias", f"= {target}") for name, target in sorted(ALIASES.items())]
        width = max(len(r[0]) for r in rows)
        kwidth = max(len(r[1]) for r in rows)
        for name, key, description in rows:
            print(f"{name:<{width}}  {key:<{kwidth}}  {description}")

    # -- %tools -----------------------------------------------------------------------

    @line_magic
    @redacted_output
    def tools(self, line: str) -> None:
        """List the tools in your namespace and of MCP servers, with their JSON Schemas
        (use with ``%%agent --tools``)."""
        found = {n: v for n, v in self._namespace_tools().items() if not isinstance(v, MCPServer)}
        servers = self._mcp_servers()
        if not found and not servers:
            print(
                "no tools in the namespace: define a function with @activity or a BaseTool subclass, or %mcp "
                "add a server"
            )
            return
        from IPython.display import display

        from ..render.tool_table import ToolSource, tools_bundle

        sources = []
        for name, value in found.items():
            try:
                tool = Toolbox([value]).tools[0]
            except (TypeError, ValueError) as exc:
                sources.append(ToolSource(name, type(value).__name__, error=str(exc)))
                continue
            sources.append(ToolSource(name, type(tool).__name__, tool.tool_definitions()))
        for name, server in servers.items():  # MCP servers start here (first use)
            kind = f"MCP server: {server.target}"
            try:
                run_sync(server.start())
            except MCPServerError as exc:
                sources.append(ToolSource(name, kind, error=str(exc)))
                continue
            sources.append(ToolSource(name, kind, server.toolset().tool_definitions()))
        display(tools_bundle(sources), raw=True)

    # -- %%agent ----------------------------------------------------------------------

    @magic_arguments(name="%agent")  # usage lines say %%agent
    @argument("-p", "--provider", help="PROVIDER:MODEL for this cell (default: the %%provider one)")
    @argument(
        "--system",
        help="system prompt for this conversation from now on: text, or a variable holding SystemBlock objects",
    )
    @argument(
        "--system-budget",
        type=int,
        metavar="TOKENS",
        help="tokens the system blocks may take: dynamic blocks are dropped, lowest priority first, to fit",
    )
    @argument(
        "-o",
        "--out",
        metavar="VAR",
        help="bind the result (.text, .output, .message, .usage, .cost, .tool_calls, .stop_reason) to VAR",
    )
    @argument("--new", action="store_true", help="start the thread's conversation afresh")
    @argument("--thread", metavar="NAME", help="the conversation thread to continue (default: the default thread)")
    @argument("--max-history", type=int, metavar="N", help="send at most the last N turns of the thread")
    @argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="the model's context window, when ipyagent does not know it; the oldest turns are left out to fit",
    )
    @argument("--no-store", action="store_true", help="do not record this run in the run store")
    @argument("--raw", action="store_true", help="send the cell as it is, without Jinja rendering")
    @argument(
        "--tools",
        metavar="NAME[,NAME]",
        help="tools the model may call: names of functions or BaseTool objects in your namespace",
    )
    @argument("--builtin", metavar="NAME[,NAME]", help=BUILTIN_HELP)
    @argument("--max-steps", type=int, default=10, help="model turns per cell at most (default 10)")
    @argument("--max-tool-calls", type=int, metavar="N",
              help="tool calls the run may make at most (default 128; %%agent settings max_tool_calls=N for all)")
    @argument("--await-in-kernel", action="store_true", help=argparse.SUPPRESS)
    @argument(
        "--react",
        action="store_true",
        help="describe tools in the prompt and parse calls from text (models without native tool calling)",
    )
    @argument(
        "--compare", metavar="ID,ID", help="send the cell to these providers at once, side by side (as %%%%compare)"
    )
    @argument(
        "--schema",
        metavar="MODEL",
        help="a pydantic model class in your namespace: the reply is validated into an instance (VAR.output with -o)",
    )
    @argument(
        "--strategy",
        choices=("native", "tool", "rule"),
        help="how --schema is asked for (default: the provider's best)",
    )
    @argument(
        "--image",
        metavar="PATH_OR_VAR",
        action="append",
        help="add an image: a file path, URL, or a variable holding bytes, a PIL image or a matplotlib figure "
        "(repeatable)",
    )
    @argument(
        "--file",
        metavar="PATH_OR_VAR",
        action="append",
        help="attach a PDF or text document: a file path, or a variable holding one or its bytes (repeatable)",
    )
    @argument(
        "--error",
        action="store_true",
        help="send the last exception (traceback, failing cell) and ask to explain and fix it (as %%agent fix)",
    )
    @argument(
        "--with",
        dest="with_",
        metavar="NAME[,NAME]",
        action="append",
        help="attach variables (or attribute paths: df.dtypes) summarized for the model "
        "(DataFrame schema and head, array shape, ...)",
    )
    @argument("--cells", type=int, metavar="N", help="attach the N previous cells' sources and text outputs")
    @argument(
        "--context-budget",
        type=int,
        metavar="TOKENS",
        help=f"tokens each attached summary may take at most (default {DEFAULT_BUDGET})",
    )
    @argument(
        "--code",
        nargs="?",
        const="python",
        metavar="LANG",
        help="put the answer's first Python code block (LANG: another language; all: every block) "
        "into a new cell below, not run",
    )
    @settings_arguments
    @timeout_argument
    @cell_magic
    def agent(self, line: str, cell: str) -> Any:
        """Send the cell as a user message and stream the reply.

        The cell is a Jinja2 template over your variables (``{{ df.shape }}``).
        Successive cells continue one conversation; ``--new`` starts another.
        The cell shows no ``Out[n]``: ``-o VAR`` binds the `AgentResult`, and the
        last one is always ``%agent last`` (or ``ipyagent.last_result()``).
        """
        args = _parse(self.agent, line)
        outcome = self._agent_cell(args, cell)
        if args.await_in_kernel and not inspect.isawaitable(outcome):
            return resolved(outcome)  # the kernel awaits whatever the cell returns
        return outcome

    def _agent_cell(self, args: Any, cell: str) -> Any:
        self._check_cell_args(args)
        if args.compare:  # an alias of %%compare (compare_magics.py)
            return self.shell.magics_manager.registry["CompareMagics"].run(
                [args.compare],
                cell,
                system=args.system,
                out=args.out,
                raw=args.raw,
                await_in_kernel=args.await_in_kernel,
                run_options=self._run_options(args),
            )
        prompt, context, masked = self._cell_prompt(args, cell)
        run_options = replace(self._run_options(args), context=tuple(context))
        self.session.last_context = [b.describe() for b in context]
        self.session.last_masked = masked_counts(masked, context)
        thread = self.session.threads.get(args.thread)
        if args.new:
            thread.reset()
        if args.system is not None:
            thread.system = self._system_value(args.system)
        try:
            agent = self._agent(args.provider, thread)
        except ConfigurationError as exc:
            self._error(str(exc))
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
        check_out_name(args.out)
        if args.compare and (args.error or args.with_ or args.cells or args.code):
            raise UsageError(
                "--error, --with, --cells and --code are not available with --compare; use %%agent without it"
            )

    def _cell_prompt(self, args: Any, cell: str) -> tuple[str, list[Any], int]:
        """(the prompt, the context blocks attached to it, values the template masked): the cell
        rendered as a template (unless ``--raw``), ``--error``'s instruction before it. Raises
        `UsageError` for a template error, an interrupt while summarizing, or an empty cell."""
        masked = 0
        try:
            if args.raw:
                prompt = cell.strip()
            else:
                redacting = current_default().redact_context
                prompt, masked = render_template(cell, template_namespace(self.shell), redacting=redacting)
                prompt = prompt.strip()
            with interruptible():  # summaries call the user's objects (a slow __repr__)
                context = self._context(args)
        except TemplateError as exc:
            raise UsageError(str(exc)) from None
        except KeyboardInterrupt:
            raise UsageError("interrupted while summarizing the cell's context; nothing was sent") from None
        if args.error:
            prompt = f"{FIX_INSTRUCTION}\n\n{prompt}".strip()
        if not prompt.strip():
            raise UsageError("the cell is empty: write the prompt below the %%agent line")
        warn_masked(masked_counts(masked, context))
        return prompt, context, masked

    def _run_agent_cell(self, agent: Agent, prompt: str, run_options: RunOptions, args: Any) -> Any:
        """Run `prompt` on the cell's thread, streaming into a view; the result is kept (``%agent last``, ``-o``)."""
        metadata = {"tools": run_options.tools.names(), "max_steps": args.max_steps,
                    "context": self.session.last_context,
                    **({"masked": self.session.last_masked} if self.session.last_masked else {})}
        active = self.session.begin(agent, prompt, run_options, record=not args.no_store, metadata=metadata)
        view = make_view(agent.provider, widgets=self._widgets(), masked=self.session.last_masked)
        options = replace(active.options, approve=view.request_approval, max_history=args.max_history,
                          context_window=args.context_window)
        # Shows the live view; when the run ends, replaces it with the saved transcript (transcript_output.py).
        live = (LiveTranscript(view, provider=agent.provider, prompt=prompt, masked=self.session.last_masked)
                if self._widgets() else None)

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

        def keep(result: AgentResult) -> None:
            self.last_result = result
            if args.out:
                self.shell.user_ns[args.out] = result

        def done(result: AgentResult) -> None:
            active.finish(result)
            code = self._next_cell(result, args.code)
            if live is not None:
                active.keep_transcript(live.finish(result, next_cell=code))
            keep(result)

        # In a kernel the cell awaits (see extension.await_agent_cells): the kernel stays free
        # for widget events such as Approve / Deny, and an interrupt cancels the run.
        return run_cell(run(), done, await_in_kernel=args.await_in_kernel)
