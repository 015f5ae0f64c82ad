"""An evaluation's progress and its background job (`agent/evaluation/background.py`), with a hand-made job
in place of the loop's: the progress line's parts and its times, the rate and what is left, and `done`,
`wait`, `cancel` on a job that has ended, not yet, with an error, or under an interrupt."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from ipyagent import Evaluation
from ipyagent.agent.evaluation import background
from ipyagent.agent.evaluation.background import Progress, _seconds


@pytest.mark.parametrize(("value", "text"), [
    (-3.0, "0 s"), (0.4, "0 s"), (59.4, "59 s"), (59.6, "1 min 00 s"), (60, "1 min 00 s"), (61, "1 min 01 s"),
    (3599, "59 min 59 s"), (3600, "1 h 00 min"), (3600 + 5 * 60 + 59, "1 h 05 min"),
    (2 * 3600 + 59 * 60, "2 h 59 min"), (26 * 3600, "26 h 00 min"),
])
def test_seconds_read_as_seconds_minutes_or_hours(value: float, text: str) -> None:
    assert _seconds(value) == text


def test_the_progress_line_names_the_rate_and_time_left_only_when_known_and_not_ended() -> None:
    assert str(Progress(1234, 5000, 0.5, 1.0, 12.34, 90.0)) == \
        "1,234 / 5,000 runs · 12.3 runs/s · 1 min 30 s left · $0.5 spent"
    assert str(Progress(0, 10, 0.0, 0.0, None, None)) == "0 / 10 runs · $0 spent"
    assert str(Progress(10, 10, 0.0, 2.0, 5.0, 0.0)) == "10 / 10 runs · 5 runs/s · $0 spent"
    assert str(Progress(3, 10, 0.0, 2.0, 1.5, 0.0)) == "3 / 10 runs · 1.5 runs/s · 0 s left · $0 spent"


def test_progress_has_no_rate_before_a_run_nor_at_no_time_and_nothing_left_at_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = SimpleNamespace(monotonic=lambda: 100.0)
    monkeypatch.setattr(background, "time", now)
    ev = Evaluation(["openai:m"], ["a", "b"], started=100.0)
    assert ev.progress == Progress(0, 2, 0.0, 0.0, None, None)
    ev.results = [SimpleNamespace(cost=None, cached=False, judge_cost=0.25, status="ok")]
    assert ev.progress == Progress(1, 2, 0.25, 0.0, None, None)  # no time yet: no rate
    now.monotonic = lambda: 90.0  # a clock behind the start reads as no time
    assert ev.progress.elapsed_s == 0.0
    now.monotonic = lambda: 104.0
    ev.results.append(SimpleNamespace(cost=0.5, cached=True, judge_cost=None, status="ok"))
    assert ev.progress == Progress(2, 2, 0.25, 4.0, 0.5, 0.0)
    ev.results.append(SimpleNamespace(cost=0.5, cached=False, judge_cost=None, status="ok"))  # more than the matrix
    assert ev.progress.eta_s == 0.0 and ev.progress.spent == 0.75


def test_progress_shows_as_its_line_in_ipython() -> None:
    from IPython.lib.pretty import pretty

    p = Progress(12, 300, 0.00312, 3.0, 4.1, 70.0)
    assert pretty(p) == "12 / 300 runs · 4.1 runs/s · 1 min 10 s left · $0.00312 spent"
    assert pretty((False, p)) == "(False, 12 / 300 runs · 4.1 runs/s · 1 min 10 s left · $0.00312 spent)"


def test_an_ended_evaluation_says_stopped_not_the_time_left() -> None:
    cancelled = Progress(52, 60, 0.0, 10.0, 5.2, None, ended=True)
    assert str(cancelled) == "52 / 60 runs · 5.2 runs/s · stopped · $0 spent"
    assert str(Progress(60, 60, 0.0, 10.0, 6.0, 0.0, ended=True)) == "60 / 60 runs · 6 runs/s · $0 spent"
    assert str(Progress(0, 60, 0.0, 0.0, None, None, ended=True)) == "0 / 60 runs · stopped · $0 spent"


def run(status: str = "ok", cost: float | None = None, judge: float | None = None,
        cached: bool = False) -> SimpleNamespace:
    return SimpleNamespace(status=status, cost=cost, judge_cost=judge, cached=cached)


def test_cost_unknown_when_runs_ran_and_none_knew_its_price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "time", SimpleNamespace(monotonic=lambda: 104.0))
    ev = Evaluation(["openai:m"], ["a", "b", "c", "d"], started=100.0)
    assert ev.progress.priced and str(ev.progress).endswith("$0 spent")  # nothing ran yet: nothing spent
    ev.results = [run("skipped"), run("template_error")]  # not sent: no price to know
    assert ev.progress.priced
    ev.results.append(run("ok"))
    assert not ev.progress.priced
    assert str(ev.progress) == "3 / 4 runs · 0.75 runs/s · 1 s left · cost unknown"
    ev.results.append(run("failed"))
    assert not ev.progress.priced and ev.progress.spent == 0.0  # `spent` stays a number
    ev.results = [run("failed"), run("ok", cost=0.0, cached=True)]  # a cached run's price counts as known
    assert ev.progress.priced and str(ev.progress).endswith("$0 spent")
    ev.results = [run("ok", judge=0.01)]  # replaced (shorter): counted anew
    assert ev.progress.priced and ev.progress.spent == 0.01
    ev.results.append(run("ok"))  # some prices known: what they cost
    assert ev.progress.priced and str(ev.progress).endswith("$0.01 spent")


def test_progress_of_a_cancelled_or_interrupted_evaluation_has_no_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "time", SimpleNamespace(monotonic=lambda: 110.0))
    ev = Evaluation(["openai:m"], ["a", "b", "c", "d"], started=100.0)
    ev.results = [run(cost=0.5)]
    assert not ev.progress.ended and ev.progress.eta_s == 30.0
    ev.interrupted = True  # cancelled, its wall time not noted yet
    assert ev.progress.ended and ev.progress.eta_s is None
    assert str(ev.progress) == "1 / 4 runs · 0.1 runs/s · stopped · $0.5 spent"
    ev.interrupted, ev.wall_s = False, 5.0  # ended (an error) before every run did
    assert ev.progress.ended and ev.progress.eta_s is None and ev.progress.rate == 0.2
    ev.results = [run(cost=0.5)] * 4
    assert ev.progress.eta_s == 0.0 and "stopped" not in str(ev.progress)


class Job:
    """A background job: `finished` set when it has ended, its `error`, and the timeouts asked."""

    def __init__(self, ended: bool = False, error: BaseException | None = None) -> None:
        self.finished, self.error, self.cancelled_with = threading.Event(), error, []
        if ended:
            self.finished.set()

    def cancel(self, timeout: float | None) -> bool:
        self.cancelled_with.append(timeout)
        return False


def with_job(job: Any) -> Evaluation:
    ev = Evaluation(["openai:m"], ["a"])
    ev._job = job
    return ev


def test_a_job_is_started_on_the_loop_and_done_once_it_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job()
    monkeypatch.setattr(background, "run_detached", lambda run: job if run == "the run" else None)
    ev = Evaluation(["openai:m"], ["a"])
    assert ev.run_in_background("the run") is ev and ev._job is job
    assert not ev.done and not ev.wait(timeout=0)
    job.finished.set()
    assert ev.done and ev.wait(timeout=0) is True


def test_wait_passes_its_timeout_and_raises_the_jobs_error() -> None:
    waited = []

    class Finished:
        def is_set(self) -> bool:
            return False

        def wait(self, timeout: float | None) -> bool:
            waited.append(timeout)
            return True

    job = SimpleNamespace(finished=Finished(), error=None)
    assert with_job(job).wait() is True and with_job(job).wait(2.5) is True and waited == [None, 2.5]
    job.error = ValueError("no row could be rendered")
    with pytest.raises(ValueError, match="no row could be rendered"):
        with_job(job).wait()


def test_an_interrupt_ends_the_wait_not_the_run_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(timeout: float | None) -> bool:
        raise KeyboardInterrupt

    job = SimpleNamespace(finished=SimpleNamespace(is_set=lambda: False, wait=interrupted), error=None)
    ev = with_job(job)
    assert ev.wait() is False
    assert capsys.readouterr().err == (f"ipyagent: stopped waiting; the evaluation goes on ({ev.progress}); "
                                       "ev.cancel() stops it\n")


def test_wait_on_ipyagents_own_loop_refuses_unless_the_job_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "in_background_loop", lambda: True)
    job = Job()
    with pytest.raises(RuntimeError) as raised:
        with_job(job).wait()
    assert str(raised.value) == ("ev.wait() on ipyagent's own loop would wait for itself; await nothing, "
                                 "read ev.done and ev.progress instead")
    job.finished.set()
    assert with_job(job).wait() is True


def test_cancel_passes_its_timeout_to_the_job_and_says_what_it_said() -> None:
    job = Job()
    assert with_job(job).cancel() is False and with_job(job).cancel(None) is False
    assert job.cancelled_with == [10.0, None]
    assert Evaluation([], []).cancel() is True and Evaluation([], []).wait() is True  # no job: ended


def test_cancel_batches_cancels_this_evaluations_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    ev = Evaluation([], [])
    monkeypatch.setattr(background, "cancel_batches", lambda of: ["b1"] if of is ev else [])
    assert ev.cancel_batches() == ["b1"]
