"""What changed between two evaluations (`agent/evaluation/history.py`), on evaluations built by hand:
the counts of newly failing and fixed runs, an older kept record without its runs, the runs `diff`
matches by column and by repeat, and the word each change gets."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import pytest

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation.export import document
from ipyagent.agent.evaluation.history import _kept, answer_digest, changes, compare_kept, diff_records, keep, row_key
from ipyagent.memory import RunStore


def built(runs: list[tuple[int, str, int, str, bool | None, str]], *, rows: int = 2) -> Evaluation:
    """An evaluation of `rows` rows ``{"q": N}`` on columns ``openai:a`` / ``openai:b`` holding `runs`:
    (row, provider, repeat, status, passed, text)."""
    fields = [{"q": n} for n in range(rows)]
    ev = Evaluation(["openai:a", "openai:b"], fields, repeat=1 + max(rep for _, _, rep, *_ in runs))
    for row, provider, repeat, status, passed, text in runs:
        ev.results.append(EvalResult(row=row, provider=provider, prompt=f"q{row}", fields=fields[row], repeat=repeat,
                                     status=status, passed=passed, text=text, run_id=f"run-{row}-{provider}-{repeat}"))
    return ev


def test_a_rows_key_is_the_digest_of_its_compact_json_with_keys_sorted() -> None:
    fields = {"b": "é", "a": [1, 2], "d": datetime.date(2026, 12, 7)}
    text = '{"a":[1,2],"b":"é","d":"2026-12-07"}'
    assert row_key(fields) == hashlib.sha1(text.encode()).hexdigest()[:16]


def test_an_answers_digest_is_of_its_text_or_of_its_error() -> None:
    def digest(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    ok = EvalResult(row=0, provider="openai:a", prompt="", fields={}, text="Paris", error="ignored")
    failed = EvalResult(row=0, provider="openai:a", prompt="", fields={}, status="failed", text="partial",
                        error_type="rate_limit", error="slow down")
    assert answer_digest(ok) == digest("Paris")
    assert answer_digest(failed) == digest("failed\x00rate_limit\x00slow down")


def test_every_newly_failing_and_every_fixed_run_is_counted() -> None:
    k = [row_key({"q": n}) for n in range(4)]
    before = [(k[0], "a", 0, "ok", True, "d0"), (k[1], "a", 0, "ok", True, "d1"),
              (k[2], "a", 0, "failed", False, "d2"), (k[3], "a", 0, "ok", False, "d3")]
    now = [(k[0], "a", 0, "ok", False, "e0"), (k[1], "a", 0, "failed", False, "e1"),
           (k[2], "a", 0, "ok", True, "e2"), (k[3], "a", 0, "ok", True, "e3")]
    found = compare_kept(before, now)
    assert (found["newly_failing"], found["fixed"]) == (2, 2)
    assert found["sentence"] == "since the last run: 2 newly failing, 2 fixed"


def test_a_kept_record_without_its_runs_makes_every_row_new_and_names_the_previous_one() -> None:
    ev = built([(0, "openai:a", 0, "ok", True, "yes"), (1, "openai:a", 0, "ok", True, "yes")])
    found = changes({"id": "e-old", "outcomes": {"archive": {}}}, ev)
    assert found["previous"] == "e-old" and found["rows"] == [0, 1] and found["new_rows"] == 2
    assert found["sentence"] == "since the last run: 2 new rows"
    kept = {"id": "e-same", "outcomes": {"cells": [list(k) for k in _kept(ev.results)]}}
    assert changes(kept, ev)["previous"] == "e-same" and changes(kept, ev)["rows"] == []


def test_diff_matches_runs_by_column_and_by_repeat() -> None:
    # Row 0 differs on column b only, and on its second repeat only: one record, for that run.
    same = [(0, "openai:a", 0, "ok", True, "x"), (0, "openai:a", 1, "ok", True, "x"),
            (0, "openai:b", 0, "ok", True, "x")]
    ev = built(same + [(0, "openai:b", 1, "ok", True, "y")], rows=1)
    other = built(same + [(0, "openai:b", 1, "ok", True, "z")], rows=1)
    (record,) = diff_records(ev, other)
    assert (record["column"], record["repeat"], record["change"]) == ("openai:b", 1, "changed")
    assert (record["output"], record["other_output"]) == ("y", "z")


def test_diff_gives_a_run_only_one_side_has_whole_and_renames_fields_named_like_its_keys() -> None:
    ev = built([(0, "openai:a", 0, "ok", True, "x"), (1, "openai:a", 0, "ok", True, "mine")])
    other = built([(0, "openai:a", 0, "ok", True, "x")], rows=1)
    other.rows = [{"q": 0}, {"q": 2}]
    other.results.append(EvalResult(row=1, provider="openai:a", prompt="q2", fields={"q": 2, "status": "s"},
                                    status="failed", passed=False, text=""))
    new, gone = diff_records(ev, other)
    assert new == {"row": 1, "other_row": None, "q": 1, "column": "openai:a", "repeat": 0, "change": "new",
                   "status": "ok", "other_status": None, "passed": True, "other_passed": None, "output": "mine",
                   "other_output": None}
    assert gone == {"row": None, "other_row": 1, "q": 2, "row.status": "s", "column": "openai:a", "repeat": 0,
                    "change": "gone", "status": None, "other_status": "failed", "passed": None,
                    "other_passed": False, "output": None, "other_output": ""}


@pytest.mark.parametrize(("before", "now", "change"), [
    (("ok", True, "x"), ("ok", False, "y"), "newly failing"),
    (("ok", True, "x"), ("failed", False, ""), "newly failing"),
    (("ok", False, "x"), ("ok", False, "y"), "changed"),  # failing before and now: not newly
    (("ok", False, "x"), ("ok", True, "y"), "fixed"),
    (("failed", False, ""), ("ok", True, "y"), "fixed"),
    (("skipped", None, ""), ("ok", True, "y"), "changed"),  # never ran before: not fixed
    (("ok", True, "x"), ("ok", True, "y"), "changed"),  # passing both times, another answer
    (("ok", True, "x"), ("skipped", None, ""), "changed"),  # not run now: not failing
])
def test_each_change_gets_its_word(before: tuple[Any, ...], now: tuple[Any, ...], change: str) -> None:
    ev, other = built([(0, "openai:a", 0, *now)], rows=1), built([(0, "openai:a", 0, *before)], rows=1)
    (record,) = diff_records(ev, other)
    assert record["change"] == change


def test_keep_reads_the_grades_back_and_compares_a_named_finished_run_with_the_last(store: RunStore) -> None:
    first = built([(0, "openai:a", 0, "ok", True, "x"), (1, "openai:a", 0, "ok", True, "x")])
    first.name = "cell-1"
    assert keep(first, store, finished=True) is None
    assert first.store_path == str(store.path) and first.changes is None  # nothing kept before it
    store.set_grade("run-1-openai:a-0", False, "wrong")
    second = built([(0, "openai:a", 0, "ok", True, "x"), (1, "openai:a", 0, "ok", False, "y")])
    second.results[0].run_id = None
    second.name = "cell-1"
    assert keep(second, store, finished=True) is None
    assert [(r.human, r.human_note) for r in second.results] == [(None, ""), (False, "wrong")]
    assert second.changes == {"newly_failing": 1, "fixed": 0, "new_rows": 0, "removed_rows": 0, "previous": first.id,
                               "rows": [1], "sentence": "since the last run: 1 newly failing"}
    kept = store.evaluation(second.id)
    assert kept["name"] == "cell-1" and kept["outcomes"]["cells"] == [list(k) for k in _kept(second.results)]
    keep(second, store, finished=True)  # kept again (graded since): still against the one before it
    assert second.changes["previous"] == first.id
    archive, whole = kept["outcomes"]["archive"], document(second)
    assert archive.keys() == whole.keys() and archive["meta"]["id"] == whole["meta"]["id"] == second.id


def test_a_run_cut_short_or_unnamed_is_kept_whole_but_not_under_its_name(store: RunStore) -> None:
    ev = built([(0, "openai:a", 0, "ok", True, "x")])
    ev.name = "cell-2"
    assert keep(ev, store, finished=False) is None
    assert ev.changes is None and store.previous_evaluation("cell-2") is None
    assert store.evaluation(ev.id)["name"] is None and "cells" not in store.evaluation(ev.id)["outcomes"]
    unnamed = built([(0, "openai:a", 0, "ok", True, "x")])
    assert keep(unnamed, store, finished=True) is None and "cells" not in store.evaluation(unnamed.id)["outcomes"]


def test_a_failing_store_costs_a_note_not_the_evaluation(store: RunStore) -> None:
    class Broken:
        path = store.path

        def grades(self, run_ids: list[str]) -> dict[str, Any]:
            raise RuntimeError("disk gone")

    ev = built([(0, "openai:a", 0, "ok", True, "x")])
    assert keep(ev, Broken(), finished=True) == ("the run store could not read the grades or keep the evaluation: "
                                                 "RuntimeError: disk gone")
    assert ev.store_path == str(store.path)
