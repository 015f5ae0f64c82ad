"""Model lifecycles: which models a provider shuts down, when, and what it recommends instead.

The dates come from the shipped table ``lifecycle.json`` (read from OpenAI's "Deprecations",
Anthropic's "Model deprecations" and Google's "Gemini deprecations" pages, on the date it
names as ``checked``) and, for OpenAI, from ``GET /v1/models``, whose models carry an
optional ``shutdown_date`` (``YYYY-MM-DD``; "Deprecations": "To monitor model shutdowns
programmatically, call the List models endpoint"). The table also holds the one choice of
current model per provider (`current_model`): ipyagent's defaults, examples and hints use it.

A model within `WARN_DAYS` days of its shutdown, or past it, gets one line (`shutdown_notice`)
when it is chosen; a 404 from a provider for a model the table says is shut down says so
(`retired_hint`). Only the provider's own API is meant: a model of the same name behind
another host (a local server, a gateway) follows that host's rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Days before a shutdown from which choosing the model prints a notice.
WARN_DAYS = 60
#: Our provider ids -> the table's (the Responses API serves OpenAI's models).
TABLE_PROVIDERS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gemini"}
#: A dated snapshot's suffix: OpenAI's ``-2025-04-14`` / ``-0613``, Anthropic's ``-20250929``, Gemini's ``-001``.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|\d{3})$")
TABLE = Path(__file__).with_name("lifecycle.json")


@dataclass(frozen=True)
class Lifecycle:
    """One model's shutdown as the provider announced it. Dates are calendar days (UTC)."""

    provider: str
    model: str
    shutdown: date
    deprecated: date | None = None
    replacement: str | None = None
    source: str = ""

    def days_left(self, today: date) -> int:
        """Days from `today` to the shutdown (0 on the day, negative after)."""
        return (self.shutdown - today).days


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The shipped table (``lifecycle.json``), parsed once."""
    return json.loads(TABLE.read_text(encoding="utf-8"))


def checked() -> date:
    """The day the shipped table was read from the providers' pages."""
    return date.fromisoformat(table()["checked"])


def current_model(provider: str) -> str:
    """The model ipyagent's defaults and examples use for `provider` (``openai`` -> ``gpt-6-luna``).

    Raises:
        KeyError: a provider the table has no current model for.
    """
    return table()["current"][TABLE_PROVIDERS.get(provider, provider)]


def example_id(provider: str = "openai") -> str:
    """``provider:model`` with `provider`'s current model, for hints and error messages."""
    return f"{provider}:{current_model(provider)}"


@lru_cache(maxsize=1)
def _index() -> dict[tuple[str, str], Lifecycle]:
    data = table()
    found: dict[tuple[str, str], Lifecycle] = {}
    for row in data["models"]:
        provider = row["provider"]
        for model in row["ids"]:
            found[(provider, model)] = Lifecycle(
                provider, model, date.fromisoformat(row["shutdown"]),
                date.fromisoformat(row["deprecated"]) if row.get("deprecated") else None,
                row.get("replacement"), data["sources"].get(provider, ""))
    return found


def lifecycle(provider: str, model: str) -> Lifecycle | None:
    """The table's entry for `model` of `provider` (a dated snapshot of a listed id included;
    ``models/gemini-2.5-flash`` read as ``gemini-2.5-flash``), None when it names no shutdown."""
    family = TABLE_PROVIDERS.get(provider)
    if family is None or not model:
        return None
    name = model.strip().lower().removeprefix("models/")
    index = _index()
    entry = index.get((family, name))
    if entry is None and _SNAPSHOT.search(name):
        entry = index.get((family, _SNAPSHOT.sub("", name)))
    return entry


def replacement(provider: str, model: str) -> str | None:
    """The model to move to: the provider's recommendation, followed while that one is itself
    on the table (a recommendation that was shut down since); None when none is named."""
    seen = {model}
    entry = lifecycle(provider, model)
    choice = None
    while entry is not None and entry.replacement and entry.replacement not in seen:
        choice = entry.replacement
        seen.add(choice)
        entry = lifecycle(provider, choice)
    return choice


def shutdown_of(provider: str, model: str, listed: date | None = None) -> Lifecycle | None:
    """`model`'s shutdown: the date its provider's model list gave (`listed`, OpenAI's
    ``shutdown_date``) over the table's; None when neither names one."""
    entry = lifecycle(provider, model)
    if listed is None:
        return entry
    if entry is None:
        return Lifecycle(TABLE_PROVIDERS.get(provider, provider), model, listed, source="GET /models")
    return Lifecycle(entry.provider, entry.model, listed, entry.deprecated, entry.replacement, entry.source)


def shutdown_notice(provider: str, model: str, today: date | None = None, *, listed: date | None = None) -> str | None:
    """One line when `model` shuts down within `WARN_DAYS` days of `today` (default: the
    later of the real day and the table's `checked` day) or has shut down; else None::

        openai:gpt-4.1-mini shuts down on 2027-01-14 (in 39 days); use openai:gpt-6-luna
        gemini:gemini-3.8-flash was shut down on 2026-12-01; use gemini:gemini-3.5-flash-lite
    """
    entry = shutdown_of(provider, model, listed)
    if entry is None:
        return None
    today = today or max(date.today(), checked())
    left = entry.days_left(today)
    if left > WARN_DAYS:
        return None
    when = (f"was shut down on {entry.shutdown.isoformat()}" if left < 0 else
            f"shuts down today ({entry.shutdown.isoformat()})" if left == 0 else
            f"shuts down on {entry.shutdown.isoformat()} (in {left} day{'s' if left != 1 else ''})")
    instead = replacement(provider, model)
    advice = f"use {provider}:{instead}" if instead else "choose another model (%provider --models lists them)"
    return f"{provider}:{model} {when}; {advice}"


def retired_hint(provider: str, model: str, today: date | None = None) -> str | None:
    """For a provider's 404 about `model`: that the model was shut down, and what to use
    instead, when the table says it was; else None."""
    entry = lifecycle(provider, model)
    if entry is None or entry.days_left(today or max(date.today(), checked())) > 0:
        return None
    instead = replacement(provider, model)
    return (f"{model} was shut down on {entry.shutdown.isoformat()}"
            + (f"; use {provider}:{instead}" if instead else "; choose another model (%provider --models lists them)"))


def driver_notice(driver: Any) -> str | None:
    """`shutdown_notice` for a driver that talks to its provider's own API: None for another host
    (``--base-url``: that host's own models) and for a replay (a cassette keeps answering for the
    model it recorded)."""
    if not getattr(driver, "price_known", True) or getattr(getattr(driver, "transport", None), "replays", False):
        return None
    return shutdown_notice(driver.provider, driver.model)
