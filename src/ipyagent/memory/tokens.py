"""Cheap token estimates, and the room a reply needs in a context window.

These are our estimates, used only to decide what fits: about four characters
per token, a flat figure per image. They are never mixed with the provider's
billed usage (`Usage`), which stays the only count shown as tokens used. A
model's context window is the driver's knowledge (`BasePromptDriver.context_window`).
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
            total += estimate_text(block.text) + 8 + IMAGE_TOKENS * len(block.media)
        else:
            total += estimate_text(getattr(block, "text", None) or json.dumps(getattr(block, "value", ""), default=str))
    return total


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Our estimate of the tokens `messages` take in a request (not the provider's count)."""
    return sum(estimate_message(m) for m in messages)


def output_reserve(window: int) -> int:
    """Tokens kept free for the reply when fitting a prompt into `window`."""
    return min(max(256, window // 8), 16_384)
