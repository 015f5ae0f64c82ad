"""Reading a reply: the body cut into frames (here, once, for every driver), each frame
decoded by the driver's `StreamDecoder` (DESIGN.md, "drivers": a driver translates).

Framing is the base's: ``"sse"`` gives one `httpx2.ServerSentEvent` a frame (the
WHATWG "Server-sent events" parsing, httpx2's `EventSource`); ``"lines"`` one line of
text (NDJSON, Gemini's lenient stream), split on CR, LF and CRLF only. A decoder is
the protocol's side: what a frame means. It is plain synchronous code called once a
frame, so a delta crosses no generator between the bytes and the driver's `stream()`.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

import httpx2
from pydantic import BaseModel, ValidationError

from ..core import (
    MAX_ARGUMENT_DEPTH,
    DeltaMessage,
    ProviderError,
    ReasoningDelta,
    ServerToolDelta,
    TextDelta,
    ToolCallDelta,
    redact_head,
)
from .aggregate import StreamMeta, merge_meta
from .http import _Replayed

#: The largest SSE event a driver reads (``EventSource(max_event_size=)``); httpx2's default,
#: 1 MiB, is less than real single events: an image in base64 (OpenRouter's image models on
#: Chat Completions, Responses' image generation), Anthropic's web-fetch result carrying a PDF,
#: Responses' ``response.completed`` repeating the whole output. Past it the turn fails, not retried.
MAX_EVENT_BYTES = 64 * 1024 * 1024


class StreamDecoder:
    """The parsing state of one reply, made by a driver's ``decoder()`` for each try.

    The base feeds it the body's frames in order (`feed`); each call returns the deltas that
    frame stands for (usually none or one: return a tuple, ``()`` for none). The stream's facts
    (usage, stop reason, request id, model) go to `meta` through `note`, so a usage that
    arrives in the same frame as an error still counts. Once `done` is True (the provider's
    stop signal, OpenAI's ``[DONE]``) no more frames are read; at the end of the body (or
    after `done`) `finish` gives what is left.

    Raises (from `feed`, `finish`, `whole`): `ProviderError` for an error inside the stream or a
    frame that cannot be read.
    """

    def __init__(self) -> None:
        self.meta = StreamMeta()
        self.done = False

    def feed(self, frame: Any) -> Sequence[DeltaMessage]:
        """The deltas of one frame (a `httpx2.ServerSentEvent`, or a line of text)."""
        raise NotImplementedError

    def finish(self) -> Sequence[DeltaMessage]:
        """The deltas left when the body has ended (a block still open). Default: none."""
        return ()

    def whole(self, data: dict[str, Any]) -> Iterable[DeltaMessage] | None:
        """The deltas of one whole (non-streamed) JSON reply, from a server that ignored
        ``stream: true``; None (the default) when this protocol has no such reply."""
        return None

    def note(self, update: StreamMeta) -> None:
        """Merge a stream fact into `meta` (`merge_meta`: fields left None are unchanged)."""
        merge_meta(self.meta, update)


#: A delta's fields that hold text, and whether None is allowed there: a decoder copies them from
#: the wire, where a server may put a number or an object (the view and the message join them).
_TEXT_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {
    TextDelta: (("text", False),),
    ReasoningDelta: (("text", False), ("signature", True)),
    ToolCallDelta: (("arguments", False), ("call_id", True), ("name", True), ("signature", True)),
    ServerToolDelta: (("arguments", False), ("call_id", True), ("tool", True), ("name", True), ("status", True)),
}


def check_text(delta: DeltaMessage) -> None:
    """Raises `TypeError` when one of `delta`'s text fields (`_TEXT_FIELDS`) is not a string:
    the base calls it for each delta a decoder gives, so the turn fails there, its text so
    far kept, rather than in the view or when the message is built."""
    if delta.__class__ is ToolCallDelta:  # the usual one after text (the relay checks text itself): no loop
        call_id, call_name, signature = delta.call_id, delta.name, delta.signature  # type: ignore[attr-defined]
        if (
            delta.arguments.__class__ is str
            and (call_id is None or call_id.__class__ is str)  # type: ignore[attr-defined]
            and (call_name is None or call_name.__class__ is str)
            and (signature is None or signature.__class__ is str)
        ):
            return
    for name, optional in _TEXT_FIELDS.get(delta.__class__, ()):
        value = getattr(delta, name)
        if value.__class__ is not str and not (optional and value is None):
            raise TypeError(f"a {delta.type} whose {name} is {type(value).__name__} ({value!r:.60}), not text")


_Model = TypeVar("_Model", bound=BaseModel)


def lenient(model: type[_Model], **fields: Any) -> _Model:
    """`model` built from a provider's `fields`, each field whose value has the wrong type (a
    URL that is a number, an offset that is a string) left at its default: what only describes
    the answer (a citation, a source a tool found) must not fail the turn that carries it."""
    try:
        return model(**fields)
    except ValidationError as exc:
        wrong = {error["loc"][0] for error in exc.errors() if error["loc"]}
        return model(**{name: value for name, value in fields.items() if name not in wrong})


#: How deep a frame's JSON is read (objects and arrays): past it, each deeper value is read as ``[]``.
#: Twice a call's own limit (`MAX_ARGUMENT_DEPTH`), so arguments inside a frame that are cut here
#: still nest deeper than the call may, and the call gets that error (`parse_arguments`).
FRAME_DEPTH = 2 * MAX_ARGUMENT_DEPTH
#: A JSON string (unrolled, no backtracking), or one bracket: what `frame_json` counts depth by.
_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def frame_json(text: str | bytes) -> Any:
    """`text` (a frame: an SSE ``data`` field, an NDJSON line) parsed as JSON, each object or array
    deeper than `FRAME_DEPTH` read as ``[]``: a frame may carry a tool call's arguments as JSON (Ollama,
    Gemini), and arguments 3,000 levels deep made `json.loads` raise RecursionError, failing the turn.
    Frames the parser reads whole (the usual ones) cost nothing more.

    Raises:
        ValueError: not JSON (`json.JSONDecodeError`), as `json.loads`.
    """
    try:
        return json.loads(text)
    except RecursionError:
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return json.loads(_cut_deep(text))


def _cut_deep(text: str) -> str:
    """`text` with each object or array opened deeper than `FRAME_DEPTH` (outside strings) written ``[]``."""
    pieces: list[str] = []
    depth = kept = 0  # brackets open; where the text kept so far ends
    cut_at = -1  # the depth at which the value being dropped opened, while one is
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > FRAME_DEPTH and cut_at < 0:
                pieces.append(text[kept:match.start()])
                pieces.append("[]")
                cut_at = depth
        elif token in "]}":
            if depth == cut_at:
                kept, cut_at = match.end(), -1
            depth -= 1
    if cut_at < 0:
        pieces.append(text[kept:])
    return "".join(pieces)


def reason_text(value: Any) -> str:
    """A stop reason as the wire gave it, as text: one that is not text (a broken proxy's list or
    object) is its JSON, cut to 100 characters; it still ends the reply (an unknown reason is the
    end of the turn) rather than failing the lookup of its kind with TypeError."""
    return value if isinstance(value, str) else json.dumps(value)[:100]


def not_json(provider: str, line: str) -> ProviderError:
    """The ``invalid_response`` error for a stream line that is not JSON, quoting its first 200 characters."""
    return ProviderError("invalid_response", f"{provider} sent a stream line that is not JSON: {redact_head(line)!r}")


def stream_json(provider: str, line: str) -> Any:
    """One stream line (an SSE ``data`` field, an NDJSON line) parsed as JSON.

    Raises `ProviderError` ``invalid_response`` (`not_json`)."""
    try:
        return frame_json(line)
    except ValueError:
        raise not_json(provider, line) from None


class LineFramer:
    """Splits streamed text into lines on CR, LF or CRLF only (not on U+2028, U+0085 and the
    like, which may sit inside a JSON string; ``str.splitlines`` and httpx2's ``aiter_lines``
    split there). A byte order mark opening the text is dropped. A line's pieces are kept
    apart until it ends, so a long line costs its length once, not once per piece."""

    __slots__ = ("_cr", "_rest", "_started")

    def __init__(self) -> None:
        self._rest: list[str] = []  # the pieces of the line not ended yet
        self._cr = False
        self._started = False

    def feed(self, text: str) -> list[str]:
        if not self._started and text:
            text, self._started = text.removeprefix("\ufeff"), True
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        rest = self._rest
        if "\n" not in text:
            if text:
                rest.append(text)
            return []
        lines = text.split("\n")
        if rest:
            rest.append(lines[0])
            lines[0] = "".join(rest)
            rest.clear()
        last = lines.pop()
        if last:
            rest.append(last)
        return lines

    def flush(self) -> list[str]:
        """The last line, when the text did not end with a line break (or ended with a CR)."""
        rest, cr = "".join(self._rest), self._cr
        self._rest, self._cr = [], False
        return [rest] if rest or cr else []


async def _text(response: httpx2.Response) -> AsyncIterator[str]:
    """`response`'s body as text, decoded as httpx2's ``aiter_text`` does (its charset, else
    UTF-8; bytes that do not decode replaced), from an ``aiter_bytes`` closed with it:
    ``aiter_text`` and `httpx2.EventSource` do not close the iterators they read when they are
    closed early (httpx2 2.17), which left them, the response with them, to the event loop."""
    decoder = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
    async with aclosing(response.aiter_bytes()) as chunks:
        async for chunk in chunks:
            if text := decoder.decode(chunk):
                yield text
    if text := decoder.decode(b"", True):
        yield text


class _TextBody:
    """What `httpx2.EventSource` reads of a response (its headers, request and text), the text
    an iterator of ours (`_text`) that `_events` closes."""

    def __init__(self, response: httpx2.Response, text: AsyncIterator[str]) -> None:
        self.headers, self.request, self._text = response.headers, response.request, text

    def aiter_text(self) -> AsyncIterator[str]:
        return self._text


async def _events(response: httpx2.Response) -> AsyncIterator[httpx2.ServerSentEvent]:
    """httpx2's `EventSource` over `_text`: closing this closes both, and so the response."""
    async with aclosing(_text(response)) as text:
        source = httpx2.EventSource(_TextBody(response, text), max_event_size=MAX_EVENT_BYTES)  # type: ignore[arg-type]
        async with aclosing(aiter(source)) as events:  # type: ignore[type-var]
            async for event in events:
                yield event


async def _lines(response: httpx2.Response) -> AsyncIterator[str]:
    framer = LineFramer()
    async with aclosing(_text(response)) as texts:
        async for text in texts:
            for line in framer.feed(text):
                yield line
    for line in framer.flush():
        yield line


def body_frames(response: httpx2.Response, framing: str) -> AsyncIterator[Any]:
    """`response`'s body as frames: ``"sse"``, one `httpx2.ServerSentEvent` each (a reply
    labelled otherwise is read as SSE all the same: the driver chose to read it so);
    ``"lines"``, one line of text each, without its line break. Closing the iterator (`aclose`)
    closes every iterator under it and the response.

    Raises:
        ValueError: another framing.
    """
    if framing == "sse":
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.headers["content-type"] = "text/event-stream"  # EventSource reads nothing else
        return _events(response)
    if framing == "lines":
        return _lines(response)
    raise ValueError(f"framing is 'sse' or 'lines', not {framing!r}")


class NotAStream(Exception):
    """No frame of a 2xx body could be read as the driver's stream: there was none (`no_frame`),
    or the first was unreadable. `_open` reports it with the status, the content type and the
    body's first characters (`not_its_stream`)."""

    def __init__(self, no_frame: bool, head: bytes | None = None) -> None:
        super().__init__("not the stream")
        self.no_frame, self.head = no_frame, head  # head: the body's first bytes, when the raiser read them


#: How much of a body that is not the stream an error quotes, characters.
QUOTE_CHARS = 300
#: How an SSE body may begin (after blank lines): a comment or a field.
_SSE_START = (b":", b"data:", b"event:", b"id:", b"retry:")


def looks_like_sse(head: bytes) -> bool:
    """True when `head` (a body's first bytes) begins as an SSE stream does, keep-alive comments
    included: such a body with no event is a stream that ended early, not another kind of reply."""
    return head.lstrip().startswith(_SSE_START)


def not_its_stream(provider: str, status: int, content_type: str, head: bytes) -> ProviderError:
    """``invalid_response`` for a 2xx reply that is not `provider`'s stream (malformed JSON, an HTML
    page, an empty body, a wrong content type): its status, content type and first `QUOTE_CHARS`
    characters (redacted before the cut, as one line). Not retried: asking again gets the same."""
    line = " ".join(redact_head(head.decode("utf-8", "replace"), 4 * QUOTE_CHARS).split())
    quote = repr(line if len(line) <= QUOTE_CHARS else line[: QUOTE_CHARS - 1] + "…") if line else "an empty body"
    what = f"HTTP {status} (content type {content_type or 'none'!r})"
    return ProviderError("invalid_response", f"{provider} answered {what} with a body that is not its stream: {quote}",
                         retryable=False)


async def read_head(
    frames: AsyncIterator[Any], decoder: StreamDecoder, head: list[DeltaMessage]
) -> AsyncIterator[Any] | None:
    """Feed `decoder` frames until one gives a delta (put in `head`); the frames left, or None
    when the body was read to its end (or to the stop signal), `decoder.finish` included.

    Raises:
        NotAStream: the body held no frame (blank lines are none), or its first frame was
            unreadable (``invalid_response``: the decoder recognised nothing of it).
        ProviderError: a later frame was unreadable (its own error, quoting that frame: the body's
            start was the stream), or the stream's error.
    """
    feed = decoder.feed
    fed = read = False  # a frame came; an event was read without error
    try:
        async for frame in frames:
            fed = fed or frame.__class__ is not str or bool(frame.strip())  # blank lines are no frame of a stream
            head.extend(feed(frame))
            read = read or frame.__class__ not in (str, bytes)  # an SSE event read; text may be buffered
            if decoder.done:
                break
            if head:
                return frames
        if not fed:
            raise NotAStream(no_frame=True)
        head.extend(decoder.finish())
    except ProviderError as exc:
        if head or read or exc.type != "invalid_response":
            raise
        raise NotAStream(no_frame=False) from exc
    return None


async def read_unlabelled(
    response: httpx2.Response, decoder: StreamDecoder, stream_type: str,
    frames: Callable[[httpx2.Response], AsyncIterator[Any]],
) -> tuple[AsyncIterator[Any] | None, list[DeltaMessage]]:
    """A 2xx reply not labelled as the driver's stream (`content_type`): (its `frames`, deltas
    already read). One JSON object is read whole (`StreamDecoder.whole`: no frames, its deltas);
    a stream labelled otherwise is read as the stream (relabelled `stream_type`).

    Raises:
        NotAStream: a single JSON reply the protocol has no reading of, or a body that is neither
            a stream nor JSON.
    """
    chunks = response.aiter_bytes()
    head = b""
    async for chunk in chunks:
        head += chunk
        if head.strip():
            break
    start = head.lstrip()
    if start[:1] == b"{":
        body = head + b"".join([c async for c in chunks])
        try:
            data = frame_json(body)
        except ValueError:
            data = None  # several objects (NDJSON, a JSON array stream): parsed as the stream
        if isinstance(data, dict):
            deltas = decoder.whole(data)
            if deltas is None:
                raise NotAStream(no_frame=False, head=body[:4096])
            return None, list(deltas)
        stream: httpx2.AsyncByteStream = _Replayed(body)
    elif not start or start[:1] == b"[" or looks_like_sse(start):
        stream = _Replayed(head, chunks)
    else:
        await chunks.aclose()
        raise NotAStream(no_frame=False, head=head[:4096])
    dropped = ("content-type", "content-encoding", "content-length")
    headers = [(k, v) for k, v in response.headers.items() if k.lower() not in dropped]
    replay = httpx2.Response(
        response.status_code, headers=[*headers, ("content-type", stream_type)], stream=stream, request=response.request
    )
    return frames(replay), []
