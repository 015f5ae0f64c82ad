"""Content blocks: the pieces of a `Message` (DESIGN.md, "core").

One pydantic discriminated union on `type`. Block types that can arrive as a
stream rebuild themselves from their deltas with `from_deltas`; the others
(image, audio, action result) raise `TypeError` there.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .tool_action import ToolAction


class _Block(BaseModel):
    model_config = ConfigDict(defer_build=True)

    @classmethod
    def from_deltas(cls, deltas: list[Any]) -> "_Block":
        raise TypeError(f"{cls.__name__} cannot be streamed, so it cannot be rebuilt from deltas")


class Citation(BaseModel):
    """A source the model cited for a span of its text, in one shape for every provider: Anthropic
    citation blocks (``web_search_result_location``, ``char_location``, ``page_location``...),
    OpenAI's ``url_citation`` / ``file_citation`` annotations, Gemini's grounding supports.

    `start` / `end` are character offsets into the `TextBlock`'s text (None: the whole block, as
    Anthropic cites a block); `url` and `title` name a web source, `document` an attached document
    or file (its title or file name) and `location` where in it (``pages 2-3``); `quote` is the
    source's text the model relied on, when the provider gives it; `kind` the provider's citation
    type. `text` is the cited span of the answer, filled in by `AgentResult.citations`.
    """
    model_config = ConfigDict(defer_build=True)

    start: int | None = Field(default=None, ge=0)
    end: int | None = Field(default=None, ge=0)
    url: str | None = None
    title: str | None = None
    document: str | None = None
    location: str | None = None
    quote: str | None = None
    kind: str = "url"
    text: str | None = None

    @model_validator(mode="after")
    def _a_span_or_none(self) -> "Citation":
        """A span that ends before it starts is no span: the citation is of the whole block."""
        if self.start is not None and self.end is not None and self.start > self.end:
            self.start = self.end = None
        return self

    def source_key(self) -> tuple[str, str]:
        """What makes two citations the same source (one footnote number): the URL, else the document."""
        return ("url", self.url) if self.url else ("document", self.document or self.title or "")


class TextBlock(_Block):
    """Text of a message; `citations` the sources the provider says it rests on (assistant text)."""

    type: Literal["text"] = "text"
    text: str
    citations: list[Citation] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_citations(self, handler: Any) -> Any:
        """Dumped without ``citations`` when there are none (most text): stores and cassettes
        keep their shape."""
        data = handler(self)
        if not self.citations and isinstance(data, dict):
            data.pop("citations", None)
        return data

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
    `signature` an opaque provider token to send back unchanged (Gemini's thoughtSignature).

    `error` is set on a call that cannot run as the model wrote it (arguments that are not a
    JSON object, no tool name): it is not run, its result is that error, sent to the model;
    its `action` then has ``input == {}`` (what goes back on the wire) and a call without a
    name is named `UNNAMED_CALL`."""

    type: Literal["action_call"] = "action_call"
    action: ToolAction
    raw_arguments: str | None = None
    signature: str | None = None
    error: str | None = None

    @classmethod
    def from_deltas(cls, deltas: list[Any], position: int = 1) -> "ActionCallBlock":
        """Rebuild from `ToolCallDelta`-like objects (`call_id`, `name`, `arguments`); `position`
        is the call's place among the reply's calls (1-based), named in an `error`.

        The last non-empty id and name win; a call without an id (some compatible servers send
        none) is given ``call_<position>``, so its result can name it; argument fragments
        concatenate; empty arguments mean ``{}``. Arguments that are not a JSON object, or no
        name, give a call with `error` set (`call_error`), never an exception.
        """
        call_id = name = ""
        for d in deltas:
            call_id = d.call_id or call_id
            name = d.name or name
        call_id = call_id or f"call_{position}"
        raw = "".join(d.arguments for d in deltas if d.arguments)
        signature = next((s for d in reversed(deltas) if (s := getattr(d, "signature", None))), None)
        try:
            arguments, problem = parse_arguments(raw, name), None
        except ValueError as exc:
            arguments, problem = {}, str(exc)
        if not name:
            problem = "it names no tool" + (f", and {problem}" if problem else "")
        action = ToolAction(tag=call_id, name=name or UNNAMED_CALL, input=arguments)
        error = call_error(position, call_id, name, problem) if problem else None
        return cls(action=action, raw_arguments=raw, signature=signature, error=error)


#: The name a call without one is given (`ActionCallBlock.error` says what happened).
UNNAMED_CALL = "invalid_tool_call"


def call_error(position: int, call_id: str, name: str, problem: str) -> str:
    """The error a call that cannot run gets, for the model: which call (its position among the
    reply's calls, its id, its tool), what is wrong, and that it was not run."""
    which = f"tool call {position} (id {call_id!r}" + (f", tool {name!r})" if name else ")")
    return f"{which} was not run: {problem}; call the tool again with its name and its arguments as one JSON object"


class ActionResultBlock(_Block):
    """The result of one tool call, tied to it by `tag`.

    `text` is what the model reads; `media` the images and audio the tool returned, sent as
    such where the provider takes them in (or after) a tool result, each driver within its
    limits (`drivers.tool_media`); a medium left out is named in a note after the text.
    """

    type: Literal["action_result"] = "action_result"
    action: ToolAction
    text: str
    is_error: bool = False
    media: list[Annotated[Union[ImageBlock, AudioBlock], Field(discriminator="type")]] = Field(default_factory=list)


#: The provider-side ("built-in") tools ipyagent knows, by their neutral names.
BUILTIN_TOOLS = ("web_search", "web_fetch", "code_execution", "file_search", "url_context")


class WebSource(BaseModel):
    """A page a provider-side tool read or found: its URL and title; `status` a fetch's outcome
    where the provider reports one (Gemini's URL context)."""
    model_config = ConfigDict(defer_build=True)

    url: str | None = None
    title: str | None = None
    status: str | None = None


class ServerToolCallBlock(_Block):
    """A call of a provider-side tool (web search, code execution, ...): the provider ran it.

    `tool` is its neutral kind (`BUILTIN_TOOLS`), `name` the provider's own name for it
    (``web_search``, ``bash_code_execution``, ``code_interpreter``, ``google_search``); `input`
    what it was given (``query`` / ``queries``, ``code``, ``url`` / ``urls``). `provider` is the
    protocol that made it and `raw` its wire form (an Anthropic block, a Responses output item, a
    Gemini part), sent back unchanged to that protocol on the next turn; None when nothing goes back.
    """

    type: Literal["server_tool_call"] = "server_tool_call"
    id: str
    tool: str
    name: str = ""
    input: dict[str, Any] = Field(default_factory=dict)
    provider: str = ""
    raw: Any = None


class ServerToolResultBlock(_Block):
    """What a provider-side tool gave back, tied to its call by `call_id`: the `sources` it found
    or fetched, a program's `output` (stdout, logs) and the `images` and `files` (``{"id",
    "name"}``, or ``{"url", "name"}``) it made, or an `error`. `provider` / `raw` as for the call."""

    type: Literal["server_tool_result"] = "server_tool_result"
    call_id: str
    tool: str
    sources: list[WebSource] = Field(default_factory=list)
    output: str | None = None
    error: str | None = None
    images: list[ImageBlock] = Field(default_factory=list)
    files: list[dict[str, str]] = Field(default_factory=list)
    provider: str = ""
    raw: Any = None


ContentBlock = Annotated[
    Union[
        TextBlock,
        ReasoningBlock,
        ImageBlock,
        AudioBlock,
        DocumentBlock,
        GenericBlock,
        ActionCallBlock,
        ActionResultBlock,
        ServerToolCallBlock,
        ServerToolResultBlock,
    ],
    Field(discriminator="type"),
]


_SURROGATE = re.compile("[\ud800-\udfff]")


def join_text(pieces: Any) -> str:
    """Join streamed text. A JSON stream may split an emoji's UTF-16 surrogate pair over two
    chunks (``"\\ud83d"`` then ``"\\ude00"``): join such halves; a lone half becomes U+FFFD,
    so the text always encodes (to the run store, to the next request)."""
    text = "".join(pieces)
    if not text.isascii() and _SURROGATE.search(text):  # isascii: a flag, no scan
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


#: The longest a tool call's arguments may be, characters (the agent loop stops reading a stream there).
MAX_ARGUMENT_CHARS = 1_000_000
#: The deepest a tool call's arguments may nest (objects and arrays): deeper is refused, never a RecursionError.
MAX_ARGUMENT_DEPTH = 64


def parse_arguments(raw: str, name: str = "") -> dict[str, Any]:
    """Parse a tool call's argument text. Empty or blank text means ``{}``.

    Raises:
        ValueError: not JSON, JSON that is not an object, longer than `MAX_ARGUMENT_CHARS` or nested
            deeper than `MAX_ARGUMENT_DEPTH`; the message says which and quotes the text's head
            (`ARGUMENTS_HEAD` characters).
    """
    if not raw.strip():
        return {}
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ValueError(f"its arguments are {len(raw):,} characters, more than the {MAX_ARGUMENT_CHARS:,} "
                         "a call may have")
    too_deep = f"its arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels: {_head(raw)}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"its arguments are not valid JSON ({exc.msg}): {_head(raw)}") from None
    except RecursionError:  # deeper than Python reads
        raise ValueError(too_deep) from None
    if _depth_over(value, MAX_ARGUMENT_DEPTH):
        raise ValueError(too_deep)
    if not isinstance(value, dict):
        raise ValueError(f"its arguments are JSON but not an object: {_head(raw)}")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    """True when `value` (parsed JSON) holds objects or arrays more than `limit` levels deep (no recursion)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(limit):
        level = [v for item in level for v in (item.values() if isinstance(item, dict) else item)
                 if isinstance(v, (dict, list))]
        if not level:
            return False
    return bool(level)


#: How much of a call's broken arguments an error quotes, characters.
ARGUMENTS_HEAD = 200


def _head(raw: str) -> str:
    """`raw` quoted, cut to `ARGUMENTS_HEAD` characters (saying how long it was)."""
    if len(raw) <= ARGUMENTS_HEAD:
        return repr(raw)
    return f"{raw[:ARGUMENTS_HEAD]!r}… ({len(raw):,} characters)"
