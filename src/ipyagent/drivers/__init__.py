"""Prompt drivers: one module per wire protocol, the base template and the registry."""

from .base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta
from .pricing import Cost
from .registry import BUILTIN, ProviderSpec, create_driver, parse_provider_id, providers, set_alias

__all__ = ["Capabilities", "BasePromptDriver", "BlockIndex", "StreamMeta", "BUILTIN", "ProviderSpec", "create_driver", "parse_provider_id", "providers", "set_alias", "Cost"]
