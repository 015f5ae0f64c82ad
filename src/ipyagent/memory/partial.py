"""A streaming reply as it stood when its run stopped: for threads and the run store.

Built the way the drivers build every reply (`drivers.Aggregator`), so a
stopped run keeps what a finished one would: text, reasoning (with its
signature) and the tool calls whose arguments are complete. The message is
marked ``partial``: threads skip it when they compose the next prompt, so a
call without its result never goes back to a provider.
"""

from __future__ import annotations

from typing import Any

from ..core import Message
from ..drivers import Aggregator


def partial_message(deltas: dict[int, list[Any]], **metadata: Any) -> Message | None:
    """The message of the deltas so far (by content index), or None when nothing had arrived.

    `metadata` is added to ``{"partial": True}``; a tool call cut inside its arguments is
    described in ``metadata["partial_tool_calls"]`` (id, name, raw argument text).
    """
    if not any(deltas.values()):
        return None
    aggregator = Aggregator()
    for index in sorted(deltas):
        for delta in deltas[index]:
            aggregator.add(delta)
    dropped: list[dict[str, Any]] = []
    message = aggregator.message(strict=False, dropped=dropped)
    message.metadata = {"partial": True, **metadata}
    if dropped:
        message.metadata["partial_tool_calls"] = dropped
    return message
