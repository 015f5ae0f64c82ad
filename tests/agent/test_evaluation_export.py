"""`Evaluation.export` and `ipyagent.load_evaluation` (issue 33, item 4): every run written as
JSONL, CSV, Parquet or JSON by the file's suffix and read back, or kept in the run store and read
back by the evaluation's id in another process, with the same DataFrame, summary, verdicts and diff."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent, Evaluation, evaluate, load_evaluation
from ipyagent.agent.evaluation import stored_evaluations
from ipyagent.agent.evaluation.export import PYARROW_MISSING
from ipyagent.drivers.registry import BUILTIN

from ..support.evaluation import answering
from ..support.exported import MIXED, capital, failing_on_peru, run_matrix
from ..support.stub_server import StubServer

pd = pytest.importorskip("pandas")

KEY_VARS = sorted({spec.api_key_env for spec in BUILTIN.values() if spec.api_key_env})


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def ev(tmp_path: Path) -> Evaluation:
    with StubServer(responder=capital) as a, StubServer(responder=failing_on_peru) as b:
        return run_matrix(tmp_path / "runs.sqlite", a.url, b.url)


def assert_same(loaded: Evaluation, ev: Evaluation) -> None:
    """The same DataFrame, summary, verdicts and no difference either way."""
    pd.testing.assert_frame_equal(loaded.to_dataframe(), ev.to_dataframe())
    pd.testing.assert_frame_equal(loaded.summary(full=True), ev.summary(full=True))
    assert loaded.id == ev.id and loaded.columns == ev.columns
    assert [(c.column, c.verdict) for c in loaded.statistics()["comparisons"]] == \
        [(c.column, c.verdict) for c in ev.statistics()["comparisons"]]
    assert loaded.diff(ev).empty and ev.diff(loaded).empty


def test_the_matrix_has_what_an_export_must_keep(ev: Evaluation) -> None:
    frame = ev.to_dataframe()
    assert len(frame) == 3 * 4 * 2 and set(frame["status"]) == {"ok", "failed"}
    assert frame["human"].tolist().count(False) == 1 and set(frame["passed"]) == {True, False}
    assert "row.status" in frame.columns and frame["population"].tolist()[:1] == [68]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet", ".json"])
def test_an_export_read_back_is_the_same_evaluation(ev: Evaluation, tmp_path: Path, suffix: str) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    path = ev.export(tmp_path / f"results{suffix}")
    assert path == tmp_path / f"results{suffix}" and path.stat().st_size > 0
    assert_same(load_evaluation(path), ev)
    assert_same(load_evaluation(str(path)), ev)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".json"])
def test_jsonl_and_parquet_keep_a_field_of_several_types_and_empty_text(tmp_path: Path, suffix: str) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    with StubServer(responder=capital) as a, StubServer(responder=failing_on_peru) as b:
        ev = run_matrix(tmp_path / "runs.sqlite", a.url, b.url, MIXED)
    loaded = load_evaluation(ev.export(tmp_path / f"r{suffix}"))
    assert_same(loaded, ev)
    rows = loaded.records()[::8]
    assert [r["mixed"] for r in rows] == [1, "x", 2.5] and [r["empty"] for r in rows] == ["", None, "y"]


def test_csv_reads_a_field_of_several_types_as_text_and_an_empty_cell_as_none(tmp_path: Path) -> None:
    with StubServer(responder=capital) as a, StubServer(responder=failing_on_peru) as b:
        ev = run_matrix(tmp_path / "runs.sqlite", a.url, b.url, MIXED)
    rows = load_evaluation(ev.export(tmp_path / "r.csv")).records()[::8]
    assert [r["mixed"] for r in rows] == ["1", "x", "2.5"] and [r["empty"] for r in rows] == [None, None, "y"]
    assert [r["population"] for r in rows] == [68, 125, 34] and [r["ratio"] for r in rows] == [0.5, 1.25, -3.0]
    assert rows[0]["row.status"] == "sovereign" and rows[0]["status"] == "ok"


def test_a_file_holds_every_runs_checks_with_reasons_usage_grade_and_the_id(ev: Evaluation, tmp_path: Path) -> None:
    lines = ev.export(tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])["ipyagent_evaluation"]
    assert meta["id"] == ev.id and meta["baseline"] == "openai:m1/plain" and meta["variants"] == ["plain", "terse"]
    runs = [json.loads(line) for line in lines[1:]]
    assert len(runs) == 24 and {r["evaluation"] for r in runs} == {ev.id}
    terse = next(r for r in runs if r["column"] == "openai:m1/terse" and r["repeat"] == 1 and r["row"] == 0)
    assert terse["regex:\\."] is False and terse["regex:\\. reason"] and terse["human"] is False
    assert terse["human_note"] == "one word, no full stop" and terse["input_tokens"] == 12
    assert terse["output"] == "It is Paris" and terse["total_s"] > 0 and terse["variant"] == "terse"
    failed = next(r for r in runs if r["provider"] == "openai:m2" and r["country"] == "Peru")
    assert failed["status"] == "failed" and "bad row" in failed["error"]


def test_to_csv_is_export_as_csv(ev: Evaluation, tmp_path: Path) -> None:
    assert ev.to_csv(tmp_path / "a.csv").read_bytes() == ev.export(tmp_path / "b.csv").read_bytes()
    doc = json.loads(ev.to_json(tmp_path / "a.json").read_text())
    assert doc == json.loads(ev.export(tmp_path / "b.json").read_text()) | {"wall_s": doc["wall_s"]}


def test_a_suffix_it_does_not_know_says_which_it_does(ev: Evaluation, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.jsonl, \.csv, \.parquet or \.json"):
        ev.export(tmp_path / "r.xlsx")
    with pytest.raises(ValueError, match="not an evaluation"):
        (tmp_path / "other.json").write_text("[1, 2]")
        load_evaluation(tmp_path / "other.json")


def test_parquet_without_pyarrow_names_the_extra(ev: Evaluation, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ImportError) as raised:
        ev.export(tmp_path / "r.parquet")
    assert str(raised.value) == PYARROW_MISSING and "pip install 'ipyagent[parquet]'" in PYARROW_MISSING
    assert not (tmp_path / "r.parquet").exists()


def test_the_store_gives_an_evaluation_back_by_its_id_or_a_prefix(ev: Evaluation, tmp_path: Path, open_store) -> None:
    store = tmp_path / "runs.sqlite"
    assert_same(load_evaluation(ev.id, store=store), ev)
    assert_same(load_evaluation(ev.id[:6], store=open_store(store)), ev)
    with pytest.raises(KeyError, match="no evaluation 'nope'"):
        load_evaluation("nope", store=store)


def test_the_store_gives_back_the_wall_time_as_the_file_does(ev: Evaluation, tmp_path: Path) -> None:
    """The store keeps the evaluation as its matrix ends, before the runner notes the wall time: it
    keeps the time so far (a loaded evaluation once read ``wall 0.00 s`` where the file said 8.32 s)."""
    stored = load_evaluation(ev.id, store=tmp_path / "runs.sqlite")
    exported = load_evaluation(ev.export(tmp_path / "r.jsonl"))
    assert exported.wall_s == ev.wall_s and 0 < stored.wall_s <= ev.wall_s
    assert f"wall {ev.wall_s:.2f} s" in repr(exported) and "wall 0.00 s" not in repr(stored)


def test_an_evaluation_past_500_runs_comes_back_whole_from_a_store_never_graded(tmp_path: Path) -> None:
    """The store reads runs by id 500 at a time; with no grade in the store every run's answer, usage
    and cost still come back (a shortcut for grades, copied to the runs' read, once lost them all)."""
    rows = [{"n": n} for n in range(260)]
    with StubServer(responder=answering(lambda q: f"answer to {q}", usage=(7, 3))) as a:
        ev = evaluate([Agent("openai:m1", base_url=a.url)], "Question {{ row.n }}?", rows, repeat=2,
                      store=tmp_path / "runs.sqlite", concurrency=8)
    assert len(ev.results) == 520 and {r.text for r in ev.results} == {f"answer to Question {n}?" for n in range(260)}
    assert_same(load_evaluation(ev.id, store=tmp_path / "runs.sqlite"), ev)


def test_either_back_end_gives_the_evaluation_back_by_its_id(store_location: Any) -> None:  # SQLite, PostgreSQL
    with StubServer(responder=capital) as a, StubServer(responder=failing_on_peru) as b:
        ev = run_matrix(store_location, a.url, b.url)
    assert_same(load_evaluation(ev.id, store=str(store_location)), ev)


def test_a_grade_given_after_the_run_comes_back_from_the_store(ev: Evaluation, tmp_path: Path) -> None:
    ev.grade(1, "openai:m2/plain", True, "fine")
    loaded = load_evaluation(ev.id, store=tmp_path / "runs.sqlite")
    assert loaded.cell(1, "openai:m2/plain").human is True and loaded.cell(1, "openai:m2/plain").human_note == "fine"


def test_the_store_lists_its_evaluations_newest_first(ev: Evaluation, tmp_path: Path, open_store) -> None:
    with StubServer(responder=capital) as a, StubServer(responder=capital) as b:
        second = run_matrix(tmp_path / "runs.sqlite", a.url, b.url)
    store = open_store(tmp_path / "runs.sqlite")
    listed = stored_evaluations(store)
    assert [e["id"] for e in listed] == [second.id, ev.id]
    first = listed[1]
    assert first["name"] == "cell-1" and first["rows"] == 3 and first["repeat"] == 2 and first["runs"] == 24
    assert first["columns"] == ev.columns
    rates = {s["column"]: s["pass_rate"] for s in ev.summary_records()}
    assert first["pass_rates"] == rates and rates["openai:m2/plain"] == 0.0 and rates["openai:m1/plain"] == 1.0


def test_the_runs_an_evaluation_keeps_are_not_pruned(ev: Evaluation, tmp_path: Path, open_store) -> None:
    store = open_store(tmp_path / "runs.sqlite")
    assert {r.run_id for r in ev.results if r.run_id} <= store.referenced_runs()


#: A fresh process: evaluates (when given a URL) or loads by id, and pickles the DataFrame.
CHILD = textwrap.dedent("""
    import pickle, sys
    sys.path.insert(0, sys.argv[1])
    from ipyagent import load_evaluation
    store, out, how = sys.argv[2], sys.argv[3], sys.argv[4:]
    if how[0] == "run":
        from tests.support.exported import run_matrix
        ev = run_matrix(store, how[1], how[2])
    else:
        ev = load_evaluation(how[1], store=store)
    pickle.dump((ev.id, ev.to_dataframe(), ev.summary(full=True)), open(out, "wb"))
""")


def _child(tmp_path: Path, *args: str) -> tuple[str, Any, Any]:
    out = tmp_path / f"child-{len(list(tmp_path.glob('child-*')))}.pickle"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", CHILD, str(root), str(tmp_path / "runs.sqlite"), str(out), *args],
                   check=True, cwd=tmp_path, timeout=120)
    return pickle.loads(out.read_bytes())


def test_after_a_restart_the_store_gives_the_evaluation_back_by_its_id(tmp_path: Path) -> None:
    with StubServer(responder=capital) as a, StubServer(responder=failing_on_peru) as b:
        ran_id, ran, ran_summary = _child(tmp_path, "run", a.url, b.url)
    loaded_id, loaded, loaded_summary = _child(tmp_path, "load", ran_id)
    assert loaded_id == ran_id and len(loaded) == 24
    pd.testing.assert_frame_equal(loaded, ran)
    pd.testing.assert_frame_equal(loaded_summary, ran_summary)
