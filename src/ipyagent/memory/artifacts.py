"""Off-prompt outputs as artifacts: what a tool returned, kept by kind.

`to_memory_artifact` keeps the shape of a tool's return value (a table stays a
table, bytes stay bytes) where `tools.to_artifact` would flatten it to text for
the prompt. `size_of` measures an artifact in the unit it is read in.
"""

from __future__ import annotations

import io
import json
from typing import Any

from pydantic import BaseModel

from ..core import (
    BaseArtifact,
    BlobArtifact,
    ImageArtifact,
    InfoArtifact,
    JsonArtifact,
    ListArtifact,
    TableArtifact,
    TextArtifact,
)

#: Image types sniffed from their first bytes. SVG is not here on purpose: it can carry script.
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image(data: bytes) -> str | None:
    """The image MIME type of `data` from its magic number (PNG, JPEG, GIF, WebP), else None."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _is_dataframe(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "pandas" and type(value).__name__ == "DataFrame"


def _is_pil_image(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "PIL" and hasattr(value, "save") and hasattr(value, "mode")


def table_from_dataframe(df: Any) -> TableArtifact:
    """A pandas DataFrame as a table (values made JSON-safe by pandas itself)."""
    rows = json.loads(df.to_json(orient="records", date_format="iso", default_handler=str))
    return TableArtifact(columns=[str(c) for c in df.columns], value=rows)


def table_from_rows(rows: list[dict[str, Any]]) -> TableArtifact:
    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(str(key), None)
    return TableArtifact(columns=list(columns), value=[{str(k): v for k, v in row.items()} for row in rows])


def to_memory_artifact(value: Any) -> BaseArtifact:
    """A tool's return value as the artifact Task Memory keeps.

    Artifacts pass; str -> text; bytes -> image (PNG/JPEG/GIF/WebP by magic
    number) or blob; a pandas DataFrame or a non-empty list of dicts -> table;
    a PIL image -> PNG image; dicts, lists, numbers, pydantic models -> JSON;
    None -> info; anything else -> its str() as text.
    """
    if isinstance(value, BaseArtifact):
        return value
    if value is None:
        return InfoArtifact(value="the tool ran and returned nothing")
    if isinstance(value, str):
        return TextArtifact(value=value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        mime = sniff_image(data)
        return ImageArtifact(value=data, mime_type=mime) if mime else BlobArtifact(value=data)
    if _is_dataframe(value):
        return table_from_dataframe(value)
    if _is_pil_image(value):
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return ImageArtifact(value=buffer.getvalue(), mime_type="image/png")
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return table_from_rows(value)
    if isinstance(value, list) and value and all(isinstance(v, BaseArtifact) for v in value):
        return ListArtifact(value=value)
    if isinstance(value, BaseModel):
        return JsonArtifact(value=value.model_dump(mode="json"))
    if isinstance(value, (dict, list, tuple, int, float, bool)):
        try:
            return JsonArtifact(value=json.loads(json.dumps(value)))
        except (TypeError, ValueError):
            pass
    return TextArtifact(value=str(value))


def size_of(artifact: BaseArtifact) -> dict[str, int]:
    """The artifact's size in the unit it is read in: chars (text, JSON text), rows and
    columns (tables), items (JSON arrays, lists), bytes (blobs, images)."""
    if isinstance(artifact, TableArtifact):
        return {"rows": len(artifact.value), "columns": len(artifact.columns)}
    if isinstance(artifact, (BlobArtifact, ImageArtifact)) or isinstance(getattr(artifact, "value", None), bytes):
        return {"bytes": len(artifact.value)}
    if isinstance(artifact, ListArtifact):
        return {"items": len(artifact.value), "chars": len(artifact.to_text())}
    if isinstance(artifact, JsonArtifact) and isinstance(artifact.value, list):
        return {"items": len(artifact.value), "chars": len(json_text(artifact))}
    if isinstance(artifact, JsonArtifact):
        return {"chars": len(json_text(artifact))}
    return {"chars": len(artifact.to_text())}


def describe_size(size: dict[str, int]) -> str:
    """``{"rows": 1200, "columns": 4}`` -> ``"1,200 rows × 4 columns"``."""
    if "rows" in size:
        return f"{size['rows']:,} rows × {size.get('columns', 0):,} columns"
    if "bytes" in size:
        return f"{size['bytes']:,} bytes"
    if "items" in size:
        return f"{size['items']:,} items"
    return f"{size.get('chars', 0):,} chars"


def json_text(artifact: JsonArtifact) -> str:
    """The JSON value as indented text (what `read` slices and `search` scans)."""
    return json.dumps(artifact.value, ensure_ascii=False, indent=2, default=str)


def text_of(artifact: BaseArtifact) -> str | None:
    """The searchable text of an artifact, or None for binary content (an image, a non-UTF-8 blob)."""
    if isinstance(artifact, JsonArtifact):
        return json_text(artifact)
    if isinstance(artifact, ImageArtifact):
        return None
    if isinstance(artifact, BlobArtifact):
        try:
            return artifact.value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return artifact.to_text()
