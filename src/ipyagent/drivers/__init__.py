"""Prompt drivers: one module per wire protocol, the base template and the registry."""

from .._lazy import lazy_exports
from .catalog.lifecycle import Lifecycle, current_model, driver_notice, example_id, lifecycle, shutdown_notice
from .catalog.pricing import Cost, Ledger, check_price_as, format_usd, total_cost
from .registry import (
    ALIAS_OPTIONS,
    ALIASES,
    BUILTIN,
    KEY_FALLBACKS,
    ProviderChoice,
    ProviderSpec,
    alias_options,
    check_base_url,
    check_record,
    choose_provider,
    create_driver,
    otel_provider_name,
    parse_provider_id,
    providers,
    resolve_alias,
    set_alias,
)

#: The drivers themselves (and httpx2 with them) load with the first driver made: a first ``%provider``
#: only checks the choice (`choose_provider`).
__getattr__ = lazy_exports(__name__, {
    "aggregate": ("Aggregator",),
    "base": ("BasePromptDriver", "BlockIndex", "Capabilities", "StreamMeta", "close_all_drivers"),
    "decode": ("StreamDecoder",),
    "structured": ("OUTPUT_TOOL", "with_rule_instruction"),  # structured output: the tool and rule strategies
    "rate_gate": ("RateGate",),  # one lane's rate limit and 429 back-off (evaluation's scheduler)
    "batch": ("BatchAPI", "BatchAnswer", "BatchState"),  # provider batch APIs (evaluation)
    "batch_apis": ("batch_api",),
})

__all__ = [
    "BUILTIN",
    "ProviderChoice",
    "ProviderSpec",
    "check_base_url",
    "check_price_as",
    "check_record",
    "choose_provider",
    "create_driver",
    "otel_provider_name",
    "parse_provider_id",
    "providers",
    "set_alias",
    "resolve_alias",
    "ALIASES",
    "ALIAS_OPTIONS",
    "alias_options",
    "KEY_FALLBACKS",
    "Cost",
    "total_cost",
    "format_usd",
    "Ledger",
    "Lifecycle",
    "current_model",
    "driver_notice",
    "example_id",
    "lifecycle",
    "shutdown_notice",
    *__getattr__.exports,
]
