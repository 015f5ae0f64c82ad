"""Prompt drivers: one module per wire protocol, the base template and the registry."""

from .._lazy import lazy_exports
from .aggregate import Aggregator
from .base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta, close_all_drivers
from .decode import StreamDecoder
from .catalog.lifecycle import Lifecycle, current_model, driver_notice, example_id, lifecycle, shutdown_notice
from .catalog.pricing import Cost, Ledger, format_usd, total_cost
from .registry import (
    ALIASES,
    BUILTIN,
    KEY_FALLBACKS,
    ProviderSpec,
    create_driver,
    otel_provider_name,
    parse_provider_id,
    providers,
    resolve_alias,
    set_alias,
)

__getattr__ = lazy_exports(__name__, {
    "structured": ("OUTPUT_TOOL", "with_rule_instruction"),  # structured output: the tool and rule strategies
    "rate_gate": ("RateGate",),  # one lane's rate limit and 429 back-off (evaluation's scheduler)
    "batch": ("BatchAPI", "BatchAnswer", "BatchState"),  # provider batch APIs (evaluation)
    "batch_apis": ("batch_api",),
})

__all__ = [
    "BatchAPI",
    "BatchAnswer",
    "BatchState",
    "batch_api",
    "Capabilities",
    "BasePromptDriver",
    "BlockIndex",
    "StreamDecoder",
    "StreamMeta",
    "BUILTIN",
    "ProviderSpec",
    "create_driver",
    "otel_provider_name",
    "parse_provider_id",
    "providers",
    "set_alias",
    "resolve_alias",
    "ALIASES",
    "KEY_FALLBACKS",
    "Cost",
    "Aggregator",
    "total_cost",
    "format_usd",
    "Ledger",
    "close_all_drivers",
    "Lifecycle",
    "current_model",
    "driver_notice",
    "example_id",
    "lifecycle",
    "shutdown_notice",
    *__getattr__.exports,
]
