"""`NotebookTools`: the notebook as the agent's workspace, over a fake notebook (tests/support)."""

import asyncio
from typing import Any

from ipyagent.core import ErrorArtifact, ToolAction, add_secret
from ipyagent.core.redact import MASK
from ipyagent.tools import NotebookTools, NotebookUnsupported, Toolbox
from ipyagent.tools.notebook import CELL_CHARS, cell_text

from tests.support.fake_notebook import FakeNotebook


def notebook() -> FakeNotebook:
    return FakeNotebook([("markdown", "# Sales", []), ("code", "df = load()\ndf.head()", ["   a  b\n0  1  2"])])


def call(tool: NotebookTools, activity: str, **given: Any) -> Any:
    action = ToolAction.from_native("c1", tool.native_name(activity), given)
    [(artifact, _)] = asyncio.run(Toolbox([tool]).run_all([action]))
    return artifact


def test_the_model_gets_five_notebook_tools() -> None:
    tool = NotebookTools(notebook())
    names = [d.name for d in tool.tool_definitions()]
    assert names == ["notebook_list_cells", "notebook_read_cell", "notebook_insert_cell", "notebook_edit_cell",
                     "notebook_run_cell"]
    insert = next(d for d in tool.tool_definitions() if d.name == "notebook_insert_cell")
    assert insert.parameters["properties"]["cell_type"]["enum"] == ["code", "markdown"]


def test_list_and_read_cells() -> None:
    tool = NotebookTools(notebook())
    listing = call(tool, "list_cells").value
    assert listing.splitlines() == ["2 cells (fake notebook):", "0: markdown: # Sales", "1: code: df = load()"]
    assert call(tool, "read_cell", index=1).value == "cell 1 (code)\ndf = load()\ndf.head()\noutputs:\n   a  b\n0  1  2"


def test_reading_passes_the_redactor() -> None:
    add_secret("sk-notebook-secret-123456")
    fake = FakeNotebook([("code", "key = 'sk-notebook-secret-123456'", ["sk-notebook-secret-123456"])])
    text = call(NotebookTools(fake), "read_cell", index=0).value
    assert "sk-notebook-secret-123456" not in text and text.count(MASK) == 2


def test_a_long_cell_is_cut() -> None:
    fake = FakeNotebook([("code", "x" * (CELL_CHARS + 500), [])])
    text = cell_text(fake.cells()[0])
    assert "500 more characters" in text and len(text) < CELL_CHARS + 200


def test_a_cell_that_does_not_exist_names_the_range() -> None:
    result = call(NotebookTools(notebook()), "read_cell", index=5)
    assert isinstance(result, ErrorArtifact)
    assert result.value == "there is no cell 5: cells are numbered 0 to 1"


def test_insert_edit_and_run_change_the_notebook() -> None:
    fake = notebook()
    tool = NotebookTools(fake, approve_edits=True, approve_runs=True)
    assert call(tool, "insert_cell", index=2, source="print(1)").value == "inserted cell 2 (code)"
    assert call(tool, "edit_cell", index=2, source="print(2)").value == "cell 2 now holds the new text"
    assert call(tool, "run_cell", index=2).value == "cell 2 (code) In [1]\nprint(2)\noutputs:\nran 'print(2)'"
    assert fake.changes == [("insert", 2), ("edit", 2), ("run", 2)]
    assert call(tool, "run_cell", index=0).value == "cell 0 is not a code cell; nothing was run"
    assert fake.changes[-1] == ("run", 2)


def test_edits_and_runs_need_approval_by_default() -> None:
    tool = NotebookTools(notebook())
    assert [a for a in tool.activities() if tool.needs_approval(a)] == ["insert_cell", "edit_cell", "run_cell"]
    edits = NotebookTools(notebook(), approve_edits=True)  # --approve-notebook: edits, never runs
    assert [a for a in edits.activities() if edits.needs_approval(a)] == ["run_cell"]
    assert [a for a in edits.activities() if edits.preapproved(a)] == ["insert_cell", "edit_cell"]  # cards say so
    both = NotebookTools(notebook(), approve_edits=True, approve_runs=True)
    assert not [a for a in both.activities() if both.needs_approval(a)]
    assert [a for a in both.activities() if both.preapproved(a)] == ["insert_cell", "edit_cell", "run_cell"]
    assert not [a for a in tool.activities() if tool.preapproved(a)]  # asked, not approved in advance


def test_the_preview_is_a_diff_of_the_source() -> None:
    tool = NotebookTools(notebook())
    edit = ToolAction.from_native("c1", "notebook_edit_cell", {"index": 1, "source": "df = load()\ndf.tail()"})
    diff = tool.preview(edit)
    assert "-df.head()" in diff.splitlines() and "+df.tail()" in diff.splitlines()
    insert = ToolAction.from_native("c2", "notebook_insert_cell", {"index": 0, "source": "print(1)"})
    assert "+print(1)" in tool.preview(insert).splitlines()
    run = ToolAction.from_native("c3", "notebook_run_cell", {"index": 1})
    assert tool.preview(run) == "runs cell 1:\ndf = load()\ndf.head()"
    assert tool.preview(ToolAction.from_native("c4", "notebook_edit_cell", {"index": 9, "source": ""})) is None
    assert tool.preview(ToolAction.from_native("c5", "notebook_list_cells", {})) is None


def test_what_a_front_end_cannot_do_is_said_to_the_model() -> None:
    class ReadOnly(FakeNotebook):
        def run(self, index: int) -> Any:
            raise NotebookUnsupported("terminal IPython cannot run cells")

    result = call(NotebookTools(ReadOnly([("code", "1", [])]), approve_runs=True), "run_cell", index=0)
    assert isinstance(result, ErrorArtifact) and result.value == "terminal IPython cannot run cells"
