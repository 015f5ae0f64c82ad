"""Artifacts: what tools and tasks produce and consume (DESIGN.md, "core").

Every artifact has a `type` tag and `to_text()`. They are pydantic models so
they serialize to the run store and transcripts as they are.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .tool_action import ToolAction


class BaseArtifact(BaseModel):
    # Bytes (blob, image, audio) travel as base64 in JSON, so any artifact can be stored.
    model_config = ConfigDict(defer_build=True, ser_json_bytes="base64", val_json_bytes="base64")

    name: str | None = None
    #: Drawn for the user but not sent to the model: another view of what it already reads
    #: (an MCP result's ``structuredContent`` that only wraps its text).
    shown_only: bool = False

    def to_text(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


class TextArtifact(BaseArtifact):
    type: Literal["text"] = "text"
    value: str

    def to_text(self) -> str:
        return self.value


class InfoArtifact(BaseArtifact):
    """A note for the model, such as "the tool returned nothing"."""

    type: Literal["info"] = "info"
    value: str

    def to_text(self) -> str:
        return self.value


class ErrorArtifact(BaseArtifact):
    type: Literal["error"] = "error"
    value: str
    exception_type: str | None = None

    def to_text(self) -> str:
        return f"{self.exception_type}: {self.value}" if self.exception_type else self.value


class BlobArtifact(BaseArtifact):
    type: Literal["blob"] = "blob"
    value: bytes
    mime_type: str = "application/octet-stream"

    def to_text(self) -> str:
        return f"<{self.mime_type}, {len(self.value)} bytes>"


class ImageArtifact(BaseArtifact):
    """An image; `value` is the raw bytes (base64 in JSON)."""

    type: Literal["image"] = "image"
    value: bytes
    mime_type: str = "image/png"

    @property
    def base64(self) -> str:
        return base64.b64encode(self.value).decode()

    def to_text(self) -> str:
        return f"<image {self.mime_type}, {len(self.value)} bytes>"


class AudioArtifact(BaseArtifact):
    type: Literal["audio"] = "audio"
    value: bytes
    mime_type: str = "audio/wav"

    def to_text(self) -> str:
        return f"<audio {self.mime_type}, {len(self.value)} bytes>"


class GenericArtifact(BaseArtifact):
    """Provider-specific content passed through unchanged."""

    type: Literal["generic"] = "generic"
    value: Any

    def to_text(self) -> str:
        return json.dumps(self.value, default=str)


class JsonArtifact(BaseArtifact):
    """A JSON value (object, array, number, ...), kept as parsed Python data."""

    type: Literal["json"] = "json"
    value: Any

    def to_text(self) -> str:
        return json.dumps(self.value, ensure_ascii=False, default=str)


class TableArtifact(BaseArtifact):
    """Rows of a table, each a dict keyed by `columns` (a DataFrame, a list of dicts).

    `to_text()` is the rows as a JSON array of objects.
    """

    type: Literal["table"] = "table"
    columns: list[str] = Field(default_factory=list)
    value: list[dict[str, Any]] = Field(default_factory=list)

    def to_text(self) -> str:
        return json.dumps(self.value, ensure_ascii=False, default=str)


class ActionArtifact(BaseArtifact):
    """A tool call; with `value.output` set it stands for the call's result."""

    type: Literal["action"] = "action"
    value: ToolAction

    def to_text(self) -> str:
        text = json.dumps({"name": self.value.native_name, "input": self.value.input})
        if self.value.output is not None:
            out = self.value.output
            text += " -> " + (out.to_text() if hasattr(out, "to_text") else str(out))
        return text


class ListArtifact(BaseArtifact):
    type: Literal["list"] = "list"
    value: list["Artifact"] = Field(default_factory=list)

    def to_text(self) -> str:
        """The items' text, blank lines between; items `shown_only` are left out (the model reads this)."""
        return "\n\n".join(a.to_text() for a in self.value if not a.shown_only)


#: Artifact types a tool result carries as media (drawn in its card; images and audio also sent to the model).
MEDIA_TYPES = ("image", "audio", "blob")


def flatten(artifact: Any) -> list[Any]:
    """`artifact` as a flat list: a `ListArtifact`'s items (nested lists too), else `[artifact]`."""
    if isinstance(artifact, ListArtifact):
        return [a for item in artifact.value for a in flatten(item)]
    return [artifact]


def split_media(artifact: Any, kinds: tuple[str, ...] = ("image", "audio"), *,
                shown: bool = False) -> tuple[str, list[Any]]:
    """(the text of `artifact` without its media, its media artifacts in order).

    `kinds` are the artifact types taken out as media: ``("image", "audio")`` for the model (a
    blob stays its one-line description), `MEDIA_TYPES` for a card. The text joins the other
    items' `to_text()` with blank lines, as `ListArtifact.to_text` does; items `shown_only` are
    left out (what the model reads) unless `shown` (what a card shows).
    """
    items = [a for a in flatten(artifact) if shown or not getattr(a, "shown_only", False)]
    media = [a for a in items if getattr(a, "type", None) in kinds]
    texts = [a.to_text() if hasattr(a, "to_text") else str(a) for a in items if getattr(a, "type", None) not in kinds]
    return "\n\n".join(t for t in texts if t), media


Artifact = Annotated[
    Union[
        TextArtifact,
        InfoArtifact,
        ErrorArtifact,
        BlobArtifact,
        ImageArtifact,
        AudioArtifact,
        GenericArtifact,
        JsonArtifact,
        TableArtifact,
        ActionArtifact,
        ListArtifact,
    ],
    Field(discriminator="type"),
]
