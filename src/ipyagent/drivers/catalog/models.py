"""Model lists: what a provider offers, with context window and price where known.

Each protocol's list endpoint (`BasePromptDriver.list_models`):

* OpenAI and every compatible server: ``GET {base}/models`` -> ``{"object": "list",
  "data": [{"id", "object": "model", "created", "owned_by", "shutdown_date"?}]}`` (OpenAI API
  reference, "Models: List models"; ``shutdown_date`` is ``YYYY-MM-DD`` or null, "Deprecations");
* Anthropic: ``GET {base}/models?limit=1000`` -> ``{"data": [{"type": "model", "id",
  "display_name", "created_at"}], "has_more", "first_id", "last_id"}``, paged with
  ``after_id`` (Anthropic API reference, "Models: List Models");
* Gemini: ``GET {base}/models?pageSize=1000`` -> ``{"models": [{"name": "models/ID",
  "displayName", "inputTokenLimit", "outputTokenLimit", "supportedGenerationMethods"}],
  "nextPageToken"}``, paged with ``pageToken`` (Gemini API reference, "models.list");
* Ollama: ``GET {base}/api/tags`` -> ``{"models": [{"name", "model", "modified_at", "size",
  "details": {"family", "parameter_size", "quantization_level"}}]}`` (Ollama API,
  "List Local Models").

Context windows and prices come from genai-prices where the provider reports none; shutdown
dates from the shipped lifecycle table (`lifecycle`) where the provider's list gives none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, ClassVar

import httpx2

from ...core import ProviderError, redact
from . import pricing
from .lifecycle import replacement, shutdown_of


@dataclass
class ModelListing:
    """One model a provider offers.

    Attributes:
        id: the id to use after ``provider:`` (``gpt-6-luna``).
        name: a display name, when the provider gives one.
        context_window: input tokens the model takes, when known.
        input_usd_per_mtok, output_usd_per_mtok: USD per million tokens (genai-prices), when known.
        shutdown_date: the day the provider shuts the model down: its list's ``shutdown_date``
            (OpenAI), else the shipped lifecycle table's; None when neither names one.
        replacement: the model the provider recommends instead, when it names one.
        details: anything else the provider said (created, owner, size, family...).
    """

    id: str
    name: str | None = None
    context_window: int | None = None
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    shutdown_date: date | None = None
    replacement: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def parse_openai(data: Any) -> tuple[list[ModelListing], dict[str, Any] | None]:
    """An OpenAI-style list (``data[].id``, ``shutdown_date`` where given); no paging."""
    rows = [ModelListing(m["id"], shutdown_date=_day(m.get("shutdown_date")),
                         details={k: m[k] for k in ("created", "owned_by") if m.get(k) is not None})
            for m in (data.get("data") or []) if isinstance(m, dict) and m.get("id")]
    return rows, None


def _day(value: Any) -> date | None:
    """A ``YYYY-MM-DD`` date (a longer ISO timestamp read as its day); None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def parse_anthropic(data: Any) -> tuple[list[ModelListing], dict[str, Any] | None]:
    rows = [ModelListing(m["id"], m.get("display_name"), details={"created_at": m.get("created_at")})
            for m in (data.get("data") or []) if isinstance(m, dict) and m.get("id")]
    return rows, ({"after_id": data["last_id"]} if data.get("has_more") and data.get("last_id") else None)


def parse_gemini(data: Any) -> tuple[list[ModelListing], dict[str, Any] | None]:
    """Gemini's list, keeping the models that generate content (not embedding-only ones)."""
    rows = []
    for m in data.get("models") or []:
        methods = m.get("supportedGenerationMethods") or []
        if not isinstance(m, dict) or not m.get("name") or (methods and "generateContent" not in methods):
            continue
        rows.append(ModelListing(m["name"].removeprefix("models/"), m.get("displayName"), m.get("inputTokenLimit"),
                                 details={k: m[k] for k in ("outputTokenLimit", "version") if m.get(k) is not None}))
    return rows, ({"pageToken": data["nextPageToken"]} if data.get("nextPageToken") else None)


def parse_ollama(data: Any) -> tuple[list[ModelListing], dict[str, Any] | None]:
    rows = []
    for m in data.get("models") or []:
        if isinstance(m, dict) and (m.get("model") or m.get("name")):
            details = dict(m.get("details") or {})
            details.update({k: m[k] for k in ("size", "modified_at") if m.get(k) is not None})
            rows.append(ModelListing(m.get("model") or m["name"], details=details))
    return rows, None


def with_shutdowns(rows: list[ModelListing], provider: str) -> list[ModelListing]:
    """Fill each row's shutdown date (where the list gave none) and replacement from the shipped
    lifecycle table of `provider` (our id: ``openai``, ``anthropic``...)."""
    for row in rows:
        entry = shutdown_of(provider, row.id, row.shutdown_date)
        if entry is not None:
            row.shutdown_date = entry.shutdown
            row.replacement = replacement(provider, row.id)
    return rows


def with_known_facts(rows: list[ModelListing], price_provider: str | None) -> list[ModelListing]:
    """Fill context windows and prices from genai-prices (`price_provider`: its provider id, None: none)."""
    if price_provider is None:
        return rows
    try:
        from genai_prices.data_snapshot import find_provider_by_id, get_snapshot

        provider = find_provider_by_id(get_snapshot().providers, price_provider)
    except Exception:  # noqa: BLE001 - prices are extra; the list stands without them
        return rows
    if provider is None:
        return rows
    for row in rows:
        try:
            info = provider.find_model(row.id)
        except Exception:  # noqa: BLE001
            info = None
        if info is None:
            continue
        row.context_window = row.context_window or getattr(info, "context_window", None)
        prices = getattr(info, "prices", None)
        row.input_usd_per_mtok = _number(getattr(prices, "input_mtok", None))
        row.output_usd_per_mtok = _number(getattr(prices, "output_mtok", None))
        row.name = row.name or getattr(info, "name", None)
    return rows


def _number(value: Any) -> float | None:
    """A flat price as a float; tiered prices (an object with tiers) give their base rate."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        base = getattr(value, "base", None)
        return float(base) if base is not None else None


class ModelLists:
    """The driver template's model list (`list_models`; mixed into `BasePromptDriver`, whose
    client, headers and error mapping it uses)."""

    provider: str
    base_url: str
    price_known: bool
    models_path: ClassVar[str]
    models_params: ClassVar[dict[str, Any]]

    def parse_models(self, data: dict[str, Any]) -> tuple[list[ModelListing], dict[str, Any] | None]:
        """(models on one page of the list, the query for the next page or None); OpenAI's shape."""
        return parse_openai(data)

    async def list_models(self, *, max_pages: int = 20) -> list[ModelListing]:
        """The models this provider offers (`models_path`, every page), with context window and
        price from genai-prices where known, and shutdown dates: the list's own (OpenAI's
        ``shutdown_date``), and for the provider's own host the shipped lifecycle table's
        (prices too only for the provider's own host).

        Raises:
            ProviderError: ``not_found`` when the server has no model list (404/405), else as
                for any request (``authentication``, ``connection``...), or ``invalid_response``.
        """
        client, url = self._client_for(), f"{self.base_url}{self.models_path}"
        params, rows = dict(self.models_params), []
        for _ in range(max_pages):
            try:
                headers = {**self.headers(), "Accept": "application/json"}
                response = await client.get(url, params=params, headers=headers)
            except httpx2.TransportError as exc:
                raise self._transport_error(exc, url) from None
            page, following = self.parse_models(self._models_page(response, url))
            rows += page
            if not following:
                break
            params = {**self.models_params, **following}
        provider = getattr(self, "price_provider", None) or pricing.PRICE_PROVIDERS.get(self.provider)
        if self.price_known:  # the provider's own host: its announced shutdowns (a list's own dates are kept)
            rows = with_shutdowns(rows, self.provider)
        return with_known_facts(rows, provider if self.price_known else None)

    def _models_page(self, response: httpx2.Response, url: str) -> dict[str, Any]:
        """One page of the model list as JSON.

        Raises:
            ProviderError: ``not_found`` (404/405: no list), the HTTP error's, or ``invalid_response``.
        """
        if response.status_code in (404, 405):
            raise ProviderError(
                "not_found",
                f"{self.provider} at {redact(self.base_url)} has no model list "
                f"(GET {self.models_path} answered HTTP {response.status_code}); name the model yourself",
                status=response.status_code,
                retryable=False,
            )
        if response.status_code >= 400:
            raise self.error_from_response(response.status_code, response.headers, response.content)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ProviderError(
                "invalid_response",
                f"{self.provider}'s model list at {redact(url)} is not a JSON object",
                retryable=False,
            )
        return data
