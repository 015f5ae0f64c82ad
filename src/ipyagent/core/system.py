"""`SystemBlock`: one piece of a system prompt, and fitting the pieces to a budget
(DESIGN.md, "core"; the provider-adapter contract's system blocks).

Static blocks are always sent. Dynamic ones (retrieved notes, a variable summary,
anything that may be left out) are dropped lowest priority first, the latest
first among equals, until the blocks fit the budget. Token counts are our
estimate (about four characters per token), kept apart from provider usage.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Characters per token of our estimate (as `memory.tokens`).
CHARS_PER_TOKEN = 4


class SystemBlock(BaseModel):
    """One block of the system prompt.

    Attributes:
        text: what the model is told.
        source: where it came from (``user``, ``react``, ``memory``, a tool's name...).
        priority: higher is kept longer when dynamic blocks must go.
        dynamic: True when the block may be dropped to fit the budget.
        token_count: our estimate of its tokens (computed from `text` when not given).
        metadata: anything else to keep with it (shown by ``%agent inspect``).
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    text: str
    source: str = "user"
    priority: int = 0
    dynamic: bool = False
    token_count: int = Field(0, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("token_count"):
            data = {**data, "token_count": math.ceil(len(data.get("text") or "") / CHARS_PER_TOKEN)}
        return data

    def summary(self, kept: bool) -> dict[str, Any]:
        """What ``%agent inspect`` and the run's metadata show: everything but the text, and whether it went in."""
        return {"source": self.source, "priority": self.priority, "dynamic": self.dynamic,
                "token_count": self.token_count, "kept": kept, **({"metadata": self.metadata} if self.metadata else {})}


def system_blocks(
    value: "str | SystemBlock | list[str | SystemBlock] | None", *, source: str = "user"
) -> list[SystemBlock]:
    """Blocks from text, a block, or a list of either (text becomes a static block from `source`).

    Raises:
        TypeError: something else.
    """
    if value is None:
        return []
    if isinstance(value, (str, SystemBlock)):
        value = [value]
    blocks = []
    for item in value:
        if isinstance(item, str):
            if item:
                blocks.append(SystemBlock(text=item, source=source))
        elif isinstance(item, SystemBlock):
            blocks.append(item)
        else:
            raise TypeError(f"system takes text or SystemBlock objects, not {type(item).__name__}")
    return blocks


def fit_system_blocks(blocks: list[SystemBlock], budget: int | None) -> tuple[list[SystemBlock], list[SystemBlock]]:
    """(blocks kept, in their order; dynamic blocks dropped) so the kept ones fit `budget` tokens.

    Static blocks always stay, even past the budget. Dynamic blocks go lowest
    priority first (the later one first among equal priorities) until the total
    fits. No budget: everything stays.
    """
    if budget is None:
        return list(blocks), []
    total = sum(b.token_count for b in blocks)
    order = sorted((n for n, b in enumerate(blocks) if b.dynamic), key=lambda n: (blocks[n].priority, -n))
    dropped: set[int] = set()
    for n in order:
        if total <= budget:
            break
        dropped.add(n)
        total -= blocks[n].token_count
    return [b for n, b in enumerate(blocks) if n not in dropped], [b for n, b in enumerate(blocks) if n in dropped]


def system_text(value: "str | SystemBlock | list[str | SystemBlock] | None") -> str:
    """All of a system prompt's text (every block, dropped or not), for estimates."""
    return "\n\n".join(b.text for b in system_blocks(value))
