"""An evaluation's saved output has a bounded size (issue 33, item 1): the summary and statistics
whole, the matrix's rows chosen failing first, then disagreeing, flaky, changed, the rest, until
`eval_output_max` is spent; each answer a 300-character preview; one line saying what is left out."""

from __future__ import annotations

import datetime
import decimal
import json

import nbformat
import pytest

from ipyagent.notebook.render.evaluation import MIME_TYPE, bundle, headline, saved_output
from ipyagent.notebook.render.evaluation_saved import (DEFAULT_OUTPUT_MAX, FIRST_GUESS, PREVIEW, plain, preview,
                                                       row_order, stored_size)

from ..support.evaluation import finished_evaluation

def _doc(**flags) -> dict:
    results = [{"row": n, "status": "ok", "passed": True} for n in range(8)]
    return {"results": results, "flaky": flags.pop("flaky", []), "row_flags": flags}


def test_rows_are_chosen_failing_then_disagreeing_flaky_changed_then_the_rest_in_order() -> None:
    doc = _doc(failed=[6, 2], disagree=[5, 2], changed=[1, 7], flaky=[[4, "a"], [3, "b"], [4, "b"]])
    assert row_order(doc) == [6, 2, 5, 3, 4, 1, 7, 0]
    # Each group counts on its own: without failures, disagreements lead; without any flag, row order.
    assert row_order(_doc(disagree=[5], changed=[1]))[:2] == [5, 1]
    assert row_order(_doc(flaky=[[3, "a"]], changed=[1]))[:2] == [3, 1]
    assert row_order(_doc()) == list(range(8))


def test_what_json_cannot_hold_is_made_plain_and_the_kernels_data_is_left_as_it_is() -> None:
    """A DataFrame's row brings dates, Decimals, numpy numbers, sets, bytes and NaN: the saved output and
    the live pages take them as text, numbers, lists and null (json.dumps once raised on a date)."""
    np = pytest.importorskip("numpy")
    row = {"when": datetime.datetime(2020, 1, 2, 3, 4), "day": datetime.date(2020, 1, 2),
           "price": decimal.Decimal("1.50"), "n": np.int64(3), "x": np.float64(2.5), "flag": np.bool_(True),
           "tags": {"b", "a"}, "raw": b"xy", "gap": float("nan"), "far": float("inf"), "nested": [{"d": np.int32(1)}],
           "text": "plain", "none": None}
    got = plain({"fields": row})["fields"]
    assert got == {"when": "2020-01-02 03:04:00", "day": "2020-01-02", "price": "1.50", "n": 3, "x": 2.5, "flag": True,
                   "tags": ["a", "b"], "raw": "b'xy'", "gap": None, "far": None, "nested": [{"d": 1}],
                   "text": "plain", "none": None}
    assert type(got["n"]) is int and type(got["flag"]) is bool
    json.dumps(got, allow_nan=False)
    assert isinstance(row["when"], datetime.datetime) and row["tags"] == {"a", "b"}  # the kernel's own, untouched


def test_an_answer_is_kept_as_its_first_300_characters_with_its_length() -> None:
    long = {"row": 0, "text": "x" * 1000, "prompt": "p" * 301, "error": None,
            "outcomes": [{"name": "judge:a", "passed": False, "reason": "r" * 500}]}
    cut = preview(long)
    assert cut["text"] == "x" * PREVIEW + "…" and cut["text_chars"] == 1000
    assert cut["prompt"] == "p" * PREVIEW + "…" and cut["prompt_chars"] == 301
    assert cut["outcomes"][0]["reason"] == "r" * PREVIEW + "…" and "error_chars" not in cut
    assert long["text"] == "x" * 1000  # the kernel's own data is left whole
    short = {"row": 0, "text": "x" * PREVIEW, "prompt": "p", "outcomes": []}
    assert preview(short) is short


def test_3000_rows_by_2_stay_under_the_limit_with_every_failing_row_and_a_note() -> None:
    failing = set(range(7, 3000, 97))
    ev = finished_evaluation(3000, failing=failing, answer=400)
    data, _ = bundle(ev, name="results")
    assert stored_size(data) <= DEFAULT_OUTPUT_MAX
    # As the notebook file stores it: one cell with this output stays within the budget too.
    output = nbformat.from_dict(saved_output(ev))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%compare", outputs=[output])])
    assert len(nbformat.writes(nb).encode()) <= DEFAULT_OUTPUT_MAX + 2_000
    doc = data[MIME_TYPE]
    shown = {r["row"] for r in doc["results"]}
    assert failing <= shown and 50 < len(shown) < 3000
    # The rest in order: the rows shown beside the failing ones are the first rows.
    assert shown - failing == set(sorted(set(range(3000)) - failing)[:len(shown - failing)])
    assert all(r["text_chars"] == 400 and len(r["text"]) == PREVIEW + 1 for r in doc["results"])
    # The summary, the statistics and the headline count every run.
    assert [s["runs"] for s in doc["summary"]] == [3000, 3000] and doc["comparisons"]
    assert headline(doc).startswith("2 providers × 3000 rows: 6000 of 6000 runs, "
                                    f"{6000 - len(failing)} passed")
    note = doc["saved"]["note"]
    assert note.startswith(f"{len(shown):,} of 3,000 rows shown") and f"{3000 - len(shown):,} rows not shown" in note
    assert "results.to_dataframe()" in note and 'results.export("results.jsonl")' in note and ev.id in note
    for mime in ("text/html", "text/markdown", "text/plain"):
        assert f"{3000 - len(shown):,} rows not shown" in data[mime]


def test_the_limit_is_filled_and_a_smaller_one_keeps_fewer_rows() -> None:
    ev = finished_evaluation(600, failing={3, 300}, answer=200)
    sizes = {}
    for limit in (60_000, 200_000):
        data, _ = bundle(ev, limit=limit)
        sizes[limit] = stored_size(data), len({r["row"] for r in data[MIME_TYPE]["results"]})
        assert {3, 300} <= {r["row"] for r in data[MIME_TYPE]["results"]}
        assert 0.9 * limit < sizes[limit][0] <= limit  # filled, not just under
    assert sizes[60_000][1] < sizes[200_000][1] < 600


def test_a_limit_below_the_summary_keeps_the_summary_and_says_no_row_is_shown() -> None:
    data, _ = bundle(finished_evaluation(40, answer=50), limit=1_000)
    doc = data[MIME_TYPE]
    assert doc["results"] == [] and len(doc["summary"]) == 2
    assert doc["saved"]["note"].startswith("0 of 40 rows shown")


def test_a_small_evaluation_is_saved_whole_without_a_note() -> None:
    data, _ = bundle(finished_evaluation(5, failing={1}))
    doc = data[MIME_TYPE]
    assert len(doc["results"]) == 10 and doc["saved"]["note"] == ""
    assert "ipyagent-eval-saved" not in data["text/html"]
    cut, _ = bundle(finished_evaluation(5, answer=PREVIEW + 20))
    assert cut[MIME_TYPE]["saved"]["note"].startswith("every row shown, answers cut to their first 300 characters")
    assert f"the first {PREVIEW} of {PREVIEW + 20} characters" in cut["text/html"]


def test_a_document_saved_before_the_limit_still_draws_its_headline() -> None:
    doc = json.loads(json.dumps(finished_evaluation(3, failing={0}).to_json()))
    assert "saved" not in doc
    assert headline(doc).startswith("2 providers × 3 rows: 6 of 6 runs, 5 passed")


@pytest.mark.parametrize("setting, expected", [("eval_output_max=200kB", 200_000), ("eval_output_max=2MB", 2_000_000)])
def test_eval_output_max_is_a_session_setting(ip, setting, expected, capsys) -> None:
    ip.run_line_magic("agent", f"settings {setting}")
    try:
        assert "eval_output_max=" in capsys.readouterr().out
        session = ip.magics_manager.registry["AgentMagics"].session
        assert session.eval_output_max == expected
    finally:
        ip.run_line_magic("agent", "settings eval_output_max=1MB")


def test_eval_output_max_below_the_least_is_refused(ip) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="eval_output_max takes 10"):
        ip.run_line_magic("agent", "settings eval_output_max=5kB")


#: A key in the environment while the saved output is made; the answers of some rows quote it.
KEY = "sk-saved-output-test-0123456789abcdef"


def _quoting_key(rows: int, monkeypatch) -> object:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ev = finished_evaluation(rows, failing=set(range(0, rows, 7)), answer=400)
    for r in ev.results[::5]:
        r.text = f"{r.text[:150]}{KEY}{r.text[150:]}"  # across the preview's cut for some: masked whole
    return ev


def test_the_saved_output_is_the_whole_evaluation_redacted_then_cut(monkeypatch) -> None:
    from ipyagent.core import MASK, redact_data
    from ipyagent.notebook.render.evaluation import render_data
    from ipyagent.notebook.render.evaluation_saved import fit

    for rows, limit in ((40, DEFAULT_OUTPUT_MAX), (3000, 60_000)):
        ev = _quoting_key(rows, monkeypatch)
        data, _ = bundle(ev, limit=limit)
        assert data == fit(redact_data(ev.to_json()), render_data, limit), rows
        assert KEY not in json.dumps(data) and MASK in json.dumps(data[MIME_TYPE]["results"])


def test_the_runs_of_rows_no_render_tries_are_not_redacted(monkeypatch) -> None:
    from ipyagent.notebook.render import evaluation

    ev = _quoting_key(3000, monkeypatch)
    redacted: set[int] = set()  # the rows whose runs went through the redactor
    whole = evaluation.redact_data

    def redact_data(value, *args):
        for run in ([value] if "row" in value else value.get("results") or []):
            redacted.add(run["row"])
        return whole(value, *args)

    monkeypatch.setattr(evaluation, "redact_data", redact_data)
    data, _ = bundle(ev, limit=60_000)
    shown = {r["row"] for r in data[MIME_TYPE]["results"]}
    # The rows shown, and those of the first guess (`FIRST_GUESS` rows) that did not fit; not 3,000.
    assert 0 < len(shown) < FIRST_GUESS and shown <= redacted and len(redacted) <= FIRST_GUESS
