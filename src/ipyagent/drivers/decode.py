"""Reading a reply: the body cut into frames (here, once, for every driver), each frame
decoded by the driver's `StreamDecoder` (DESIGN.md, "drivers": a driver translates).

Framing is the base's: ``"sse"`` gives one `httpx2.ServerSentEvent` a frame (the
WHATWG "Server-sent events" parsing, httpx2's `EventSource`); ``"lines"`` one line of
text (NDJSON, Gemini's lenient stream), split on CR, LF and CRLF only. A decoder is
the protocol's side: what a frame means. It is plain synchronous code called once a
frame, so a delta crosses no generator between the bytes and the driver's `stream()`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import httpx2

from ..core import DeltaMessage, ProviderError
from .aggregate import StreamMeta, merge_meta

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


def not_json(provider: str, line: str) -> ProviderError:
    """The ``invalid_response`` error for a stream line that is not JSON, quoting its first 200 characters."""
    return ProviderError("invalid_response", f"{provider} sent a stream line that is not JSON: {line[:200]!r}")


def stream_json(provider: str, line: str) -> Any:
    """One stream line (an SSE ``data`` field, an NDJSON line) parsed as JSON.

    Raises `ProviderError` ``invalid_response`` (`not_json`)."""
    try:
        return json.loads(line)
    except ValueError:
        raise not_json(provider, line) from None


class LineFramer:
    """Splits streamed text into lines on CR, LF or CRLF only (not on U+2028, U+0085 and the
    like, which may sit inside a JSON string; ``str.splitlines`` and httpx2's ``aiter_lines``
    split there)."""

    __slots__ = ("_rest", "_cr")

    def __init__(self) -> None:
        self._rest = ""
        self._cr = False

    def feed(self, text: str) -> list[str]:
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._rest += text
            return []
        lines = text.split("\n")
        lines[0] = self._rest + lines[0]
        self._rest = lines.pop()
        return lines

    def flush(self) -> list[str]:
        """The last line, when the text did not end with a line break (or ended with a CR)."""
        rest, cr = self._rest, self._cr
        self._rest, self._cr = "", False
        return [rest] if rest or cr else []


async def _lines(response: httpx2.Response) -> AsyncIterator[str]:
    framer = LineFramer()
    async for text in response.aiter_text():
        for line in framer.feed(text):
            yield line
    for line in framer.flush():
        yield line


def body_frames(response: httpx2.Response, framing: str) -> AsyncIterator[Any]:
    """`response`'s body as frames: ``"sse"``, one `httpx2.ServerSentEvent` each (a reply
    labelled otherwise is read as SSE all the same: the driver chose to read it so);
    ``"lines"``, one line of text each, without its line break.

    Raises:
        ValueError: another framing.
    """
    if framing == "sse":
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.headers["content-type"] = "text/event-stream"  # EventSource reads nothing else
        return aiter(httpx2.EventSource(response, max_event_size=MAX_EVENT_BYTES))
    if framing == "lines":
        return _lines(response)
    raise ValueError(f"framing is 'sse' or 'lines', not {framing!r}")
