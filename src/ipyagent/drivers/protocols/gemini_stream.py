"""Parsing Gemini's `GenerateContentResponse` stream: deltas, usage, stop reasons, errors.

Follows the Gemini API reference, "Generating content" (response
`GenerateContentResponse`, `Candidate`, `Part`, `UsageMetadata`), the "Function
calling" and "Thought signatures" guides, and the `google.rpc.Status` error
model (with `RetryInfo` and `ErrorInfo` details). See `gemini.py` for the
translation notes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from ...core import (
    AudioBlock,
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    GenericBlock,
    ImageBlock,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    StopKind,
    TextDelta,
    ToolCallDelta,
    Usage,
    redact,
    redact_head,
)
from ..base import BlockIndex, StreamMeta, read_usage, wire_usage
from ..decode import StreamDecoder, not_json
from .gemini_tools import code_call, code_result, grounding_citations, search_blocks, url_blocks

#: `Candidate.finishReason` -> StopKind. STOP with function calls is tool_use.
FINISH_REASONS: dict[str, StopKind] = {
    "STOP": StopKind.end_turn,
    "MAX_TOKENS": StopKind.max_tokens,
    "SAFETY": StopKind.content_filter,
    "RECITATION": StopKind.content_filter,
    "BLOCKLIST": StopKind.content_filter,
    "PROHIBITED_CONTENT": StopKind.content_filter,
    "SPII": StopKind.content_filter,
    "IMAGE_SAFETY": StopKind.content_filter,
    "IMAGE_PROHIBITED_CONTENT": StopKind.content_filter,
    "IMAGE_RECITATION": StopKind.content_filter,
    "MALFORMED_FUNCTION_CALL": StopKind.error,
    "UNEXPECTED_TOOL_CALL": StopKind.error,
    "TOO_MANY_TOOL_CALLS": StopKind.error,
    "MISSING_THOUGHT_SIGNATURE": StopKind.error,
}

#: `google.rpc.Status.status` -> ProviderError type.
STATUS_TYPES: dict[str, str] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "DATA_LOSS": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
}

#: `google.rpc.ErrorInfo.reason` values that decide the type whatever the HTTP status
#: (Gemini reports a bad key as HTTP 400 INVALID_ARGUMENT with reason API_KEY_INVALID).
REASON_TYPES: dict[str, str] = {
    "API_KEY_INVALID": "authentication",
    "API_KEY_EXPIRED": "authentication",
    "ACCESS_TOKEN_EXPIRED": "authentication",
    "CREDENTIALS_MISSING": "authentication",
    "API_KEY_SERVICE_BLOCKED": "permission",
    "SERVICE_DISABLED": "permission",
}

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")
_PATH_RE = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")\]")


def usage_from_gemini(raw: dict[str, Any]) -> Usage:
    """Map `usageMetadata` (tokens) to `Usage`. Thought tokens are `reasoning_tokens`, not `output_tokens`.

    Raises:
        ValueError, AttributeError: a block of the wrong shape (`read_usage` drops it)."""
    return wire_usage(
        raw,
        input_tokens=raw.get("promptTokenCount") or 0,
        output_tokens=raw.get("candidatesTokenCount") or 0,
        total_tokens=raw.get("totalTokenCount") or 0,
        cache_read_tokens=raw.get("cachedContentTokenCount") or 0,
        reasoning_tokens=raw.get("thoughtsTokenCount") or 0,
    )


def parse_duration(value: Any) -> float | None:
    """Seconds from a protobuf JSON `Duration` (``"48s"``, ``"1.5s"``), else None."""
    if not isinstance(value, str):
        return None
    match = _DURATION_RE.match(value)
    return float(match.group(1)) if match else None


def _details(error: dict[str, Any]) -> list[dict[str, Any]]:
    details = error.get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def error_reason(error: dict[str, Any]) -> str | None:
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo") and detail.get("reason"):
            return str(detail["reason"])
    return None


def retry_delay(error: Any) -> float | None:
    """Seconds from the `google.rpc.RetryInfo.retryDelay` of an error body, else None."""
    if isinstance(error, list) and error:
        error = error[0]
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict):
        return None
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return parse_duration(detail.get("retryDelay"))
    return None


def error_type(error: dict[str, Any]) -> str | None:
    reason = error_reason(error)
    if reason in REASON_TYPES:
        return REASON_TYPES[reason]
    return STATUS_TYPES.get(str(error.get("status") or ""))


# -- tool schemas ----------------------------------------------------------------------


class _OpenCall:
    """A function call whose arguments are still streaming (Vertex `partialArgs`)."""

    __slots__ = ("index", "args", "continuing")

    def __init__(self, index: int, args: dict[str, Any]) -> None:
        self.index = index
        self.args = args
        self.continuing: set[str] = set()  # jsonPaths whose string value goes on


def _make_room(items: list[Any], index: int) -> None:
    """Room for `items[index]`: an item that exists or the next one (arguments stream in order).

    Raises:
        ValueError: an index past the next (``$.a[10000000]`` would allocate ten million items)."""
    if index > len(items):
        raise ValueError(f"tool call arguments set item {index} of a list of {len(items)}, out of order")
    if index == len(items):
        items.append(None)


def _set_path(root: dict[str, Any], path: str, value: Any, append: bool) -> None:
    """Set (or append to, for a continuing string) the value at a JSONPath like ``$.a[0].b``.

    Raises:
        ValueError: a list index past the next item (`_make_room`)."""
    keys: list[str | int] = []
    for name, number, single, double in _PATH_RE.findall(path[1:] if path.startswith("$") else path):
        keys.append(int(number) if number else (name or single or double))
    if not keys:
        return
    node: Any = root
    for key, nxt in zip(keys, keys[1:]):
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(key, int):
            if not isinstance(node, list):
                return
            _make_room(node, key)
            if not isinstance(node[key], (dict, list)):
                node[key] = empty
            node = node[key]
        else:
            if not isinstance(node, dict):
                return
            if not isinstance(node.get(key), (dict, list)):
                node[key] = empty
            node = node[key]
    last = keys[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            return
        _make_room(node, last)
        old = node[last]
        node[last] = old + value if append and isinstance(old, str) and isinstance(value, str) else value
    elif isinstance(node, dict):
        old = node.get(last)
        node[last] = old + value if append and isinstance(old, str) and isinstance(value, str) else value


class GeminiResponseParser:
    """Turns `GenerateContentResponse` objects (stream chunks, or one whole
    non-streaming body) into deltas; `finish()` gives the closing `StreamMeta`.

    Only candidate 0 makes the reply. Consecutive text parts form one text
    block, consecutive thought parts one reasoning block; each function call is
    its own block.
    """

    __slots__ = ("index", "_kind", "_seq", "_calls", "_open", "_reasoning_signed", "usage", "finish_reason",
                 "block_reason", "response_id", "model", "_texts", "_codes", "_code_id", "grounding", "url_context")

    def __init__(self) -> None:
        self.index = BlockIndex()
        self._kind: str | None = None  # kind of the block now open: "text", "thought" or None
        self._seq = 0
        self._calls = 0
        self._open: _OpenCall | None = None
        self._reasoning_signed = False
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.block_reason: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self._texts: dict[int, list[str]] = {}  # text block -> its pieces (grounding offsets are into the text)
        self._codes = 0  # code executions so far (Gemini gives them no id)
        self._code_id: str | None = None  # the code execution a result answers
        self.grounding: dict[str, Any] | None = None  # the candidate's groundingMetadata (its last)
        self.url_context: dict[str, Any] | None = None  # the candidate's urlContextMetadata

    def feed(self, chunk: Any) -> Iterator[DeltaMessage]:
        """Deltas for one response object. Raises `ProviderError` for an ``error`` object."""
        if isinstance(chunk, list):  # a JSON-array framed body
            for item in chunk:
                yield from self.feed(item)
            return
        if not isinstance(chunk, dict):
            return
        error = chunk.get("error")
        if error:
            raise stream_error(error)
        usage = chunk.get("usageMetadata")
        if usage:
            self.usage = usage
        self.response_id = chunk.get("responseId") or self.response_id
        self.model = chunk.get("modelVersion") or self.model
        candidates = chunk.get("candidates")
        if not candidates:
            feedback = chunk.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                self.block_reason = feedback["blockReason"]
            return
        for candidate in candidates:
            if candidate.get("index", 0) != 0:
                continue  # candidateCount > 1: the other candidates are not this reply
            content = candidate.get("content")
            if content:
                for part in content.get("parts") or ():
                    yield from self._part(part)
            finish = candidate.get("finishReason")
            if finish:
                self.finish_reason = finish
            if isinstance(candidate.get("groundingMetadata"), dict):
                self.grounding = candidate["groundingMetadata"]
            if isinstance(candidate.get("urlContextMetadata"), dict):
                self.url_context = candidate["urlContextMetadata"]

    def _new(self, kind: str | None) -> int:
        self._seq += 1
        self._kind = kind
        return self.index(("block", self._seq))

    def _part(self, part: dict[str, Any]) -> Iterator[DeltaMessage]:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if call is not None:
            yield from self._function_call(call, signature)
            return
        text = part.get("text")
        if text is not None:
            if part.get("thought"):
                if self._kind != "thought" or (signature and self._reasoning_signed):
                    self._new("thought")
                    self._reasoning_signed = False
                self._reasoning_signed = self._reasoning_signed or bool(signature)
                if text or signature:
                    yield ReasoningDelta(self.index(("block", self._seq)), text, signature)
                return
            if signature:
                # A signature on a text part: a whole signature-only reasoning block (nothing to
                # show while streaming), then the text in a new block.
                yield BlockDelta(self._new(None), ReasoningBlock(text="", signature=signature))
            if text:
                if self._kind != "text":
                    self._new("text")
                index = self.index(("block", self._seq))
                self._texts.setdefault(index, []).append(text)
                yield TextDelta(index, text)
            return
        inline = part.get("inlineData")
        if isinstance(inline, dict) and inline.get("data"):
            mime = inline.get("mimeType") or "application/octet-stream"
            block: Any = (
                ImageBlock(mime_type=mime, data=inline["data"])
                if mime.startswith("image/")
                else AudioBlock(mime_type=mime, data=inline["data"])
                if mime.startswith("audio/")
                else GenericBlock(value=part)
            )
            yield BlockDelta(self._new(None), block)
            return
        if "executableCode" in part:  # the code execution tool: a call, its part kept to go back
            self._codes += 1
            call = code_call(part, self._codes)
            self._code_id = call.id
            yield BlockDelta(self._new(None), call)
        elif "codeExecutionResult" in part:
            yield BlockDelta(self._new(None), code_result(part, self._code_id or f"code_{self._codes}"))
        elif part:
            # fileData and parts we do not know: kept whole, sent back as they came.
            yield BlockDelta(self._new(None), GenericBlock(value=part))

    def _function_call(self, call: dict[str, Any], signature: str | None) -> Iterator[DeltaMessage]:
        name = call.get("name")
        open_call = self._open
        if open_call is not None and not name:
            self._apply_partial(open_call, call)
            if signature:
                yield ToolCallDelta(open_call.index, None, None, "", signature)
            if not call.get("willContinue"):
                yield self._close()
            return
        if open_call is not None:
            yield self._close()
        if not name:
            return  # a stray closing part without an open call
        index = self._new("call")
        self._calls += 1
        call_id = call.get("id") or _call_id(index, self.response_id)
        args = call.get("args")
        if call.get("willContinue"):
            self._open = _OpenCall(index, dict(args) if isinstance(args, dict) else {})
            self._apply_partial(self._open, call)
            yield ToolCallDelta(index, call_id, name, "", signature)
        else:  # args that are not an object are passed on as sent: the call gets its error, for the model
            yield ToolCallDelta(
                index, call_id, name, json.dumps({} if args is None else args, ensure_ascii=False), signature
            )

    @staticmethod
    def _apply_partial(open_call: _OpenCall, call: dict[str, Any]) -> None:
        if isinstance(call.get("args"), dict):
            open_call.args.update(call["args"])
        for partial in call.get("partialArgs") or ():
            path = partial.get("jsonPath") or ""
            if "stringValue" in partial:
                value: Any = partial["stringValue"]
            elif "numberValue" in partial:
                value = partial["numberValue"]
            elif "boolValue" in partial:
                value = partial["boolValue"]
            elif "nullValue" in partial:
                value = None
            else:
                continue
            _set_path(open_call.args, path, value, append=path in open_call.continuing)
            if partial.get("willContinue"):
                open_call.continuing.add(path)
            else:
                open_call.continuing.discard(path)

    def _close(self) -> ToolCallDelta:
        open_call, self._open = self._open, None
        assert open_call is not None
        return ToolCallDelta(open_call.index, None, None, json.dumps(open_call.args, ensure_ascii=False))

    def _grounded(self) -> list[DeltaMessage]:
        """The URL context and Google Search the reply rested on, as calls and results placed before
        its first block (negative indices: the metadata comes last, the tools ran first), and the
        citations of its text."""
        blocks = url_blocks(self.url_context, self.response_id) if self.url_context else []
        blocks += search_blocks(self.grounding, self.response_id) if self.grounding else []
        items: list[DeltaMessage] = [BlockDelta(n - len(blocks), block) for n, block in enumerate(blocks)]
        if self.grounding and self._texts:
            texts = {index: "".join(pieces) for index, pieces in self._texts.items()}
            items += [CitationDelta(index, cited) for index, cited in grounding_citations(self.grounding, texts)]
        return items

    def finish(self) -> list[DeltaMessage | StreamMeta]:
        """What the end of the response tells: a still-open call closed, usage, stop reason, ids."""
        items: list[DeltaMessage | StreamMeta] = []
        if self._open is not None:
            items.append(self._close())
        items += self._grounded()
        ids = {"request_id": self.response_id, "model": self.model}
        meta = read_usage(usage_from_gemini, self.usage, **ids) if self.usage else StreamMeta(**ids)
        queries = (self.grounding or {}).get("webSearchQueries")
        if isinstance(queries, list) and queries:  # Gemini 3 bills each search query
            meta.server_tool_calls = {"web_search": len(queries)}
        entry = (self.grounding or {}).get("searchEntryPoint")
        if isinstance(entry, dict) and entry.get("renderedContent"):
            # Google's search suggestions (HTML and CSS that load from Google), which its terms ask an app
            # showing grounded answers to display: kept for such an app, never drawn here.
            meta.extra = {"search_entry_point": entry["renderedContent"]}
        if self.finish_reason:
            meta.stop_raw = self.finish_reason
            kind = FINISH_REASONS.get(self.finish_reason, StopKind.end_turn)
            if kind is StopKind.end_turn and self._calls:
                kind = StopKind.tool_use
            meta.stop_kind = kind
        elif self.block_reason:
            meta.stop_raw, meta.stop_kind = self.block_reason, StopKind.content_filter
        items.append(meta)
        return items


def stream_error(error: Any) -> ProviderError:
    """A `ProviderError` for an ``error`` object (`google.rpc.Status`) found in a stream."""
    if not isinstance(error, dict):
        return ProviderError("server", f"gemini stream error: {error}", raw=error)
    message = str(error.get("message") or error.get("status") or error)
    message = redact(message)
    code = error.get("code")
    status = code if isinstance(code, int) else None
    etype = error_type(error) or ("server" if status is None or status >= 500 else "invalid_request")
    return ProviderError(
        etype,  # type: ignore[arg-type]
        f"gemini stream error: {message}",
        code=error_reason(error) or error.get("status") or code,
        raw=error,
        status=status,
        retry_after=retry_delay(error),
    )


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

    def feed(self, line: str) -> Sequence[DeltaMessage]:
        if line.startswith("data:"):
            self.sse = True
            self.data.append(line[6:] if line.startswith("data: ") else line[5:])
            return ()
        chunk = self._line(line)
        return list(self.parser.feed(chunk)) if chunk is not None else ()

    def finish(self) -> list[DeltaMessage]:
        """The last event (its blank line missing), a still-open call; usage, stop reason and ids noted.

        Raises:
            ProviderError: ``invalid_response`` for JSON left open (the stream ended early) or
                lines that are neither SSE nor JSON, outside an SSE stream.
        """
        chunk = self._line("")
        deltas = list(self.parser.feed(chunk)) if chunk is not None else []
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
            values = json.loads(f"[{text}]")
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
            chunk = json.loads(payload)
        except ValueError:
            raise not_json(self.provider, payload) from None
        if isinstance(chunk, dict) and chunk.get("error"):
            raise stream_error(chunk["error"])
        return chunk


# -- the driver ------------------------------------------------------------------------


_GENERATED_ID = re.compile(r"^call_\d+(?:_[A-Za-z0-9_-]+)?$")


def _call_id(index: int, response_id: str | None) -> str:
    """An id for a call Gemini sent without one: stable on replay, and unique across the
    turns of a conversation when the response has a `responseId`."""
    return f"call_{index}_{response_id}" if response_id else f"call_{index}"


def is_sent_id(tag: str) -> bool:
    """Whether a call id goes on the wire: the ids `_call_id` made up do not."""
    return bool(tag) and not _GENERATED_ID.match(tag)


def parse_response(body: Any) -> tuple[list[DeltaMessage], StreamMeta]:
    """The deltas and closing `StreamMeta` of one whole (non-streaming)
    `GenerateContentResponse`, through the same parser the stream uses."""
    parser = GeminiResponseParser()
    items: list[Any] = list(parser.feed(body))
    *rest, meta = parser.finish()
    return items + rest, meta
