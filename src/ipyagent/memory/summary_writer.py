"""What a summary is (`Summary`: its text and whether it was cut) and how one is written within a
budget (`Writer`, `cut`): shared by `summarize` and the DataFrame and array summaries (`frames`)."""

from __future__ import annotations

from dataclasses import dataclass

from .tokens import CHARS_PER_TOKEN, estimate_text

#: Characters of one table cell or one JSON string kept in a summary.
CELL_CHARS = 60


@dataclass(frozen=True)
class Summary:
    """A value described for a model.

    Attributes:
        kind: what the value is (``pandas.DataFrame``, ``numpy.ndarray``, ``dict``, ...).
        text: the description, at most the budget.
        truncated: True when something was left out to fit the budget.
    """

    kind: str
    text: str
    truncated: bool = False

    @property
    def tokens(self) -> int:
        """Our estimate of the text's size in tokens."""
        return estimate_text(self.text)


class Writer:
    """Lines added until a character budget is spent; then one note says what was left out."""

    def __init__(self, budget_tokens: int) -> None:
        self.limit = max(1, budget_tokens) * CHARS_PER_TOKEN
        self.lines: list[str] = []
        self.size = 0
        self.truncated = False

    def room(self) -> int:
        return self.limit - self.size

    def add(self, line: str) -> bool:
        """Add `line` if it fits (keeping room for a truncation note); False when it did not."""
        if self.truncated:
            return False
        if self.size + len(line) + 1 > self.limit - 80:
            self.truncated = True
            return False
        self.lines.append(line)
        self.size += len(line) + 1
        return True

    def add_all(self, lines: list[str], what: str) -> bool:
        """Add `lines` while they fit; the first that does not ends the summary with
        a note naming how many `what` were left out."""
        for n, line in enumerate(lines):
            if not self.add(line):
                self.note(f"… {len(lines) - n:,} more {what} left out (budget)")
                return False
        return True

    def note(self, text: str) -> None:
        self.truncated = True
        self.lines.append(text)
        self.size += len(text) + 1

    def summary(self, kind: str) -> Summary:
        return Summary(kind, "\n".join(self.lines), self.truncated)


def cut(text: str, chars: int) -> tuple[str, bool]:
    """`text` cut to `chars` characters, with a note of how many were left out."""
    if len(text) <= chars:
        return text, False
    keep = max(0, chars - 40)
    return f"{text[:keep]}… ({len(text) - keep:,} more characters left out)", True
