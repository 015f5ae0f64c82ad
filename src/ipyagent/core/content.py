"""Content blocks: the pieces of a `Message` (DESIGN.md, "core").

One pydantic discriminated union on `type`. Block types that can arrive as a
stream rebuild themselves from their deltas with `from_deltas`; the others
(image, audio, action result) raise `TypeError` there.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field

from .tool_action import ToolAction


class _Block(BaseModel):
    @classmethod
    def from_deltas(cls, deltas: list[Any]) -> "_Block":
        raise TypeError(f"{cls.__name__} cannot be streamed, so it cannot be rebuilt from deltas")


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str

    @classmethod
    def from_deltas(cls, deltas: list[Any]) -> "TextBlock":
        """Concatenate the `text` of `TextDelta`-like objects (surrogate halves split across
        chunks are joined; a lone half becomes U+FFFD)."""
        return cls(text=join_text(d.text for d in deltas))


class ReasoningBlock(_Block):
    """Model reasoning ("thinking"); `signature` must go back to the provider unchanged."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None
    redacted: bool = False

    @classmethod
    def from_deltas(cls, deltas: list[Any]) -> "ReasoningBlock":
        return cls(text=join_text(d.text for d in deltas))


class ImageBlock(_Block):
    """An image, base64 data or a URL."""

    type: Literal["image"] = "image"
    mime_type: str = "image/png"
    data: str | None = None
    url: str | None = None


class AudioBlock(_Block):
    type: Literal["audio"] = "audio"
    mime_type: str = "audio/wav"
    data: str


class DocumentBlock(_Block):
    """A document the user attached: a PDF as base64 `data`, or a text document as `text`.

    `name` is the file name shown to the model where the provider takes one.
    """

    type: Literal["document"] = "document"
    mime_type: str = "application/pdf"
    data: str | None = None
    text: str | None = None
    name: str | None = None

    @property
    def is_pdf(self) -> bool:
        return self.mime_type == "application/pdf"

    def as_text(self) -> str:
        """A text document as the model reads it where it goes in as text: its name, then its text."""
        return f"<document name={self.name!r}>\n{self.text or ''}\n</document>" if self.name else (self.text or "")

    @property
    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.data}"


class GenericBlock(_Block):
    """Provider-specific content passed through unchanged."""

    type: Literal["generic"] = "generic"
    value: Any


class ActionCallBlock(_Block):
    """A tool call made by the model. `raw_arguments` keeps the text as sent;
    `signature` an opaque provider token to send back unchanged (Gemini's thoughtSignature)."""

    type: Literal["action_call"] = "action_call"
    action: ToolAction
    raw_arguments: str | None = None
    signature: str | None = None

    @classmethod
    def from_deltas(cls, deltas: list[Any]) -> "ActionCallBlock":
        """Rebuild from `ToolCallDelta`-like objects (`call_id`, `name`, `arguments`).

        The last non-empty id and name win; argument fragments concatenate;
        empty arguments mean ``{}``.

        Raises:
            ValueError: the joined arguments are not a JSON object; the message
                holds the raw text.
        """
        call_id = name = ""
        for d in deltas:
            call_id = d.call_id or call_id
            name = d.name or name
        raw = "".join(d.arguments for d in deltas if d.arguments)
        signature = next((s for d in reversed(deltas) if (s := getattr(d, "signature", None))), None)
        return cls(action=ToolAction.from_native(call_id, name, parse_arguments(raw, name)), raw_arguments=raw, signature=signature)


class ActionResultBlock(_Block):
    """The result of one tool call, tied to it by `tag`."""

    type: Literal["action_result"] = "action_result"
    action: ToolAction
    text: str
    is_error: bool = False


ContentBlock = Annotated[
    Union[TextBlock, ReasoningBlock, ImageBlock, AudioBlock, DocumentBlock, GenericBlock, ActionCallBlock, ActionResultBlock],
    Field(discriminator="type"),
]


_SURROGATE = re.compile("[\ud800-\udfff]")


def join_text(pieces: Any) -> str:
    """Join streamed text. A JSON stream may split an emoji's UTF-16 surrogate pair over two
    chunks (``"\\ud83d"`` then ``"\\ude00"``): join such halves; a lone half becomes U+FFFD,
    so the text always encodes (to the run store, to the next request)."""
    text = "".join(pieces)
    if _SURROGATE.search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def parse_arguments(raw: str, name: str = "") -> dict[str, Any]:
    """Parse a tool call's argument text. Empty or blank text means ``{}``.

    Raises:
        ValueError: not JSON, or JSON that is not an object; the message names
            the tool and quotes the raw text.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"tool call {name!r} has arguments that are not valid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"tool call {name!r} has arguments that are not a JSON object: {raw!r}")
    return value
