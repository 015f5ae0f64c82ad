"""An evaluation written to a file (`agent/evaluation/export.py`), on evaluations built by hand: the JSON
columns (structured output, tool calls) as JSON text in CSV and Parquet, a row field of several types
in Parquet, and the header of an evaluation without runs."""

from __future__ import annotations

import csv
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation import export
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.agent.evaluation.export import _compact_outcomes, document, export_records, json_text, meta

CALL = {"name": "lookup", "input": {"q": "é"}, "output": "found"}


def with_outputs() -> Evaluation:
    """Two rows on one column: row 0 with a structured output and a tool call, row 1 with neither;
    its ``when`` field a date then text (two types)."""
    rows: list[dict[str, Any]] = [{"when": datetime.date(2026, 12, 7)}, {"when": "later"}]
    ev = Evaluation(["openai:a"], rows)
    ev.results.append(EvalResult(row=0, provider="openai:a", prompt="p0", fields=rows[0], text="a",
                                 output={"city": "Paris"}, passed=True, tool_calls=[CALL]))
    ev.results.append(EvalResult(row=1, provider="openai:a", prompt="p1", fields=rows[1], text="b", passed=True))
    return ev


def test_csv_writes_the_json_columns_as_json_text_and_nothing_for_none(tmp_path: Path) -> None:
    path = with_outputs().export(tmp_path / "r.csv")
    with path.open(newline="", encoding="utf-8") as handle:
        first, second = csv.DictReader(handle)
    assert first["structured"] == '{"city": "Paris"}' and json.loads(first["tool_calls"]) == [CALL]
    assert first["tool_calls"] == json.dumps([CALL], ensure_ascii=False)  # UTF-8 text, not \\u escapes
    assert (second["structured"], second["tool_calls"]) == ("", "")


def test_an_evaluation_without_runs_writes_a_csv_header_of_row_and_provider(tmp_path: Path) -> None:
    path = Evaluation(["openai:a"], []).export(tmp_path / "r.csv")
    assert path.read_bytes() == b"row,provider\r\n"


def test_parquet_keeps_json_columns_and_a_field_of_several_types_as_json_text(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet  # noqa: F401 - loads pa.parquet

    path = with_outputs().export(tmp_path / "r.parquet")
    table = pa.parquet.read_table(path)
    columns = table.to_pydict()
    assert columns["structured"] == ['{"city": "Paris"}', None]
    assert columns["tool_calls"] == [json.dumps([CALL], ensure_ascii=False), None]
    assert columns["when"] == ['"2026-12-07"', '"later"']  # two types: JSON text, the date as its text
    info = json.loads(table.schema.metadata[b"ipyagent_evaluation"])
    assert info["json_columns"] == ["when"] and info["rows"] == 2
    mixed = Evaluation(["openai:a"], [{"n": 1}, {"n": None}, {"n": "x"}])
    mixed.results.extend(EvalResult(row=n, provider="openai:a", prompt="", fields=row, passed=True)
                         for n, row in enumerate(mixed.rows))
    assert pa.parquet.read_table(mixed.export(tmp_path / "m.parquet")).to_pydict()["n"] == ["1", None, '"x"']


class City(BaseModel):
    name: str


def test_a_record_holds_each_checks_reason_and_score_and_the_output_as_json() -> None:
    ev = Evaluation(["openai:a"], [{"q": 0}], assertions=["python:f", "contains:x"])
    ev.results.append(EvalResult(row=0, provider="openai:a", prompt="", fields={"q": 0}, output=City(name="Lima"),
                                 passed=False, outcomes=[Outcome("python:f", False, score=0.5, reason="half")]))
    (rec,) = export_records(ev)
    assert (rec["python:f reason"], rec["python:f score"]) == ("half", 0.5)
    assert (rec["contains:x reason"], rec["contains:x score"]) == (None, None)  # not checked
    assert rec["structured"] == {"name": "Lima"} and rec["evaluation"] == ev.id and rec["tool_calls"] == []


def test_json_text_is_utf_8_json_with_dates_as_text_and_nothing_for_none_or_no_calls() -> None:
    assert json_text(None) is None and json_text([]) is None
    assert json_text({}) == "{}" and json_text([0]) == "[0]"
    assert json_text({"d": datetime.date(2026, 12, 7), "s": "é"}) == '{"d": "2026-12-07", "s": "é"}'


def test_jsonl_is_utf_8_text_and_writes_what_json_cannot_hold_as_its_text(tmp_path: Path) -> None:
    ev = with_outputs()
    ev.name, ev.seed = "café", datetime.date(2026, 1, 2)  # type: ignore[assignment] - a value JSON has no type for
    head, first, second = ev.export(tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    assert '"name": "café"' in head and json.loads(head)["ipyagent_evaluation"]["seed"] == "2026-01-02"
    assert '"input": {"q": "é"}' in first and json.loads(first)["when"] == "2026-12-07"
    assert json.loads(second)["when"] == "later"


def test_the_json_document_names_each_part() -> None:
    ev = with_outputs()
    ev.assertions, ev.interrupted, ev.budget_stopped, ev.notes = ["json"], True, True, ["a note"]
    doc = ev.to_json()
    assert list(doc) == ["id", "providers", "columns", "variants", "repeat", "assertions", "total", "wall_s",
                         "interrupted", "budget", "budget_stopped", "spent", "reserved", "skipped", "notes", "aliases",
                         "summary", "baseline", "comparisons", "agreement", "changes", "row_flags", "flaky", "results",
                         "field_order"]
    assert (doc["providers"], doc["assertions"], doc["total"], doc["notes"]) == (["openai:a"], ["json"], 2, ["a note"])
    assert doc["interrupted"] is True and doc["budget_stopped"] is True
    assert doc["summary"] == ev.summary_records() and doc["field_order"] == ["when"]


def test_a_record_checks_a_failed_run_as_failing_and_a_skipped_one_as_unchecked() -> None:
    ev = Evaluation(["openai:a"], [{"q": n} for n in range(3)], assertions=["contains:x"])
    ev.results += [EvalResult(row=0, provider="openai:a", prompt="p", fields={"q": 0, "row": "r", "cost": "c"},
                              passed=True, cost=0.01, judge_cost=0.002, outcomes=[Outcome("contains:x", True)],
                              text="x", input_tokens=3, output_tokens=4, ttft_s=0.1, total_s=0.2, cached=True,
                              run_id="r0", human=True, human_note="fine"),
                   EvalResult(row=1, provider="openai:a", prompt="", fields={"q": 1}, status="failed", passed=False),
                   EvalResult(row=2, provider="openai:a", prompt="", fields={"q": 2}, status="skipped")]
    ok, failed, skipped = ev.records()
    assert (ok["contains:x"], failed["contains:x"], skipped["contains:x"]) == (True, False, None)
    assert ok == {"row": 0, "q": 0, "row.row": "r", "row.cost": "c", "column": "openai:a", "provider": "openai:a",
                  "alias": None, "variant": None, "repeat": 0, "prompt": "p", "output": "x", "structured": None,
                  "passed": True, "contains:x": True, "failures": "", "status": "ok", "error_type": None,
                  "error": None, "input_tokens": 3, "output_tokens": 4, "cost": 0.01, "judge_cost": 0.002,
                  "ttft_s": 0.1, "total_s": 0.2, "cached": True, "run_id": "r0", "human": True, "human_note": "fine"}


def test_the_json_file_is_the_document_as_utf_8_json_indented_by_one(tmp_path: Path) -> None:
    ev = with_outputs()
    text = ev.to_json(tmp_path / "r.json").read_text(encoding="utf-8")
    assert text == json.dumps(ev.to_json(), ensure_ascii=False, indent=1, default=str)
    assert '\n "id": ' in text and '"q": "é"' in text and '"when": "2026-12-07"' in text


def test_parquet_metadata_writes_what_json_cannot_hold_as_its_text(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet  # noqa: F401 - loads pa.parquet

    ev = with_outputs()
    ev.seed = datetime.date(2026, 1, 2)  # type: ignore[assignment] - a value JSON has no type for
    info = json.loads(pa.parquet.read_table(ev.export(tmp_path / "r.parquet")).schema.metadata[b"ipyagent_evaluation"])
    assert info["seed"] == "2026-01-02"


@pytest.mark.parametrize(("outcomes", "kept"), [
    ([Outcome("a", True), Outcome("b", True)], 1),  # every check passed, nothing to say: 1
    ([Outcome("a", True), Outcome("b", False)], [[True, None, None], [False, None, None]]),
    ([Outcome("a", True, score=0.5), Outcome("b", True)], [[True, 0.5, None], [True, None, None]]),
    ([Outcome("a", True, reason="why"), Outcome("b", True)], [[True, None, "why"], [True, None, None]]),
    ([Outcome("b", True)], [None, [True, None, None]]),  # a not checked
])
def test_the_store_keeps_a_runs_outcomes_whole_unless_every_check_simply_passed(outcomes: list[Outcome],
                                                                                kept: Any) -> None:
    result = EvalResult(row=0, provider="openai:a", prompt="", fields={}, outcomes=outcomes)
    assert _compact_outcomes(result, ["a", "b"]) == kept
    assert _compact_outcomes(result, []) == []


def test_a_records_failures_are_joined_by_semicolons() -> None:
    ev = Evaluation(["openai:a"], [{"q": 0}], assertions=["a", "b"])
    ev.results.append(EvalResult(row=0, provider="openai:a", prompt="", fields={"q": 0}, passed=False,
                                 outcomes=[Outcome("a", False, reason="no"), Outcome("b", False)]))
    assert ev.records()[0]["failures"] == "a: no; b: failed"


def test_the_store_keeps_each_run_its_columns_tally_and_a_prompt_only_without_a_run_id() -> None:
    ev = Evaluation(["openai:a", "openai:b"], [{"q": 0}, {"q": 1}], assertions=["a"])
    ev.results += [EvalResult(row=0, provider="openai:b", prompt="p0", fields={"q": 0}, passed=True, run_id="r0",
                              outcomes=[Outcome("a", True)]),
                   EvalResult(row=1, provider="openai:b", prompt="p1", fields={"q": 1}, status="skipped",
                              error_type="budget", error="over")]
    doc = document(ev)
    assert doc["meta"]["pass"] == {"openai:a": [0, 0], "openai:b": [1, 1]} and doc["rows"] == [{"q": 0}, {"q": 1}]
    assert doc["runs"] == [[0, 1, 0, "ok", True, "r0", False, None, None, None, 1, None],
                           [1, 1, 0, "skipped", None, None, False, "budget", "over", None, [None], "p1"]]


def test_the_store_keeps_the_wall_time_so_far_until_the_runner_notes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    ev = Evaluation(["openai:a"], [{"q": 0}], started=100.0)
    monkeypatch.setattr(export.time, "monotonic", lambda: 105.25)
    assert document(ev)["meta"]["wall_s"] == 5.25 and meta(ev)["wall_s"] == 0.0
    ev.wall_s = 8.32
    assert document(ev)["meta"]["wall_s"] == 8.32


def test_meta_holds_the_evaluations_settings_and_when_it_was_kept() -> None:
    ev = Evaluation(["openai:a"], [{"q": 0}, {"q": 1}], assertions=["a"], variants=["x"], repeat=2,
                    labels={"openai:a": "good"}, baseline="openai:a/x", seed=3, name="cell", wall_s=1.5,
                    interrupted=True, budget=2.0, budget_stopped=True, spent=0.5, reserved=0.25, notes=["n"])
    found = meta(ev)
    assert isinstance(found.pop("created_at"), float)
    assert found == {"v": 1, "id": ev.id, "name": "cell", "providers": ["openai:a"], "variants": ["x"], "repeat": 2,
                     "assertions": ["a"], "labels": {"openai:a": "good"}, "baseline": "openai:a/x", "seed": 3,
                     "rows": 2, "wall_s": 1.5, "interrupted": True, "budget": 2.0, "budget_stopped": True,
                     "spent": 0.5, "reserved": 0.25, "notes": ["n"]}


def test_a_suffix_export_does_not_know_is_named_and_json_is_the_document(tmp_path: Path) -> None:
    ev = with_outputs()
    with pytest.raises(ValueError, match=r"'r\.txt' has no suffix it knows; end it in \.jsonl, \.csv, \.parquet"):
        ev.export(tmp_path / "r.txt")
    path = ev.export(tmp_path / "r.JSON")  # a suffix is read in either case
    assert path == tmp_path / "r.JSON" and json.loads(path.read_text(encoding="utf-8"))["results"][1]["text"] == "b"


def test_to_csv_writes_other_columns_as_they_are_and_a_failed_runs_error(tmp_path: Path) -> None:
    ev = with_outputs()
    ev.results[1].status, ev.results[1].error_type, ev.results[1].error = "failed", "RateLimitError", "429 slow"
    path = ev.to_csv(tmp_path / "r.csv")
    assert path == tmp_path / "r.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        first, second = csv.DictReader(handle)
    assert (first["output"], first["when"], second["output"]) == ("a", "2026-12-07", "b")  # not JSON text
    assert (second["error_type"], second["error"]) == ("RateLimitError", "429 slow")


def test_parquet_without_pyarrow_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ImportError) as raised:
        export.load_pyarrow()
    assert str(raised.value) == export.PYARROW_MISSING and "ipyagent[parquet]" in str(raised.value)


def test_the_store_tallies_every_run_of_a_column() -> None:
    ev = Evaluation(["openai:a"], [{"q": n} for n in range(3)])
    ev.results += [EvalResult(row=n, provider="openai:a", prompt="", fields={"q": n}, passed=n != 1) for n in range(3)]
    assert document(ev)["meta"]["pass"] == {"openai:a": [2, 3]}


def test_the_documents_head_is_every_part_but_the_runs() -> None:
    ev = Evaluation(["openai:a", "openai:b"], [{"q": 0, "é": 1}, {"q": 1}], assertions=["contains:x"], repeat=2,
                    labels={"openai:a": "fast"}, wall_s=8.32, interrupted=True, budget=2.0, budget_stopped=True,
                    spent=0.5, reserved=0.25, notes=["a note"])
    for n, (row, provider, repeat, passed) in enumerate(((1, "openai:b", 0, True), (0, "openai:b", 1, False),
                                                         (0, "openai:b", 0, True), (0, "openai:a", 0, True))):
        ev.results.append(EvalResult(row=row, provider=provider, repeat=repeat, prompt="", fields=ev.rows[row],
                                     passed=passed, outcomes=[Outcome("contains:x", passed)], cost=0.01 * n))
    ev.results.append(EvalResult(row=1, provider="openai:a", repeat=1, prompt="", fields=ev.rows[1],
                                 status="skipped", error_type="budget", error="over"))
    head, stats = ev.json_head(), ev.statistics()
    assert head == {"id": ev.id, "providers": ["openai:a", "openai:b"], "columns": ["openai:a", "openai:b"],
                    "variants": [], "repeat": 2, "assertions": ["contains:x"], "total": 8, "wall_s": 8.32,
                    "interrupted": True, "budget": 2.0, "budget_stopped": True, "spent": 0.5, "reserved": 0.25,
                    "skipped": 1, "notes": ["a note"], "aliases": {"openai:a": "fast"},
                    "summary": ev.summary_records(stats=stats), **ev.analysis_json(stats),
                    "flaky": [[0, "openai:b"]], "results": [], "field_order": ["q", "é"]}
    assert list(head) == list(ev.to_json()) and ev.to_json() == {**head, "results": ev.json_results()}


def test_the_documents_runs_are_by_row_column_and_repeat_for_the_rows_asked() -> None:
    """As `ordered`: a column the evaluation does not list ranks first (its index read as 0)."""
    ev = Evaluation(["openai:b", "openai:a"], [{}, {}, {}], repeat=2)
    for row, provider in ((2, "openai:a"), (0, "openai:a"), (0, "openai:z"), (0, "openai:b"), (1, "openai:a")):
        ev.results += [EvalResult(row=row, provider=provider, prompt="", fields={}, passed=True, repeat=repeat)
                       for repeat in (1, 0)]
    assert ev.json_results() == [r.to_dict() for r in ev.ordered()]
    assert [(r["row"], r["provider"], r["repeat"]) for r in ev.json_results({0, 2})] == [
        (0, "openai:z", 0), (0, "openai:b", 0), (0, "openai:z", 1), (0, "openai:b", 1), (0, "openai:a", 0),
        (0, "openai:a", 1), (2, "openai:a", 0), (2, "openai:a", 1)]
    assert ev.json_results(set()) == [] and [r["row"] for r in ev.json_results([1])] == [1, 1]
