"""What a live view keeps of a provider-side tool call (its card) and of the sources an answer
cites, in the transcript's own shapes (`core.ServerToolPart`, `core.TranscriptCitation`), so the
live front end draws them with the saved transcript's renderer."""

from __future__ import annotations

from typing import Any

from ...core import RASTER_TYPES, MAX_IMAGE_CHARS, ServerToolCallBlock, ServerToolResultBlock


def new_card(call_id: str = "", tool: str = "", name: str = "") -> dict[str, Any]:
    """A card still running: a `ServerToolPart` as JSON."""
    return {"type": "server_tool", "id": call_id, "tool": tool, "name": name, "input": {}, "status": "pending"}


def progress(card: dict[str, Any], event: Any) -> bool:
    """A `ServerToolDelta`'s id, kind, name and status onto `card`; True when any changed."""
    before = dict(card)
    for key, value in (("id", event.call_id), ("tool", event.tool), ("name", event.name)):
        if value:
            card[key] = value
    if event.status:
        card["progress"] = event.status
    return card != before


def with_call(card: dict[str, Any], block: ServerToolCallBlock) -> None:
    """The whole call onto its card: id, kind, name and input."""
    card.update(id=block.id, tool=block.tool, name=block.name, input=dict(block.input or {}))


def with_result(card: dict[str, Any], block: ServerToolResultBlock) -> None:
    """A result onto its call's card: status, sources, output, error, images, files."""
    card.pop("progress", None)
    sources = [{k: v for k, v in (("url", s.url), ("title", s.title), ("retrieval", s.status)) if v is not None}
               for s in block.sources]
    card.update(status="error" if block.error else "ok", sources=sources,
                output=block.output, error=block.error, files=[dict(f) for f in block.files],
                images=[{"mime_type": i.mime_type, "data": i.data} for i in block.images
                        if i.data and i.mime_type in RASTER_TYPES and len(i.data) <= MAX_IMAGE_CHARS])
    if not card.get("tool"):
        card["tool"] = block.tool


def citation_json(citation: Any, text_length: int | None = None) -> dict[str, Any]:
    """A `core.Citation` as the transcript's `TranscriptCitation` (a whole block's: up to
    `text_length`, the text so far)."""
    found = {k: v for k, v in citation.model_dump(include={"url", "title", "document", "location", "quote"}).items()
             if v is not None}
    found["start"] = citation.start if citation.start is not None else 0
    found["end"] = citation.end if citation.end is not None else (text_length or 0)
    return found
