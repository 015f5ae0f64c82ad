"""Cheap token estimates and context-window sizes.

These are our estimates, used only to decide what fits: about four characters
per token, a flat figure per image. They are never mixed with the provider's
billed usage (`Usage`), which stays the only count shown as tokens used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..core import ActionCallBlock, ActionResultBlock, AudioBlock, ImageBlock, Message

CHARS_PER_TOKEN = 4
#: Estimated tokens of one image (a mid-size image in OpenAI's and Anthropic's accounting).
IMAGE_TOKENS = 1000
#: Estimated tokens of a message's framing (role, separators).
MESSAGE_OVERHEAD = 4

#: Context windows (tokens) by model-name prefix; the longest matching prefix wins.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "mistral": 32_000,
    "mistral-large": 131_072,
    "deepseek": 65_536,
}
#: Per provider, when the model is not in the table. Ollama cuts prompts at its own
#: ``num_ctx`` (4096 by default) whatever the model could take.
PROVIDER_WINDOWS: dict[str, int] = {"ollama": 4_096}
DEFAULT_WINDOW = 128_000


def estimate_text(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_message(message: Message) -> int:
    total = MESSAGE_OVERHEAD
    for block in message.content:
        if isinstance(block, (ImageBlock, AudioBlock)):
            total += IMAGE_TOKENS
        elif isinstance(block, ActionCallBlock):
            total += estimate_text(block.action.native_name + json.dumps(block.action.input))
        elif isinstance(block, ActionResultBlock):
            total += estimate_text(block.text) + 8
        else:
            total += estimate_text(getattr(block, "text", None) or json.dumps(getattr(block, "value", ""), default=str))
    return total


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Our estimate of the tokens `messages` take in a request (not the provider's count)."""
    return sum(estimate_message(m) for m in messages)


def context_window(model: str, provider: str | None = None) -> int:
    """The model's context window in tokens: from `CONTEXT_WINDOWS` by prefix, else the
    provider's default, else `DEFAULT_WINDOW`. Pass ``--context-window`` to override."""
    name = model.lower().rsplit("/", 1)[-1]
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    if best is not None and provider != "ollama":
        return CONTEXT_WINDOWS[best]
    return PROVIDER_WINDOWS.get(provider or "", DEFAULT_WINDOW)


def output_reserve(window: int) -> int:
    """Tokens kept free for the reply when fitting a prompt into `window`."""
    return min(max(256, window // 8), 16_384)
