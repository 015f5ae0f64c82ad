"""Anthropic Messages: the stream and a whole reply, read into deltas.

Follows the Anthropic API reference, "Streaming Messages" (the `message_start` /
`content_block_start` / `content_block_delta` / `content_block_stop` / `message_delta` /
`message_stop` event flow, `ping`, `event: error`) and "Handling stop reasons". Every content
block has its own wire `index`; tool input arrives as `input_json_delta` fragments (the first
one often ``""``), thinking as `thinking_delta` then one `signature_delta`; `redacted_thinking`
and server tool results arrive whole in `content_block_start`. Usage comes in two parts: input
(and cache) counts in `message_start`, cumulative counts in `message_delta`, which overwrite
what they repeat.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ....core import (
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    ServerToolDelta,
    StopKind,
    TextDelta,
    ToolCallDelta,
    Usage,
    redact_head,
)
from ...base import BlockIndex, StreamMeta, check_counts, read_usage, wire_usage
from ...decode import StreamDecoder, frame_json, not_json
from .server import TOOL_KINDS, citation, server_block

if TYPE_CHECKING:
    from .driver import AnthropicPromptDriver

#: stop_reason -> StopKind ("Handling stop reasons"). `pause_turn` (the API paused a long turn of
#: server tools) ends this turn, marked ``paused`` in its metadata: the loop sends it back as it is,
#: which continues it ("Server tools": "The server-side loop and pause_turn").
STOP_REASONS: dict[str, StopKind] = {
    "end_turn": StopKind.end_turn,
    "tool_use": StopKind.tool_use,
    "max_tokens": StopKind.max_tokens,
    "model_context_window_exceeded": StopKind.max_tokens,
    "stop_sequence": StopKind.stop_sequence,
    "refusal": StopKind.content_filter,
    "pause_turn": StopKind.end_turn,
}

#: Content block types this driver maps to core blocks; any other type passes through as `GenericBlock`.
_KNOWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def usage_from_anthropic(raw: dict[str, Any]) -> Usage:
    """Map an Anthropic usage object to `Usage`.

    Anthropic's `input_tokens` counts only the uncached part of the prompt;
    `input_tokens` here is the whole prompt (input + cache read + cache write), so
    that, as for every other driver, the cache counts are parts of `input_tokens`.

    Raises:
        ValueError, AttributeError: a block of the wrong shape (`read_usage` drops it).
    """
    uncached = raw.get("input_tokens") or 0
    cache_read = raw.get("cache_read_input_tokens") or 0
    cache_write = raw.get("cache_creation_input_tokens") or 0
    check_counts(input_tokens=uncached, cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_write)
    details = raw.get("output_tokens_details") or {}
    usage = wire_usage(
        raw,
        input_tokens=uncached + cache_read + cache_write,
        output_tokens=raw.get("output_tokens") or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=details.get("thinking_tokens") or 0,
    )
    server = raw.get("server_tool_use") or {}
    calls = {"web_search": server.get("web_search_requests") or 0, "web_fetch": server.get("web_fetch_requests") or 0}
    check_counts(**calls)
    usage.server_tool_calls = {kind: count for kind, count in calls.items() if count}
    return usage


def stop_kind(stop_reason: str) -> StopKind:
    """The normalized kind of an Anthropic `stop_reason` (unknown values end the turn)."""
    return STOP_REASONS.get(stop_reason, StopKind.end_turn)


def block_deltas(index: int, block: dict[str, Any], provider: str = "anthropic") -> list[DeltaMessage]:
    """The deltas that stand for one whole content block, as it appears in
    `content_block_start` or in a non-streaming message's `content`.

    Text and thinking give their text (nothing when empty, as at the start of a
    stream); `tool_use` gives its id and name and its input as JSON text (none
    for ``{}``, the streaming start); `redacted_thinking` becomes a redacted
    `ReasoningBlock` whose signature is the opaque `data`; a server tool's call or result
    becomes its neutral block (`server.server_block`); any other block passes through
    whole as a `GenericBlock`. A text block's citations (a whole message's) come after its text.
    """
    kind = block.get("type")
    if kind == "text":
        text = block.get("text") or ""
        cited = [CitationDelta(index, c) for c in map(citation, block.get("citations") or ()) if c is not None]
        return ([TextDelta(index, text)] if text else []) + cited
    if kind == "thinking":
        text, signature = block.get("thinking") or "", block.get("signature") or None
        return [ReasoningDelta(index, text, signature=signature)] if (text or signature) else []
    if kind == "redacted_thinking":
        return [BlockDelta(index, ReasoningBlock(text="", redacted=True, signature=block.get("data")))]
    if kind == "tool_use":
        arguments = block.get("input") or {}
        text = json.dumps(arguments) if arguments else ""
        return [ToolCallDelta(index, block.get("id") or None, block.get("name") or None, text)]
    return [BlockDelta(index, server_block(block, provider))]


class MessagesDecoder(StreamDecoder):
    """One Messages stream ("Streaming Messages"): one step per SSE event type, each taking the
    event and returning the deltas it stands for; ``message_start`` and ``message_delta`` note
    the usage (cumulative) and the stop reason; ``message_stop`` ends the reply (`done`). ``ping``
    and unknown event types carry nothing we keep; an ``error`` event raises."""

    def __init__(self, driver: AnthropicPromptDriver) -> None:
        super().__init__()
        self.driver = driver
        self.index = BlockIndex()
        self.usage: dict[str, Any] = {}
        self.pending: dict[
            int, tuple[dict[str, Any], list[str]]
        ] = {}  # passthrough blocks whose input is still streaming

    def feed(self, sse: Any) -> Sequence[DeltaMessage]:
        try:
            event = frame_json(sse.data)
        except ValueError:
            if sse.data:
                raise not_json(self.driver.provider, sse.data) from None
            return ()
        if type(event) is not dict:
            return ()
        kind = event.get("type") or sse.event
        if kind == "content_block_delta":  # the usual event: one piece of text
            delta = event.get("delta") or _NONE
            if delta.get("type") == "text_delta":
                text = delta.get("text")
                return (TextDelta(self.index[event.get("index", 0)], text),) if text else ()
        step = self.STEPS.get(kind)
        if step is not None:
            return step(self, event)
        if kind == "error" or sse.event == "error":
            raise self.driver._stream_error(event.get("error", event))
        return ()

    def block_delta(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """A delta other than text (`feed` reads a text delta itself)."""
        wire = event.get("index", 0)
        delta = event.get("delta") or _NONE
        kind = delta.get("type")
        if kind == "input_json_delta":
            fragment = delta.get("partial_json") or ""
            if wire in self.pending:
                self.pending[wire][1].append(fragment)
                if fragment and self.pending[wire][0].get("type") == "server_tool_use":  # shown as it is written
                    return (ServerToolDelta(self.index(wire), arguments=fragment),)
            elif fragment:
                return (ToolCallDelta(self.index(wire), None, None, fragment),)
        elif kind == "citations_delta":
            cited = citation(delta.get("citation"))
            return (CitationDelta(self.index(wire), cited),) if cited is not None else ()
        elif kind == "thinking_delta":
            if delta.get("thinking"):
                return (ReasoningDelta(self.index(wire), delta["thinking"]),)
        elif kind == "signature_delta":
            if delta.get("signature"):
                return (ReasoningDelta(self.index(wire), "", signature=delta["signature"]),)
        return ()  # unknown delta types carry nothing we keep

    def block_start(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        wire = event.get("index", 0)
        block = event.get("content_block") or {}
        position = self.index(wire)  # the arrival order fixes the position, even for a block emitted at its stop
        if block.get("type") in _KNOWN_BLOCKS:
            return block_deltas(position, block, self.driver.protocol)
        self.pending[wire] = (dict(block), [])
        if block.get("type") == "server_tool_use":  # its card opens now; the call is whole at its stop
            name = str(block.get("name") or "")
            return (ServerToolDelta(position, block.get("id") or None, TOOL_KINDS.get(name, name), name or None),)
        return ()

    def block_stop(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        wire = event.get("index", 0)
        if wire in self.pending:
            return (self._finish_block(self.index(wire), *self.pending.pop(wire)),)
        return ()

    def message_start(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        message = event.get("message") or {}
        self.usage = message.get("usage") or {}
        self.note(
            read_usage(
                usage_from_anthropic,
                self.usage,
                request_id=message.get("id") or None,
                model=message.get("model") or None,
            )
        )
        return ()

    def message_delta(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        counts = event.get("usage")
        if counts:  # first: billed, the counts count even when the rest of the event is unreadable
            self.note(read_usage(self._cumulative, counts))
        delta = event.get("delta") or {}
        reason = delta.get("stop_reason")
        if reason:
            self.note(StreamMeta(stop_raw=reason, stop_kind=stop_kind(reason),
                                 extra={"paused": True} if reason == "pause_turn" else None))
        if isinstance(delta.get("container"), dict):  # code ran in a container: the next request may reuse it
            self.note(StreamMeta(extra={"container": delta["container"]}))
        return ()

    def _cumulative(self, counts: Any) -> Usage:
        """The usage with `counts` over message_start's: cumulative counts overwrite; fields not
        repeated keep their message_start value. Raises as `usage_from_anthropic`."""
        self.usage = {**self.usage, **{k: v for k, v in counts.items() if v is not None}}
        return usage_from_anthropic(self.usage)

    def _finish_block(self, position: int, block: dict[str, Any], fragments: list[str]) -> BlockDelta:
        """A passthrough block (a server tool's call or result) made whole from its streamed input.

        Raises:
            ProviderError: ``invalid_response`` when the input is not JSON.
        """
        raw = "".join(fragments)
        if raw.strip():
            value = _json_or_none(raw)
            if value is None:
                raise ProviderError(
                    "invalid_response",
                    f"{self.driver.provider} sent a {block.get('type')} block whose input is not JSON: "
                    f"{redact_head(raw)!r}",
                )
            block["input"] = value
        return BlockDelta(position, server_block(block, self.driver.protocol))

    def finish(self) -> list[DeltaMessage]:
        """A passthrough block left open (the stream stopped inside it), kept only if its input is whole."""
        left = []
        for wire, (block, fragments) in self.pending.items():
            raw = "".join(fragments)
            if not raw.strip() or _json_or_none(raw) is not None:
                left.append(self._finish_block(self.index(wire), block, fragments))
        return left

    def whole(self, data: dict[str, Any]) -> list[DeltaMessage]:
        """A whole Messages API reply (``type: message``; a proxy that ignored ``stream: true``)."""
        if data.get("type") == "error" or isinstance(data.get("error"), dict):
            raise self.driver._stream_error(data.get("error", data))
        if data.get("type") != "message" and not isinstance(data.get("content"), list):
            raise ProviderError(
                "invalid_response",
                f"{self.driver.provider} sent a JSON reply that is not a message: {redact_head(json.dumps(data))!r}",
                retryable=False,
            )
        self.note(
            read_usage(
                usage_from_anthropic,
                data.get("usage") or {},
                request_id=data.get("id") or None,
                model=data.get("model") or None,
            )
        )
        deltas = [
            d
            for index, block in enumerate(data.get("content") or ())
            if isinstance(block, dict)
            for d in block_deltas(index, block, self.driver.protocol)
        ]
        reason = data.get("stop_reason") or "end_turn"
        self.note(StreamMeta(stop_raw=reason, stop_kind=stop_kind(reason),
                             extra={"paused": True} if reason == "pause_turn" else None))
        if isinstance(data.get("container"), dict):
            self.note(StreamMeta(extra={"container": data["container"]}))
        return deltas

    def message_stop(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """The stream's last event: nothing after it is read (a proxy's extra bytes, an error)."""
        self.done = True
        return ()

    STEPS: ClassVar[dict[str, Callable[[MessagesDecoder, dict[str, Any]], Sequence[DeltaMessage]]]] = {
        "content_block_delta": block_delta,
        "content_block_start": block_start,
        "content_block_stop": block_stop,
        "message_start": message_start,
        "message_delta": message_delta,
        "message_stop": message_stop,
    }


_NONE: dict[str, Any] = {}  # read only: a delta without fields


def _json_or_none(raw: str) -> Any:
    try:
        return frame_json(raw)
    except ValueError:
        return None
