"""Prompt drivers: one module per wire protocol, the base template and the registry."""

from .aggregate import Aggregator
from .base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta
from .pricing import LEDGER, Cost, total_cost
from .registry import BUILTIN, ProviderSpec, create_driver, parse_provider_id, providers, set_alias

__all__ = ["Capabilities", "BasePromptDriver", "BlockIndex", "StreamMeta", "BUILTIN", "ProviderSpec", "create_driver", "parse_provider_id", "providers", "set_alias", "Cost",
           "Aggregator", "total_cost", "LEDGER"]
