"""A run's core `Message`s as a saved transcript's messages (`transcript_messages`): text joined per
message with its citations, reasoning, each tool call with its result and its timing
(`ToolTiming`), a provider-side tool's call and result on one card, images kept when small.
Names are re-exported by `transcript`."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .transcript_parts import (
    APPROVALS,
    MAX_IMAGE_CHARS,
    PREVIEW_CHARS,
    RASTER_TYPES,
    MediaPart,
    OtherPart,
    ReasoningPart,
    ServerSource,
    ServerToolPart,
    TextPart,
    ToolCallPart,
    TranscriptCitation,
    TranscriptMessage,
    card_result,
)


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """How one tool call ran, as its card shows it: the `seconds` it took, whether its result
    is an error, `approval` (``approved`` / ``denied`` by the user, None when it needed none) and
    `stopped` (``interrupted`` / ``timeout`` when the run's end cut it off, else None); `notes`:
    what happened while it ran, a line each (an MCP server's sampling request, an elicitation)."""

    seconds: float
    is_error: bool = False
    approval: str | None = None
    stopped: str | None = None
    notes: tuple[str, ...] = ()


def transcript_messages(messages: Iterable[Any], timings: Mapping[str, deque[ToolTiming]] | None = None
                        ) -> list[TranscriptMessage]:
    """`messages` (core `Message`s) as a transcript's messages: text joined per message, reasoning,
    each tool call with its result (from the call's output or a later result block), images kept
    when small. `timings` (tool call id -> its calls' `ToolTiming`s in the order run; each read is
    taken off its queue) times the calls, says which the user approved or denied and which the
    run's end cut off."""
    timings = timings or {}
    out: list[TranscriptMessage] = []
    open_calls: dict[str, ToolCallPart] = {}
    open_servers: dict[str, ServerToolPart] = {}
    for message in messages:
        parts: list[Any] = []
        for block in getattr(message, "content", []):
            kind = getattr(block, "type", None)
            if kind == "text":
                _add_text(parts, block)
            elif kind in ("server_tool_call", "server_tool_result"):
                _add_server(parts, block, open_servers)
            elif kind == "reasoning":
                parts.append(ReasoningPart(text=block.text, redacted=bool(getattr(block, "redacted", False))))
            elif kind == "action_call":
                action = block.action
                call = ToolCallPart(id=action.tag, name=_native_name(action), arguments=dict(action.input or {}))
                if action.output is not None:
                    call.result, call.media = card_result(action.output)
                    call.status = "error" if getattr(action.output, "type", None) == "error" else "ok"
                queue = timings.get(action.tag)
                if queue:
                    timing = queue.popleft()
                    call.duration_s = round(timing.seconds, 4)
                    approval, stop, call.notes = timing.approval, timing.stopped, list(timing.notes)
                    call.approval = approval if approval in APPROVALS else None  # type: ignore[assignment]
                    call.stopped = stop if stop in ("interrupted", "timeout") else None  # type: ignore[assignment]
                    if call.result is not None and timing.is_error:
                        call.status = "error"
                open_calls[action.tag] = call
                parts.append(call)
            elif kind == "action_result":
                call = open_calls.pop(block.action.tag, None)
                if call is None:  # a result whose call we do not have: keep it visible
                    parts.append(ToolCallPart(id=block.action.tag, name=_native_name(block.action),
                                              arguments=dict(block.action.input or {}), result=block.text,
                                              status="error" if block.is_error else "ok",
                                              media=[MediaPart.of_block(m) for m in block.media]))
                elif call.result is None:
                    call.result, call.status = block.text, "error" if block.is_error else "ok"
                    call.media = [MediaPart.of_block(m) for m in block.media]
            elif kind in ("image", "audio"):
                mime, data = getattr(block, "mime_type", "") or "", getattr(block, "data", None)
                keep = kind == "image" and mime in RASTER_TYPES and data and len(data) <= MAX_IMAGE_CHARS
                parts.append(OtherPart(kind=kind, summary=f"<{kind} {mime}>", mime_type=mime or None,
                                       data=data if keep else None))
            elif kind is not None:
                summary = json.dumps(getattr(block, "value", None), default=str)[:PREVIEW_CHARS]
                parts.append(OtherPart(kind=str(kind), summary=summary))
        role = getattr(message, "role", "assistant")
        if parts:
            out.append(TranscriptMessage(role=role, parts=parts))
    return out


def _add_text(parts: list[Any], block: Any) -> None:
    """A text block onto `parts`: joined to the text part before it (its citations' offsets moved
    along), else a new part."""
    joined = parts[-1] if parts and isinstance(parts[-1], TextPart) else None
    offset = len(joined.text) if joined is not None else 0
    cited = [TranscriptCitation(start=offset + (c.start if c.start is not None else 0),
                                end=offset + (c.end if c.end is not None else len(block.text)),
                                url=c.url, title=c.title, document=c.document, location=c.location, quote=c.quote)
             for c in getattr(block, "citations", None) or ()]
    if joined is not None:
        joined.text += block.text
        joined.citations += cited
    else:
        parts.append(TextPart(text=block.text, citations=cited))


def _add_server(parts: list[Any], block: Any, open_servers: dict[str, ServerToolPart]) -> None:
    """A provider-side tool's call (a new card) or result (onto its call's card; a card of its
    own when its call is not there)."""
    if block.type == "server_tool_call":
        part = open_servers[block.id] = ServerToolPart(id=block.id, tool=block.tool, name=block.name,
                                                       input=dict(block.input or {}))
        parts.append(part)
        return
    part = open_servers.pop(block.call_id, None)
    if part is None:
        part = ServerToolPart(id=block.call_id, tool=block.tool)
        parts.append(part)
    part.status = "error" if block.error else "ok"
    part.sources = [ServerSource(url=s.url, title=s.title, retrieval=s.status) for s in block.sources]
    part.output, part.error, part.files = block.output, block.error, [dict(f) for f in block.files]
    part.images = [{"mime_type": i.mime_type, "data": i.data} for i in block.images
                   if i.data and i.mime_type in RASTER_TYPES and len(i.data) <= MAX_IMAGE_CHARS]


def _native_name(action: Any) -> str:
    try:
        return action.native_name
    except Exception:  # a name a model made up that does not map back
        return str(getattr(action, "name", "") or "tool call")
