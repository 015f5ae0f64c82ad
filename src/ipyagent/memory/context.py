"""Context blocks: notebook state attached to a prompt (a variable, the last error, other cells).

A `ContextBlock` is sent as one text block at the head of the user message,
wrapped in a ``<context>`` element naming what it is, so the model can tell
the attached material from the question; secrets in play are masked first. `%agent inspect` lists the blocks a
run carried with our token estimate of each.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core import redact
from .summarize import DEFAULT_BUDGET, summarize
from .tokens import estimate_text


@dataclass(frozen=True)
class ContextBlock:
    """One piece of context.

    Attributes:
        name: what it is called in the notebook (``df``, ``error``, ``In[3]``).
        source: ``variable``, ``error`` or ``cell``.
        kind: the value's type (``pandas.DataFrame``) or ``traceback`` / ``cell``.
        text: the summary sent to the model.
        truncated: True when the summary was cut to its budget.
    """

    name: str
    source: str
    kind: str
    text: str
    truncated: bool = False

    @property
    def tokens(self) -> int:
        """Our estimate of the block's size in the request, in tokens."""
        return estimate_text(self.to_text())

    def to_text(self) -> str:
        """The block as sent: a ``<context>`` element, followed by a blank line. Secrets in
        play (an API key a cell set, a key in a config dict) are masked (`core.redact`)."""
        cut = ' truncated="true"' if self.truncated else ""
        return redact(
            f'<context source="{self.source}" name="{_attr(self.name)}" '
            f'type="{_attr(self.kind)}"{cut}>\n{self.text}\n</context>\n\n'
        )

    def describe(self) -> dict[str, Any]:
        """A JSON record of the block with its token estimate (run store metadata, `%agent inspect`), secrets masked."""
        return {**asdict(self), "text": redact(self.text), "tokens": self.tokens}


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def variable_block(name: str, value: Any, budget_tokens: int = DEFAULT_BUDGET) -> ContextBlock:
    """`value` summarized (`summarize.summarize`) as the context block of variable `name`."""
    summary = summarize(value, budget_tokens=budget_tokens)
    return ContextBlock(name, "variable", summary.kind, summary.text, summary.truncated)
