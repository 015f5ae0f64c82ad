"""Anthropic Messages over SSE: the prompt driver and its public names.

Follows the Anthropic API reference, "Messages" (`POST /v1/messages`,
`anthropic-version: 2023-06-01`), its "Streaming Messages" guide, "Errors", "Tool use",
"Extended thinking" and "Handling stop reasons". One module per part of the translation:

* `request` — PromptStack -> the request body (`AnthropicRequest`, mixed into the driver);
* `stream` — SSE events (or a whole reply) -> deltas (`MessagesDecoder`, `block_deltas`,
  `usage_from_anthropic`, `stop_kind`);
* `server` — provider-side tools (web search, web fetch, code execution) and citations;
* `errors` — the error envelope -> `ProviderError`;
* `driver` — `AnthropicPromptDriver`, joining them.
"""

from .driver import API_VERSION, AnthropicPromptDriver
from .errors import ERROR_TYPES, error_from_object
from .request import (
    CACHE_CONTROL,
    DEFAULT_MAX_TOKENS,
    MIN_THINKING_BUDGET,
    STRUCTURED_OUTPUT_TOOL,
    TOOL_CHOICE_TYPES,
    AnthropicRequest,
)
from .stream import STOP_REASONS, MessagesDecoder, block_deltas, stop_kind, usage_from_anthropic

__all__ = [
    "API_VERSION", "CACHE_CONTROL", "DEFAULT_MAX_TOKENS", "ERROR_TYPES", "MIN_THINKING_BUDGET", "STOP_REASONS",
    "STRUCTURED_OUTPUT_TOOL", "TOOL_CHOICE_TYPES", "AnthropicPromptDriver", "AnthropicRequest", "MessagesDecoder",
    "block_deltas", "error_from_object", "stop_kind", "usage_from_anthropic",
]
