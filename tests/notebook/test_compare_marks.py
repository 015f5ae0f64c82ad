"""A comparison's figures table marks the best figure among the providers (the fastest total
time, the cheapest cost, the fewest out tokens), computed once with the table and saved with it,
so the labextension and the HTML fallback mark the same cells."""

from __future__ import annotations

from ipyagent.agent.compare import RunFigures
from ipyagent.core import ComparisonRecord
from ipyagent.notebook.render.transcript import comparison_to_html
from ipyagent.notebook.views.compare_view import table_data

COLUMN = {"total (s)": 2, "out tokens": 4, "cost": 6}


def _marks(table) -> set[tuple[int, int, str]]:
    return {(m.row, m.column, m.label) for m in table.marks}


def test_the_fastest_cheapest_and_fewest_tokens_are_marked_on_the_providers_rows() -> None:
    figures = [RunFigures("openai:a", 0, 0, 0.1, 2.0, 10, 30, cost=0.002, stop_reason="end_turn"),
               RunFigures("openai:b", 1, 0, 0.2, 1.0, 10, 40, cost=0.001, stop_reason="end_turn"),
               RunFigures("openai:c", 2, 0, 0.1, 3.0, 10, 20, stop_reason="end_turn")]
    table = table_data(["openai:a", "openai:b", "openai:c"], figures, 1)
    assert table.columns[2] == "total (s)" and table.columns[4] == "out tokens" and table.columns[6] == "cost"
    assert _marks(table) == {(1, COLUMN["total (s)"], "fastest"), (1, COLUMN["cost"], "cheapest"),
                             (2, COLUMN["out tokens"], "fewest tokens")}
    # The saved record keeps them, and the HTML fallback draws a marked figure in bold.
    record = ComparisonRecord.model_validate(ComparisonRecord(providers=["openai:a", "openai:b", "openai:c"],
                                                              table=table).model_dump(mode="json"))
    assert _marks(record.table) == _marks(table)
    html = comparison_to_html(record)
    assert "<td><b>1.00</b></td>" in html and "<td>2.00</td>" in html and "<td><b>20</b></td>" in html


def test_nothing_is_marked_for_one_provider_a_tie_or_a_failed_run() -> None:
    one = [RunFigures("openai:a", 0, 0, 0.1, 1.0, 10, 30, stop_reason="end_turn")]
    assert table_data(["openai:a"], one, 1).marks == []
    tie = one + [RunFigures("openai:b", 1, 0, 0.1, 1.0, 10, 30, stop_reason="end_turn")]
    assert table_data(["openai:a", "openai:b"], tie, 1).marks == []
    # A failed run is no figure: the one that ran is alone, and the quicker failure is not "fastest".
    failed = one + [RunFigures("openai:b", 1, 0, None, 0.2, 0, 0, error_type="server", error="down")]
    assert table_data(["openai:a", "openai:b"], failed, 1).marks == []


def test_with_several_runs_the_medians_rows_are_marked_not_a_runs_row() -> None:
    figures = [RunFigures("openai:a", 0, r, 0.1, 1.0 + r, 10, 30, stop_reason="end_turn") for r in range(2)]
    figures += [RunFigures("openai:b", 1, r, 0.1, 3.0 + r, 10, 30, stop_reason="end_turn") for r in range(2)]
    table = table_data(["openai:a", "openai:b"], figures, 2)
    assert table.row_runs[0] == [0, None]
    assert _marks(table) == {(0, COLUMN["total (s)"], "fastest")}
