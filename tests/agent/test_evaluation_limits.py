"""The checks' time limits (`agent/evaluation/checks/limits.py`) on hand-made searches and functions: a
search's inline try and its thread, the limits each is given, the invalid patterns' message, and the
`Stoppable` threads (a value, an error, a thread kept for the next call, one stopped when its caller gives
up, the idle ones ended by `close`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ipyagent.agent.evaluation.checks import limits
from ipyagent.agent.evaluation.checks.limits import CHECK_TIMEOUT_S, INLINE_S, Stoppable, compile_pattern, search


class Search:
    """A compiled pattern whose searches answer, in turn, what `answers` holds (an exception is raised;
    an Event is waited on, then nothing is found)."""

    def __init__(self, *answers: Any) -> None:
        self.answers, self.calls = list(answers), []

    def search(self, text: str, **options: Any) -> Any:
        self.calls.append((text, options))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, threading.Event):
            answer.wait(10)
            return None
        return answer


def test_the_limits_defaults() -> None:
    assert (INLINE_S, CHECK_TIMEOUT_S) == (0.005, 1.0)


def test_a_search_answered_inline_never_reaches_a_thread() -> None:
    found = Search(object())
    assert asyncio.run(search(found, "text", 1.0)) is True
    assert found.calls == [("text", {"timeout": INLINE_S})]
    missed = Search(None)
    assert asyncio.run(search(missed, "text", 0.001)) is False
    assert missed.calls == [("text", {"timeout": 0.001})]  # a limit under INLINE_S is the inline one


def test_a_limit_within_the_inline_try_gives_up_with_it() -> None:
    for limit in (0.001, INLINE_S):
        timed_out = Search(TimeoutError())
        assert asyncio.run(search(timed_out, "text", limit)) is None and len(timed_out.calls) == 1


def test_a_slow_search_goes_on_in_a_thread_for_the_rest_of_its_limit() -> None:
    for answer, expected in ((object(), True), (None, False), (TimeoutError(), None)):
        slow = Search(TimeoutError(), answer)
        assert asyncio.run(search(slow, "text", 1.0)) is expected
        (_, inline), (text, threaded) = slow.calls
        assert inline == {"timeout": INLINE_S} and text == "text"
        assert threaded == {"concurrent": True, "timeout": pytest.approx(1.0 - INLINE_S)}


def test_the_caller_stops_waiting_at_the_limit() -> None:
    release = threading.Event()
    stuck = Search(TimeoutError(), release)

    async def go() -> Any:
        try:
            return await search(stuck, "text", INLINE_S + 0.02)
        finally:
            release.set()  # the thread ends, so the loop's executor can shut down

    assert asyncio.run(go()) is None and not stuck.answers


def test_an_invalid_pattern_is_a_value_error_quoting_the_engine() -> None:
    assert compile_pattern("Par.s").search("Paris")
    with pytest.raises(ValueError, match=r"^not a valid pattern \(missing \)") as caught:
        compile_pattern("Lim(a")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(ValueError, match=r"^not a valid pattern \("):
        compile_pattern(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^not a valid pattern \("):
        compile_pattern("a{99999999999999999999}")


def test_a_stoppable_call_returns_its_value_or_raises_its_error_and_keeps_its_thread() -> None:
    stoppable = Stoppable()

    async def go() -> None:
        first = await stoppable.call(lambda a, b: (threading.current_thread(), a + b), 2, 3)
        thread, total = first
        assert total == 5 and thread is not threading.current_thread()
        assert thread.daemon and thread.name == "ipyagent-check"

        def fail() -> None:
            raise KeyError("no")

        with pytest.raises(KeyError, match="no"):
            await stoppable.call(fail)
        again, _ = await stoppable.call(lambda: (threading.current_thread(), None))
        assert again is thread  # one thread served all three calls
        assert stoppable._idle == [thread]

    asyncio.run(go())
    thread = stoppable._idle[0]
    stoppable.close()
    thread.join(10)
    assert not thread.is_alive() and stoppable._idle == []


def test_two_calls_at_once_take_two_threads() -> None:
    stoppable = Stoppable()
    both = threading.Barrier(2)

    def meet() -> threading.Thread:
        both.wait(10)
        return threading.current_thread()

    async def go() -> list[threading.Thread]:
        return list(await asyncio.gather(stoppable.call(meet), stoppable.call(meet)))

    one, two = asyncio.run(go())
    assert one is not two and sorted(map(id, stoppable._idle)) == sorted(map(id, (one, two)))
    stoppable.close()


def test_a_call_given_up_stops_its_thread_and_is_not_kept() -> None:
    stoppable = Stoppable()
    entered, threads, got = threading.Event(), [], []

    def spin() -> None:
        threads.append(threading.current_thread())
        entered.set()
        try:
            while True:
                pass
        except BaseException as exc:
            got.append(type(exc))
            raise

    async def go() -> None:
        task = asyncio.ensure_future(stoppable.call(spin))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    (thread,) = threads
    thread.join(10)
    assert not thread.is_alive() and thread.retired and stoppable._idle == [] and got == [limits.CheckStopped]


def test_a_worker_woken_without_a_job_waits_for_the_next() -> None:
    worker = limits._Worker()
    assert worker.job is None and worker.retired is False and not worker.wake.is_set()
    answers = []

    class Wake(threading.Event):
        """Woken at once each time; the second time, a job is there (run on this thread)."""

        waits = 0

        def wait(self, timeout: float | None = None) -> bool:
            self.waits += 1
            if self.waits == 2:
                worker.job = (lambda: 7, lambda value, error: answers.append((value, error)))
            if self.waits == 3:
                worker.retired = True
            return True

    worker.wake = Wake()
    worker.run()  # not started: the loop runs here until it is retired
    assert answers == [(7, None)] and worker.wake.waits == 3 and worker.job is None


def test_a_worker_passes_on_a_check_s_error_and_ends_on_a_late_stop() -> None:
    worker = limits._Worker()
    answers = []

    def fail() -> None:
        raise KeyError("x")

    def late(value: Any, error: BaseException | None) -> None:
        answers.append((value, type(error)))
        raise limits.CheckStopped  # the stop came after the call: the thread ends quietly

    worker.job = (fail, late)
    worker.wake.set()
    worker.run()
    assert answers == [(None, KeyError)]


def test_stopping_a_worker_never_started_only_retires_it() -> None:
    worker = limits._Worker()
    worker.stop()
    assert worker.retired and worker.wake.is_set() and worker.ident is None
