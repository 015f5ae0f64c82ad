"""A run's transcript: a versioned JSON record of one agent run, for saved notebooks and tools.

When an ``%%agent`` run ends, its cell output carries this document, once, as
``application/vnd.ipyagent.transcript+json``, so a saved, reopened or exported
notebook still shows the run without a kernel: the JupyterLab extension in
``labextension/`` renders it.

It lives in core (pydantic only, no IPython, no agent import) so every layer
can read or write it: the notebook layer publishes it, the run store can keep
it, and a script reading a saved ``.ipynb`` needs nothing else. A run becomes one
in the agent layer (`ipyagent.agent.transcript_of`), which knows `AgentResult`.

No secrets: usage and errors leave out the provider's raw objects (which are
not needed to show a run), and nothing from request headers is ever read.
A ``%%compare`` cell saves a `ComparisonRecord` (one transcript per run) the
same way, as ``application/vnd.ipyagent.comparison+json``. The JSON Schema of
both is published beside this module as ``transcript.schema.json``
(``python -m ipyagent.core.transcript`` prints it).
"""

from __future__ import annotations

import base64
import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from .artifacts import MEDIA_TYPES, split_media
from .figures import comparison_footer, footer_figures
from .messages import TokenCounts

#: The MIME type of a transcript in a cell output.
MIME_TYPE = "application/vnd.ipyagent.transcript+json"
#: The version of the document format; bumped on any incompatible change.
VERSION = 1
#: Artifact previews are cut to this many characters.
PREVIEW_CHARS = 400
#: The field of a saved document holding its footer's figures, computed by ``to_json`` from the other
#: fields (`figures.footer_figures`, `figures.comparison_footer`): renderers draw them as they are and
#: compute none. A model read back leaves it out (it is computed again when written).
FOOTER = "footer"
FOOTER_DOC = "The footer's figures, computed from the other fields when written: drawn as they are."
#: Characters of a tool result kept in a saved transcript (the model saw the whole result).
RESULT_CHARS = 20_000


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
    approval: Literal["approved", "denied", "preapproved"] | None = None
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


class ArtifactSummary(_Model):
    """An off-prompt tool output kept in Task Memory: what it is, not the content.

    `size` is ``{"chars": n}`` / ``{"rows": n, "columns": n}`` / ``{"bytes": n}`` /
    ``{"items": n}``; `preview` is at most `PREVIEW_CHARS` characters of its text.
    """

    call_id: str | None = None
    tool: str | None = None
    namespace: str | None = None
    memory: str | None = None
    kind: str = "unknown"
    size: dict[str, int] = Field(default_factory=dict)
    preview: str = ""
    #: The entry as ``%agent memory`` draws it (Markdown, a table, an image), as sanitized HTML:
    #: set by the notebook layer; renderers sanitize it again (the labextension with DOMPurify).
    html: str | None = None


class TranscriptUsage(TokenCounts):
    """Tokens billed by the provider, summed over the run's model turns (`Usage` without `raw`).

    A transcript saved with the old names (``input``, ``output``, ``cache_read``...) still loads.
    """

    model_config = ConfigDict(extra="ignore")


class TranscriptCost(_Model):
    """The run's price in US dollars."""

    input_usd: float | None = None
    output_usd: float | None = None
    total_usd: float


class TranscriptError(_Model):
    type: str
    message: str
    code: str | int | None = None


class Timings(_Model):
    """Seconds. `total_s`: the whole run (model turns and tools); `first_token_s`:
    from the first request to its first token; `turns`: model turns taken."""

    total_s: float | None = None
    first_token_s: float | None = None
    turns: int = 0
    turn_latencies_s: list[float] = Field(default_factory=list)


class NextCell(_Model):
    """Code from the answer offered as a new cell (``--code``): `language` is the fence label
    asked for (``python``, ``sql``, ``all``); `source` the code. Renderers show it with an
    insert button and a copy button, for front ends that ignore ``set_next_input``."""

    language: str = "python"
    source: str


class Transcript(_Model):
    """One run, as saved in a notebook (format ``ipyagent.transcript``, `VERSION` 1).

    `provider` is ``provider:model`` as the run was asked for; `model` the model
    the provider said answered. `status` is ``completed``, ``failed`` (see
    `error`) or ``interrupted`` (the text is partial).
    """

    format: Literal["ipyagent.transcript"] = "ipyagent.transcript"
    version: Literal[1] = VERSION
    provider: str
    #: The name the user gave the provider (``-p small``, a ``%provider --alias``), shown before its
    #: id in the footer (``small · openai:gpt-6-luna``); None: it was named by its id.
    alias: str | None = None
    model: str | None = None
    status: Literal["completed", "failed", "interrupted"] = "completed"
    stop_reason: str | None = None
    stop_reason_raw: str | None = None
    messages: list[TranscriptMessage] = Field(default_factory=list)
    artifacts: list[ArtifactSummary] = Field(default_factory=list)
    usage: TranscriptUsage = Field(default_factory=TranscriptUsage)
    cost: TranscriptCost | None = None
    #: True when the run was priced but genai-prices did not know the model (the footer says "unknown price").
    price_unknown: bool = False
    #: Why the price is unknown and how to set it (``... --price-as PROVIDER:MODEL``), one line the
    #: driver wrote; shown once under the output, never as a footer figure. None: known, or not said.
    price_note: str | None = None
    timings: Timings = Field(default_factory=Timings)
    error: TranscriptError | None = None
    attempts: int | None = None
    replayed: bool = False
    next_cell: NextCell | None = None
    #: The generation settings the run used (`ModelSettings.as_dict`), empty when none was set.
    settings: dict[str, Any] = Field(default_factory=dict)
    #: Values the one redactor masked in the context the run was sent, by where they were (``cell
    #: template``, ``error``, a variable's name, ``In[3]``); empty when none was.
    masked: dict[str, int] = Field(default_factory=dict)
    #: A heading drawn above the run (``%agent history``: ``turn 2 · run 1a2b3c``).
    title: str | None = None
    #: Draw the user's messages too, each above the reply it got (``%agent history``). A cell's
    #: transcript leaves its prompt out: the prompt is the cell above.
    show_prompts: bool = False
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def text(self) -> str:
        """The assistant's text, all turns joined (what the live view shows as the answer)."""
        return "".join(p.text for m in self.messages if m.role == "assistant"
                       for p in m.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for m in self.messages for p in m.parts if isinstance(p, ToolCallPart)]

    def to_json(self) -> dict[str, Any]:
        """The JSON document (plain dicts and lists), default-valued fields left out (`compact_json`),
        with the `FOOTER` figures computed from them (`figures.footer_figures`)."""
        return {**compact_json(self), FOOTER: footer_figures(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> "Transcript":
        """Read a saved transcript.

        Raises:
            ValueError: not a transcript, or a version this ipyagent does not know
                (the message says which).
        """
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict) or data.get("format") != "ipyagent.transcript":
            raise ValueError("not an ipyagent transcript (its 'format' is not 'ipyagent.transcript')")
        if data.get("version") != VERSION:
            raise ValueError(
                f"transcript version {data.get('version')!r} is not supported (this ipyagent reads version {VERSION})"
            )
        return cls.model_validate(data)

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Any],
        *,
        provider: str,
        status: str = "completed",
        error: str | None = None,
        title: str | None = None,
    ) -> "Transcript":
        """The transcript of stored messages (a thread's turn: its prompt, replies, tool calls
        and results), drawn with its prompts (`show_prompts`). Usage is the sum of the
        assistant messages' usage; no timings are known beyond the model turns taken.

        `status` is ``completed``, ``failed`` (with `error`, one line) or ``interrupted``.
        """
        messages = list(messages)
        replies = [m for m in messages if getattr(m, "role", None) == "assistant"]
        usages = [m.usage for m in replies if getattr(m, "usage", None) is not None]
        fields = tuple(TranscriptUsage.model_fields)
        usage = TranscriptUsage(**{f: sum(int(getattr(u, f, 0) or 0) for u in usages) for f in fields})
        return cls(
            provider=provider,
            status=status,
            messages=transcript_messages(messages),
            usage=usage,
            timings=Timings(turns=len(replies)),
            title=title,
            show_prompts=True,
            error=TranscriptError(type="failed", message=error) if status == "failed" and error else None,
        )


#: The MIME type of a comparison (``%%compare``): one transcript per run, side by side.
COMPARISON_MIME_TYPE = "application/vnd.ipyagent.comparison+json"


class ComparisonEntry(_Model):
    """One run of a comparison: the provider's position (`index`, 0-based), the run number
    (`run`, 0-based) and its transcript."""

    index: int
    run: int = 0
    transcript: Transcript


class ComparisonMark(_Model):
    """A figure the comparison's table marks as the best of its column among the providers: the
    cell at `row`, `column` (indexes into `ComparisonTable.rows`) and why (`label`: ``fastest``,
    ``cheapest``, ``fewest tokens``)."""

    row: int
    column: int
    label: str


class ComparisonTable(_Model):
    """The figures table of a comparison as shown: column titles and rows of cell texts (per
    provider its median row, then with several runs one row per run); `row_runs` gives each
    row's ``[provider index, run]``, run None for a provider's row (empty in older records)."""

    columns: list[str] = Field(default_factory=list)
    rows: list[list[str]] = Field(default_factory=list)
    row_runs: list[list[int | None]] = Field(default_factory=list)
    #: The best figure of a column among two or more providers, on their own rows (empty when they tie).
    marks: list[ComparisonMark] = Field(default_factory=list)


class ComparisonRecord(_Model):
    """The same prompt sent to several providers (``%%compare``), as saved in a notebook.

    `entries` are in provider order, then run order; `wall_s` is the whole comparison's
    time in seconds.
    """

    format: Literal["ipyagent.comparison"] = "ipyagent.comparison"
    version: Literal[1] = VERSION
    providers: list[str] = Field(default_factory=list)
    runs: int = 1
    wall_s: float | None = None
    entries: list[ComparisonEntry] = Field(default_factory=list)
    table: ComparisonTable | None = None
    #: The panes' titles as the user typed them (aliases), when they differ from `providers`.
    titles: list[str] | None = None
    #: True when the comparison was stopped: finished runs are complete, stopped ones partial.
    interrupted: bool = False
    #: The run (0-based) each pane shows, as the user picked it while the comparison streamed
    #: (None: not picked, the pane shows its last run); None when no pane was picked.
    selected: list[int | None] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document, default-valued fields left out (`compact_json`), with its `FOOTER`
        figures (`figures.comparison_footer`) and each run's."""
        doc = compact_json(self)
        for entry, saved in zip(self.entries, doc.get("entries", [])):
            saved["transcript"][FOOTER] = footer_figures(entry.transcript)
        return {**doc, FOOTER: comparison_footer(self)}


# -- building helpers ------------------------------------------------------------------


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
                    call.approval = approval if approval in ("approved", "denied", "preapproved") else None  # type: ignore[assignment]
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


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of both documents: a transcript (`MIME_TYPE`) or a
    comparison (`COMPARISON_MIME_TYPE`), told apart by ``format``; with the `FOOTER` each
    ``to_json`` writes beside the fields."""
    schema = TypeAdapter(Union[Transcript, ComparisonRecord]).json_schema()
    for name in ("Transcript", "ComparisonRecord"):
        schema["$defs"][name]["properties"][FOOTER] = {
            "description": FOOTER_DOC, "items": {"type": "string"}, "type": "array", "title": "Footer"
        }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "ipyagent transcript", **schema}


if __name__ == "__main__":  # python -m ipyagent.core.transcript > src/ipyagent/core/transcript.schema.json
    print(json.dumps(json_schema(), indent=2))
