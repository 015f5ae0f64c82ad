"""Runs, threads and messages as lines of text, for ``%agent history``, ``runs`` and ``inspect``
in a terminal: each block cut to `SHOWN_CHARS`, a message's status and error said."""

from __future__ import annotations

import datetime
import json
from typing import Any

from ....core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    Usage,
)

#: Characters of one message block shown by history and inspect.
SHOWN_CHARS = 600


def json_short(value: Any, limit: int) -> str:
    """`value` as JSON (non-ASCII kept, anything else as text), cut to `limit` characters by `short`."""
    return short(json.dumps(value, ensure_ascii=False, default=str), limit)


def short(text: str, limit: int = SHOWN_CHARS) -> str:
    text = text.replace("\r", "")
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more chars)"


def message_lines(message: Message) -> list[str]:
    """A message as readable lines: text, reasoning, tool calls and results, flags."""
    flags = {"complete": "", "partial": "partial"}.get(message.status, f"partial, {message.status}")
    tag = f" [{flags}]" if flags else ""
    lines = []
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.append(f"{message.role}{tag}: {short(block.text)}")
        elif isinstance(block, ReasoningBlock):
            lines.append(f"{message.role}{tag} (reasoning): {short(block.text)}")
        elif isinstance(block, ActionCallBlock):
            lines.append(
                f"{message.role}{tag} → "
                f"{block.action.native_name}({short(json.dumps(block.action.input), 300)})  [{block.action.tag}]"
            )
        elif isinstance(block, ActionResultBlock):
            label = "error" if block.is_error else "result"
            media = "".join(f" [{m.type} {m.mime_type}]" for m in block.media)
            lines.append(
                f"tool ← {label} of {block.action.native_name} [{block.action.tag}]: {short(block.text, 300)}{media}"
            )
        elif isinstance(block, (ImageBlock, AudioBlock)):
            lines.append(f"{message.role}{tag}: [{block.type} {block.mime_type}]")
        else:
            lines.append(f"{message.role}{tag}: [{block.type}]")
    if not message.content:
        lines.append(f"{message.role}{tag}: (nothing had arrived)")
    for call in message.metadata.get("partial_tool_calls") or []:
        lines.append(
            f"{message.role}{tag} → {call.get('name')}({short(call.get('raw_arguments') or '', 300)}  (cut off)"
        )
    if message.error is not None:
        lines.append(f"  error: {message.error.type}: {message.error.message}")
    return lines


def tokens_text(usage: dict[str, Any]) -> str:
    """``"12 in / 3 out"`` from a stored usage dict (old field names too)."""
    u = Usage.model_validate(usage)
    return f"{u.input_tokens} in / {u.output_tokens} out"


def system_block_lines(blocks: list[dict[str, Any]]) -> list[str]:
    """``%agent inspect``: which system blocks went into a request, and which were dropped to fit."""
    if not blocks:
        return []
    sent = [b for b in blocks if b.get("kept")]
    lines = [
        f"system blocks: {len(sent)} sent, ≈{sum(b.get('token_count', 0) for b in sent):,} tokens (estimate)"
        + (f"; {len(blocks) - len(sent)} dropped to fit the budget" if len(sent) < len(blocks) else "")
    ]
    for b in blocks:
        kind = "dynamic" if b.get("dynamic") else "static"
        lines.append(
            f"  {'sent   ' if b.get('kept') else 'dropped'}  {b.get('source')}  priority {b.get('priority')}  {kind}  "
            f"≈{b.get('token_count', 0):,} tokens"
        )
    return lines


def when_text(timestamp: float | None) -> str:
    if not timestamp:
        return "?"
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")
