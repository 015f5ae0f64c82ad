"""``%provider``: the session's default provider, its settings, aliases, budget and model lists.

It sets the default configuration that ``%%agent``, ``%%compare`` and Python's ``Agent()`` share
(`agent.defaults`); `ProviderMagics.driver_options` resolves a cell's ``-p`` id (an alias, the
``%provider`` one, or another) to a driver's options.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from ...agent import DEFAULT_PROVIDER, current_default, run_sync, session_default, set_default
from ...core import ConfigurationError, ProviderError, redact
from ...drivers import (
    ALIAS_OPTIONS,
    ALIASES,
    KEY_FALLBACKS,
    ProviderChoice,
    check_base_url,
    check_price_as,
    check_record,
    choose_provider,
    create_driver,
    driver_notice,
    format_usd,
    parse_provider_id,
    providers,
    resolve_alias,
    set_alias,
)
from ..redacted_io import redacted_output
from ..render.model_table import model_table
from .options import (
    parse_line,
    print_error,
    settings_arguments,
    settings_from_args,
    timeout_argument,
    timeout_from_args,
)

if TYPE_CHECKING:
    from ...drivers import BasePromptDriver


def check_given(options: dict[str, Any]) -> None:
    """Refuse what would fail at the first request: a base URL the client cannot send to, a
    ``--price-as`` model without a price, a ``--record`` path that cannot be written.

    Raises:
        ConfigurationError: the first of those, in one line.
    """
    if options.get("base_url") is not None:
        check_base_url(options["base_url"])
    if options.get("price_as"):
        check_price_as(options["price_as"])
    if options.get("record"):
        check_record(options["record"])


@magics_class
class ProviderMagics(Magics):
    """``%provider``, and the provider state of the session: the aliases with their options and
    the model lists fetched."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._provider_set = False  # %provider named one (else the built-in default is in force)
        self._model_lists: dict[tuple[str, str], list[Any]] = {}  # (provider, base URL) -> its models, per session
        self._noticed: set[tuple[str, str]] = set()  # models whose shutdown notice was printed this session

    @property
    def provider_id(self) -> str | None:
        """The ``%provider`` id (the session's default, shared with Python: `ipyagent.set_default`),
        or None while no provider was set and the built-in default is in force."""
        current = session_default().provider
        return current if self._provider_set or current != DEFAULT_PROVIDER else None

    @property
    def alias_options(self) -> dict[str, dict[str, Any]]:
        """Alias -> the options it brings (`ALIAS_OPTIONS`: Python's ``Agent(NAME)`` reads them too)."""
        return ALIAS_OPTIONS

    @property
    def provider_options(self) -> dict[str, Any]:
        """The session default's driver options (``base_url``, ``api_key_env``, ``record``)."""
        return dict(session_default().driver_options)

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

    def note_shutdown(self, driver: BasePromptDriver | ProviderChoice) -> None:
        """One line, once a session per model, when `driver`'s model (a driver's, or the one
        ``%provider`` chose) shuts down within 60 days or has shut down (`driver_notice`: its date
        and the replacement the provider recommends)."""
        key = (driver.provider, driver.model)
        if key in self._noticed:
            return
        self._noticed.add(key)
        notice = driver_notice(driver)
        if notice:
            print(f"note: {notice}")

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
        args = parse_line(self.provider, line)
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
            self._set_alias(args, bool(settings) or args.clear_settings or args.timeout is not None)
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

    def _set_alias(self, args: Any, with_settings: bool) -> None:
        """``%provider --alias NAME PROVIDER:MODEL [options]``: NAME stands for the id, with those options.
        An alias of an alias takes all the options of the one it names (its ``--base-url``: else its
        prompts, and the provider's key, would go to the provider's own host), those given going over;
        ``--base-url default`` is the provider's own API root. An alias keeps no generation settings
        or timeout (`with_settings`): refused, not dropped without a word."""
        if not args.provider_id:
            raise UsageError(f"--alias NAME needs the id it stands for: %provider --alias fast {DEFAULT_PROVIDER}")
        if with_settings:
            raise UsageError(
                "an alias keeps a provider and its options, not settings or a timeout: set them for the session "
                f"(%provider --temperature 0) or in a cell (%%agent -p {args.alias} --temperature 0)"
            )
        given = self._given_options(args)
        if given.get("base_url") == "default":  # the provider's own, over an aliased alias's too
            given["base_url"] = None
        try:
            check_given(given)  # now, not at its first request (after it was paid for)
            target = set_alias(args.alias, args.provider_id, given)
        except ConfigurationError as exc:
            print_error(str(exc))
            return
        options = self.alias_options[args.alias]
        where = f" at {options['base_url']}" if options.get("base_url") else ""
        print(f"alias: {args.alias} = {target}{where}")

    def _set_provider(self, args: Any, settings: Any) -> None:
        """``%provider PROVIDER:MODEL [options]``: the session's default, once checked as a driver would
        be (`choose_provider`: the provider, the key, the base URL); the driver itself is made at the
        first request, and with it the HTTP stack (a first ``%provider`` imports neither)."""
        # an alias's options, with those given over them (not instead: its base URL stays)
        options = {**self.alias_options.get(args.provider_id, {}), **self._given_options(args)}
        resolved = resolve_alias(args.provider_id)
        options = {**session_default().options_for(resolved), **options}
        if options.get("base_url") == "default":  # back to the provider's own API root
            options["base_url"] = None
        try:
            if options.get("record"):
                check_record(options["record"])
            if parse_provider_id(args.provider_id)[0] == "replay":  # the cassette names its provider
                driver: BasePromptDriver | ProviderChoice = create_driver(args.provider_id, **options)
            else:
                driver = choose_provider(args.provider_id, base_url=options.get("base_url"),
                                         api_key_env=options.get("api_key_env"), price_as=options.get("price_as"))
        except ConfigurationError as exc:
            print_error(str(exc))
            return
        set_default(resolved, settings=settings, replace_settings=args.clear_settings, timeout=args.timeout, **options)
        self._provider_set = True
        where = f"at {driver.base_url}"
        if args.provider_id.startswith("replay:"):  # not the recorded URL: nothing is sent there
            where = f"replayed from the cassette {args.provider_id.partition(':')[2]} (no network, no key)"
        note = f", recording to {args.record}" if args.record else ""
        print(f"provider: {driver.id} {where}{note}")
        self.note_shutdown(driver)
        if session_default().settings:
            print(f"settings: {session_default().settings.describe()}")

    def _list_models(self, target: str | None, given: dict[str, Any] | None = None) -> None:
        """``%provider --models [PROVIDER]``: the provider's models, fetched once per session."""

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
            print_error(str(exc))
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
                print_error(f"could not list the models of {driver.provider}: {exc.message}")
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
