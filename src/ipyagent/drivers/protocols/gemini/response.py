"""Gemini's `GenerateContentResponse` read into deltas: a stream's chunks or one whole reply.

Follows the Gemini API reference, "Generating content" (response `GenerateContentResponse`,
`Candidate`, `Part`, `UsageMetadata`), the "Function calling" and "Thought signatures" guides,
and Vertex AI's streamed function call arguments (``willContinue`` / ``partialArgs`` with a
``jsonPath``). See the package's notes (`ipyagent.drivers.protocols.gemini`) for the translation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ....core import (
    AudioBlock,
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    GenericBlock,
    ImageBlock,
    ReasoningBlock,
    ReasoningDelta,
    StopKind,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ...base import BlockIndex, StreamMeta, read_usage, wire_usage
from ...decode import FRAME_DEPTH, reason_text
from .errors import stream_error
from .tools import code_call, code_result, grounding_citations, search_blocks, url_blocks

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

    A path deeper than `FRAME_DEPTH` keys is cut there, its value ``[]``: the arguments still nest
    deeper than a call may (`parse_arguments` gives the call that error), and no deeper, so writing
    them as JSON raises no RecursionError.

    Raises:
        ValueError: a list index past the next item (`_make_room`)."""
    keys: list[str | int] = []
    for name, number, single, double in _PATH_RE.findall(path[1:] if path.startswith("$") else path):
        keys.append(int(number) if number else (name or single or double))
    if not keys:
        return
    if len(keys) > FRAME_DEPTH:
        keys, value, append = keys[:FRAME_DEPTH], [], False
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
                self.finish_reason = reason_text(finish)
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
