"""Gemini's stream read a line at a time: SSE ``data:`` lines, or JSON over lines.

Follows the Gemini API reference, "Generating content" (`streamGenerateContent?alt=sse`, and
without ``alt=sse`` a JSON array of `GenerateContentResponse` objects); an error object inside
the stream (a ``data:`` payload, or a bare JSON object written without ``data:`` as the API and
its SDKs do) raises `ProviderError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ....core import DeltaMessage, ProviderError, redact_head
from ...aggregate import merge_meta
from ...base import StreamMeta, read_usage
from ...decode import StreamDecoder, frame_json, not_json
from .errors import stream_error
from .response import GeminiResponseParser, usage_from_gemini

#: A JSON string on one line (JSON strings hold no raw line break): skipped when counting brackets.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


class GeminiDecoder(StreamDecoder):
    """Gemini's reply a line at a time (``framing = "lines"``): SSE ``data:`` lines (``alt=sse``),
    or JSON written over lines without ``data:`` (a JSON array, the stream's other framing; one
    object, a non-streamed reply; a bare error object), each value read by `GeminiResponseParser`
    as soon as its last line has come.

    A bare value is cut out by counting brackets outside strings, line by line, so each line is
    read once (an array's elements are parsed one at a time, as they arrive)."""

    def __init__(self, provider: str) -> None:
        super().__init__()
        self.provider = provider
        self.parser = GeminiResponseParser()
        self.data: list[str] = []  # the data lines of the SSE event being read
        self.bare: list[str] = []  # the lines of the JSON value being read without ``data:``
        self.depth = 0  # brackets open in the bare JSON
        self.level = 0  # the depth at which a value is whole: 1 inside a top-level array
        self.sse = False  # a ``data:`` line came: other lines are SSE fields, ignored unless JSON
        self.noted_usage: dict[str, Any] | None = None  # the parser's usage block last read into `meta`

    @property  # type: ignore[override]
    def meta(self) -> StreamMeta:
        """The facts noted, the last usage block received read into them first: Gemini sends one on
        every chunk, and a turn that fails after one still cost those tokens (`StreamDecoder`). Read
        here, when the turn reads its facts, not at each chunk (about 10 µs each, read_usage)."""
        usage = self.parser.usage
        if usage is not None and usage is not self.noted_usage:
            self.noted_usage = usage
            merge_meta(self._meta, read_usage(usage_from_gemini, usage))
        return self._meta

    @meta.setter
    def meta(self, meta: StreamMeta) -> None:
        self._meta = meta

    def feed(self, line: str) -> Sequence[DeltaMessage]:
        if line.startswith("data:"):
            self.sse = True
            self.data.append(line[6:] if line.startswith("data: ") else line[5:])
            return ()
        chunk = self._line(line)
        return self._read(chunk) if chunk is not None else ()

    def _read(self, chunk: Any) -> list[DeltaMessage]:
        """The deltas of one parsed chunk (or array of them).

        Raises:
            ProviderError: ``invalid_response`` for a chunk of another shape (``"candidates": "x"``,
                ``"parts": [1]``), quoting it (redacted), not Python's words about it; the stream's error.
        """
        try:
            return list(self.parser.feed(chunk))
        except (AttributeError, TypeError, KeyError) as exc:
            quote = redact_head(json.dumps(chunk, ensure_ascii=False)[:1000])
            raise ProviderError("invalid_response", f"{self.provider} sent a chunk of a shape the Gemini API does "
                                f"not have ({type(exc).__name__}): {quote!r}") from None

    def finish(self) -> list[DeltaMessage]:
        """The last event (its blank line missing), a still-open call; usage, stop reason and ids noted.

        Raises:
            ProviderError: ``invalid_response`` for JSON left open (the stream ended early) or
                lines that are neither SSE nor JSON, outside an SSE stream.
        """
        chunk = self._line("")
        deltas = self._read(chunk) if chunk is not None else []
        if self.bare and not self.sse:  # in an SSE stream, lines that are not JSON are fields to ignore
            text = "\n".join(self.bare).strip()
            raise ProviderError(
                "invalid_response",
                f"{self.provider} sent a stream line that is not SSE or JSON, "
                f"or the stream ended inside one: {redact_head(text)!r}",
            )
        for item in self.parser.finish():
            if isinstance(item, StreamMeta):
                self.note(item)
            else:
                deltas.append(item)
        return deltas

    def whole(self, data: dict[str, Any]) -> list[DeltaMessage]:
        """The deltas of one whole `GenerateContentResponse` (a batch's inline response), read by
        the stream's parser; its usage, stop reason and ids noted."""
        deltas = list(self.parser.feed(data))
        for item in self.parser.finish():
            if isinstance(item, StreamMeta):
                self.note(item)
            else:
                deltas.append(item)
        return deltas

    def _line(self, line: str) -> Any:
        """The JSON a non-``data:`` line completes, or None: the event's data at a blank line,
        else the values of bare JSON whose last line this is (`_bare`)."""
        if not line:
            data = self.data
            if data:
                payload = "\n".join(data)
                data.clear()
                if payload != "[DONE]":
                    return self._json(payload)
            return None
        if not self.bare and self.depth == 0:
            head = line.lstrip()
            if not head.startswith(("{", "[")):
                return None  # ":" comments, event:, id:, retry: carry nothing Gemini uses
            self.level = 1 if head.startswith("[") else 0
        return self._bare(line)

    def _bare(self, line: str) -> list[Any] | None:
        """The values `line` completes (the elements of an array so far), or None while one is open.

        Raises:
            ProviderError: the stream's error object; ``invalid_response`` for a whole value that is
                not JSON (outside an SSE stream, where such a line is a field to ignore).
        """
        bare = self.bare
        bare.append(line)
        scan = _JSON_STRING.sub("", line) if '"' in line else line
        self.depth += scan.count("{") + scan.count("[") - scan.count("}") - scan.count("]")
        if self.depth > self.level:
            return None
        text = "\n".join(bare).strip()
        bare.clear()
        if self.depth < 0 or (self.depth == 0 and self.level):  # past the array's end: start again
            self.depth = self.level = 0
        text = text[1:] if text.startswith(("[", ",")) else text  # the array's "[" or a separating ","
        text = text[:-1] if text.endswith(("]", ",")) else text
        if not text.strip():
            return None
        try:
            values = frame_json(f"[{text}]")
        except ValueError:
            if self.sse:
                return None
            raise ProviderError(
                "invalid_response", f"{self.provider} sent a stream line that is not SSE or JSON: {redact_head(text)!r}"
            ) from None
        for value in values:
            if isinstance(value, dict) and "error" in value:
                raise stream_error(value["error"])
        return values

    def _json(self, payload: str) -> Any:
        try:
            chunk = frame_json(payload)
        except ValueError:
            raise not_json(self.provider, payload) from None
        if isinstance(chunk, dict) and chunk.get("error"):
            raise stream_error(chunk["error"])
        return chunk
