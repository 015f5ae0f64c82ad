"""Stream aggregation: deltas, by content index, into the final assistant `Message`.

Lives once, here, for every prompt driver (DESIGN.md, "drivers"): text blocks
concatenate; a tool call keeps the last non-empty id and name and concatenates
its argument fragments (empty arguments mean ``{}``; arguments that are not a JSON
object, or no name, make a call that is not run, its error for the model:
`ActionCallBlock.error`); a whole block arriving at
once (`BlockDelta`) is kept as it is. A reply that stopped before its end (failed,
interrupted, past its deadline) is built here too (`Aggregator.partial`), by the
same rules, wherever it is kept: the failed turn's event, the run's result, threads
and the run store.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any

from ..core import (
    ActionCallBlock,
    BlockDelta,
    Citation,
    CitationDelta,
    DeltaMessage,
    Message,
    MessageError,
    MessageStatus,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    ServerToolCallBlock,
    ServerToolDelta,
    StopKind,
    TextBlock,
    join_text,
    TextDelta,
    ToolCallDelta,
    Usage,
)


@dataclass(slots=True)
class StreamMeta:
    """Facts of a stream a decoder notes (`StreamDecoder.note`): any field left None is
    unchanged. `usage_error`: the provider's usage block could not be read (`usage.read_usage`);
    it replaces a usage read before, as a usage read later replaces it. `server_tool_calls`:
    provider-side tool calls counted from the stream, by kind (``{"web_search": 1}``), where the
    usage block does not count them; `extra`: facts of the reply kept in its message's metadata
    (Anthropic's code execution ``container``; ``paused``: the provider paused its own tool loop,
    and sending the conversation back continues the turn). A decoder notes each whole, not a
    change; `extra` keys add to those noted before."""

    usage: Usage | None = None
    usage_error: str | None = None
    stop_raw: str | None = None
    stop_kind: StopKind | None = None
    request_id: str | None = None
    model: str | None = None
    server_tool_calls: dict[str, int] | None = None
    extra: dict[str, Any] | None = None


_INDEX = attrgetter("index")


class BlockIndex(dict[Any, int]):
    """Gives each content block of a reply a stable index in arrival order.

    Drivers key blocks by whatever the wire uses (``"text"``, ``("tool", 1)``):
    ``index(key)``, or ``index[key]`` on a hot path (a dict lookup, no Python call
    unless the key is new).
    """

    __slots__ = ()

    def __missing__(self, key: Any) -> int:
        index = self[key] = len(self)
        return index

    def __call__(self, key: Any) -> int:
        return self[key]


class _Texts(dict[int, list[str]]):
    """Content index -> the text pieces streamed there."""

    __slots__ = ()

    def __missing__(self, index: int) -> list[str]:
        pieces = self[index] = []
        return pieces


class Aggregator:
    """Builds the final assistant `Message` from deltas, by content index.

    A `TextDelta` is kept as its text (`texts`), the other deltas as they are (`others`, in
    arrival order): a long answer's thousands of delta objects would each be walked by the
    garbage collector for as long as the reply is kept, strings are not. Deltas are grouped
    by content index once, when a message is built."""

    __slots__ = ("texts", "others")

    def __init__(self) -> None:
        self.texts = _Texts()
        self.others: list[DeltaMessage] = []

    def add(self, delta: DeltaMessage) -> None:
        if delta.__class__ is TextDelta:
            self.texts[delta.index].append(delta.text)  # type: ignore[attr-defined]
        else:
            self.others.append(delta)

    def __bool__(self) -> bool:
        """Whether any delta arrived."""
        return bool(self.texts or self.others)

    def clear(self) -> None:
        """Forget the deltas (the next reply starts)."""
        self.texts.clear()
        self.others.clear()

    def blocks(self) -> dict[int, list[Any]]:
        """By content index, in index order: a text block's pieces (strings), or another block's
        deltas in arrival order. Citations are not a block's: see `citations`.

        Raises:
            ValueError: one content index holding text and deltas of another kind.
        """
        buckets: dict[int, list[Any]] = {}
        others = self.others
        if any(d.__class__ is CitationDelta for d in others):
            others = [d for d in others if d.__class__ is not CitationDelta]
        for index, run in groupby(others, _INDEX):  # runs of one index, so one lookup per run
            bucket = buckets.get(index)
            if bucket is None:
                buckets[index] = list(run)
            else:
                bucket.extend(run)
        for index, pieces in self.texts.items():
            if index in buckets:
                raise ValueError(f"content block {index} holds text and {type(buckets[index][0]).__name__} deltas")
            buckets[index] = pieces
        return dict(sorted(buckets.items()))

    def citations(self) -> dict[int, list[Citation]]:
        """Content index -> the citations of that text block, in arrival order (`CitationDelta`)."""
        found: dict[int, list[Citation]] = {}
        for delta in self.others:
            if delta.__class__ is CitationDelta:
                found.setdefault(delta.index, []).append(delta.citation)  # type: ignore[attr-defined]
        return found

    def message(self, *, dropped: list[dict[str, Any]] | None = None) -> Message:
        """The message so far. A tool call that cannot run as written (`ActionCallBlock.error`:
        arguments that are not a JSON object, no name) is kept with its error, for the model to
        read; with `dropped` given it is left out instead (a call cut off by the end of the
        stream or by max_tokens was not the model's mistake) and described there ({"id",
        "name", "raw_arguments"}). A text block gets its citations; a provider-side tool call is
        the whole block that closed it, or, cut off before, what its progress deltas said.

        Raises:
            TypeError, ValueError: the deltas form no message (a text delta that is not text, one
                content index holding different kinds).
        """
        blocks: list[Any] = []
        calls = 0
        cited = self.citations() if self.others else {}
        for index, bucket in self.blocks().items():
            first = bucket[0]
            if index in self.texts:
                blocks.append(TextBlock(text=join_text(bucket), citations=cited.get(index, [])))
            elif isinstance(first, TextDelta):  # a subclass of it
                blocks.append(TextBlock.from_deltas(bucket))
            elif isinstance(first, ReasoningDelta):
                block = ReasoningBlock.from_deltas(bucket)
                block.signature = next((d.signature for d in reversed(bucket) if d.signature), None)
                blocks.append(block)
            elif isinstance(first, ToolCallDelta):
                calls += 1
                call = ActionCallBlock.from_deltas(bucket, calls)
                if call.error is None or dropped is None:
                    blocks.append(call)
                else:
                    dropped.append({
                        "id": next((d.call_id for d in reversed(bucket) if d.call_id), None),
                        "name": next((d.name for d in reversed(bucket) if d.name), None),
                        "raw_arguments": call.raw_arguments,
                    })
            elif isinstance(first, (BlockDelta, ServerToolDelta)):
                blocks.append(_whole_block(bucket))
        return Message(role="assistant", content=blocks)

    def partial(self, status: MessageStatus = "partial", error: ProviderError | None = None) -> Message | None:
        """The reply so far of a stream that stopped before its end (or has not ended), or None
        when nothing had arrived: its text, reasoning (with its signature) and the tool calls
        whose arguments are complete, with `status` (``partial``, ``failed``, ``interrupted``)
        and `error`. A call cut inside its arguments is left out and described in
        ``metadata["partial_tool_calls"]`` (id, name, raw argument text).

        Raises:
            ValueError: the deltas form no message (one content index holding different kinds).
        """
        if not self:
            return None
        dropped: list[dict[str, Any]] = []
        message = self.message(dropped=dropped)
        message.status = status
        if error is not None:
            message.error = MessageError.of(error)
        if dropped:
            message.metadata["partial_tool_calls"] = dropped
        return message


def _whole_block(bucket: list[Any]) -> Any:
    """The block a run of `BlockDelta` / `ServerToolDelta` stands for: the last whole block; a
    provider-side call that never closed, from its progress (its input as far as it came, in
    ``input["partial"]``)."""
    for delta in reversed(bucket):
        if delta.__class__ is BlockDelta:
            return delta.block
    call_id = next((d.call_id for d in reversed(bucket) if d.call_id), "")
    tool = next((d.tool for d in reversed(bucket) if d.tool), "")
    name = next((d.name for d in reversed(bucket) if d.name), "")
    text = "".join(d.arguments for d in bucket)
    return ServerToolCallBlock(id=call_id, tool=tool, name=name, input={"partial": text} if text else {})


def merge_meta(meta: StreamMeta, update: StreamMeta) -> None:
    """Copy the fields `update` sets (not None) onto `meta`; an unreadable usage leaves no usage,
    a readable one no usage error."""
    for name in StreamMeta.__slots__:
        value = getattr(update, name)
        if value is not None:
            setattr(meta, name, {**(meta.extra or {}), **value} if name == "extra" else value)
    if update.usage_error is not None:
        meta.usage = None
    elif update.usage is not None:
        meta.usage_error = None
