"""`TaskMemoryTool`: the activities a model uses to read what off-prompt tools stored.

It lives in tools/ (not memory/) because it is a `BaseTool`: memory/ sits below
tools/ and may not import it. The agent adds it by itself when any tool of a
run is off-prompt (`with_task_memory`).
"""

from __future__ import annotations

from typing import Any

from ...memory import SUMMARY_QUESTION, MemoryEntry, TaskMemory, read_slice, search, unit_of
from ...memory import ask as ask_memory
from ..activity import activity
from ..base_tool import BaseTool
from ..off_prompt import has_off_prompt, memories_of
from ..toolbox import Toolbox

#: Default slice of `read` per unit.
DEFAULT_LENGTH = {"chars": 2000, "rows": 20, "items": 20, "bytes": 2000}


class TaskMemoryTool(BaseTool):
    """Reads Task Memory: list what is stored, read slices, search, summarize, ask questions.

    Args:
        memories: the memories it reads (one or several).
        driver: the prompt driver that `summarize` and `query` ask (the run's own).
        ledger: where those sub-requests' spending is recorded (the run's `Ledger`; None: nowhere).
        context_window: tokens the sub-prompts may use (default: the model's).
        max_chars, max_rows: the most one `read` returns (characters or bytes; rows or items).
        name: the tool's name (``TaskMemory``).
    """

    def __init__(
        self,
        memories: TaskMemory | list[TaskMemory],
        *,
        driver: Any = None,
        ledger: Any = None,
        context_window: int | None = None,
        max_chars: int = 8000,
        max_rows: int = 100,
        name: str = "TaskMemory",
    ) -> None:
        super().__init__(name=name)
        self.memories = list(memories) if isinstance(memories, (list, tuple)) else [memories]
        self.driver, self.ledger = driver, ledger
        self.context_window = context_window
        self.max_chars, self.max_rows = max_chars, max_rows

    def _entry(self, namespace: str) -> MemoryEntry:
        for memory in self.memories:
            if namespace in memory:
                return memory.entry(namespace)
        known = [ns for m in self.memories for ns in m]
        hint = ", ".join(known[-10:]) if known else "nothing is stored yet"
        raise ValueError(f"no artifact under namespace {namespace!r}; stored: {hint}")

    @activity
    def list(self) -> list[dict[str, Any]]:
        """List the artifacts stored off-prompt: namespace, type, size and the tool that produced each."""
        return [e.summary() for m in self.memories for e in m.entries()]

    @activity
    def read(self, namespace: str, offset: int = 0, length: int | None = None) -> dict[str, Any]:
        """Read a slice of a stored artifact.

        Args:
            namespace: the artifact's namespace, from its reference.
            offset: where to start: a character offset for text and JSON, a row index for tables,
                an item index for lists, a byte offset for blobs and images (from 0).
            length: how many characters / rows / items / bytes to read (default 2000 characters, 20 rows).
        """
        entry = self._entry(namespace)
        unit = unit_of(entry.artifact)
        cap = self.max_rows if unit in ("rows", "items") else self.max_chars
        wanted = DEFAULT_LENGTH[unit] if length is None else length
        out = read_slice(entry, offset, min(wanted, cap))
        if wanted > cap:
            out["capped"] = f"at most {cap} {unit} per read; continue from next_offset"
        return out

    @activity
    def search(
        self, query: str, namespace: str | None = None, regex: bool = False, limit: int = 5
    ) -> list[dict[str, Any]]:
        """Search stored text, tables and JSON for passages matching a query, best first, with
        their positions (character offset and line, or row / item index) to read around.

        Args:
            query: keywords (ranked with BM25), or a regular expression when regex is true.
            namespace: search only this artifact (default: all of them).
            regex: treat the query as a case-insensitive regular expression.
            limit: the most passages to return.
        """
        entries = [self._entry(namespace)] if namespace else [e for m in self.memories for e in m.entries()]
        return search(entries, query, regex=regex, limit=limit)

    @activity
    async def summarize(self, namespace: str) -> dict[str, Any]:
        """Summarize a stored artifact (the model reads all of it, in parts if it is long).

        Args:
            namespace: the artifact's namespace.
        """
        return await self._ask(namespace, SUMMARY_QUESTION)

    @activity
    async def query(self, namespace: str, question: str) -> dict[str, Any]:
        """Answer a question from a stored artifact (the model reads all of it, in parts if it is long).

        Args:
            namespace: the artifact's namespace.
            question: what to find out from it.
        """
        return await self._ask(namespace, question)

    async def _ask(self, namespace: str, question: str) -> dict[str, Any]:
        entry = self._entry(namespace)
        if self.driver is None:
            raise ValueError("no model to ask: give TaskMemoryTool a driver")
        answer = await ask_memory(self.driver, entry, question, window=self.context_window, ledger=self.ledger)
        return {"namespace": namespace, **answer.to_dict()}


def with_task_memory(toolbox: Toolbox, memory: TaskMemory, driver: Any = None, ledger: Any = None) -> Toolbox:
    """`toolbox` plus a `TaskMemoryTool` over `memory` (and the tools' own output memories)
    when any of its tools is off-prompt; unchanged otherwise, or when it has one already
    (which then gets `driver` and `ledger` if it had none)."""
    if not toolbox or not has_off_prompt(toolbox):
        return toolbox
    memories = memories_of(toolbox, memory)
    for tool in toolbox.tools:
        if isinstance(tool, TaskMemoryTool):
            tool.driver, tool.ledger = tool.driver or driver, tool.ledger or ledger
            tool.memories += [m for m in memories if all(m is not k for k in tool.memories)]
            return toolbox
    return Toolbox([*toolbox.tools, TaskMemoryTool(memories, driver=driver, ledger=ledger)])
