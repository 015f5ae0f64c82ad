"""Provider ids -> prompt drivers (DESIGN.md, "drivers").

Providers are addressed as ``provider:model``. The registry knows which driver
speaks each provider's protocol, its default base URL and the environment
variable holding its API key. Third-party drivers register through the
``ipyagent.drivers`` entry-point group (``name = "package.module:DriverClass"``;
the class may set `api_key_env` and `default_base_url`).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core import ConfigurationError, ModelSettings, add_secret, add_url
from .catalog.lifecycle import example_id
from .catalog.pricing import check_price_as

if TYPE_CHECKING:  # the drivers, httpx2 and the cassettes load with the first driver made, not with the registry
    from .base import BasePromptDriver


@dataclass(frozen=True)
class ProviderSpec:
    """How to reach one provider: driver class path, key variable, base URL."""

    name: str
    driver: str
    api_key_env: str | None
    base_url: str | None = None
    base_url_env: str | None = None
    description: str = ""
    #: True when a base URL from the environment does not make the key optional (Azure).
    key_required: bool = False
    #: The driver's own API root (its class's `default_base_url`), known without importing the driver;
    #: None: read from the class (a plug-in). A test keeps the built-ins' equal to their classes'.
    default_base_url: str | None = None

    def driver_class(self) -> type[BasePromptDriver]:
        module, _, cls = self.driver.partition(":")
        return getattr(importlib.import_module(module), cls)


_OPENAI = "ipyagent.drivers.protocols.openai_chat:OpenAIChatPromptDriver"

BUILTIN: dict[str, ProviderSpec] = {
    s.name: s
    for s in [
        ProviderSpec(
            "openai",
            _OPENAI,
            "OPENAI_API_KEY",
            None,
            "OPENAI_BASE_URL",
            "OpenAI Chat Completions, or any OpenAI-compatible server with --base-url",
            default_base_url="https://api.openai.com/v1",
        ),
        ProviderSpec(
            "openai-responses",
            "ipyagent.drivers.protocols.openai_responses:OpenAIResponsesPromptDriver",
            "OPENAI_API_KEY",
            None,
            "OPENAI_BASE_URL",
            "OpenAI Responses API",
            default_base_url="https://api.openai.com/v1",
        ),
        ProviderSpec(
            "anthropic",
            "ipyagent.drivers.protocols.anthropic:AnthropicPromptDriver",
            "ANTHROPIC_API_KEY",
            None,
            "ANTHROPIC_BASE_URL",
            "Anthropic Messages API",
            default_base_url="https://api.anthropic.com/v1",
        ),
        ProviderSpec(
            "gemini",
            "ipyagent.drivers.protocols.gemini:GeminiPromptDriver",
            "GEMINI_API_KEY",
            None,
            "GEMINI_BASE_URL",
            "Google Gemini API (GEMINI_API_KEY, or GOOGLE_API_KEY)",
            default_base_url="https://generativelanguage.googleapis.com/v1beta",
        ),
        ProviderSpec(
            "ollama",
            "ipyagent.drivers.protocols.ollama:OllamaPromptDriver",
            None,
            None,
            "OLLAMA_BASE_URL",
            "a local Ollama through its native /api/chat (OLLAMA_BASE_URL or --base-url for another host); no key",
            default_base_url="http://localhost:11434",
        ),
        ProviderSpec(
            "azure-openai",
            "ipyagent.drivers.protocols.azure_openai:AzureOpenAIChatPromptDriver",
            "AZURE_OPENAI_API_KEY",
            None,
            "AZURE_OPENAI_ENDPOINT",
            "Azure OpenAI: azure-openai:DEPLOYMENT, endpoint in AZURE_OPENAI_ENDPOINT (api version: "
            "AZURE_OPENAI_API_VERSION)",
            key_required=True,
            default_base_url="",
        ),
        ProviderSpec(
            "groq", _OPENAI, "GROQ_API_KEY", "https://api.groq.com/openai/v1", None, "Groq (OpenAI-compatible)"
        ),
        ProviderSpec(
            "mistral", _OPENAI, "MISTRAL_API_KEY", "https://api.mistral.ai/v1", None, "Mistral (OpenAI-compatible)"
        ),
        ProviderSpec(
            "openrouter",
            _OPENAI,
            "OPENROUTER_API_KEY",
            "https://openrouter.ai/api/v1",
            None,
            "OpenRouter (OpenAI-compatible)",
        ),
        ProviderSpec(
            "deepseek", _OPENAI, "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1", None, "DeepSeek (OpenAI-compatible)"
        ),
    ]
}

#: ``gen_ai.provider.name`` (OpenTelemetry's GenAI semantic conventions) of each built-in provider id; one the
#: conventions do not list keeps its own id (``ollama``, ``openrouter``).
OTEL_PROVIDER_NAMES = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic",
                       "gemini": "gcp.gemini", "azure-openai": "azure.ai.openai", "groq": "groq",
                       "mistral": "mistral_ai", "deepseek": "deepseek"}


def otel_provider_name(provider: str) -> str:
    """The ``gen_ai.provider.name`` of provider id `provider` (`OTEL_PROVIDER_NAMES`, else the id)."""
    return OTEL_PROVIDER_NAMES.get(provider, provider)


#: A second variable accepted for a provider's key (Google documents both).
KEY_FALLBACKS = {"GEMINI_API_KEY": "GOOGLE_API_KEY"}

#: Short names for provider ids (``%provider --alias fast openai:gpt-6-luna``): name -> ``provider:model``.
ALIASES: dict[str, str] = {}
#: The driver options each alias brings (``base_url``, ``api_key_env``...): name -> options.
ALIAS_OPTIONS: dict[str, dict[str, Any]] = {}
_ALIAS_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def set_alias(name: str, provider_id: str, options: dict[str, Any] | None = None) -> str:
    """Make `name` stand for `provider_id` wherever a provider id is taken, with driver `options`
    (`alias_options`); returns the id. An alias of an alias brings that one's options, `options`
    over them: its base URL lost, its prompts and the provider's key would go to the provider's host.

    Raises:
        ConfigurationError: `name` is not letters, digits, ``-``, ``_``, ``.`` (starting
            with a letter), or `provider_id` is not a known ``provider:model``.
    """
    if not _ALIAS_RE.match(name):
        raise ConfigurationError(
            f"alias {name!r}: use letters, digits, '-', '_' and '.', starting with a letter (no ':')"
        )
    target = resolve_alias(provider_id.strip())
    parse_provider_id(target)
    ALIAS_OPTIONS[name] = {**ALIAS_OPTIONS.get(provider_id.strip(), {}), **(options or {})}
    ALIASES[name] = target
    return target


def resolve_alias(provider_id: str) -> str:
    """The ``provider:model`` an alias stands for; any other id unchanged."""
    return ALIASES.get(provider_id.strip(), provider_id)


def alias_options(provider_id: str) -> dict[str, Any] | None:
    """The driver options alias `provider_id` brings (a copy; `set_alias`); None: not an alias."""
    found = ALIAS_OPTIONS.get(provider_id.strip()) if provider_id.strip() in ALIASES else None
    return None if found is None else dict(found)


#: (the import path's state, the plug-ins found there): scanning every installed package's entry
#: points takes 50-100 ms, and every driver created asks.
_plugins: tuple[tuple[Any, ...], dict[str, ProviderSpec]] | None = None


def _path_state() -> tuple[Any, ...]:
    """`sys.path` with each folder's modification time: installing a package (``%pip install``)
    adds its ``dist-info`` folder, which changes its folder's time."""
    state = []
    for folder in sys.path:
        try:
            state.append((folder, os.stat(folder or ".").st_mtime_ns))
        except OSError:
            state.append((folder, None))
    return tuple(state)


def entry_points(**selection: Any) -> Any:
    """`importlib.metadata.entry_points`, imported at the first scan: the import alone is 10-20 ms,
    and a built-in provider is found without one (`provider_spec`)."""
    from importlib.metadata import entry_points as scan

    return scan(**selection)


def plugins() -> dict[str, ProviderSpec]:
    """Providers registered by installed packages (the ``ipyagent.drivers`` entry points), scanned
    again only when `sys.path` or one of its folders changed."""
    global _plugins
    state = _path_state()
    if _plugins is None or _plugins[0] != state:
        found = {
            ep.name: ProviderSpec(
                ep.name, ep.value, None, None, None, f"from {ep.dist.name if ep.dist else 'a plugin'}"
            )
            for ep in entry_points(group="ipyagent.drivers")
        }
        _plugins = (state, found)
    return _plugins[1]


def providers() -> dict[str, ProviderSpec]:
    """Built-in providers plus those registered by installed packages."""
    found = dict(BUILTIN)
    for name, spec in plugins().items():
        found.setdefault(name, spec)
    return found


def provider_spec(name: str) -> ProviderSpec | None:
    """The provider called `name`, or None: a built-in one without scanning the installed packages
    (a plug-in cannot take a built-in name, and the scan is most of a first ``%provider``)."""
    return BUILTIN.get(name) or plugins().get(name)


def providers_with_builtin(tool: str) -> list[str]:
    """The providers whose driver can ask for provider-side tool `tool` (``web_search``), sorted."""
    found = []
    for name, spec in providers().items():
        try:
            if tool in getattr(spec.driver_class(), "builtin_tools", ()):
                found.append(name)
        except Exception:  # noqa: BLE001 - a plug-in that does not import names nothing here
            continue
    return sorted(found)


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """``"openai:gpt-6-luna"`` -> ``("openai", "gpt-6-luna")``; the model may hold ``:``.
    An alias (`set_alias`) is replaced by the id it stands for.

    Raises:
        ConfigurationError: no ``provider:model`` shape, or an unknown provider
            (the message lists the known ones).
    """
    name, sep, model = resolve_alias(provider_id).strip().partition(":")
    if name == "replay":
        if not model:
            raise ConfigurationError("replay needs a cassette file: replay:PATH")
        return name, model
    if not sep or not model:
        raise ConfigurationError(f"expected PROVIDER:MODEL (e.g. {example_id()}) or an alias "
                                 f"(%provider --alias NAME PROVIDER:MODEL), got {provider_id!r}")
    if provider_spec(name) is None:
        known = ", ".join(sorted(providers()))
        raise ConfigurationError(f"unknown provider {name!r}; known providers: {known}, replay")
    return name, model


def _driver_options(cls: type[BasePromptDriver]) -> set[str]:
    """The keyword arguments `cls` takes, its bases' included while it passes ``**kwargs`` on."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names - {"self", "model", "api_key", "provider"}


def _check_options(cls: type[BasePromptDriver], provider: str, options: dict[str, Any]) -> None:
    """Raises TypeError, saying what to write instead, for an option `cls` does not take: a
    key (read from a variable, so none is saved in a notebook), a model setting, or a typo."""
    for name in options:
        if name == "api_key":
            raise TypeError(
                "ipyagent takes no api_key: keys are read from environment variables, so none is saved "
                "in a notebook; set os.environ[...] and name it with api_key_env='VAR' (--api-key-env VAR)"
            )
        if name in ModelSettings.model_fields:
            raise TypeError(f"{name} is a model setting: pass settings={{{name!r}: ...}}")
        known = _driver_options(cls) | {"base_url", "api_key_env", "record"}
        if name not in known:
            raise TypeError(f"unknown option {name!r} for {provider}; its options: {', '.join(sorted(known))}")


@dataclass(frozen=True)
class ProviderChoice:
    """A ``provider:model`` resolved without making its driver (`choose_provider`): the provider,
    the model, the API root requests go to, and the variable the key was read from."""

    spec: ProviderSpec
    model: str
    #: The API root (``https://api.openai.com/v1``), without a trailing ``/``.
    base_url: str
    #: The variable holding the key sent (the fallback one when only it is set); None: no key is sent.
    key_env: str | None
    #: The base URL was named here and is not the provider's own: no key by default, turns unpriced.
    other_host: bool

    @property
    def id(self) -> str:
        """``provider:model``."""
        return f"{self.spec.name}:{self.model}"

    @property
    def provider(self) -> str:
        return self.spec.name

    @property
    def price_known(self) -> bool:
        """The driver's turns are priced at the provider's rates (not another host's; `driver_notice`)."""
        return not self.other_host

    def api_key(self) -> str | None:
        """The key, read from `key_env` now (never kept in this record)."""
        return os.environ.get(self.key_env) if self.key_env else None


def check_base_url(base_url: str, what: str = "--base-url") -> None:
    """Refuse, in one line, a base URL the HTTP client could not send to (it would fail at the
    first request, with its own traceback): not http(s), a port that is not a number in 0-65535,
    an IPv6 address not closed by ``]``, no host, a control character. `what`: where it came from,
    as the message names it (the option, or the provider's variable).

    Raises:
        ConfigurationError: what is wrong, and an example of what to type.
    """
    example = "e.g. http://localhost:8000/v1 or http://[::1]:8000/v1"
    if not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{what} must start with http:// or https://, {example} (got {base_url!r})")
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as exc:
        raise ConfigurationError(f"{what} {base_url!r} is not a valid URL ({exc}); {example}") from None
    if not parts.hostname:
        raise ConfigurationError(f"{what} {base_url!r} names no host; {example}")
    if any(ord(c) < 32 or ord(c) == 127 for c in base_url):
        raise ConfigurationError(f"{what} {base_url!r} holds a control character; {example}")


def check_record(path: str | Path) -> None:
    """Refuse a cassette path (``--record``) that cannot be written: a folder, a file not writable, or
    one under a file or a folder not writable (the nearest that exists: missing ones are made).

    Raises:
        ConfigurationError: what is wrong with the path, and what to give instead.
    """
    target, shown = Path(path).expanduser(), f"--record {str(path)!r}"
    if target.is_dir():
        raise ConfigurationError(f"{shown} is a folder: name a file in it (e.g. {target / 'run.jsonl'})")
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigurationError(f"{shown}: {folder} is a file, not a folder; name a file in a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigurationError(f"{shown} cannot be written (no permission in {folder}); "
                                 "name a file in a folder you can write")


def choose_provider(provider_id: str, *, base_url: str | None = None, api_key_env: str | None = None,
                    price_as: str | None = None) -> ProviderChoice:
    """Check ``provider:model`` and its options as `create_driver` does, without making the driver
    or importing it (a built-in's; a plug-in's class is imported for its defaults): what ``%provider``
    records, the driver being made at the first request. The key found and the base URL's
    credentials are given to the one redactor (`core.redact`).

    A `base_url` named here that is not the provider's own gets no key unless `api_key_env` names
    one; a base URL from the provider's own variable (``OPENAI_BASE_URL``) gets the key, and is
    checked as `base_url` is.

    Raises:
        ConfigurationError: ``replay:`` (a cassette is read by `create_driver`), unknown provider,
            no ``provider:model`` shape, a base URL not http(s), the key variable unset, no endpoint
            where the provider has no default one (Azure), `price_as` not ``PROVIDER:MODEL`` or a
            model genai-prices has no price for.
    """
    name, model = parse_provider_id(provider_id)
    if name == "replay":
        raise ConfigurationError("replay:CASSETTE has no provider to choose: create_driver reads the cassette")
    spec = provider_spec(name)
    assert spec is not None  # parse_provider_id refused unknown names
    if base_url is not None:
        check_base_url(base_url)
    if price_as is not None and ":" not in price_as:
        raise ConfigurationError(f"price_as takes PROVIDER:MODEL ({example_id()}), not {price_as!r}")
    if price_as is not None:
        check_price_as(price_as)
    other_host = base_url is not None and base_url.rstrip("/") != (spec.base_url or "").rstrip("/")
    base_url = base_url or _base_url_from_env(spec) or spec.base_url
    own_env, default = spec.api_key_env, spec.default_base_url
    if default is None:  # a plug-in: its class says
        cls = spec.driver_class()
        own_env, default = own_env or getattr(cls, "api_key_env", None), getattr(cls, "default_base_url", "")
    env = api_key_env or (None if other_host else own_env)
    api_key = (os.environ.get(env) or os.environ.get(KEY_FALLBACKS.get(env, ""))) if env else None
    if env and not api_key and (api_key_env or spec.key_required or base_url in (None, spec.base_url)):
        raise ConfigurationError(
            f"{env} is not set: set it in the environment (os.environ[{env!r}] = ...) before "
            f"%provider {name}:{model}, or name another variable (--api-key-env VAR; api_key_env= in Python)"
        )
    if not (base_url or default):  # no endpoint (Azure's is the user's resource): the driver says so
        spec.driver_class()(model, provider=name)
    add_secret(api_key)
    root = (base_url or default or "").rstrip("/")
    add_url(root)
    key_env = (env if os.environ.get(env) else KEY_FALLBACKS.get(env)) if api_key and env else None
    return ProviderChoice(spec, model, root, key_env, other_host)


def _base_url_from_env(spec: ProviderSpec) -> str | None:
    """The provider's base URL variable (``OPENAI_BASE_URL``), checked as ``--base-url`` is; None: unset
    or empty."""
    url = os.environ.get(spec.base_url_env) if spec.base_url_env else None
    if url:
        check_base_url(url, f"the variable {spec.base_url_env}")
    return url or None


def create_driver(
    provider_id: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    record: str | Path | None = None,
    **kwargs: Any,
) -> BasePromptDriver:
    """Build the prompt driver for ``provider:model`` (or ``replay:CASSETTE``).

    A `base_url` other than the provider's own makes the driver's turns "unknown price"
    unless ``price_as="PROVIDER:MODEL"`` names the price that applies.

    The API key is read from the provider's environment variable (or
    `api_key_env`). A `base_url` given here (a local or third-party server)
    gets no key unless `api_key_env` names one: a provider's key is not sent
    to another host by default. A base URL from the provider's own variable
    (``OPENAI_BASE_URL``) is the user's configuration, and gets the key.

    Raises:
        ConfigurationError: unknown provider, or the API key variable is unset (`choose_provider`);
            a `record` path that cannot be written (`check_record`).
    """
    name, model = parse_provider_id(provider_id)
    if name == "replay":
        return _replay_driver(model, **kwargs)
    if record:
        check_record(record)
    choice = choose_provider(provider_id, base_url=base_url, api_key_env=api_key_env)
    cls = choice.spec.driver_class()
    _check_options(cls, name, kwargs)
    # A host named here (a local server, a proxy) is not billed at the provider's rates; the
    # provider's own variable (OPENAI_BASE_URL) stands for the provider, as it does for the key.
    kwargs.setdefault("price_known", not choice.other_host)
    driver = cls(model, api_key=choice.api_key(), base_url=choice.base_url or None, provider=name, **kwargs)
    driver.key_env = choice.key_env  # which variable held the key: a 401 says to check that one
    if record:
        from .cassette import RecordingTransport

        driver.transport = RecordingTransport(
            record, provider=name, model=model, inner=driver.transport, base_url=driver.base_url
        )
    return driver


def _replay_driver(path: str, **kwargs: Any) -> BasePromptDriver:
    from .cassette import ReplayTransport

    transport = ReplayTransport(path, chunk_delay=kwargs.pop("chunk_delay", 0.0))
    first = transport.entries[0]
    name = first.get("provider", "openai")
    spec = provider_spec(name)
    if spec is None:
        raise ConfigurationError(f"cassette {path!r} was recorded for provider {name!r}, which is not installed")
    cls = spec.driver_class()
    own = (spec.base_url or getattr(cls, "default_base_url", "") or "").rstrip("/")
    recorded = first.get("base_url")
    kwargs.setdefault("price_known", spec.key_required or not recorded or recorded.rstrip("/") == own)
    return cls(first.get("model", "unknown"), base_url=recorded, provider=name, transport=transport, **kwargs)
