"""A re-run serves the cells the store has without a coroutine each when nothing in them can wait:
every check a text check answered at once (contains, icontains, equals) and no span to open. Any
other check (a regex, a function, a judge), or tracing, and each cell goes through `run_cell` as
before. Either way a cell's verdict is the one its first run had (issue 25: a cached re-run of
10,000 rows x 3 takes at most 1 % of the first run)."""

from __future__ import annotations

from typing import Any

import pytest

from ipyagent import Agent, evaluate
from ipyagent.agent.evaluation import cells, matrix
from ipyagent.agent.evaluation.checks import TextAssertion

from ..support.evaluation import CAPITALS, answering, capital_of
from ..support.stub_server import StubServer

TEXT_CHECKS = ["contains:{{ row.capital }}", "icontains:THE", "equals:The capital is Paris."]


def _served_by_run_cell(store, monkeypatch, assertions: list[Any], *, traced: bool = False) -> tuple[Any, Any, int]:
    """(first run, cached re-run, the re-run's cells that went through `run_cell`)."""
    with StubServer(responder=answering(capital_of)) as server:
        run = lambda: evaluate([Agent("openai:m", base_url=server.url), Agent("openai:n", base_url=server.url)],
                               "Capital of {{ row.country }}?", CAPITALS, assertions=assertions, store=store)
        first = run()
        calls: list[str] = []
        run_cell = matrix._Run.run_cell

        async def counted(self: Any, job: Any) -> Any:
            calls.append(job.result.prompt)
            return await run_cell(self, job)

        monkeypatch.setattr(matrix._Run, "run_cell", counted)
        if traced:  # tracing on: each cell in its span (none is exported here: the SDK's tracer is not set up)
            monkeypatch.setattr(matrix, "current_tracing", lambda: object())
        again = run()
    assert len(server.requests) == 2 * len(CAPITALS) and all(r.cached for r in again.results)
    return first, again, len(calls)


def _verdicts(ev: Any) -> list[Any]:
    return [(r.row, r.column, r.passed, r.judge_cost, [(o.name, o.passed, o.score, o.reason) for o in r.outcomes])
            for r in ev.ordered()]


def test_cells_with_text_checks_are_served_without_run_cell_with_the_first_runs_verdicts(store, monkeypatch) -> None:
    first, again, through_run_cell = _served_by_run_cell(store, monkeypatch, TEXT_CHECKS)
    assert through_run_cell == 0
    assert _verdicts(again) == _verdicts(first)
    assert {r.passed for r in again.results} == {True, False}  # both verdicts, failures' reasons included
    assert [r.text for r in again.ordered()] == [r.text for r in first.ordered()]


@pytest.mark.parametrize("other", ["regex:capital", lambda result, row: True], ids=["regex", "function"])
def test_a_check_that_may_wait_sends_each_cell_through_run_cell(store, monkeypatch, other: Any) -> None:
    first, again, through_run_cell = _served_by_run_cell(store, monkeypatch, [*TEXT_CHECKS, other])
    assert through_run_cell == len(again.results) == 2 * len(CAPITALS)
    assert _verdicts(again) == _verdicts(first)


def test_with_tracing_each_cell_goes_through_run_cell_for_its_span(store, monkeypatch) -> None:
    _, again, through_run_cell = _served_by_run_cell(store, monkeypatch, TEXT_CHECKS, traced=True)
    assert through_run_cell == len(again.results)


def test_only_text_checks_that_answer_at_once_are_checked_at_once() -> None:
    class Own(TextAssertion):
        async def check(self, result: Any, row: Any) -> Any:  # its own check: awaited as it says
            return await super().check(result, row)

    assert cells.checked_at_once([TextAssertion("contains", "a"), TextAssertion("equals", "b")])
    assert cells.checked_at_once([])
    assert not cells.checked_at_once([TextAssertion("contains", "a"), TextAssertion("regex", "b")])
    assert not cells.checked_at_once([Own("contains", "a")])
