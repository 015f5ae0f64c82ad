"""The default configuration: the provider, settings and driver options an `Agent`
made without a provider uses (DESIGN.md, "Defaults").

``%provider`` and Python share it. `set_default` changes it for the session;
``with ipyagent.using(...)`` changes it inside the block only. The block's value
lives in a `ContextVar`, so two threads, or two asyncio tasks, in different
``using`` blocks each see their own, and the previous default is back after the
block. A `Defaults` is immutable and every `Agent` builds its own driver from it:
nothing one agent does (Griptape #1440/#1490: ``stream=True`` on one agent
changed the shared default driver) reaches another.

The session default is a plain module value, not the `ContextVar`'s: a kernel runs
each cell in its own context, so a `ContextVar` set by ``%provider`` in one cell
would be gone in the next.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..core import ModelSettings, coerce_settings
from ..drivers import Ledger, alias_options, example_id, resolve_alias

#: The provider used when nothing else says which: OpenAI's current model in the shipped lifecycle
#: table (``drivers/catalog/lifecycle.json``, the one place that choice is made).
DEFAULT_PROVIDER = example_id("openai")
#: Seconds a run may take, every model turn and tool included, unless told otherwise: a stream
#: that never ends, or a tool that never returns, ends as ``timeout`` after ten minutes.
DEFAULT_TIMEOUT = 600.0
#: Tool calls a run may make, all its model turns together: a turn whose calls would pass it ends the
#: run before any of them runs (`RunOptions.max_tool_calls`, ``%agent settings max_tool_calls=N``).
DEFAULT_MAX_TOOL_CALLS = 128
#: The most `max_tool_calls` may be: each call holds its arguments and result in memory (a turn of
#: 100,000 calls took 1.9 GB and a minute), so a larger number is a typo, not a plan.
MAX_TOOL_CALLS_CEILING = 10_000
#: Driver options a provider's own session settings carry to another model of that provider.
PROVIDER_SCOPED = ("base_url", "api_key_env")


@dataclass(frozen=True)
class Defaults:
    """One default configuration.

    Attributes:
        provider: ``provider:model`` (or an alias).
        settings: generation settings every agent starts from.
        driver_options: `create_driver` options for `provider` (``base_url``, ``api_key_env``, ``record``...).
        timeout: the deadline of a run, seconds (every model turn and tool; `DEFAULT_TIMEOUT`).
        max_tool_calls: tool calls a run may make (`DEFAULT_MAX_TOOL_CALLS`).
        redact_context: context sent to a model (cell templates' values, ``--with``, ``--cells``,
            the last error, tool results) passes the one redactor's context rule
            (`core.redact_context`); False sends it as it is (``%agent settings redact_context=false``).
        ledger: the session's spending and budget (``%provider --budget``, ``%agent cost``): each
            run records its billed turns there (`RunOptions.ledger`); a default changed from this
            one (`set_default`, `using`) keeps it, `reset_default` starts a new one.
    """

    provider: str = DEFAULT_PROVIDER
    settings: ModelSettings = field(default_factory=lambda: coerce_settings(None))
    driver_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = DEFAULT_TIMEOUT
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    redact_context: bool = True
    ledger: Ledger = field(default_factory=Ledger, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "driver_options", MappingProxyType(dict(self.driver_options)))

    def options_for(self, provider_id: str) -> dict[str, Any]:
        """The driver options another id gets from this default: all of them for the same
        id, the provider-scoped ones (base URL, key variable) for another model of the
        same provider, none for another provider; an alias's own (`alias_options`: its base
        URL, not the provider's host, gets its prompts)."""
        declared = alias_options(provider_id)
        if declared is not None:
            return declared
        if provider_id == self.provider:
            return dict(self.driver_options)
        if _provider_name(provider_id) == _provider_name(self.provider):
            return {k: v for k, v in self.driver_options.items() if k in PROVIDER_SCOPED}
        return {}


def _provider_name(provider_id: str) -> str:
    return resolve_alias(provider_id).partition(":")[0]


_lock = threading.Lock()
_session = Defaults()
_block: ContextVar[Defaults | None] = ContextVar("ipyagent_defaults", default=None)


def current_default() -> Defaults:
    """The default in force here: the innermost ``using`` block's, else the session's."""
    return _block.get() or _session


def session_default() -> Defaults:
    """The session's default, whatever block this code is in."""
    return _session


def _changed(base: Defaults, provider: str | None, settings: Any, fields: dict[str, Any],
             driver_options: dict[str, Any] | None, timeout: float | None = None, **limits: Any) -> Defaults:
    new_settings = base.settings.merged(coerce_settings(settings), fields or None)
    kept = dict(base.driver_options) if provider is None else base.options_for(provider)
    options = {k: v for k, v in {**kept, **(driver_options or {})}.items() if v is not None}  # None: back to default
    changed = {k: v for k, v in limits.items() if v is not None}
    if "max_tool_calls" in changed:
        changed["max_tool_calls"] = check_max_tool_calls(changed["max_tool_calls"])
    if "redact_context" in changed and not isinstance(changed["redact_context"], bool):
        raise ValueError(f"redact_context must be True or False, not {changed['redact_context']!r}")
    return replace(Defaults(provider or base.provider, new_settings, options,
                            base.timeout if timeout is None else check_timeout(timeout),
                            base.max_tool_calls, base.redact_context, base.ledger), **changed)


def check_max_tool_calls(value: Any) -> int:
    """`value` if it is a whole number from 0 (no tool may be called) to `MAX_TOOL_CALLS_CEILING`.

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOOL_CALLS_CEILING:
        raise ValueError(f"max_tool_calls must be a whole number from 0 to {MAX_TOOL_CALLS_CEILING:,}, not {value!r}")
    return value


def check_timeout(timeout: float) -> float:
    """`timeout` (seconds) if it is a positive number.

    Raises:
        ValueError: zero, negative or not a number.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


def split_settings(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(`ModelSettings` fields, the rest: driver options) of keyword arguments."""
    names = set(ModelSettings.model_fields)
    return {k: v for k, v in kwargs.items() if k in names}, {k: v for k, v in kwargs.items() if k not in names}


def set_default(provider: str | None = None, *, settings: ModelSettings | dict[str, Any] | None = None,
                replace_settings: bool = False, timeout: float | None = None, max_tool_calls: int | None = None,
                redact_context: bool | None = None, **kwargs: Any) -> Defaults:
    """Change the session's default (what ``%provider`` does) and return it.

    Args:
        provider: the new ``provider:model``; None keeps the current one. Another model
            of the same provider keeps its base URL and key variable.
        settings: settings merged over the current ones (all of them when `replace_settings`).
        timeout: the deadline of every run from now on, seconds (None: unchanged).
        max_tool_calls: tool calls a run may make from now on (None: unchanged).
        redact_context: whether context sent to a model passes the context rule (None: unchanged).
        **kwargs: `ModelSettings` fields (``temperature=0``) and driver options (``base_url=...``;
            ``base_url=None`` goes back to the provider's own API root).

    Raises:
        pydantic.ValidationError: a bad setting.
        ValueError: a timeout that is not a positive number, a bad `max_tool_calls` or `redact_context`.
    """
    global _session
    fields, options = split_settings(kwargs)
    with _lock:
        base = replace(_session, settings=coerce_settings(None)) if replace_settings else _session
        _session = _changed(base, provider, settings, fields, options, timeout, max_tool_calls=max_tool_calls,
                            redact_context=redact_context)
        return _session


def reset_default() -> None:
    """Back to the built-in default (tests, ``%unload_ext``)."""
    global _session
    with _lock:
        _session = Defaults()


@contextmanager
def using(provider: str | None = None, /, *, settings: ModelSettings | dict[str, Any] | None = None,
          timeout: float | None = None, **kwargs: Any) -> Iterator[Defaults]:
    """Switch the default inside a ``with`` block only (this thread or asyncio task).

        with ipyagent.using("anthropic:claude-sonnet-5-5", temperature=0):
            ipyagent.Agent().run("...")       # Anthropic, at temperature 0

    Args:
        provider: ``provider:model`` for the block; None keeps the current one.
        settings: settings merged over the current default's.
        timeout: the deadline of every run in the block, seconds (None: unchanged).
        **kwargs: `ModelSettings` fields and driver options (``base_url``, ``api_key_env``...).

    Yields:
        The `Defaults` in force inside the block.

    Raises:
        pydantic.ValidationError: a bad setting.
    """
    fields, options = split_settings(kwargs)
    token = _block.set(_changed(current_default(), provider, settings, fields, options, timeout))
    try:
        yield _block.get()  # type: ignore[misc]
    finally:
        _block.reset(token)


def resolve(provider: str | None, settings: ModelSettings | dict[str, Any] | None = None,
            driver_options: dict[str, Any] | None = None) -> tuple[str, ModelSettings, dict[str, Any]]:
    """(``provider:model``, settings, driver options) for an agent: the default's provider
    when `provider` is None, the default's settings under `settings`, and the default's
    driver options that apply to that provider under `driver_options`."""
    base = current_default()
    chosen = provider or base.provider
    options = {**base.options_for(chosen), **(driver_options or {})}
    return chosen, base.settings.merged(coerce_settings(settings)), options
