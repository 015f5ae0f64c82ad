"""An evaluation given back (`agent/evaluation/archive.py`), on files and documents written by hand: what
each kind of file is read as, a CSV column's types, a flat record's result and META, the run store's
document with its runs and grades, which store an id is looked up in, and what `%agent evals` lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agent import EvalResult
from ipyagent.agent.evaluation.archive import (
    _infer,
    _inferred_meta,
    _outcomes,
    _read_bool,
    _typed_column,
    from_document,
    from_records,
    json_document,
    load_evaluation,
    read_file,
    result_of,
    stored_evaluations,
    typed_csv,
)
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.agent.evaluation.export import OWN
from ipyagent.memory import RunStore

META = {"ipyagent_evaluation": {"id": "e1", "providers": ["openai:a"]}}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- reading a file ----------------------------------------------------------------------


def test_a_missing_file_is_named_and_a_suffix_it_does_not_read_lists_those_it_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        read_file(tmp_path / "gone.jsonl")
    assert str(missing.value) == f"load_evaluation: there is no file {str(tmp_path / 'gone.jsonl')!r}"
    with pytest.raises(ValueError) as other:
        read_file(write(tmp_path / "r.txt", "{}"))
    assert str(other.value) == ("load_evaluation: 'r.txt' is not an export it reads; give a .jsonl, .csv, .parquet "
                                "or .json file (ev.export) or an evaluation's id")


def test_jsonl_reads_its_meta_line_then_every_record_skipping_blank_lines(tmp_path: Path) -> None:
    text = json.dumps(META) + "\n\n" + '{"row": 0, "q": "é"}\n  \n{"row": 1}\n'
    assert read_file(write(tmp_path / "r.JSONL", text)) == (META["ipyagent_evaluation"], [{"row": 0, "q": "é"},
                                                                                        {"row": 1}])
    assert read_file(write(tmp_path / "r.ndjson", '{"row": 0}\n{"row": 1}\n')) == (None, [{"row": 0}, {"row": 1}])
    assert read_file(write(tmp_path / "e.jsonl", "")) == (None, [])
    assert read_file(write(tmp_path / "l.jsonl", "[1]\n")) == (None, [[1]])  # no META: not a dict


def test_csv_keeps_a_line_break_inside_a_quoted_cell_and_types_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "r.Csv"
    path.write_bytes('row,provider,prompt,n\r\n0,openai:a,"two\r\nlines é",3\r\n'.encode())
    assert read_file(path) == (None, [{"row": 0, "provider": "openai:a", "prompt": "two\r\nlines é", "n": 3}])


def test_parquet_reads_meta_from_the_schema_and_decodes_the_json_columns(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet  # noqa: F401 - loads pa.parquet

    table = pa.table({"row": [0, 1], "structured": ['{"a": 1}', None], "tool_calls": ["[]", None],
                      "when": ['"x"', None]})
    info = {"id": "e1", "json_columns": ["when"]}
    pa.parquet.write_table(table.replace_schema_metadata({"ipyagent_evaluation": json.dumps(info)}),
                           tmp_path / "r.parquet")
    assert read_file(tmp_path / "r.parquet") == (info, [{"row": 0, "structured": {"a": 1}, "tool_calls": [],
                                                         "when": "x"},
                                                        {"row": 1, "structured": None, "tool_calls": None,
                                                         "when": None}])
    pa.parquet.write_table(pa.table({"row": [0], "structured": ['"s"']}), tmp_path / "bare.parquet")
    assert read_file(tmp_path / "bare.parquet") == (None, [{"row": 0, "structured": "s"}])


def test_json_reads_the_document_and_refuses_json_that_is_not_one(tmp_path: Path) -> None:
    doc = {"id": "e1", "results": [{"row": 0, "provider": "openai:a", "text": "é", "fields": {}}]}
    path = tmp_path / "r.json"
    path.write_bytes(json.dumps(doc, ensure_ascii=False).encode())
    info, records = read_file(path)
    assert info["id"] == "e1" and records[0]["output"] == "é"
    for bad in ([1], {"results": {}}, {"id": "e1"}):
        with pytest.raises(ValueError) as raised:
            json_document(bad)
        assert str(raised.value) == "load_evaluation: this JSON file is not an evaluation (ev.to_json or ev.export)"


def test_a_json_documents_runs_become_flat_records_and_its_keys_meta() -> None:
    run = {"row": 0, "provider": "openai:a", "column": "openai:a", "text": "Paris", "output": {"c": 1},
           "extra": "kept", "fields": {"q": 1, "provider": "own", "alias": "own", "extra": "field"},
           "outcomes": [{"name": "contains:P", "passed": True, "reason": "why", "score": 0.5}]}
    doc = {"results": [run, {"row": 1, "fields": None, "outcomes": None}], "id": "e1", "providers": ["openai:a"],
           "variants": [], "repeat": 2, "assertions": ["contains:P"], "baseline": "openai:a", "wall_s": 1.5,
           "interrupted": True, "budget": 2.0, "budget_stopped": True, "spent": 0.5, "reserved": 0.25,
           "notes": ["n"], "aliases": {"openai:a": "a"}, "columns": ["ignored"]}
    info, (first, second) = json_document(doc)
    assert first == {"row": 0, "provider": "openai:a", "column": "openai:a", "extra": "kept", "q": 1,
                     "row.provider": "own", "row.alias": "own", "row.extra": "field", "output": "Paris",
                     "structured": {"c": 1}, "contains:P": True, "contains:P reason": "why", "contains:P score": 0.5}
    assert second == {"row": 1, "output": None, "structured": None}
    assert info == {**{k: doc[k] for k in ("id", "providers", "variants", "repeat", "assertions", "baseline",
                                           "wall_s", "interrupted", "budget", "budget_stopped", "spent", "reserved",
                                           "notes")}, "labels": {"openai:a": "a"}}
    assert json_document({"results": []})[0]["labels"] == {}


# -- a CSV column's types ------------------------------------------------------------------


def test_a_bool_is_read_in_either_case_else_none() -> None:
    assert [_read_bool(v) for v in ("True", "False", "true", "false", "TRUE", "", "1")] == \
        [True, False, True, False, None, None, None]


@pytest.mark.parametrize(("values", "typed"), [
    (["1", "-2", " 3", ""], [1, -2, 3, None]),
    (["1", "+5"], [1.0, 5.0]),  # int() reads +5, but it is not written as a whole number
    (["1.5", "2", ""], [1.5, 2.0, None]),
    (["True", "", "False"], [True, None, False]),
    (["true", "False"], ["true", "False"]),
    (["x", "", "1"], ["x", None, "1"]),
    (["", ""], [None, None]),
])
def test_a_field_column_is_whole_numbers_numbers_bools_or_text(values: list[str], typed: list[Any]) -> None:
    got = _infer(values)
    assert got == typed and [type(v) for v in got] == [type(v) for v in typed]


@pytest.mark.parametrize(("name", "values", "typed"), [
    ("row", ["0", "2", ""], [0, 2, None]),
    ("cost", ["0.5", "1", ""], [0.5, 1.0, None]),
    ("c score", ["1", ""], [1.0, None]),
    ("x score", ["1", ""], [1, None]),  # x is not a check: a field
    ("passed", ["True", "false", ""], [True, False, None]),
    ("c", ["False", ""], [False, None]),
    ("prompt", ["", "1"], ["", "1"]),
    ("error", ["", "1"], [None, "1"]),
    ("c reason", ["", "1"], [None, "1"]),
    ("x reason", ["", "1"], [None, 1]),
    ("evaluation", ["", "1"], [None, "1"]),
    ("structured", ['{"a": 1}', ""], [{"a": 1}, None]),
    ("q", ["1", ""], [1, None]),
])
def test_a_records_column_is_typed_by_what_it_holds(name: str, values: list[str], typed: list[Any]) -> None:
    got = _typed_column(name, values, {"c"})
    assert got == typed and [type(v) for v in got] == [type(v) for v in typed]


def test_typed_csv_types_each_column_reading_a_missing_cell_as_empty() -> None:
    rows = [{"row": "0", "c": "True", "c reason": "", "q": "1"}, {"row": "1", "c": "false", "c reason": "r", "q": None}]
    assert typed_csv(rows) == [{"row": 0, "c": True, "c reason": None, "q": 1},  # c: a check (it has a reason)
                               {"row": 1, "c": False, "c reason": "r", "q": None}]
    assert typed_csv([]) == []


# -- records to an Evaluation ------------------------------------------------------------------


def test_a_checks_outcome_is_kept_when_it_passed_failed_or_has_a_reason() -> None:
    rec = {"a": True, "a score": 0.5, "b": False, "c": None, "c reason": "not run", "d": None, "d score": 1.0}
    assert _outcomes(rec, ["a", "b", "c", "d"]) == [Outcome("a", True, score=0.5), Outcome("b", False),
                                                     Outcome("c", False, reason="not run")]


def test_a_record_gives_back_its_result_with_row_fields_apart_from_its_own_columns() -> None:
    own = {*OWN, "row", "c", "c reason", "c score"}
    rec = {"row": "2", "provider": "openai:a", "prompt": "p", "variant": "v", "repeat": "1", "output": "Paris",
           "structured": {"a": 1}, "passed": False, "c": False, "c reason": "r", "c score": None, "status": "ok",
           "error_type": "e", "error": "E", "input_tokens": "3", "output_tokens": 4, "cost": 0.5, "judge_cost": 0.25,
           "ttft_s": 0.1, "total_s": 0.2, "cached": 1, "run_id": "r1", "tool_calls": [{"name": "t"}],
           "human": True, "human_note": "fine", "q": 1, "row.status": "mine", "row.zz": 3, "column": "x"}
    r = result_of(rec, ["c"], own)
    assert r == EvalResult(2, "openai:a", "p", {"q": 1, "status": "mine", "row.zz": 3}, variant="v", repeat=1,
                           text="Paris", output={"a": 1}, passed=False, outcomes=[Outcome("c", False, reason="r")],
                           status="ok", error_type="e", error="E", input_tokens=3, output_tokens=4, cost=0.5,
                           judge_cost=0.25, ttft_s=0.1, total_s=0.2, cached=True, run_id="r1",
                           tool_calls=[{"name": "t"}], human=True, human_note="fine")
    assert type(r.cached) is bool and type(r.repeat) is int


def test_a_bare_record_takes_every_default_and_no_checks_unless_it_ran() -> None:
    r = result_of({"row": 0, "c": False, "status": None}, ["c"], {*OWN, "c"})
    assert r == EvalResult(0, "", "", {})
    assert r.tool_calls == () and r.status == "ok" and r.outcomes == []
    failed = result_of({"row": 0, "c": False, "status": "failed"}, ["c"], {*OWN, "c"})
    assert failed.status == "failed" and failed.outcomes == []


def test_meta_read_from_the_records_in_order_of_first_appearance() -> None:
    records = [{"evaluation": "e1", "provider": "openai:b", "variant": "v2", "repeat": 0, "c": True, "c reason": None,
                "alias": "b"},
               {"evaluation": "e2", "provider": "openai:a", "variant": None, "repeat": 2, "alias": None},
               {"evaluation": "e1", "provider": "openai:b", "variant": "v1", "repeat": None, "alias": ""}]
    assert _inferred_meta(records) == {"id": "e1", "providers": ["openai:b", "openai:a"], "variants": ["v2", "v1"],
                                       "repeat": 3, "assertions": ["c"], "labels": {"openai:b": "b"}}
    assert _inferred_meta([]) == {"id": None, "providers": [], "variants": [], "repeat": 1, "assertions": [],
                                  "labels": {}}


def test_records_without_meta_become_an_evaluation_with_every_row_in_place() -> None:
    records = [{"row": 2, "provider": "openai:a", "status": "ok", "passed": True, "c": True, "c reason": None,
                "c score": None, "q": 2, "evaluation": "e9"}]
    ev = from_records(None, records)
    assert ev.id == "e9" and ev.providers == ["openai:a"] and ev.assertions == ["c"] and ev.repeat == 1
    assert ev.rows == [{}, {}, {"q": 2}] and ev.results[0].fields == {"q": 2}
    assert ev.results[0].outcomes == [Outcome("c", True)]
    assert from_records({"rows": "4", "id": None, "repeat": 2}, records).rows == [{}, {}, {"q": 2}, {}]
    assert from_records({"id": None}, records).id == "e9"  # a None in META leaves the records' word


def test_meta_sets_the_evaluations_settings_with_their_types() -> None:
    info = {"id": "e1", "providers": ["openai:a", "openai:b"], "variants": ["v"], "repeat": "2", "assertions": ["c"],
            "labels": {"openai:a": "a"}, "name": "cell-1", "baseline": "openai:b/v", "budget": 3.0, "notes": ["n"],
            "seed": "7", "wall_s": "1.5", "spent": 1, "reserved": "0.25", "interrupted": 1, "budget_stopped": "y"}
    ev = from_records(info, [])
    assert (ev.id, ev.providers, ev.variants, ev.repeat, ev.assertions, ev.labels) == \
        ("e1", ["openai:a", "openai:b"], ["v"], 2, ["c"], {"openai:a": "a"})
    assert (ev.name, ev.baseline, ev.budget, ev.notes) == ("cell-1", "openai:b/v", 3.0, ["n"])
    assert (ev.seed, ev.wall_s, ev.spent, ev.reserved) == (7, 1.5, 1.0, 0.25)
    assert [type(v) for v in (ev.seed, ev.wall_s, ev.spent, ev.reserved)] == [int, float, float, float]
    assert ev.interrupted is True and ev.budget_stopped is True and ev.rows == []
    bare = from_records({}, [])
    assert bare.interrupted is False and bare.budget_stopped is False and bare.repeat == 1
    assert (bare.name, bare.baseline, bare.budget, bare.notes, bare.wall_s, bare.spent) == (None, None, None, [], 0, 0)
    assert len(bare.id) == 12 and bare.labels == {}


# -- the run store ---------------------------------------------------------------------


class FakeStore:
    """What `from_document` and `stored_evaluations` read of a run store, recording what was asked."""

    path = Path("kept.sqlite")

    def __init__(self, runs: dict[str, Any] | None = None, grades: dict[str, Any] | None = None,
                 kept: list[dict[str, Any]] | None = None) -> None:
        self._runs, self._grades, self._kept, self.asked = runs or {}, grades or {}, kept or [], []

    def runs_by_id(self, ids: list[str]) -> dict[str, Any]:
        self.asked.append(("runs", ids))
        return {i: self._runs[i] for i in ids if i in self._runs}

    def grades(self, ids: list[str]) -> dict[str, Any]:
        self.asked.append(("grades", ids))
        return {i: self._grades[i] for i in ids if i in self._grades}

    def evaluations(self, limit: int) -> list[dict[str, Any]]:
        self.asked.append(("evaluations", limit))
        return self._kept


def document(runs: list[list[Any]], **meta: Any) -> dict[str, Any]:
    info = {"id": "e1", "providers": ["openai:a", "openai:b"], "variants": ["v", "w"], "assertions": ["c", "d"],
            "repeat": 2, **meta}
    return {"meta": info, "rows": [{"q": 0}, None], "runs": runs}


STORED = {"prompt": "stored prompt", "usage": {"input_tokens": 3, "output_tokens": 4}, "cost": 0.5, "duration_s": 2.0,
          "metadata": {"text": "Paris", "output": {"c": 1}, "ttft_s": 0.1, "tool_calls": [{"name": "t"}]}}


def test_the_documents_runs_come_back_on_their_columns_with_their_checks() -> None:
    runs = [[0, 3, 1, "ok", False, None, True, None, None, 0.25, [[True, 0.5, "fine"], None], "sent"],
            [1, 0, 0, "ok", True, None, False, None, None, None, 1, None],
            [2, 1, 0, "failed", False, None, False, "rate_limit", "slow", None, None, None]]
    store = FakeStore()
    ev = from_document(document(runs), store)
    first, second, third = ev.results
    assert first == EvalResult(0, "openai:b", "sent", {"q": 0}, variant="w", repeat=1, passed=False,
                               outcomes=[Outcome("c", True, score=0.5, reason="fine")], judge_cost=0.25, cached=True)
    assert second == EvalResult(1, "openai:a", "", {}, variant="v", passed=True,
                                outcomes=[Outcome("c", True), Outcome("d", True)])
    assert third == EvalResult(2, "openai:a", "", {}, variant="w", status="failed", passed=False,
                               error_type="rate_limit", error="slow")
    assert ev.rows == [{"q": 0}, {}] and ev.id == "e1" and ev.repeat == 2 and ev.store_path == "kept.sqlite"
    assert store.asked == [("runs", []), ("grades", [])]


def test_a_stored_run_gives_its_answer_and_a_grade_given_since() -> None:
    runs = [[0, 0, 0, "ok", True, "r1", False, None, None, None, 1, None],
            [0, 1, 0, "ok", True, "r2", False, None, None, None, [], None],
            [1, 0, 0, "ok", True, "r3", False, None, None, None, [], None]]
    bare = {"prompt": None, "metadata": None, "usage": None}
    store = FakeStore(runs={"r1": STORED, "r2": bare}, grades={"r1": {"passed": False, "note": "no"}})
    ev = from_document(document(runs, variants=None, assertions=None, repeat=None), store)
    first, second, third = ev.results
    assert ev.repeat == 1 and ev.variants == [] and ev.assertions == []
    assert store.asked == [("runs", ["r1", "r2", "r3"]), ("grades", ["r1", "r2", "r3"])]
    assert first == EvalResult(0, "openai:a", "stored prompt", {"q": 0}, passed=True, text="Paris", output={"c": 1},
                               input_tokens=3, output_tokens=4, cost=0.5, total_s=2.0, ttft_s=0.1,
                               tool_calls=[{"name": "t"}], run_id="r1", human=False, human_note="no")
    assert second == EvalResult(0, "openai:b", "", {"q": 0}, passed=True, run_id="r2")
    assert second.tool_calls == () and third.human is None and third.prompt == ""


def test_an_id_is_looked_up_in_the_store_given_and_a_store_opened_for_it_is_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    store.add_evaluation("e1abc", "cell-1", {"archive": document([[0, 0, 0, "ok", True, None, False, None, None,
                                                                  None, 1, "p"]])})
    store.add_evaluation("old", "cell-2", {"pass": {}})
    ev = load_evaluation("e1a", store=store)
    assert ev.id == "e1" and ev.results[0].prompt == "p" and ev.store_path == str(store.path)
    with pytest.raises(KeyError) as before:
        load_evaluation("old", store=store)
    assert before.value.args[0] == ("the run store keeps what evaluation old found, not its runs (it ran before "
                                    "evaluations were kept whole); run its cell again")
    store.evaluation("e1")  # the store given is left open
    closed = []
    close = RunStore.close
    monkeypatch.setattr(RunStore, "close", lambda self: (closed.append(self.path), close(self))[0])
    assert load_evaluation("e1", store=tmp_path / "runs.sqlite").id == "e1" and len(closed) == 1
    with pytest.raises(KeyError):
        load_evaluation("old", store=str(tmp_path / "runs.sqlite"))
    assert len(closed) == 2
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    assert load_evaluation("e1").id == "e1" and len(closed) == 3
    store.close()


def test_a_path_is_read_as_a_file_and_anything_else_as_an_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "none.sqlite"))
    with pytest.raises(FileNotFoundError):
        load_evaluation(tmp_path / "gone.CSV")  # a suffix it writes: a file, though missing
    with pytest.raises(ValueError, match="is not an export it reads"):
        load_evaluation(write(tmp_path / "noext", "x"))  # a file, though without a suffix
    assert load_evaluation(write(tmp_path / "r.jsonl", json.dumps(META) + "\n")).id == "e1"
    with pytest.raises(KeyError) as no_store:
        load_evaluation("e1")
    assert no_store.value.args[0] == (f"no run store at {str(tmp_path / 'none.sqlite')!r} to find the evaluation "
                                      "in; give store= or a file")


def test_no_store_or_one_that_cannot_be_opened_is_a_key_error(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_RUN_STORE", "off")
    with pytest.raises(KeyError) as off:
        load_evaluation("e1")
    assert off.value.args[0] == "no run store at 'None' to find the evaluation in; give store= or a file"
    with pytest.raises(KeyError) as folder:
        load_evaluation("e1", store=tmp_path)
    assert folder.value.args[0].startswith(f"no run store at {str(tmp_path)!r}")
    not_sqlite = write(tmp_path / "notes.txt", "not a database " * 100)
    with pytest.raises(KeyError) as bad:
        load_evaluation("e1", store=not_sqlite)
    assert bad.value.args[0].endswith("; give store= or a file") and bad.value.__cause__ is None
    assert bad.value.__suppress_context__ and "notes.txt" in bad.value.args[0]


def test_the_store_lists_the_evaluations_it_keeps_whole() -> None:
    kept = [{"id": "e2", "name": "cell-2", "created_at": 20.0, "outcomes": {"archive": {"meta": {
                "name": None, "providers": ["openai:a", "openai:b"], "labels": {"openai:a": "good", "openai:b": "o:m"},
                "rows": 3, "repeat": 2, "interrupted": 1, "pass": {"openai:a": [2, 4], "openai:b": [0, 0]}}}}},
            {"id": "e1", "name": "cell-1", "created_at": 10.0, "outcomes": {"archive": {}}},
            {"id": "e0", "name": "cell-0", "created_at": 5.0, "outcomes": None},
            {"id": "eb", "name": "x", "created_at": 1.0, "outcomes": {"archive": {"meta": {"name": "named"}}}}]
    store = FakeStore(kept=kept)
    assert stored_evaluations(store, 7) == [
        {"id": "e2", "name": "cell-2", "created_at": 20.0, "columns": ["openai:a", "openai:b"],
         "providers": ["openai:a", "openai:b"], "aliases": {"openai:a": "good"}, "rows": 3, "repeat": 2, "runs": 4,
         "pass_rates": {"openai:a": 0.5, "openai:b": None}, "interrupted": True},
        {"id": "eb", "name": "named", "created_at": 1.0, "columns": [], "providers": [], "aliases": {}, "rows": None,
         "repeat": None, "runs": 0, "pass_rates": {}, "interrupted": False}]
    assert store.asked == [("evaluations", 7)]
    stored_evaluations(store)
    assert store.asked[-1] == ("evaluations", 20)

