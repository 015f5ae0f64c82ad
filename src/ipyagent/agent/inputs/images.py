"""Images for a user message: file paths, URLs, bytes, PIL images, matplotlib figures -> `ImageBlock`.

PIL and matplotlib are optional: objects are recognised by their methods
(``PIL.Image.Image.save``, ``Figure.savefig``), so neither is imported here.
"""

from __future__ import annotations

import base64
import io
import mimetypes
import os
import re
from pathlib import Path
from typing import Any

from ...core import ImageArtifact, ImageBlock

_DATA_URL_RE = re.compile(r"^data:(image/[\w.+-]+);base64,(.+)$", re.S)
#: Leading bytes of the formats every vision provider takes.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_mime(data: bytes) -> str | None:
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp`` from the leading bytes, else None."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _from_bytes(data: bytes, what: str) -> ImageBlock:
    mime = sniff_mime(data)
    if mime is None:
        raise ValueError(f"{what} is not a PNG, JPEG, GIF or WebP image")
    return ImageBlock(mime_type=mime, data=base64.b64encode(data).decode())


def image_block(value: Any) -> ImageBlock:
    """One image as an `ImageBlock`.

    Args:
        value: a file path (str or `os.PathLike`), an ``http(s)://`` or ``data:``
            URL, bytes, an `ImageArtifact` / `ImageBlock`, a PIL image (sent as
            PNG), or a matplotlib figure (rendered to PNG).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: bytes or a file that are not a PNG, JPEG, GIF or WebP image.
        TypeError: anything else.
    """
    if isinstance(value, ImageBlock):
        return value
    if isinstance(value, ImageArtifact):
        return ImageBlock(mime_type=value.mime_type, data=base64.b64encode(value.value).decode())
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _from_bytes(bytes(value), "the bytes given")
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        mime = mimetypes.guess_type(value.split("?", 1)[0])[0]
        return ImageBlock(url=value, mime_type=mime if mime and mime.startswith("image/") else "image/png")
    if isinstance(value, str) and value.startswith("data:"):
        match = _DATA_URL_RE.match(value)
        if not match:
            raise ValueError("a data URL image must look like data:image/png;base64,...")
        return ImageBlock(mime_type=match.group(1), data=match.group(2))
    if isinstance(value, (str, os.PathLike)):
        path = Path(value).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"image file {str(path)!r} not found")
        return _from_bytes(path.read_bytes(), f"{path.name}")
    if callable(getattr(value, "savefig", None)):  # a matplotlib Figure
        buffer = io.BytesIO()
        value.savefig(buffer, format="png", bbox_inches="tight")
        return _from_bytes(buffer.getvalue(), "the figure")
    if type(value).__module__.startswith("PIL.") and callable(getattr(value, "save", None)):
        image = (
            value
            if getattr(value, "mode", "RGB") in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16")
            else value.convert("RGBA")
        )
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return _from_bytes(buffer.getvalue(), "the PIL image")
    raise TypeError(
        f"cannot send a {type(value).__name__} as an image: give a file path, a URL, bytes, "
        "a PIL image or a matplotlib figure"
    )


def image_blocks(values: Any) -> list[ImageBlock]:
    """`image_block` for each of `values` (one value alone is fine too)."""
    if values is None:
        return []
    if isinstance(values, (list, tuple)):
        return [image_block(v) for v in values]
    return [image_block(values)]
