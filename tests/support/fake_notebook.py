"""A notebook in memory behind `NotebookTools` (the tests' `NotebookAccess`): cells as a list; a run
"executes" a cell by a given function of its source."""

from __future__ import annotations

from collections.abc import Callable

from ipyagent.tools import NotebookAccess, NotebookCell


class FakeNotebook(NotebookAccess):
    """`cells` as (cell_type, source, outputs); `execute(source)` gives a run's text outputs. Every
    change is appended to `changes` as (op, index)."""

    kind = "fake notebook"

    def __init__(self, cells: list[tuple[str, str, list[str]]],
                 execute: Callable[[str], list[str]] = lambda source: [f"ran {source!r}"]) -> None:
        self._cells = [
            NotebookCell(index=n, cell_type=t, source=s, outputs=list(o)) for n, (t, s, o) in enumerate(cells)
        ]
        self.execute = execute
        self.changes: list[tuple[str, int]] = []
        self.count = 0

    def cells(self) -> list[NotebookCell]:
        for n, cell in enumerate(self._cells):
            cell.index = n
        return list(self._cells)

    def insert(self, index: int, source: str, cell_type: str) -> NotebookCell:
        if not 0 <= index <= len(self._cells):
            raise IndexError(f"cannot insert at {index}")
        self._cells.insert(index, NotebookCell(index=index, cell_type=cell_type, source=source))
        self.changes.append(("insert", index))
        return self.cells()[index]

    def edit(self, index: int, source: str) -> NotebookCell:
        self._cells[index].source = source
        self.changes.append(("edit", index))
        return self.cells()[index]

    def run(self, index: int) -> NotebookCell:
        cell = self._cells[index]
        self.count += 1
        cell.outputs, cell.execution_count = self.execute(cell.source), self.count
        self.changes.append(("run", index))
        return self.cells()[index]
