"""The pieces of a saved transcript (`transcript.Transcript`): its messages and their parts (text with
its citations, reasoning, a tool call with its result and media, a provider-side tool, anything
else), and how every model of the document is written (`compact_json`). Names are re-exported by
`transcript`, the module to import from."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .artifacts import MEDIA_TYPES, split_media

#: Artifact previews are cut to this many characters.
PREVIEW_CHARS = 400
#: Characters of a tool result kept in a saved transcript (the model saw the whole result).
RESULT_CHARS = 20_000

#: What a user said to a tool call that asked: yes, no, or yes in advance (the tool pre-approved it).
Approval = Literal["approved", "denied", "preapproved"]
APPROVALS: tuple[str, ...] = get_args(Approval)


class _Model(BaseModel):
    # Unknown keys are ignored, so a reader keeps working when a later version adds fields.
    model_config = ConfigDict(defer_build=True, extra="ignore")


#: Fields a document always writes, default or not: what a reader tells documents, parts and
#: runs apart by (and ``created_at``, whose default is the time of reading).
ALWAYS_WRITTEN = frozenset({"format", "version", "type", "role", "status", "provider", "created_at"})


def compact_json(model: BaseModel) -> dict[str, Any]:
    """``model.model_dump(mode="json")`` without the fields that hold their default (a missing
    field reads as its default, in `Transcript.from_json` and in the labextension's renderer),
    except `ALWAYS_WRITTEN`; nested models and lists of them alike. A saved notebook keeps
    every field, indented, in every output."""
    return _drop_defaults(model, model.model_dump(mode="json"))


def _drop_defaults(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    for name, field in type(model).model_fields.items():
        if name not in data:
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            _drop_defaults(value, data[name])
        elif isinstance(value, list):
            for item, dumped in zip(value, data[name]):
                if isinstance(item, BaseModel):
                    _drop_defaults(item, dumped)
        if name in ALWAYS_WRITTEN:
            continue
        factory = field.default_factory
        default = factory() if factory is not None else field.default  # type: ignore[call-arg]
        if value == default:
            del data[name]
    return data


class TranscriptCitation(_Model):
    """A source cited for `text[start:end]` of its `TextPart` (`core.Citation`): a web page
    (`url`, `title`) or a document (`document`, `location`), with the `quote` relied on."""

    start: int = 0
    end: int = 0
    url: str | None = None
    title: str | None = None
    document: str | None = None
    location: str | None = None
    quote: str | None = None


class TextPart(_Model):
    """Text of a message; `citations` the sources of its spans, drawn as numbered footnotes."""

    type: Literal["text"] = "text"
    text: str
    citations: list[TranscriptCitation] = Field(default_factory=list)


class ServerSource(_Model):
    """A page a provider-side tool found or read: `url`, `title`, and how reading it went
    (`retrieval`: ``success`` / ``error``..., where the provider says)."""

    url: str | None = None
    title: str | None = None
    retrieval: str | None = None


class ServerToolPart(_Model):
    """A provider-side tool call and what it gave (`core.ServerToolCallBlock` with its result).

    `tool` is the neutral kind (``web_search``, ``web_fetch``, ``code_execution``, ``file_search``,
    ``url_context``), `name` the provider's; `input` the query, code or URL; `status` ``ok`` /
    ``error`` / ``pending`` (no result yet); then the `sources` found or fetched, the program's
    `output`, the `images` it drew (raster, base64) and the `files` it made (``{"id" | "url",
    "name"}``), or the `error`.
    """

    type: Literal["server_tool"] = "server_tool"
    id: str
    tool: str
    name: str = ""
    input: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error", "pending"] = "pending"
    sources: list[ServerSource] = Field(default_factory=list)
    output: str | None = None
    error: str | None = None
    images: list[dict[str, str]] = Field(default_factory=list)
    files: list[dict[str, str]] = Field(default_factory=list)

    @field_validator("output")
    @classmethod
    def _cap(cls, value: str | None) -> str | None:
        """A program's long output keeps its head (`RESULT_CHARS`), as a tool result does."""
        if value is not None and len(value) > RESULT_CHARS:
            return f"{value[:RESULT_CHARS]}\n… ({len(value) - RESULT_CHARS:,} more characters not saved)"
        return value


class ReasoningPart(_Model):
    """Model reasoning; shown collapsed. `redacted`: the provider sent it encrypted (no text)."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    redacted: bool = False


#: Audio types a card plays from a ``data:`` URL (nothing loads from outside).
AUDIO_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/mp3", "audio/ogg", "audio/webm",
                         "audio/flac", "audio/aac", "audio/mp4"})
#: Base64 characters of one image, audio or file a card keeps (about 1.5 MB); a larger one is
#: described ("too large to show") instead.
MEDIA_CHARS = 2_000_000


class MediaPart(_Model):
    """An image, audio or file a tool returned, drawn in its card: an image inline, audio as a
    player, a file as a download link (`kind` ``image`` / ``audio`` / ``blob``).

    `size` is in bytes. `data` is the base64 content, None when it is larger than `MEDIA_CHARS`
    or of a type not drawn (an image other than `RASTER_TYPES`, audio other than `AUDIO_TYPES`):
    the card then says what it is and why it is not shown.
    """

    kind: Literal["image", "audio", "blob"]
    mime_type: str
    size: int = 0
    name: str | None = None
    data: str | None = None

    @classmethod
    def of(cls, artifact: Any) -> "MediaPart":
        """The part of an image, audio or blob artifact (raw bytes in `value`)."""

        kind, mime, raw = artifact.type, str(artifact.mime_type or ""), bytes(artifact.value)
        drawn = kind == "blob" or mime in (RASTER_TYPES if kind == "image" else AUDIO_TYPES)
        data = base64.b64encode(raw).decode() if drawn and len(raw) * 4 // 3 <= MEDIA_CHARS else None
        return cls(kind=kind, mime_type=mime, size=len(raw), name=artifact.name, data=data)

    @classmethod
    def of_block(cls, block: Any) -> "MediaPart":
        """The part of an image or audio content block (base64 `data`; a URL image has no data here)."""
        data = str(getattr(block, "data", None) or "")
        size = len(data) * 3 // 4 - data[-2:].count("=")
        drawn = block.mime_type in (RASTER_TYPES if block.type == "image" else AUDIO_TYPES) and len(data) <= MEDIA_CHARS
        return cls(kind=block.type, mime_type=block.mime_type, size=size, data=data if drawn and data else None)

    @property
    def summary(self) -> str:
        """``image image/png, 4,033 bytes`` (and its name): the line a terminal and a fallback show."""
        name = f" {self.name}" if self.name else ""
        return f"{self.kind}{name} {self.mime_type}, {self.size:,} bytes"


def card_result(output: Any) -> tuple[str, list[MediaPart]]:
    """A call's result as its card shows it: its text (views the model does not read, such as a
    ``structuredContent`` that wraps the text, included) and its images, audio and files."""

    if not hasattr(output, "to_text"):
        return str(output), []
    text, media = split_media(output, MEDIA_TYPES, shown=True)
    return text, [MediaPart.of(m) for m in media]


class ToolCallPart(_Model):
    """A tool call with its result once run.

    `status`: ``ok`` / ``error`` (the tool failed, or was denied or not run) /
    ``pending`` (no result: the run stopped first). `duration_s` in seconds.
    `approval`: ``approved`` / ``denied`` by the user when the call needed approval
    (a denied call has status ``error`` and was not run), ``preapproved`` when the user
    approved it in advance (``%%agent --approve-runs``), else None.
    `stopped`: ``interrupted`` / ``timeout`` when the run stopped (Stop, or its deadline)
    while the call ran (status ``error``, the result says so), else None.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error", "pending"] = "pending"
    result: str | None = None
    duration_s: float | None = None
    approval: Approval | None = None
    stopped: Literal["interrupted", "timeout"] | None = None
    #: Images, audio and files the tool returned (`MediaPart`), drawn under the result.
    media: list[MediaPart] = Field(default_factory=list)
    #: What happened while it ran, a line each: an MCP server's sampling request, an elicitation.
    notes: list[str] = Field(default_factory=list)

    @field_validator("result")
    @classmethod
    def _cap(cls, value: str | None) -> str | None:
        """A saved notebook keeps the head of a huge result: it is stored in every fallback."""
        if value is not None and len(value) > RESULT_CHARS:
            return f"{value[:RESULT_CHARS]}\n… ({len(value) - RESULT_CHARS:,} more characters not saved)"
        return value


#: How a call cut off by the run's end reads (`ToolCallPart.stopped`), in every view.
STOPPED_WORDS = {"interrupted": "interrupted", "timeout": "stopped at the deadline"}


#: Image types a saved transcript shows inline (``data:`` URLs of raster images load nothing).
RASTER_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Base64 characters of one image kept in a transcript (about 6 MB of image).
MAX_IMAGE_CHARS = 8_000_000


class OtherPart(_Model):
    """Content shown as a one-line summary: an image, audio, provider-specific data.

    An image the model returned keeps its `mime_type` and base64 `data` (raster types
    only), so a saved notebook shows it as an image."""

    type: Literal["other"] = "other"
    kind: str
    summary: str
    mime_type: str | None = None
    data: str | None = None


Part = Annotated[Union[TextPart, ReasoningPart, ToolCallPart, ServerToolPart, OtherPart], Field(discriminator="type")]


class TranscriptMessage(_Model):
    """One message of the run. Tool results are inside the calls they answer, so
    tool-result messages do not appear on their own."""

    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part] = Field(default_factory=list)
