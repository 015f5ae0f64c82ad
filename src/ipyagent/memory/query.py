"""Questions over a stored artifact, asked of the current model in sub-prompts.

Content that does not fit the model's context window is cut into chunks at
line ends (so table rows stay whole); each chunk is asked on its own (map),
then the partial answers are combined (reduce, repeated while they do not fit).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from ..core import ImageArtifact, ImageBlock, Message, PromptStack, TableArtifact, TextBlock, Usage
from .artifacts import text_of
from .task_memory import MemoryEntry
from .tokens import CHARS_PER_TOKEN, estimate_text, output_reserve

SYSTEM = ("You answer questions about a stored document using only the content given. "
          "Be precise and brief; quote figures exactly.")
NOTHING = "NOTHING"
SUMMARY_QUESTION = "Summarize this content: its main points, in a few sentences."
#: Fewest characters a chunk may hold; a smaller window is an error, not a thousand requests.
MIN_CHUNK_CHARS = 200


@dataclass
class Answer:
    """`text` answers the question; `chunks` is how many pieces the content was cut into,
    `requests` how many sub-prompts were sent, `usage` their billed tokens summed."""

    text: str
    chunks: int
    requests: int
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        return {"answer": self.text, "chunks": self.chunks, "requests": self.requests}


def split_text(text: str, max_chars: int) -> list[str]:
    """`text` in pieces of at most `max_chars`, cut at line ends where there is one."""
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + max_chars)
        if end < len(text):
            cut = text.rfind("\n", start + max_chars // 2, end)
            end = cut + 1 if cut != -1 else end
        pieces.append(text[start:end])
        start = end
    return pieces or [""]


def content_text(entry: MemoryEntry) -> str:
    """The text a sub-prompt sees: a table as one JSON object per line, else `text_of`.

    Raises:
        ValueError: binary content that is not an image.
    """
    artifact = entry.artifact
    if isinstance(artifact, TableArtifact):
        return "\n".join(json.dumps(row, ensure_ascii=False, default=str) for row in artifact.value)
    text = text_of(artifact)
    if text is None:
        raise ValueError(f"{entry.namespace} is binary ({entry.kind}); it cannot be read as text")
    return text


class _Asker:
    def __init__(self, driver: Any, window: int, ledger: Any = None) -> None:
        self.driver, self.window, self.ledger = driver, window, ledger
        self.requests, self.usage = 0, Usage()

    def room(self, fixed: str) -> int:
        """Characters of content that fit beside `fixed` text."""
        tokens = self.window - output_reserve(self.window) - estimate_text(SYSTEM + fixed) - 32
        return tokens * CHARS_PER_TOKEN

    async def ask(self, blocks: list[Any]) -> str:
        stack = PromptStack()
        stack.add_system_message(SYSTEM)
        stack.messages.append(Message(role="user", content=blocks))
        completed = await self.driver.run(stack)
        if self.ledger is not None:  # spent within the run that asked: its ledger counts it
            self.ledger.record_turn(completed.metadata, completed.usage)
        self.requests += 1
        u = completed.usage
        self.usage = self.usage + u
        return completed.message.text.strip()


async def ask(driver: Any, entry: MemoryEntry, question: str, *, window: int | None = None,
              ledger: Any = None) -> Answer:
    """Answer `question` from the stored artifact with `driver` (any prompt driver).

    `window` is the context window in tokens (default: the model's, `driver.context_window`);
    `ledger` (a `drivers.Ledger`) records each sub-request's spending.

    Raises:
        ValueError: an empty question; binary content other than an image; a window
            too small to hold even `MIN_CHUNK_CHARS` of content.
        ProviderError: a sub-prompt failed.
    """
    if not question.strip():
        raise ValueError("the question is empty")
    text = None if isinstance(entry.artifact, ImageArtifact) else content_text(entry)
    asker = _Asker(driver, window or driver.context_window, ledger)
    if text is None:
        image = ImageBlock(mime_type=entry.artifact.mime_type, data=base64.b64encode(entry.artifact.value).decode())
        answer = await asker.ask([image, TextBlock(text=question)])
        return Answer(answer, 1, asker.requests, asker.usage)
    frame = _chunk_prompt("", question, 1, 1)
    room = asker.room(frame + " part 999 of 999")
    if room < MIN_CHUNK_CHARS:
        raise ValueError(
            f"the context window ({asker.window} tokens) is too small to hold the question and any content"
        )
    chunks = split_text(text, room)
    if len(chunks) == 1:
        answer = await asker.ask([TextBlock(text=_chunk_prompt(chunks[0], question, 1, 1))])
        return Answer(answer, 1, asker.requests, asker.usage)
    notes = []
    for n, chunk in enumerate(chunks, 1):
        note = await asker.ask([TextBlock(text=_chunk_prompt(chunk, question, n, len(chunks)))])
        if note and note.strip().rstrip(".").upper() != NOTHING:
            notes.append(f"From part {n}: {note}")
    if not notes:
        return Answer("The stored content does not say.", len(chunks), asker.requests, asker.usage)
    answer = await _combine(asker, notes, question)
    return Answer(answer, len(chunks), asker.requests, asker.usage)


async def _combine(asker: _Asker, notes: list[str], question: str) -> str:
    frame = _combine_prompt("", question)
    room = asker.room(frame)
    joined = "\n\n".join(notes)
    if len(joined) <= room:
        return await asker.ask([TextBlock(text=_combine_prompt(joined, question))])
    groups = split_text(joined, room)
    partial = [await asker.ask([TextBlock(text=_combine_prompt(g, question))]) for g in groups]
    return await _combine(asker, partial, question)


def _chunk_prompt(chunk: str, question: str, n: int, total: int) -> str:
    if total == 1:
        return f"Content:\n<<<\n{chunk}\n>>>\n\nQuestion: {question}"
    return (
        f"This is part {n} of {total} of a stored document. Answer from this part only; "
        f"if it holds nothing relevant, reply exactly {NOTHING}.\n\nContent:\n<<<\n{chunk}\n>>>\n\nQuestion: {question}"
    )


def _combine_prompt(notes: str, question: str) -> str:
    return (
        f"These notes were taken from the parts of a stored document. Combine them into one answer.\n\n"
        f"Notes:\n<<<\n{notes}\n>>>\n\nQuestion: {question}"
    )
