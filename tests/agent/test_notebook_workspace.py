"""The notebook tools in the agent loop: an insert and a run wait for approval; approved, the cell
exists with its output and the model's next request holds it; denied, nothing changes."""

import asyncio
from typing import Any

from ipyagent import Agent, RunOptions
from ipyagent.agent import AgentResult
from ipyagent.tools import NotebookTools, Toolbox

from tests.support.fake_notebook import FakeNotebook
from tests.support.scripted_driver import ScriptedDriver, call, calls, text

INSERT = '{"index": 1, "source": "print(6 * 7)"}'
RUN = '{"index": 1}'


def run(fake: FakeNotebook, approve: Any, **tool_kw: Any) -> tuple[AgentResult, ScriptedDriver, list[Any]]:
    driver = ScriptedDriver(
        calls(call("c1", "notebook_insert_cell", INSERT)),
        calls(call("c2", "notebook_run_cell", RUN)),
        text("It printed 42."),
    )
    asked: list[Any] = []

    def approving(action: Any) -> bool:
        asked.append(action.native_name)
        return approve(action)

    agent = Agent(driver, approve=approving)
    options = RunOptions(tools=Toolbox([NotebookTools(fake, **tool_kw)]))
    return asyncio.run(agent._arun("Add a cell printing 6*7 and run it", options, [].append)), driver, asked


def test_approved_the_cell_is_inserted_and_run_and_the_model_reads_its_output() -> None:
    fake = FakeNotebook([("code", "x = 1", [])], execute=lambda source: ["42\n"])
    result, driver, asked = run(fake, lambda action: True)
    assert result.ok and asked == ["notebook_insert_cell", "notebook_run_cell"]
    assert fake.changes == [("insert", 1), ("run", 1)]
    assert fake.cells()[1].source == "print(6 * 7)" and fake.cells()[1].outputs == ["42\n"]
    last = repr(driver.stacks[2].messages[-1])
    assert "cell 1 (code) In [1]" in last and "42" in last


def test_denied_nothing_changes() -> None:
    fake = FakeNotebook([("code", "x = 1", [])])
    result, driver, asked = run(fake, lambda action: False)
    assert asked == ["notebook_insert_cell", "notebook_run_cell"]
    assert fake.changes == [] and [c.source for c in fake.cells()] == ["x = 1"]
    assert "denied by the user" in repr(driver.stacks[1].messages[-1])


def test_pre_approved_edits_still_ask_before_a_run() -> None:
    fake = FakeNotebook([("code", "x = 1", [])])
    result, driver, asked = run(fake, lambda action: False, approve_edits=True)
    assert asked == ["notebook_run_cell"]
    assert fake.changes == [("insert", 1)]
