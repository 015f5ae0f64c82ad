"""Context blocks: notebook state attached to a prompt (a variable, the last error, other cells).

A `ContextBlock` is sent as one text block at the head of the user message,
wrapped in a ``<context>`` element naming what it is, so the model can tell
the attached material from the question. Its text passes the one redactor's
context rule (`core.redact_context`: secrets in play, values under secret-looking
names) when it is made (`context_block`, `variable_block`), which counts the values
it masked, and again when it is sent, unless the session turned that off
(``redact_context=false``: `raw`). `%agent inspect` lists the blocks a run carried
with our token estimate of each and how many values were masked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core import mask_named, redact, redact_context
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
        masked: how many values of it were masked (secrets, values under secret-looking names).
        raw: sent as it is, not redacted (the session's ``redact_context`` is off).
    """

    name: str
    source: str
    kind: str
    text: str
    truncated: bool = False
    masked: int = 0
    raw: bool = False

    @property
    def tokens(self) -> int:
        """Our estimate of the block's size in the request, in tokens."""
        return estimate_text(self.to_text())

    def to_text(self) -> str:
        """The block as sent: a ``<context>`` element, followed by a blank line. Unless `raw`, it
        passes the context rule (`core.redact_context`): an API key a cell set, a password in a
        config dict, are masked."""
        cut = ' truncated="true"' if self.truncated else ""
        name, kind = _attr(self.name), _attr(self.kind)
        text = f'<context source="{self.source}" name="{name}" type="{kind}"{cut}>\n{self.text}\n</context>\n\n'
        return text if self.raw else redact_context(text)[0]

    def describe(self) -> dict[str, Any]:
        """A JSON record of the block with its token estimate and masked count (run store metadata,
        `%agent inspect`); its text redacted whatever `raw` says (it is shown and stored)."""
        return {**asdict(self), "text": redact(self.text), "tokens": self.tokens}


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def context_block(name: str, source: str, kind: str, text: str, truncated: bool = False, *,
                  redacting: bool = True) -> ContextBlock:
    """A `ContextBlock` whose text has passed the context rule (`core.redact_context`), with the
    count of values masked; with `redacting` False (the session's opt-out), a `raw` one."""
    masked = 0
    if redacting:
        text, masked = redact_context(text)
    return ContextBlock(name, source, kind, text, truncated, masked, raw=not redacting)


def variable_block(name: str, value: Any, budget_tokens: int = DEFAULT_BUDGET, *,
                   redacting: bool = True) -> ContextBlock:
    """`value` summarized (`summarize.summarize`) as the context block of variable `name`; while
    `redacting`, the secret-named entries of its mappings are masked before it is summarized."""
    named = 0
    if redacting:
        value, named = mask_named(value)
    summary = summarize(value, budget_tokens=budget_tokens)
    block = context_block(name, "variable", summary.kind, summary.text, summary.truncated, redacting=redacting)
    return replace(block, masked=block.masked + named)
