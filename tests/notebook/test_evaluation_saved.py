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


def _mixed(rows: int) -> object:
    """2 providers × 2 variants × 2 repeats over `rows` rows, built without a server: failing and
    disagreeing rows, flaky cells, errors, skipped and unrendered runs, cached runs, grades,
    changed rows, long answers (some quoting `KEY`), a date among the fields, unicode."""
    from ipyagent.agent import EvalResult, Evaluation
    from ipyagent.agent.evaluation.checks import Outcome

    check = "contains:{{ row.want }}"
    providers, variants = ["openai:m0", "openai:m1"], ["terse", "steps"]
    fields = [{"n": n, "want": f"It is {n}.", "when": datetime.date(2026, 1, 1 + n % 28), "é": "ü"}
              for n in range(rows)]
    ev = Evaluation(providers, fields, assertions=[check], variants=variants, repeat=2, seed=7)
    for n, row in enumerate(fields):
        for c, (provider, variant) in enumerate((p, v) for p in providers for v in variants):
            for repeat in range(2):
                ok = not (n % 4 == 1 and c == 3) and not (n % 5 == 3 and c == 0 and repeat == 1)
                text = (f"It is {n}." if ok else "No idea.").ljust(40 + 37 * (n % 13), "·")
                text = f"{text[:150]}{KEY}{text[150:]}" if n % 5 == 0 and len(text) > 150 else text
                r = EvalResult(row=n, provider=provider, variant=variant, repeat=repeat, prompt=f"What is {n}?",
                               fields=row, text=text, passed=ok, cached=n % 3 == 0, run_id=f"r{n}-{c}-{repeat}",
                               outcomes=[Outcome(check, ok, reason=None if ok else "not there " * (n % 40))],
                               total_s=0.05, input_tokens=10, output_tokens=5, cost=0.001)
                if n % 6 == 2 and c == 1:
                    r.status, r.passed, r.text, r.outcomes = "failed", False, "", []
                    r.error_type, r.error = "RateLimitError", "429 " * 100
                elif n % 7 == 4 and c == 2 and repeat:
                    r.status, r.passed, r.error_type, r.error = "skipped", None, "budget", "over the budget"
                elif n % 9 == 5 and c == 0:
                    r.status, r.passed, r.error_type, r.error = "template_error", None, "TemplateError", "no field"
                if n % 3 == 0 and repeat == 0:
                    r.human, r.human_note = n % 2 == 0, "looked at it"
                ev.results.append(r)
    ev.results.reverse()  # in the order they ended: not the matrix's
    ev.changes = {"newly_failing": 2, "fixed": 1, "new_rows": 0, "removed_rows": 0, "previous": "e0",
                  "sentence": "since the last run: 2 newly failing, 1 fixed", "rows": [4, 6, 8]}
    return ev


def _bundle_before(ev, limit: int, name: str = "ev") -> tuple[dict, dict]:
    """`bundle` as it was before it asked for the runs of the rows it keeps only: from `to_json`."""
    from ipyagent.core import redact_data
    from ipyagent.core.redact import current_forms
    from ipyagent.notebook.render.evaluation import render_data
    from ipyagent.notebook.render.evaluation_saved import fit

    doc = ev.to_json()
    forms = current_forms()
    head = plain(redact_data({key: value for key, value in doc.items() if key != "results"}, forms))
    doc = {key: doc["results"] if key == "results" else head[key] for key in doc}
    done: dict[int, dict] = {}

    def kept(run: dict) -> dict:
        if id(run) not in done:
            done[id(run)] = preview(plain(redact_data(run, forms)))
        return done[id(run)]

    return fit(doc, render_data, limit, name, kept), {"ipyagent": {"evaluation": {"id": doc["id"]}}}


@pytest.mark.parametrize("rows, limit, shown", [(12, DEFAULT_OUTPUT_MAX, 12), (400, DEFAULT_OUTPUT_MAX, 50),
                                                (400, 120_000, 5), (400, 10_000, 0)])
def test_the_saved_output_is_what_the_whole_document_made_byte_for_byte(rows, limit, shown, monkeypatch) -> None:
    """The saved output builds the runs of the rows it keeps only (issue 33): what it saves is what
    it saved when it built every run's dict then kept the rows that fit, to the byte."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ev = _mixed(rows)
    data, metadata = bundle(ev, limit=limit, name="mixed")
    before, before_metadata = _bundle_before(ev, limit, "mixed")
    assert json.dumps(data) == json.dumps(before) and metadata == before_metadata
    doc = data[MIME_TYPE]
    assert KEY not in json.dumps(data) and doc["row_flags"]["changed"] == [4, 6, 8] and doc["flaky"]
    statuses = {r["status"] for r in doc["results"]}
    assert statuses == {"ok", "failed", "skipped", "template_error"} if shown >= 12 else len(statuses) < 4
    assert doc["saved"]["rows_shown"] == shown and doc["saved"]["rows"] == rows


def test_only_the_runs_of_the_rows_renders_try_are_built(monkeypatch) -> None:
    """At 3,000 × 2 with room for a few rows, the runs' dicts are made for the rows the renders try
    (the first guess's `FIRST_GUESS` rows at most), each once: not all 6,000 (`to_json` made them all)."""
    from ipyagent.agent import EvalResult

    ev = finished_evaluation(3000, failing=set(range(0, 3000, 7)), answer=400)
    made: list[int] = []
    whole = EvalResult.to_dict

    def to_dict(self):
        made.append(self.row)
        return whole(self)

    monkeypatch.setattr(EvalResult, "to_dict", to_dict)
    data, _ = bundle(ev, limit=60_000)
    shown = {r["row"] for r in data[MIME_TYPE]["results"]}
    assert 0 < len(shown) < FIRST_GUESS and shown <= set(made)
    assert len(made) == len(set(made)) * 2 <= FIRST_GUESS * 2
