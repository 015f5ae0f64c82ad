"""The live matrix pages from the kernel (issue 33, item 2): the front end asks for a page (next,
previous, a filter) and the kernel sends only that page; a run ending off the page sends the
progress alone; a grade on any page lands and its page is sent again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.notebook.render.evaluation import PAGE
from ipyagent.notebook.views.evaluation_pages import Pager

from ..support.evaluation import finished_evaluation

#: What a message carries beside the page: the summary, the progress line, the filters' counts.
PROGRESS = ("summary", "progress", "note", "counts")


def _rows(message: dict[str, Any]) -> list[int]:
    return sorted({r["row"] for r in message["doc"]["results"]})


def test_a_page_holds_its_rows_only_and_pages_forward_back_and_by_filter() -> None:
    failing = set(range(3, 300, 3))  # 99 rows: two pages
    pager = Pager(finished_evaluation(300, failing=failing))
    first = pager.message()
    assert first["type"] == "page" and _rows(first) == list(range(PAGE)) and first["page"]["matching"] == 300
    assert first["counts"] == {"all": 300, "failed": len(failing), "disagree": len(failing), "changed": 0}
    assert [s["runs"] for s in first["summary"]] == [300, 300]  # the summary counts every run
    assert first["doc"]["saved"]["results"] == 600 and first["doc"]["saved"]["passed"] == 600 - len(failing)
    assert pager.ask({"type": "page", "start": PAGE, "filter": "all"})
    second = pager.message()
    assert _rows(second) == list(range(PAGE, 2 * PAGE)) and second["page"]["rows"] == list(range(PAGE, 2 * PAGE))
    pager.ask({"type": "page", "start": 0, "filter": "all"})  # previous
    assert _rows(pager.message()) == list(range(PAGE))
    pager.ask({"type": "page", "start": 0, "filter": "failed"})
    failures = pager.message()
    assert _rows(failures) == sorted(failing)[:PAGE] and failures["page"]["matching"] == len(failing)
    assert failures["doc"]["row_flags"]["failed"] == sorted(failing)[:PAGE]
    pager.ask({"type": "page", "start": 10_000, "filter": "disagree"})  # past the end: the last page
    last = pager.message()
    assert last["page"]["start"] == (len(failing) - 1) // PAGE * PAGE and _rows(last) == sorted(failing)[PAGE:]
    assert not pager.ask({"type": "approve"}) and not pager.ask("page")


def test_a_run_ending_off_the_page_sends_the_progress_alone_on_it_the_page() -> None:
    pager = Pager(finished_evaluation(200))
    assert pager.message()["type"] == "page"
    assert pager.message()["type"] == "progress"  # nothing changed
    pager.changed(120)
    off = pager.message()
    assert off["type"] == "progress" and "doc" not in off and off["counts"]["all"] == 200
    pager.changed(7)
    assert pager.message()["type"] == "page"
    pager.ask({"type": "hello"})  # a new view: the page again
    assert pager.message()["type"] == "page"


def test_an_answer_on_a_page_is_a_preview_and_the_rows_fields_come_with_it() -> None:
    ev = finished_evaluation(60, answer=2_000)
    ev.rows.append({"n": 60, "want": "It is 60."})  # a row with no run yet
    pager = Pager(ev)
    pager.ask({"type": "page", "start": PAGE, "filter": "all"})
    message = pager.message()
    assert message["page"]["rows"] == list(range(PAGE, 61))
    assert message["page"]["fields"]["60"] == {"n": 60, "want": "It is 60."}
    assert all(r["text_chars"] == 2_000 and len(r["text"]) < 400 for r in message["doc"]["results"])


class Frames:
    """Stands in for the view's frame timer (`threading.Timer`): a frame is drawn when the test says."""

    def __init__(self) -> None:
        self.due: list[Any] = []

    def Timer(self, wait: float, frame: Any) -> Any:  # noqa: N802 - threading's name
        due = self.due
        return type("Timer", (), {"start": lambda _self: due.append(frame)})()

    def draw(self) -> None:
        while self.due:
            self.due.pop()()


def _sent_bytes(rows: int, monkeypatch) -> tuple[int, int]:
    """(bytes of the pages, bytes of the rest) the live view of `rows` × 2 sends while its runs end
    50 between two frames (as at 500 runs per second), then a page forward and back."""
    import threading

    from ipyagent import Evaluation
    from ipyagent.notebook.views import evaluation_view

    frames = Frames()
    monkeypatch.setattr(evaluation_view, "threading", type("T", (), {"Timer": frames.Timer, "Lock": threading.Lock}))
    done = finished_evaluation(rows)
    ev = Evaluation(done.providers, done.rows, assertions=done.assertions)
    sent: list[dict[str, Any]] = []
    view = evaluation_view.EvaluationView(ev, widgets=True)
    assert view.pager is not None
    monkeypatch.setattr(view.widget, "send", sent.append)
    view._on_msg(view.widget, {"type": "hello"}, [])
    for n, result in enumerate(done.results):
        ev.results.append(result)
        view.update(result)
        if n % 50 == 49:
            frames.draw()
    frames.draw()
    for start in (PAGE, 0):
        view._on_msg(view.widget, {"type": "page", "start": start, "filter": "all"}, [])
    view.finish()
    pages = sum(len(json.dumps({k: v for k, v in m.items() if k not in PROGRESS})) for m in sent)
    rest = sum(len(json.dumps({k: v for k, v in m.items() if k in PROGRESS})) for m in sent)
    return pages, rest


def test_the_live_view_of_3000_rows_sends_at_most_twice_the_bytes_of_50_rows(monkeypatch) -> None:
    from ipyagent.notebook import saved_outputs
    from ipyagent.notebook.saved_outputs import SavedOutputs
    from ipyagent.notebook.views import evaluation_view, transcript_output

    monkeypatch.setattr(saved_outputs, "SAVED", SavedOutputs())
    for module in (evaluation_view, transcript_output):
        monkeypatch.setattr(module, "display", lambda obj, **kw: None, raising=False)
        monkeypatch.setattr(module, "update_display", lambda data, **kw: None, raising=False)
    monkeypatch.setattr(evaluation_view, "FRAME_S", 1e6)  # frames drawn by `Frames` only
    small, _ = _sent_bytes(50, monkeypatch)
    large, _ = _sent_bytes(3000, monkeypatch)
    assert large <= 2 * small, (large, small)
    # The whole matrix sent once would be many times that: the rows are what is counted.
    assert len(json.dumps(finished_evaluation(3000).to_json()["results"])) > 10 * small


@pytest.fixture
def quiet_display(monkeypatch):
    from ipyagent.notebook import saved_outputs
    from ipyagent.notebook.saved_outputs import SavedOutputs
    from ipyagent.notebook.views import evaluation_view, transcript_output

    monkeypatch.setattr(saved_outputs, "SAVED", SavedOutputs())
    for module in (evaluation_view, transcript_output):
        monkeypatch.setattr(module, "display", lambda obj, **kw: None, raising=False)
        monkeypatch.setattr(module, "update_display", lambda data, **kw: None, raising=False)
    monkeypatch.setattr(evaluation_view, "FRAME_S", 0.0)
    return evaluation_view


def test_a_grade_clicked_on_page_2_of_a_live_matrix_is_kept_and_its_page_sent_again(quiet_display, monkeypatch):
    from ipyagent.notebook.grading import grade_request

    ev = finished_evaluation(120)
    view = quiet_display.EvaluationView(ev, widgets=True)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(view.widget, "send", sent.append)
    view._on_msg(view.widget, {"type": "page", "start": PAGE, "filter": "all"}, [])
    answer = grade_request({"evaluation": ev.id, "row": 60, "column": "openai:m1", "passed": False,
                            "note": "wrong"}, store=lambda: None)
    assert answer["ok"], answer
    assert ev.cell(60, "openai:m1").human is False
    graded = [r for r in sent[-1]["doc"]["results"] if r["row"] == 60 and r["column"] == "openai:m1"]
    assert sent[-1]["type"] == "page" and graded[0]["human"] is False and graded[0]["human_note"] == "wrong"
    # A grade off the page shown sends the progress alone.
    grade_request({"evaluation": ev.id, "row": 3, "column": "openai:m0", "passed": True}, store=lambda: None)
    assert sent[-1]["type"] == "progress"


def test_a_background_live_matrix_keeps_paging_after_its_end_a_foreground_one_closes(quiet_display, monkeypatch):
    background = quiet_display.EvaluationView(finished_evaluation(80), widgets=True, background=True, out="run")
    foreground = quiet_display.EvaluationView(finished_evaluation(80), widgets=True)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(background.widget, "send", sent.append)
    background._on_msg(background.widget, {"type": "hello"}, [])
    assert sent[-1]["note"] == "running in the background: run.wait() waits for it, run.cancel() stops it"
    background.finish()
    foreground.finish()
    assert sent[-1]["type"] == "page" and sent[-1]["progress"] == "" and sent[-1]["note"] == ""
    background._on_msg(background.widget, {"type": "page", "start": PAGE, "filter": "all"}, [])
    assert sent[-1]["page"]["rows"] == list(range(PAGE, 80))
    assert foreground.widget.comm is None  # closed: the saved output took its place


def test_the_summary_goes_with_a_page_and_else_at_most_once_a_second() -> None:
    from ipyagent.notebook.views.evaluation_pages import SUMMARY_S

    now = [100.0]
    pager = Pager(finished_evaluation(120), clock=lambda: now[0])
    assert "summary" in pager.message()  # with the first page
    pager.changed(110)
    assert "summary" not in pager.message()  # the progress alone, within the second
    now[0] += SUMMARY_S
    assert [s["runs"] for s in pager.message()["summary"]] == [120, 120]


def test_the_row_index_reads_only_new_runs_and_starts_again_when_the_runs_are_replaced() -> None:
    ev = finished_evaluation(20, failing={3})
    pager = Pager(ev)
    assert pager.message()["counts"]["failed"] == 1
    later = finished_evaluation(20, failing={5, 6})
    ev.results.extend(later.results[:2])  # row 0 again, both passing: nothing new fails
    assert pager.message()["counts"]["failed"] == 1 and len(pager.index.by_row[0]) == 4
    ev.results = later.results  # replaced (a re-run): indexed again from its first run
    assert pager.message()["counts"] == {"all": 20, "failed": 2, "disagree": 2, "changed": 0}
    assert len(pager.index.by_row[0]) == 2


def _varied_runs(seed: int = 7) -> Any:
    """An evaluation (3 rows × 2 providers × 2 variants × 3 repeats) and its runs in the order they
    end: passed, failed and errored runs, skipped and unrendered ones, cached ones, flaky cells,
    costs and times known and not."""
    import random

    from ipyagent.agent import EvalResult, Evaluation

    pick = random.Random(seed)
    ev = Evaluation(["openai:a", "openai:b"], [{"n": n} for n in range(3)], variants=["terse", "long"], repeat=3)
    runs = []
    for row in range(3):
        for provider in ev.providers:
            for variant in ev.variants:
                for repeat in range(3):
                    status = pick.choice(["ok"] * 5 + ["failed", "skipped", "template_error"])
                    ran = status in ("ok", "failed")
                    runs.append(EvalResult(
                        row=row, provider=provider, prompt="p", fields={"n": row}, variant=variant, repeat=repeat,
                        status=status, passed=(status == "ok" and pick.random() < 0.6) if ran else None,
                        cached=pick.random() < 0.3, input_tokens=pick.randrange(50), output_tokens=pick.randrange(9),
                        cost=pick.choice([None, pick.random() / 7]), judge_cost=pick.choice([None, pick.random() / 3]),
                        ttft_s=pick.choice([None, pick.random()]), total_s=pick.choice([None, 1 + pick.random()])))
    pick.shuffle(runs)
    return ev, runs


def test_the_live_summary_counts_on_and_says_what_the_whole_summary_says() -> None:
    from ipyagent.notebook.views.evaluation_pages import LiveSummary, _no_statistics

    ev, runs = _varied_runs()
    live = LiveSummary(ev)
    assert live.records() == ev.summary_records(stats=_no_statistics(ev))  # no run yet
    for start in range(0, len(runs), 5):
        ev.results.extend(runs[start:start + 5])
        live.add(runs[start:start + 5])
        assert live.records() == ev.summary_records(stats=_no_statistics(ev)), start
    assert sum(s["flaky"] for s in live.records()) > 0 and sum(s["skipped"] for s in live.records()) > 0


def test_a_frames_summary_reads_the_runs_ended_since_the_last_not_the_whole_matrix(monkeypatch) -> None:
    from ipyagent import Evaluation
    from ipyagent.notebook.views.evaluation_pages import _no_statistics

    ev, runs = _varied_runs()
    whole = Evaluation.summary_records
    pager = Pager(ev)

    def summary_records(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.results:
            pytest.fail("the summary read every run")
        return whole(self, *args, **kwargs)  # of no runs: the columns' keys

    monkeypatch.setattr(Evaluation, "summary_records", summary_records)
    ev.results.extend(runs[:20])
    pager.ask({"type": "hello"})
    first = pager.message()["summary"]
    ev.results.extend(runs[20:])
    pager.ask({"type": "hello"})
    last = pager.message()["summary"]
    monkeypatch.undo()
    ev.results[:] = runs[:20]
    assert first == ev.summary_records(stats=_no_statistics(ev))
    ev.results[:] = runs
    assert last == ev.summary_records(stats=_no_statistics(ev))


def test_the_live_summary_keeps_each_cells_verdicts_only_when_cells_repeat() -> None:
    from ipyagent.notebook.views.evaluation_pages import LiveSummary

    once = finished_evaluation(200, failing={3, 9})
    live = LiveSummary(once)
    live.add(once.results)
    assert live.verdicts is None and [s["flaky"] for s in live.records()] == [0, 0]
    repeated, runs = _varied_runs()
    live = LiveSummary(repeated)
    live.add(runs)
    assert live.verdicts and set(live.verdicts.values()) <= {1, 2, 3}
