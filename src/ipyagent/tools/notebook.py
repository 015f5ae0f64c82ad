"""`NotebookTools`: the notebook as the agent's workspace. The model may list the cells, read a
cell's source and text outputs, insert a code or Markdown cell, edit a cell, and run a cell and read
its result.

The tool knows no front end: a `NotebookAccess` does the work (the notebook layer's
`notebook.workspace` holds the ones for JupyterLab / Notebook 7 through the labextension, and
for terminal IPython; the tests use a fake). What a cell holds is model input: every source and
output passes the one redactor (`core.redact`) before it goes back.

Approval: every insert, edit and run waits for the user's approval (the run's ``approve``
callback) unless pre-approved: ``approve_edits=True`` lets inserts and edits through;
runs are pre-approved only by ``approve_runs=True``. `NotebookTools.preview` gives the diff the
approval card shows.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import ToolAction, redact
from .activity import activity
from .base_tool import BaseTool

#: Characters of one cell's source or outputs sent back to the model at most.
CELL_CHARS = 8_000

#: Characters of a cell's first line shown per cell by ``list_cells``.
LIST_CHARS = 80

#: The activities that change the notebook, and the one that runs code.
EDITS = ("insert_cell", "edit_cell")
RUNS = ("run_cell",)


class NotebookUnsupported(Exception):
    """An operation this notebook front end cannot do (terminal IPython cannot insert a cell); its
    message says what it can do instead."""


@dataclass
class NotebookCell:
    """One cell as the model sees it.

    Attributes:
        index: its position, from 0.
        cell_type: ``code``, ``markdown`` or ``raw``.
        source: its text.
        outputs: its text outputs (stream text, ``text/plain`` of results and displays, errors as
            ``ENAME: EVALUE``), in order.
        execution_count: the ``In [n]`` number, or None.
        id: the cell's id in the notebook (nbformat 4.5), when it has one.
    """

    index: int
    cell_type: str = "code"
    source: str = ""
    outputs: list[str] = field(default_factory=list)
    execution_count: int | None = None
    id: str | None = None


class NotebookAccess:
    """What the tools do to a notebook; a subclass implements what its front end allows and raises
    `NotebookUnsupported` (saying why) for the rest. Methods are sync (tools run them in a thread).
    """

    #: Shown in ``list_cells``: what this notebook is (``JupyterLab``, ``terminal IPython`` ...).
    kind = "notebook"

    def cells(self) -> list[NotebookCell]:
        raise NotImplementedError

    def insert(self, index: int, source: str, cell_type: str) -> NotebookCell:
        """Insert a cell at `index` (0 to the number of cells); the new cell."""
        raise NotebookUnsupported(f"{self.kind} cannot insert cells")

    def edit(self, index: int, source: str) -> NotebookCell:
        """Replace cell `index`'s source; the changed cell."""
        raise NotebookUnsupported(f"{self.kind} cannot edit cells")

    def run(self, index: int) -> NotebookCell:
        """Run cell `index` and wait for it to finish; the cell with its new outputs."""
        raise NotebookUnsupported(f"{self.kind} cannot run cells")

    def close(self) -> None:
        """Let go of the front end (the run that used it ended)."""
        return None

    def cell(self, index: int) -> NotebookCell:
        """Cell `index`. Raises `IndexError` naming the valid range."""
        cells = self.cells()
        if not 0 <= index < len(cells):
            raise IndexError(_range_error(index, len(cells)))
        return cells[index]


def _range_error(index: int, count: int) -> str:
    if count == 0:
        return f"there is no cell {index}: the notebook has no cells"
    return f"there is no cell {index}: cells are numbered 0 to {count - 1}"


def _cut(text: str, limit: int = CELL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def cell_text(cell: NotebookCell) -> str:
    """A cell as the model reads it: a header line, its source, and its outputs, redacted and cut."""
    count = f" In [{cell.execution_count}]" if cell.execution_count is not None else ""
    parts = [f"cell {cell.index} ({cell.cell_type}){count}", _cut(redact(cell.source))]
    outputs = "\n".join(o for o in cell.outputs if o)
    if cell.cell_type == "code":
        parts.append("outputs:\n" + _cut(redact(outputs)) if outputs else "(no output)")
    return "\n".join(parts)


def unified_diff(before: str, after: str, label: str) -> str:
    """A unified diff of one cell's source (redacted), as the approval card shows it."""
    lines = difflib.unified_diff(redact(before).splitlines(), redact(after).splitlines(),
                                 f"{label} (now)", f"{label} (after)", lineterm="")
    return "\n".join(lines)


class NotebookTools(BaseTool):
    """The notebook tools (`NotebookAccess` does the work).

    Args:
        notebook: the notebook to act on.
        approve_edits: inserts and edits run without asking (``%%agent --approve-notebook``).
        approve_runs: runs go without asking (never the default; only when asked for).
        name: the tool's name (the native names are ``NAME_list_cells`` ...).
    """

    def __init__(self, notebook: NotebookAccess, *, approve_edits: bool = False, approve_runs: bool = False,
                 name: str = "notebook", **kwargs: Any) -> None:
        self.notebook = notebook
        self.approve_edits = approve_edits
        self.approve_runs = approve_runs
        super().__init__(name=name, **kwargs)

    def needs_approval(self, activity: str) -> bool:
        if activity in EDITS:
            return not self.approve_edits
        if activity in RUNS:
            return not self.approve_runs
        return super().needs_approval(activity)

    def preapproved(self, activity: str) -> bool:
        return (activity in EDITS and self.approve_edits) or (activity in RUNS and self.approve_runs)

    def preview(self, action: ToolAction) -> str | None:
        """What `action` would change, for the approval card: a diff of the source for an insert or
        an edit, the source to run for a run; None for another call or one that names no cell."""
        activity = next((a for a in self.activities() if self.native_name(a) == action.native_name), None)
        given = action.input if isinstance(action.input, dict) else {}
        try:
            if activity == "insert_cell":
                return unified_diff("", str(given.get("source", "")), f"new cell {given.get('index', '')}")
            if activity in ("edit_cell", "run_cell"):
                cell = self.notebook.cell(int(given.get("index", -1)))
                if activity == "run_cell":
                    return f"runs cell {cell.index}:\n{redact(cell.source)}"
                return unified_diff(cell.source, str(given.get("source", "")), f"cell {cell.index}")
        except (IndexError, ValueError, TypeError, NotebookUnsupported, NotImplementedError):
            return None
        return None

    @activity
    def list_cells(self) -> str:
        """List the notebook's cells: number, type, In [n] and first line of each."""
        cells = self.notebook.cells()
        if not cells:
            return f"the {self.notebook.kind} has no cells"
        lines = [f"{len(cells)} cells ({self.notebook.kind}):"]
        for cell in cells:
            first = redact(cell.source).strip().split("\n", 1)[0][:LIST_CHARS]
            count = f" In [{cell.execution_count}]" if cell.execution_count is not None else ""
            lines.append(f"{cell.index}: {cell.cell_type}{count}: {first}")
        return "\n".join(lines)

    @activity
    def read_cell(self, index: int) -> str:
        """Read one cell: its source and its text outputs.

        Args:
            index: the cell's number (from list_cells, 0 is the first).
        """
        return cell_text(self.notebook.cell(index))

    @activity
    def insert_cell(self, index: int, source: str, cell_type: Literal["code", "markdown"] = "code") -> str:
        """Insert a new cell (not run); the user approves it first.

        Args:
            index: where it goes: 0 puts it first, the number of cells puts it last.
            source: the cell's text.
            cell_type: code or markdown.
        """
        cell = self.notebook.insert(index, source, cell_type)
        return f"inserted cell {cell.index} ({cell.cell_type})"

    @activity
    def edit_cell(self, index: int, source: str) -> str:
        """Replace one cell's text (not run); the user approves the change first.

        Args:
            index: the cell's number.
            source: its new text, whole.
        """
        self.notebook.cell(index)
        cell = self.notebook.edit(index, source)
        return f"cell {cell.index} now holds the new text"

    @activity
    def run_cell(self, index: int) -> str:
        """Run one code cell and read its outputs; the user approves the run first.

        Args:
            index: the cell's number.
        """
        if self.notebook.cell(index).cell_type != "code":
            return f"cell {index} is not a code cell; nothing was run"
        return cell_text(self.notebook.run(index))
