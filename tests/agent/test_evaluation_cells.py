"""One cell of the matrix (`agent/evaluation/cells.py`) built by hand, without a server: a fake clock, agents,
writer, store and checks: what a run, a cached run and a run never sent copy into the cell, its record for the
store, a judge's run (its lane, its cache, its record), each check under the run's deadline, and the rates."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation import cells
from ipyagent.agent.evaluation.cells import CellRuns
from ipyagent.agent.evaluation.checks import (
    Assertion,
    CheckError,
    JsonAssertion,
    JudgeAssertion,
    Outcome,
    TextAssertion,
)
from ipyagent.core import ProviderError, Usage
from ipyagent.core.events import TextDelta

RUN_ID = "0123456789ab"


class Clock:
    """`cells.time` with a monotonic clock that moves by `step` at each reading."""

    def __init__(self, start: float = 100.0, step: float = 0.0) -> None:
        self.now, self.step, self.reads = start, step, 0

    def monotonic(self) -> float:
        value = self.now
        self.now += self.step
        self.reads += 1
        return value


class Writer:
    """`CacheWriter` as the cell sees it: each `add`'s keywords, a future-like token back."""

    def __init__(self) -> None:
        self.added: list[dict[str, Any]] = []
        self.flushes = 0

    def add(self, **kw: Any) -> Any:
        self.added.append(kw)
        return f"commit {len(self.added)}"

    def flush(self) -> None:
        self.flushes += 1


class Budget:
    def __init__(self) -> None:
        self.added: list[Any] = []

    def add(self, cost: Any) -> None:
        self.added.append(cost)


class Host(CellRuns):
    """The part of `matrix._Run` a cell uses, set by hand."""

    def __init__(self, assertions: list[Any] | None = None, **more: Any) -> None:
        self.ev = Evaluation(["openai:a"], [{"q": 0}])
        self.assertions = assertions or []
        self.check_timeout, self.concurrency, self.cache, self.store = 5.0, 2, True, None
        self.writer, self.budget = Writer(), Budget()
        self.claimed: set[str] = set()
        self.owned: list[Any] = []
        self.judge_factory: Any = None
        self.judge_lanes: dict[str, Any] = {}
        self.on_result: Any = None
        self.run_options: dict[str, Any] = {}
        self.fresh: list[Any] = []
        self.__dict__.update(more)

    def _key(self, agent: Any, prompt: str) -> str:
        return f"{agent.provider}|{prompt}"

    def _fresh(self, agent: Any) -> Any:
        self.fresh.append(agent)
        return agent


def cell(provider: str = "openai:a", prompt: str = "q?") -> EvalResult:
    return EvalResult(0, provider, prompt, {"q": 0})


def answer(text: str = "hi", **more: Any) -> SimpleNamespace:
    """An `AgentResult` as a cell reads it."""
    fields: dict[str, Any] = {"text": text, "output": None, "usage": Usage(input_tokens=3, output_tokens=4),
                              "cost": None, "tool_calls": [], "error": None, "interrupted": False, "ok": True}
    fields.update(more)
    return SimpleNamespace(**fields)


# -- filling a cell ---------------------------------------------------------------------


def test_a_runs_answer_is_copied_into_its_cell() -> None:
    done = SimpleNamespace(to_text=lambda: "r" * 600)
    calls = [SimpleNamespace(native_name="read", input={"p": 1}, output=done),
             SimpleNamespace(native_name="list", input={}, output=None)]
    result = answer("Paris", output={"a": 1}, cost=2, tool_calls=calls)
    c = cell()
    cells._fill(c, result, None, 1.5, 0.25)
    assert (c.text, c.output, c.input_tokens, c.output_tokens, c.total_s, c.ttft_s) == ("Paris", {"a": 1}, 3, 4, 1.5,
                                                                                        0.25)
    assert c.cost == 2.0 and isinstance(c.cost, float)
    assert c.tool_calls == [{"name": "read", "input": {"p": 1}, "output": "r" * 500},
                            {"name": "list", "input": {}, "output": None}]
    assert (c.status, c.error_type, c.error) == ("ok", None, None)
    empty = cell()
    cells._fill(empty, answer(), None, 1.0, None)
    assert empty.tool_calls == () and empty.ttft_s is None and empty.cost is None


def test_a_runs_error_or_interruption_fails_its_cell_and_an_exception_says_what_it_was() -> None:
    error = SimpleNamespace(type="rate_limit", message="slow down")
    failed = cell()
    cells._fill(failed, answer("", error=error, interrupted=True), None, 1.0, None)
    assert (failed.status, failed.error_type, failed.error) == ("failed", "rate_limit", "slow down")
    stopped = cell()
    cells._fill(stopped, answer("part", interrupted=True), None, 1.0, None)
    assert (stopped.status, stopped.error_type, stopped.error, stopped.text) == ("failed", "cancelled", "interrupted",
                                                                                 "part")
    refused = cell()
    cells._fill(refused, None, ProviderError("auth", "no key"), 0.5, None)
    assert (refused.status, refused.error_type, refused.error, refused.total_s) == ("failed", "auth", "no key", 0.5)
    assert refused.text == "" and refused.input_tokens == 0
    bad = cell()
    cells._fill(bad, answer("x", error=error), ValueError(""), 0.0, None)  # the exception's word wins
    assert (bad.status, bad.error_type, bad.error) == ("failed", "ValueError", "ValueError")
    said = cell()
    cells._fill(said, None, OSError("gone"), 0.0, None)
    assert (said.error_type, said.error) == ("OSError", "gone")
    nothing = cell()
    cells._fill(nothing, None, None, 2.0, 1.0)
    assert (nothing.status, nothing.error_type, nothing.total_s, nothing.ttft_s) == ("ok", None, 2.0, 1.0)


def test_a_cost_is_a_float_or_none() -> None:
    assert cells._cost(None) is None and cells._cost(SimpleNamespace()) is None
    assert cells._cost(SimpleNamespace(cost=None)) is None
    assert cells._cost(SimpleNamespace(cost=0)) == 0.0 and isinstance(cells._cost(SimpleNamespace(cost=1)), float)


class Answer(BaseModel):
    city: str


def stored(**meta: Any) -> dict[str, Any]:
    return {"id": RUN_ID, "metadata": meta, "usage": {"input_tokens": 7, "output_tokens": 9}, "cost": 0.5,
            "duration_s": 3.0}


def test_a_stored_run_is_copied_into_its_cell_its_output_read_with_the_schema() -> None:
    c = cell()
    tools = [{"name": "read", "input": {}, "output": "x"}]
    cells._from_cache(c, stored(text="Paris", output={"city": "Paris"}, ttft_s=0.5, tool_calls=tools), Answer)
    assert c.cached is True and c.run_id == RUN_ID and c.text == "Paris" and c.output == Answer(city="Paris")
    assert (c.input_tokens, c.output_tokens, c.cost, c.total_s, c.ttft_s) == (7, 9, 0.5, 3.0, 0.5)
    assert c.tool_calls == tools
    bare = cell()
    cells._from_cache(bare, {"id": RUN_ID, "metadata": None, "usage": None}, Answer)
    assert (bare.text, bare.output, bare.input_tokens, bare.cost, bare.total_s, bare.ttft_s) == ("", None, 0, None,
                                                                                                  None, None)
    assert bare.tool_calls == () and bare.cached is True
    none = cell()
    cells._from_cache(none, {"id": RUN_ID, "metadata": {"text": None, "tool_calls": []}}, None)
    assert none.text == "" and none.tool_calls == ()


def test_a_stored_output_the_schema_does_not_read_or_no_model_schema_is_kept_as_stored() -> None:
    c = cell()
    cells._from_cache(c, stored(output={"town": "Paris"}), Answer)  # the schema changed shape
    assert c.output == {"town": "Paris"}
    for schema in ({"type": "object"}, dict, SimpleNamespace(model_validate=lambda value: "read"), None):
        kept = cell()
        cells._from_cache(kept, stored(output={"city": "Paris"}), schema)
        assert kept.output == {"city": "Paris"}, schema
    read: list[Any] = []

    class Model:
        @classmethod
        def model_validate(cls, value: Any) -> Any:
            read.append(value)
            return "read"

    empty = cell()
    cells._from_cache(empty, stored(output=None), Model)
    assert empty.output is None and read == []
    falsy = cell()
    cells._from_cache(falsy, stored(output=0), Model)
    assert falsy.output == "read" and read == [0]


def test_the_rates_are_the_price_of_a_million_tokens_each_way_or_zeros() -> None:
    def price(usage: Usage) -> Any:
        if usage.input_tokens == 1_000_000 and not usage.output_tokens:
            return 3
        if usage.output_tokens == 1_000_000 and not usage.input_tokens:
            return 12
        raise AssertionError(usage)

    rates = cells._rates(SimpleNamespace(driver=SimpleNamespace(price=price)))
    assert rates == (3 / 1_000_000, 12 / 1_000_000) and all(isinstance(r, float) for r in rates)

    def unknown(which: str) -> Any:
        return lambda usage: None if getattr(usage, which) else 1.0

    assert cells._rates(SimpleNamespace(driver=SimpleNamespace(price=unknown("input_tokens")))) == (0.0, 0.0)
    assert cells._rates(SimpleNamespace(driver=SimpleNamespace(price=unknown("output_tokens")))) == (0.0, 0.0)

    def failing(usage: Usage) -> Any:
        raise KeyError("no price")

    assert cells._rates(SimpleNamespace(driver=SimpleNamespace(price=failing))) == (0.0, 0.0)


# -- verdicts ---------------------------------------------------------------------------


def test_a_cells_verdict_is_all_its_checks_and_its_judges_cost_their_sum() -> None:
    c = cell()
    outcomes = [Outcome("a", True, cost=0.25), Outcome("b", True), Outcome("c", True, cost=0.5)]
    cells._conclude(c, outcomes)
    assert c.outcomes == outcomes and c.outcomes is not outcomes and c.passed is True and c.judge_cost == 0.75
    free = cell()
    cells._conclude(free, [Outcome("a", True, cost=0.0), Outcome("b", False)])
    assert free.judge_cost == 0.0 and free.passed is False
    unjudged = cell()
    cells._conclude(unjudged, [Outcome("a", True)])
    assert unjudged.judge_cost is None and unjudged.passed is True
    none = cell()
    cells._conclude(none, [])
    assert none.outcomes == [] and none.passed is True and none.judge_cost is None


def test_only_text_checks_answering_at_once_are_checked_at_once() -> None:
    class Own(TextAssertion):
        async def check(self, result: Any, row: Any) -> Any:
            return await super().check(result, row)

    text = [TextAssertion("contains", "a"), TextAssertion("icontains", "b"), TextAssertion("equals", "c")]
    assert cells.checked_at_once(text) and cells.checked_at_once([])
    assert not cells.checked_at_once([*text, TextAssertion("regex", "b")])
    assert not cells.checked_at_once([Own("contains", "a"), *text])
    assert not cells.checked_at_once([*text, JsonAssertion()])  # instant, yet not a text check


class Check(Assertion):
    """A check that says when it ran, answering `passed` (or waiting forever when None)."""

    def __init__(self, name: str, passed: bool | None = True, *, instant: bool = False, bounded: bool = False) -> None:
        self.name, self.passed, self.instant, self.bounded = name, passed, instant, bounded
        self.seen: list[tuple[Any, Any]] = []

    async def check(self, result: Any, row: Any) -> Outcome:
        self.seen.append((result, row))
        return Outcome(self.name, bool(self.passed))


class WaitFor:
    """`cells.asyncio` with a `wait_for` that records its limit (and times out when told)."""

    Semaphore = asyncio.Semaphore

    def __init__(self, times_out: bool = False) -> None:
        self.limits: list[float] = []
        self.times_out = times_out

    async def wait_for(self, awaitable: Any, limit: float) -> Any:
        self.limits.append(limit)
        if self.times_out:
            awaitable.close()
            raise TimeoutError
        return await awaitable


ROW = {"q": 0}


def outcome(monkeypatch, check: Assertion, end: float, *, times_out: bool = False, of: Any = None) -> Any:
    """(`check`'s outcome on the cell `of` at 100 s on the clock, the limits `wait_for` was given)."""
    monkeypatch.setattr(cells, "time", Clock(100.0))
    waits = WaitFor(times_out)
    monkeypatch.setattr(cells, "asyncio", waits)
    got = asyncio.run(Host()._outcome(check, of or cell(), ROW, end))
    return got, waits.limits


def test_an_instant_check_runs_even_past_the_deadline_without_a_limit(monkeypatch) -> None:
    check, c = Check("i", instant=True), cell()
    got, limits = outcome(monkeypatch, check, 50.0, of=c)
    assert got == Outcome("i", True) and limits == [] and check.seen == [(c, ROW)]


def test_a_bounded_check_keeps_its_own_limit_while_it_fits_else_the_deadline_stops_it(monkeypatch) -> None:
    check, c = Check("b", bounded=True), cell()
    assert outcome(monkeypatch, check, 105.0, of=c) == (Outcome("b", True), [])  # exactly one check timeout left
    assert check.seen == [(c, ROW)]
    assert outcome(monkeypatch, check, 104.5, of=c) == (Outcome("b", True), [4.5])
    assert check.seen == [(c, ROW)] * 2


def test_a_check_with_no_time_left_fails_unrun_and_one_past_its_time_fails_timed_out(monkeypatch) -> None:
    check = Check("f")
    for end in (100.0, 99.0):
        got, limits = outcome(monkeypatch, check, end)
        assert got == Outcome("f", False, reason="timed out: no time was left before the run's deadline")
        assert limits == [] and check.seen == []
    bounded = Check("b", bounded=True)
    got, limits = outcome(monkeypatch, bounded, 100.0)
    assert got.reason == "timed out: no time was left before the run's deadline" and bounded.seen == []
    assert outcome(monkeypatch, check, 100.25) == (Outcome("f", True), [0.25])
    got, limits = outcome(monkeypatch, check, 101.23456, times_out=True)
    assert got == Outcome("f", False, reason="timed out: the check ran past 1.23 s") and limits == [pytest.approx(
        1.23456)]


def checked(monkeypatch, host: Host, c: EvalResult, deadline: float) -> list[float]:
    monkeypatch.setattr(cells, "time", Clock(100.0))
    waits = WaitFor()
    monkeypatch.setattr(cells, "asyncio", waits)
    asyncio.run(host._check(c, {"q": 0}, deadline))
    return waits.limits


def test_a_cells_checks_end_by_the_deadline_or_one_check_timeout_after_they_start(monkeypatch) -> None:
    first, second = Check("a"), Check("b", False)
    host = Host([first, second])
    c = cell()
    assert checked(monkeypatch, host, c, 110.0) == [10.0, 10.0]
    assert [o.name for o in c.outcomes] == ["a", "b"] and c.passed is False
    assert first.seen == [(c, {"q": 0})]
    assert checked(monkeypatch, host, cell(), 102.0) == [5.0, 5.0]  # the deadline is before one check timeout


class NoVerdict(Assertion):
    """A check whose judge gives no verdict (`CheckError`, with what its run cost)."""

    def __init__(self, name: str, cost: float | None) -> None:
        self.name, self.cost = name, cost

    async def check(self, result: Any, row: Any) -> Outcome:
        raise CheckError(f"the judge failed: HTTP 500 ({self.name})", self.cost)


def test_a_check_that_gives_no_verdict_makes_its_cell_an_error_not_a_failure(monkeypatch) -> None:
    host = Host([Check("a"), NoVerdict("judge:x", 0.25), Check("b", False), NoVerdict("judge:y", None)])
    c = cell()
    c.text = "Paris"
    checked(monkeypatch, host, c, 110.0)
    assert c.outcomes == [Outcome("a", True), Outcome("judge:x", False, reason="the judge failed: HTTP 500 (judge:x)",
                                                      cost=0.25), Outcome("b", False),
                          Outcome("judge:y", False, reason="the judge failed: HTTP 500 (judge:y)")]
    assert (c.status, c.error_type, c.passed, c.judge_cost, c.text) == ("failed", "check", False, 0.25, "Paris")
    assert c.error == ("judge:x: the judge failed: HTTP 500 (judge:x); "
                       "judge:y: the judge failed: HTTP 500 (judge:y)")
    assert c.ran and not c.ok and c.failures() == [f"check: {c.error}"]  # counted with the errors
    fine = cell()
    checked(monkeypatch, Host([Check("a"), Check("b", False)]), fine, 110.0)
    assert (fine.status, fine.error_type, fine.error, fine.passed) == ("ok", None, None, False)


def test_a_failed_run_is_not_checked(monkeypatch) -> None:
    check = Check("a")
    c = cell()
    c.status = "failed"
    assert checked(monkeypatch, Host([check, Check("b")]), c, 110.0) == []
    assert check.seen == [] and c.passed is False
    assert c.outcomes == [Outcome("a", False, reason="not checked: the run failed"),
                          Outcome("b", False, reason="not checked: the run failed")]


# -- served, never sent, finished -----------------------------------------------------------


def test_a_finished_cell_is_kept_timed_and_told(monkeypatch) -> None:
    told: list[EvalResult] = []
    host = Host(on_result=told.append)
    host.ev.started = 90.0
    monkeypatch.setattr(cells, "time", Clock(100.0))
    c = cell("openai:b")
    host._finish(c)
    assert host.ev.results == [c] and host.ev.finished_s == {"openai:b": 10.0} and told == [c]
    quiet = Host()
    quiet._finish(c)
    assert quiet.ev.results == [c]


def test_a_stored_run_is_served_and_checked_at_once(monkeypatch) -> None:
    monkeypatch.setattr(cells, "time", Clock(100.0))
    told: list[EvalResult] = []
    checks = [TextAssertion("contains", "{{ row.q }}"), TextAssertion("equals", "Paris")]
    host = Host(checks, on_result=told.append, run_options={"output_schema": Answer})
    c = cell()
    host._serve(c, stored(text="Paris 1", output={"city": "Paris"}), {"q": 1})
    assert told == [c] and c.cached and c.output == Answer(city="Paris") and c.run_id == RUN_ID
    assert [o.passed for o in c.outcomes] == [True, False] and c.passed is False
    blank = cell()
    host._serve(blank, {"id": RUN_ID, "metadata": {"text": None}}, {"q": "X"})  # no text: none contains X
    assert [o.passed for o in blank.outcomes] == [False, False] and blank.text == ""
    failed = cell()
    failed.status = "failed"
    host._serve(failed, stored(text="Paris"), {"q": ""})
    assert failed.passed is False and [o.reason for o in failed.outcomes] == ["not checked: the run failed"] * 2
    assert told == [c, blank, failed] and host.ev.results == told


def test_a_run_never_sent_is_a_template_error_or_a_failed_run_unchecked(monkeypatch) -> None:
    monkeypatch.setattr(cells, "time", Clock(100.0))
    host = Host([Check("a")])
    c = cell()
    host._unsent(c, "row.x is undefined", ValueError("ignored"))
    assert (c.status, c.error_type, c.error, c.outcomes, c.passed) == ("template_error", "template",
                                                                       "row.x is undefined", [], None)
    lost = cell()
    host._unsent(lost, None, ProviderError("auth", "no key"))
    assert (lost.status, lost.error_type, lost.error, lost.total_s, lost.ttft_s) == ("failed", "auth", "no key", 0.0,
                                                                                     None)
    assert lost.passed is False and [o.reason for o in lost.outcomes] == ["not checked: the run failed"]
    assert host.ev.results == [c, lost]


# -- a run and its record --------------------------------------------------------------------


class Agent:
    """An agent whose run streams `events`, then answers `result` or raises `error`."""

    def __init__(self, provider: str = "openai:j", result: Any = None, error: BaseException | None = None,
                 events: tuple[Any, ...] = ()) -> None:
        self.provider, self.result, self.error, self.events = provider, result, error, events
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.driver = SimpleNamespace(rate_gate=None)

    async def arun(self, prompt: str, *, on_event: Any, **options: Any) -> Any:
        self.runs.append((prompt, options))
        for event in self.events:
            on_event(event)
        if self.error is not None:
            raise self.error
        return self.result


def test_a_run_is_timed_to_its_end_and_to_its_first_delta(monkeypatch) -> None:
    clock = Clock(10.0, step=1.0)
    monkeypatch.setattr(cells, "time", clock)
    result = answer()
    agent = Agent(result=result, events=(object(), TextDelta(0, "a"), TextDelta(0, "b")))
    got = asyncio.run(Host()._agent_run(agent, "q?", {"max_turns": 2}))
    assert got == (result, None, 2.0, 1.0) and agent.runs == [("q?", {"max_turns": 2})]  # one reading a delta
    clock = Clock(10.0, step=1.0)
    monkeypatch.setattr(cells, "time", clock)
    assert asyncio.run(Host()._agent_run(Agent(result=result, events=(object(),)), "q?", {})) == (result, None, 1.0,
                                                                                                   None)


@pytest.mark.parametrize("error", [ProviderError("auth", "no"), ValueError("v"), TypeError("t"), OSError("o")],
                         ids=["provider", "value", "type", "os"])
def test_a_run_refused_before_sending_gives_its_error(monkeypatch, error: BaseException) -> None:
    monkeypatch.setattr(cells, "time", Clock(10.0, step=1.0))
    assert asyncio.run(Host()._agent_run(Agent(error=error), "q?", {})) == (None, error, 1.0, None)


def test_any_other_exception_of_a_run_is_raised(monkeypatch) -> None:
    with pytest.raises(RuntimeError, match="bug"):
        asyncio.run(Host()._agent_run(Agent(error=RuntimeError("bug")), "q?", {}))


def record(host: Host, c: EvalResult | None, key: str | None = "k1", ok: bool = True) -> Any:
    return host._record(key, "openai:a", "q?", c, "RESULT", {"evaluation": "e1", "row": 0}, text="hi",
                        output=Answer(city="Paris"), ok=ok, cost=0.5, seconds=2.0, ttft=0.25, error={"type": "x"},
                        usage={"input_tokens": 1})


def test_a_run_is_queued_for_the_store_with_every_figure(monkeypatch) -> None:
    monkeypatch.setattr(cells, "new_run_id", lambda: RUN_ID)
    host = Host(store=object())
    host.claimed.add("k1")
    c = cell()
    c.tool_calls = [{"name": "read"}]
    assert record(host, c) == "commit 1"
    assert c.run_id == RUN_ID
    assert host.writer.added == [{
        "run_id": RUN_ID, "key": "k1", "claim": "k1", "provider": "openai:a", "prompt": "q?", "status": "ok",
        "result": "RESULT", "figures": {"duration_s": 2.0, "usage": {"input_tokens": 1}, "cost": 0.5,
                                        "error": {"type": "x"}},
        "metadata": {"evaluation": "e1", "row": 0, "text": "hi", "output": {"city": "Paris"}, "ttft_s": 0.25,
                     "tool_calls": [{"name": "read"}]},
    }]


def test_a_run_without_a_cell_or_a_store_has_no_run_id_and_an_unclaimed_key_no_claim(monkeypatch) -> None:
    monkeypatch.setattr(cells, "new_run_id", lambda: RUN_ID)
    host = Host(store=object())
    record(host, None, ok=False)
    added = host.writer.added[-1]
    assert added["run_id"] is None and added["claim"] is None and added["status"] == "failed"
    assert added["metadata"]["tool_calls"] == []
    unstored = Host()
    c = cell()
    record(unstored, c, key=None)
    assert unstored.writer.added[-1]["run_id"] is None and c.run_id is None
    assert unstored.writer.added[-1]["claim"] is None and unstored.writer.added[-1]["key"] is None


# -- judges ---------------------------------------------------------------------------------


def test_a_judges_lane_is_built_once_owned_and_gated(monkeypatch) -> None:
    built: list[str] = []

    def factory(provider: str) -> Agent:
        built.append(provider)
        return Agent(provider)

    host = Host(judge_factory=factory, concurrency=3)
    agent, error, limit = host._judge("openai:j")
    assert isinstance(agent, Agent) and error is None and host.owned == [agent] and built == ["openai:j"]
    assert agent.driver.rate_gate is not None and limit._value == 3
    assert host._judge("openai:j") == (agent, None, limit) and built == ["openai:j"]
    assert host._judge("openai:k")[0] is not agent and len(host.owned) == 2


def test_a_judge_that_cannot_be_built_fails_in_every_outcome() -> None:
    def factory(provider: str) -> Agent:
        raise KeyError("no key")

    host = Host(judge_factory=factory)
    agent, error, limit = host._judge("openai:j")
    assert agent is None and isinstance(error, KeyError) and host.owned == [] and limit._value == 2
    assert host._judge("openai:j")[1] is error
    gateless = Host(judge_factory=lambda provider: SimpleNamespace(provider=provider), concurrency=1)
    assert gateless._judge("openai:j")[0] is None and gateless.owned == []
    judge = JudgeAssertion("openai:j")
    assert asyncio.run(host._judge_run(judge, "grade")) == ("", None, "'no key'")


class Store:
    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs, self.asked = runs, []

    def cached_runs(self, keys: list[str]) -> dict[str, Any]:
        self.asked.append(keys)
        return {k: self.runs[k] for k in keys if k in self.runs}


def judged(monkeypatch, result: Any = None, error: BaseException | None = None, **host: Any) -> tuple[Host, Agent, Any]:
    """(the host, its judge, the judge's run of "grade"): the judge streams a delta at 11 s, ends at 12 s."""
    monkeypatch.setattr(cells, "time", Clock(10.0, step=1.0))
    agent = Agent("openai:j", result=result, error=error, events=(TextDelta(0, "P"),))

    def factory(provider: str) -> Agent:
        assert provider == "openai:j"
        return agent

    run = Host(judge_factory=factory, **host)
    got = asyncio.run(run._judge_run(JudgeAssertion("openai:j"), "grade"))
    return run, agent, got


def test_a_judges_run_is_recorded_and_spent(monkeypatch) -> None:
    result = answer("PASS", cost=0.5)
    store = Store({})
    host, agent, got = judged(monkeypatch, result, store=store)
    assert got == ("PASS", 0.5, None) and agent.runs == [("grade", {})] and host.fresh == [agent]
    assert host.budget.added == [0.5] and store.asked == [["openai:j|grade"]] and host.writer.flushes == 1
    (added,) = host.writer.added
    assert added["key"] == "openai:j|grade" and added["provider"] == "openai:j" and added["prompt"] == "grade"
    assert added["run_id"] is None and added["status"] == "ok" and added["result"] is result
    assert added["figures"] == {"duration_s": 2.0, "usage": result.usage.model_dump(), "cost": 0.5, "error": None}
    assert added["metadata"] == {"evaluation": host.ev.id, "judge": True, "text": "PASS", "output": None,
                                 "ttft_s": 1.0, "tool_calls": []}


def test_a_judges_stored_run_is_served_and_without_a_store_or_the_cache_it_is_sent(monkeypatch) -> None:
    key = "openai:j|grade"
    for hit, text in (({"metadata": {"text": "FAIL: no"}}, "FAIL: no"), ({"metadata": None}, ""),
                      ({"metadata": {"text": None}}, "")):
        host, agent, got = judged(monkeypatch, answer("PASS"), store=Store({key: hit}))
        assert got == (text, None, None) and agent.runs == [] and host.writer.added == [] and host.budget.added == []
    store = Store({key: {"metadata": {"text": "FAIL"}}})
    host, agent, got = judged(monkeypatch, answer("PASS"), store=store, cache=False)
    assert got == ("PASS", None, None) and store.asked == [] and host.writer.flushes == 0
    assert host.writer.added[0]["key"] == key and host.budget.added == [None]
    host, agent, got = judged(monkeypatch, answer("PASS"))
    assert got == ("PASS", None, None) and host.writer.added[0]["key"] is None and host.writer.flushes == 0


def test_a_judges_failed_run_gives_its_error_and_cost_and_is_not_recorded(monkeypatch) -> None:
    error = SimpleNamespace(type="server", message="boom")
    host, _, got = judged(monkeypatch, answer("", ok=False, error=error, cost=0.25))
    assert got == ("", 0.25, "boom") and host.writer.added == [] and host.budget.added == []
    host, _, got = judged(monkeypatch, answer("", ok=False))
    assert got == ("", None, "interrupted") and host.writer.added == []
    host, _, got = judged(monkeypatch, error=ProviderError("auth", "no key"))
    assert got == ("", None, "no key") and host.writer.added == []
