"""Images and audio a tool returned, as each driver sends them with the tool's result.

A tool result (`ActionResultBlock`) carries its images and audio in `media`. A
driver sends them where its API takes them: inside the tool result (Anthropic
``tool_result`` image blocks, OpenAI Responses ``function_call_output`` items,
Gemini 3 ``functionResponse.parts``), else in a user message right after the
results that names the call they came from (OpenAI Chat Completions, Ollama,
older Gemini models). What a model cannot take (no vision, a type it does not
read, over its size limit) is left out, and the text the model reads says so.

A driver states what it takes with three class attributes, read here:
`tool_image_types` (MIME types), `max_image_bytes` (one image, decoded) and
`tool_audio_types` (MIME types; empty: no audio).
"""

from __future__ import annotations

from typing import Any

from ..core import ActionResultBlock, AudioBlock, ImageBlock

#: The image types every vision API here reads (OpenAI, Anthropic, Gemini, Ollama).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Bytes of one image, decoded, a driver sends unless it says less (OpenAI: 20 MB a image; Gemini: 20 MB a request).
MAX_IMAGE_BYTES = 20 * 1024 * 1024


def decoded_size(block: ImageBlock | AudioBlock) -> int:
    """Bytes of a base64 image or audio block, decoded (0 for a URL image)."""
    data = block.data or ""
    return len(data) * 3 // 4 - data[-2:].count("=")


def _megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.1f} kB"


def tool_media(driver: Any, block: ActionResultBlock) -> tuple[list[ImageBlock | AudioBlock], list[str]]:
    """(the result's media `driver`'s model takes, a note for each one left out and why).

    An image goes when the model has vision, its type is in ``driver.tool_image_types`` and it
    is at most ``driver.max_image_bytes`` decoded; audio when its type is in
    ``driver.tool_audio_types``.
    """
    vision = driver.capabilities_for(driver.model).vision
    image_types = getattr(driver, "tool_image_types", IMAGE_TYPES)
    limit = getattr(driver, "max_image_bytes", MAX_IMAGE_BYTES)
    audio_types = getattr(driver, "tool_audio_types", frozenset())
    sent: list[ImageBlock | AudioBlock] = []
    notes: list[str] = []
    for n, medium in enumerate(block.media, 1):
        size = decoded_size(medium)
        what = f"{medium.type} {n} ({medium.mime_type}, {_megabytes(size)})"
        if isinstance(medium, AudioBlock):
            taken = medium.mime_type in audio_types
            why = None if taken else f"{driver.provider} takes no {medium.mime_type} audio here"
        elif not vision:
            why = f"{driver.provider} model {driver.model} takes no images"
        elif medium.mime_type not in image_types:
            why = f"{driver.provider} takes no {medium.mime_type} images"
        elif size > limit:
            why = f"over the {_megabytes(limit)} {driver.provider} takes in one image"
        else:
            why = None
        if why is None:
            sent.append(medium)
        else:
            notes.append(f"[{what} returned by the tool was not sent to you: {why}]")
    return sent, notes


def result_text(block: ActionResultBlock, notes: list[str], sent: int = 0) -> str:
    """The text the model reads for `block`: its text, then the notes; when the tool returned
    only media (`sent` of them go with it), a line saying so, so that text is not empty."""
    text = "\n\n".join(t for t in (block.text, *notes) if t)
    if not text and sent:
        text = f"the tool returned {'an image or audio' if sent == 1 else f'{sent} images or audio'}, attached"
    return text


def caption(block: ActionResultBlock) -> str:
    """The text before media sent in a user message after the results: which call they came from."""
    return f"The media returned by tool call {block.action.tag} ({block.action.native_name}):"
