"""A streaming reply as it stood when its run stopped: for threads and the run store.

Unlike the drivers' final aggregation, every tool call here stays raw (id, name, argument
text): a call without its result must not go back to a provider.
"""

from __future__ import annotations

from typing import Any

from ..core import Message, ReasoningBlock, ReasoningDelta, TextBlock, TextDelta


def partial_message(deltas: dict[int, list[Any]], **metadata: Any) -> Message | None:
    """The text and reasoning streamed so far (by content index), the tool calls in
    ``metadata["partial_tool_calls"]``; None when nothing had arrived."""
    blocks: list[Any] = []
    calls = []
    for index in sorted(deltas):
        bucket = deltas[index]
        if isinstance(bucket[0], TextDelta):
            blocks.append(TextBlock.from_deltas(bucket))
        elif isinstance(bucket[0], ReasoningDelta):
            blocks.append(ReasoningBlock.from_deltas(bucket))
        else:
            calls.append({"id": next((d.call_id for d in bucket if getattr(d, "call_id", None)), None),
                          "name": next((d.name for d in bucket if getattr(d, "name", None)), None),
                          "raw_arguments": "".join(getattr(d, "arguments", "") or "" for d in bucket)})
    if not blocks and not calls:
        return None
    metadata = {"partial": True, **metadata}
    if calls:
        metadata["partial_tool_calls"] = calls
    return Message(role="assistant", content=blocks, metadata=metadata)
