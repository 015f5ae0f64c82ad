"""The price of a model turn, from genai-prices (imported on first use).

Prices depend on the provider, so they are worked out here, in the drivers
layer: the base driver puts ``metadata["cost"]`` (`Cost.to_dict()`, or None when
the price is unknown) on every `ModelCompleted`.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from typing import TYPE_CHECKING, Any

from ...core import ConfigurationError, ProviderError, format_usd

if TYPE_CHECKING:
    from ...core import Usage

#: Our provider ids -> genai-prices provider ids. Others (ollama, plug-ins) have no known price.
PRICE_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "openai-responses": "openai",
    "azure-openai": "azure",
    "anthropic": "anthropic",
    "gemini": "google",
    "groq": "groq",
    "mistral": "mistral",
    "openrouter": "openrouter",
    "deepseek": "deepseek",
}

#: Provider-side tool calls (`Usage.server_tool_calls`) -> genai-prices' per-call units: a web search
#: ($10 per thousand at OpenAI and Anthropic, Gemini's per-query grounding), a file search (OpenAI's
#: "storage searches"), a code execution. Web fetch and URL context cost their tokens only.
TOOL_UNITS: dict[str, str] = {"web_search": "web_searches", "file_search": "storage_searches",
                              "code_execution": "code_executions"}

#: Providers whose `Usage.output_tokens` leaves out the reasoning tokens they bill as output (Gemini's thoughts).
REASONING_OUTSIDE_OUTPUT = frozenset({"gemini"})

#: What a batch API's turn costs against a live one, where genai-prices has no batch price for the
#: model (its ``processing: batch`` price variants, used first, cover each provider's current models
#: only): half, as each provider documents it (OpenAI, "Batch API" guide: "50% cost discount";
#: Anthropic, "Batch processing", pricing: "50% of standard API prices"; Google, "Batch Mode":
#: "50% of the standard cost").
BATCH_DISCOUNT = 0.5


class Cost(float):
    """A price in US dollars. The float value is the total, so a `Cost` sorts, sums and
    formats like a number; `input_usd` (cache reads and writes included) and
    `output_usd` are its parts."""

    input_usd: float
    output_usd: float

    def __new__(cls, input_usd: float, output_usd: float, total_usd: float | None = None) -> "Cost":
        self = super().__new__(cls, input_usd + output_usd if total_usd is None else total_usd)
        self.input_usd, self.output_usd = float(input_usd), float(output_usd)
        return self

    @property
    def total_usd(self) -> float:
        return float(self)

    def __add__(self, other: Any) -> Any:
        if isinstance(other, Cost):
            return Cost(
                self.input_usd + other.input_usd, self.output_usd + other.output_usd, float(self) + float(other)
            )
        return float(self) + other

    def __str__(self) -> str:
        return format_usd(float(self))

    def __repr__(self) -> str:
        return f"Cost(total_usd={float(self)!r}, input_usd={self.input_usd!r}, output_usd={self.output_usd!r})"

    def __reduce__(self) -> Any:
        return (Cost, (self.input_usd, self.output_usd, float(self)))

    def to_dict(self) -> dict[str, float]:
        return {"input_usd": self.input_usd, "output_usd": self.output_usd, "total_usd": float(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Cost":
        return cls(float(data["input_usd"]), float(data["output_usd"]), float(data["total_usd"]))


#: Turns priced so far: (genai-prices provider, model, tokens, hour) -> (input, output, total) USD or None.
#: A batch of runs on one model (an evaluation) mostly repeats a few usages; genai-prices takes
#: about 0.1 ms a turn. The hour is in the key because prices may change at a given time.
_PRICED: dict[tuple[Any, ...], tuple[float, float, float] | None] = {}
_PRICED_MAX = 4096


def loaded() -> bool:
    """True once genai-prices' tables are loaded (the first price takes ~0.15 s; later ones ~0.1 ms)."""
    return bool(_PRICED)


def price_provider_of(provider: str, price_provider: str | None = None) -> str | None:
    """genai-prices' id for our `provider` (`price_provider` when a plug-in driver names one); None:
    genai-prices does not list it, and `price` is None without reading its tables."""
    return price_provider or PRICE_PROVIDERS.get(provider)


def price(provider: str, model: str, usage: Usage, *, price_provider: str | None = None,
          batch: bool = False) -> Cost | None:
    """The price of one model turn, or None when genai-prices does not know the provider or model.

    Args:
        provider: our provider id (``openai``, ``gemini``...).
        model: the model as the provider reported it (a dated snapshot, as the reply named it).
        usage: the turn's billed tokens (`Usage.input_tokens` includes cache reads and writes) and
            provider-side tool calls (`Usage.server_tool_calls`, priced per call: `TOOL_UNITS`).
        price_provider: a genai-prices provider id overriding `PRICE_PROVIDERS` (plug-in drivers).
        batch: the turn went through the provider's batch API: genai-prices' batch price
            (``price_context={"processing": "batch"}``), else the live price times `BATCH_DISCOUNT`.
    """
    provider_id = price_provider_of(provider, price_provider)
    if provider_id is None or not model:
        return None
    output = usage.output_tokens + (usage.reasoning_tokens if provider in REASONING_OUTSIDE_OUTPUT else 0)
    tokens = {"input_tokens": usage.input_tokens, "output_tokens": output}
    if usage.cache_read_tokens:
        tokens["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        tokens["cache_write_tokens"] = usage.cache_write_tokens
    for kind, count in usage.server_tool_calls.items():
        if kind in TOOL_UNITS and count:
            tokens[TOOL_UNITS[kind]] = count
    key = (provider_id, model, *tokens.items(), int(time.time() // 3600), batch)
    if key not in _PRICED:
        if len(_PRICED) >= _PRICED_MAX:
            _PRICED.clear()
        _PRICED[key] = _batch_calc(provider_id, model, tokens) if batch else _calc(provider_id, model, tokens)
    found = _PRICED[key]
    return None if found is None else Cost(*found)


def check_price_as(price_as: str) -> None:
    """Refuse a ``PROVIDER:MODEL`` to price turns as (``--price-as``) that genai-prices has no
    price for: every turn would read "price unknown" with nothing said when it was set.

    Raises:
        ConfigurationError: no price is known for it, naming how to find one that is.
    """
    provider, _, model = price_as.partition(":")
    provider_id = price_provider_of(provider)
    tokens = {"input_tokens": 1000, "output_tokens": 1000}
    if provider_id is None or not model or _calc(provider_id, model, tokens) is None:
        raise ConfigurationError(
            f"--price-as {price_as!r}: genai-prices has no price for it; name a model it prices "
            "(%provider --models PROVIDER lists them with their prices)"
        )


def _batch_calc(provider_id: str, model: str, tokens: dict[str, int]) -> tuple[float, float, float] | None:
    """A batch turn's (input, output, total) USD: genai-prices' batch variant of the model's price
    when it has one (a price that differs from the live one), else the live price times `BATCH_DISCOUNT`."""
    live = _calc(provider_id, model, tokens)
    if live is None:
        return None
    batched = _calc(provider_id, model, tokens, {"processing": "batch"})
    if batched is not None and batched != live:
        return batched
    return live[0] * BATCH_DISCOUNT, live[1] * BATCH_DISCOUNT, live[2] * BATCH_DISCOUNT


def _calc(provider_id: str, model: str, tokens: dict[str, int],
          context: dict[str, str] | None = None) -> tuple[float, float, float] | None:
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        extra = {"price_context": context} if context else {}  # a genai-prices without it: TypeError, None
        calc = calc_price(PriceUsage(**tokens), model, provider_id=provider_id, **extra)
    except Exception:  # an unknown model (LookupError) or odd usage: the price is unknown, the run is fine
        return None
    return float(calc.input_price), float(calc.output_price), float(calc.total_price)


def total_cost(costs: list[dict[str, Any] | None]) -> Cost | None:
    """The sum of per-turn ``metadata["cost"]`` values; None when any turn's price is unknown."""
    if not costs or any(c is None for c in costs):
        return None
    total = Cost.from_dict(costs[0])  # type: ignore[arg-type]
    for c in costs[1:]:
        total = total + Cost.from_dict(c)  # type: ignore[arg-type]
    return total


_NAN = math.nan


class Ledger:
    """What a session spent, turn by turn: each run records its billed model turns here
    (`record_turn`; replays excepted), whatever started it (a cell, a comparison, Python).
    A run is given its ledger (`RunOptions.ledger`); the session's is the default's
    (`agent.defaults.Defaults.ledger`).

    `budget` (USD, None: none) is what ``%provider --budget`` sets; `check_budget`
    refuses new runs once the known total has reached it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.budget: float | None = None
        self._clear()

    def _clear(self) -> None:
        """No turns. A session keeps every turn of its runs (an evaluation's thousands): each is four
        numbers in arrays, its provider and model an index into the pairs seen, not a tuple of objects."""
        self._pairs: list[tuple[str, str]] = []  # (provider, model), each once
        self._pair_index: dict[tuple[str, str], int] = {}
        self._which = array("I")  # per turn: its (provider, model) in `_pairs`
        self._costs = array("d")  # per turn: USD, NaN when unknown
        self._tokens = array("q")  # per turn: input, output tokens
        self._known = 0.0  # USD of the turns whose price is known, summed in order (`total`)

    def record(self, provider: str, model: str, cost: float | None, usage: Usage) -> None:
        with self._lock:
            pair = (provider, model)
            index = self._pair_index.get(pair)
            if index is None:
                index = self._pair_index[pair] = len(self._pairs)
                self._pairs.append(pair)
            self._which.append(index)
            self._costs.append(_NAN if cost is None else float(cost))
            self._tokens.extend((usage.input_tokens, usage.output_tokens))
            if cost is not None:
                self._known += float(cost)

    @property
    def turns(self) -> list[tuple[str, str, float | None, int, int]]:
        """Every recorded turn, in order: (provider, model, USD or None when unknown, input, output tokens)."""
        with self._lock:
            pairs, tokens = self._pairs, self._tokens
            return [(*pairs[k], None if c != c else c, tokens[2 * n], tokens[2 * n + 1])
                    for n, (k, c) in enumerate(zip(self._which, self._costs))]

    def record_turn(self, metadata: dict[str, Any], usage: Usage | None) -> None:
        """Record a model turn from its event's `metadata` (``provider``, ``model``, ``cost``:
        `Cost.to_dict()` or None when unknown) and billed `usage`; a replayed turn, or one
        without usage or a price entry (nothing was billed), is not recorded."""
        if usage is None or "cost" not in metadata or metadata.get("replayed"):
            return
        cost = metadata["cost"]
        total = float(cost["total_usd"]) if isinstance(cost, dict) else None
        self.record(str(metadata.get("provider") or ""), str(metadata.get("model") or ""), total, usage)

    @property
    def total(self) -> float:
        """USD spent on turns whose price is known."""
        with self._lock:
            return self._known

    def by_provider(self) -> dict[str, dict[str, Any]]:
        """provider -> ``{"turns", "input_tokens", "output_tokens", "usd" (known part), "unknown" (turns without
        a price)}``."""
        rows: dict[str, dict[str, Any]] = {}
        for provider, _, cost, tokens_in, tokens_out in self.turns:
            row = rows.setdefault(
                provider, {"turns": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0, "unknown": 0}
            )
            row["turns"] += 1
            row["input_tokens"] += tokens_in
            row["output_tokens"] += tokens_out
            if cost is None:
                row["unknown"] += 1
            else:
                row["usd"] += cost
        return rows

    def check_budget(self) -> None:
        """Raises:
        ProviderError: type ``budget`` once the known total has reached `budget`."""
        if self.budget is not None and self.total >= self.budget:
            raise ProviderError(
                "budget",
                f"this session has spent {format_usd(self.total)} of its {format_usd(self.budget)} budget; "
                "no new run starts (%provider --budget USD raises it; %agent cost shows the spending)",
                retryable=False,
            )

    def reset(self) -> None:
        with self._lock:
            self._clear()
            self.budget = None

