"""The matrix in progress (`agent/evaluation/matrix.py`) built by hand, without a server: a lane per
provider (a failing factory fails its lane only; agents built from names are owned), the columns named by
what was built, a run's cost estimate, a skipped run's error, and a run never sent."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation import matrix
from ipyagent.agent.evaluation.checks import CallableAssertion, Outcome, Stoppable, parse_assertion
from ipyagent.agent.evaluation.matrix import DEFAULT_OUTPUT_TOKENS, _Cell, _Lane, _Run
from ipyagent.agent.evaluation.plan import Variant
from ipyagent.core import ModelSettings


def make_run(providers: list[str] | None = None, *, budget: float | None = 1.0, **more: Any) -> _Run:
    options: dict[str, Any] = {
        "variants": [Variant(None, "{{ row }}")], "repeat": 1, "check_timeout": 1.0, "assertions": [],
        "concurrency": 3, "budget": budget, "cache": False, "store": None, "factory": lambda name: name,
        "judge_factory": lambda name: name, "run_options": {}, "namespace": None, "raw": False,
        "redacting": False, "on_start": None, "on_result": None,
    }
    options.update(more)
    return _Run(Evaluation(providers or ["openai:a"], [{"q": 0}]), **options)


def prototype(provider: str = "openai:a", system: Any = None, **settings: Any) -> SimpleNamespace:
    return SimpleNamespace(provider=provider, system=system, settings=ModelSettings(**settings))


def job(lane: _Lane, prompt: str = "x" * 40, hit: Any = None) -> _Cell:
    return _Cell(lane, EvalResult(0, lane.name, prompt, {}), {"q": 0}, Variant(None, ""), hit=hit)


def test_the_run_sets_its_checks_limit_and_threads() -> None:
    function = CallableAssertion(lambda result, row: True)
    text = parse_assertion("contains:a")
    run = make_run(assertions=[function, text], check_timeout=0.25, batch={"poll_s": 1})
    assert function.timeout == 0.25 and text.timeout == 0.25 and function.threads is run.threads
    assert run.batch == {"poll_s": 1} and make_run(batch=True).batch == {} and make_run().batch is None
    assert run.budget.limit == 1.0 and run.claims is None and run.owned == [] and run.writer.session == run.ev.id
    assert isinstance(run.threads, Stoppable) and make_run(judge_factory=str).judge_factory is str
    assert (run.judge_lanes, run.digests, run.twins, run.claimed, run.uncommitted) == ({}, {}, {}, set(), {})
    store = object()
    stored = make_run(store=store)
    assert stored.writer.store is store and stored.claims.store is store  # type: ignore[union-attr]


def test_a_lane_built_from_a_name_is_owned_and_a_failing_factory_fails_its_lane_only() -> None:
    built = object()

    def factory(name: str) -> Any:
        if name == "bad":
            raise KeyError("no key")
        return built

    run = make_run(factory=factory)
    lane = run._lane("openai:a", "openai:a")
    assert lane.prototype is built and lane.error is None and run.owned == [built] and lane.concurrency == 3
    given = object()
    assert run._lane("b", given).prototype is given and run.owned == [built]  # given: not closed by us
    failed = run._lane("bad", "bad")
    assert failed.prototype is None and isinstance(failed.error, KeyError) and run.owned == [built]


def test_the_lanes_are_named_by_what_was_built() -> None:
    run = make_run(["x", "y", "z"])
    made = {"x": prototype("openai:m"), "y": prototype("openai:m")}

    def factory(name: str) -> Any:
        return made[name]

    run.factory = factory
    lanes = run._lanes(["x", "y", "z"])
    assert run.ev.providers == ["openai:m", "openai:m #2", "z"] and [lane.name for lane in lanes] == run.ev.providers
    assert lanes[2].prototype is None and lanes[2].error is not None


def test_no_estimate_for_a_stored_run_no_limit_or_no_agent() -> None:
    run = make_run()
    lane = _Lane("a", 1, prototype=prototype())
    lane.costs.append(0.5)
    assert run.estimate(job(lane, hit={"text": "x"})) == 0.0
    assert run.estimate(job(_Lane("a", 1))) == 0.0
    assert make_run(budget=None).estimate(job(lane)) == 0.0
    assert run.estimate(job(lane)) == 0.5


def test_the_estimate_is_the_lanes_mean_cost_once_a_run_has_one() -> None:
    lane = _Lane("a", 1, prototype=prototype())
    lane.costs.extend([0.1, 0.2, 0.6])
    assert make_run().estimate(job(lane)) == pytest.approx(0.3)


def test_before_any_cost_the_estimate_prices_the_prompt_and_the_longest_reply(monkeypatch) -> None:
    rates = []

    def priced(agent: Any) -> tuple[float, float]:
        rates.append(agent)
        return (0.001, 0.01)

    monkeypatch.setattr(matrix, "_rates", priced)
    run = make_run()
    lane = _Lane("a", 1, prototype=prototype(system="s" * 8))
    # 40 chars of prompt and 8 of system: 12 tokens in; no max_output_tokens: DEFAULT_OUTPUT_TOKENS out.
    assert run.estimate(job(lane)) == pytest.approx(12 * 0.001 + DEFAULT_OUTPUT_TOKENS * 0.01)
    assert DEFAULT_OUTPUT_TOKENS == 256 and lane.rates == (0.001, 0.01)
    assert run.estimate(job(lane)) > 0 and rates == [lane.prototype]  # the rates are asked once a lane
    capped = _Lane("a", 1, prototype=prototype(max_output_tokens=100), rates=(0.001, 0.01))
    assert run.estimate(job(capped)) == pytest.approx(10 * 0.001 + 100 * 0.01)
    capped.outputs.extend([10, 30])  # finished runs: their mean, within the cap
    assert run.estimate(job(capped)) == pytest.approx(10 * 0.001 + 20 * 0.01)
    capped.outputs[:] = [500, 700]
    assert run.estimate(job(capped)) == pytest.approx(10 * 0.001 + 100 * 0.01)
    free = _Lane("a", 1, prototype=prototype(), outputs=[50])
    assert run.estimate(job(free)) == pytest.approx(10 * 0.001 + 50 * 0.01)


def test_the_run_options_settings_cap_the_reply_and_an_unknown_price_estimates_nothing() -> None:
    run = make_run(run_options={"settings": {"max_output_tokens": 4}})
    lane = _Lane("a", 1, prototype=prototype(max_output_tokens=100), rates=(0.5, 1.0))
    assert run.estimate(job(lane, prompt="abcd")) == pytest.approx(1 * 0.5 + 4 * 1.0)
    unknown = _Lane("a", 1, prototype=prototype(), rates=(0.0, 0.0))
    assert run.estimate(job(unknown)) == 0.0
    # An unknown price estimates nothing without reading the agent's settings or the prompt.
    bare = _Lane("a", 1, prototype=SimpleNamespace(provider="openai:a"), rates=(0.0, 0.0))
    assert run.estimate(job(bare)) == 0.0


def test_a_skipped_run_says_why_and_a_budget_skip_stops_the_evaluation() -> None:
    seen = []
    run = make_run(budget=0.5, on_result=seen.append)
    lane = _Lane("openai:a", 1)
    first = job(lane)
    run.skip(first, "budget")
    cell = first.result
    assert (cell.status, cell.error_type, cell.passed) == ("skipped", "budget", None)
    assert cell.error == "not run: it would take the spending past the budget of $0.5" and run.ev.budget_stopped
    assert run.ev.results == [cell] and seen == [cell]
    other = make_run()
    second = job(lane)
    other.skip(second, "interrupted")
    assert second.result.error == "not run: interrupted" and second.result.error_type == "interrupted"
    assert other.ev.budget_stopped is False
    other.ev.budget_stopped = True
    other.skip(job(lane), "interrupted")
    assert other.ev.budget_stopped is True


def test_a_run_never_sent_is_a_template_error_or_a_failed_run_unchecked() -> None:
    run = make_run(assertions=[parse_assertion("contains:a"), parse_assertion("json")])
    template = EvalResult(0, "openai:a", "", {})
    run._unsent(template, "row 0: bad", KeyError("ignored"))
    assert (template.status, template.error_type, template.error) == ("template_error", "template", "row 0: bad")
    assert template.outcomes == [] and template.passed is None
    failed = EvalResult(1, "openai:a", "q", {})
    run._unsent(failed, None, KeyError("no key"))
    assert failed.status == "failed" and failed.passed is False and failed.error == "'no key'"
    assert (failed.error_type, failed.total_s, failed.ttft_s) == ("KeyError", 0.0, None)  # it took no time
    assert failed.outcomes == [Outcome("contains:a", False, reason="not checked: the run failed"),
                               Outcome("json", False, reason="not checked: the run failed")]
    assert run.ev.results == [template, failed]


def test_a_run_never_sent_ends_once_per_repeat_and_a_stored_run_is_keyed_by_its_variant() -> None:
    run = make_run(repeat=2)
    variant = Variant("terse", "{{ row }}")
    plan = SimpleNamespace(variants=[variant], prompts={"terse": ["p0", None]}, errors={"terse": [None, "bad"]})
    broken = _Lane("openai:b", 1, error=KeyError("no key"))
    keyed = []
    run.store = SimpleNamespace()  # type: ignore[assignment]
    run._key = lambda prototype, prompt, variant, repeat: keyed.append((prompt, variant.name, repeat))  # type: ignore
    assert run._queue([_Lane("openai:a", 1, prototype=prototype()), broken], [{"q": 0}, {"q": 1}], plan) == []
    assert [(r.provider, r.row, r.repeat, r.status) for r in run.ev.results] == [
        ("openai:a", 1, 0, "template_error"), ("openai:a", 1, 1, "template_error"), ("openai:b", 0, 0, "failed"),
        ("openai:b", 0, 1, "failed"), ("openai:b", 1, 0, "template_error"), ("openai:b", 1, 1, "template_error")]
    assert keyed == [("p0", "terse", 0), ("p0", "terse", 1)]


def test_the_plan_is_made_with_the_runs_variants_rows_checks_namespace_raw_and_redaction(monkeypatch) -> None:
    made: dict[str, Any] = {}

    def make_plan(variants: Any, rows: Any, assertions: Any, **options: Any) -> Any:
        made.update(options, variants=variants, rows=rows, assertions=assertions)
        raise LookupError("stop here")

    monkeypatch.setattr(matrix, "make_plan", make_plan)
    check = parse_assertion("contains:a")
    run = make_run(namespace={"x": 1}, raw=True, redacting=True, assertions=[check])
    with pytest.raises(LookupError):
        asyncio.run(run.run(["openai:a"], [{"q": 0}]))
    assert made == {"namespace": {"x": 1}, "raw": True, "redacting": True, "variants": run.variants,
                    "rows": [{"q": 0}], "assertions": [check]}


def cell_runner(run: _Run, claims: list[bool]) -> list[str]:
    """Replace the claim, the wait and the run of a cell by recorders; the claims answer in turn."""
    calls: list[str] = []

    async def claim(job: _Cell) -> bool:
        assert isinstance(job, _Cell)
        calls.append("claim")
        return claims.pop(0)

    async def wait_for(job: _Cell) -> None:
        assert isinstance(job, _Cell)
        calls.append("wait")

    async def run_cell(job: _Cell) -> float | None:
        assert isinstance(job, _Cell)
        calls.append("run")
        return 0.25

    run._claim, run._wait_for, run._run_cell = claim, wait_for, run_cell  # type: ignore[method-assign]
    return calls


def test_a_cell_another_process_sends_is_put_back_while_its_lane_has_other_work() -> None:
    run = make_run()
    calls = cell_runner(run, [False, False, True])
    lane = _Lane("openai:a", 1, prototype=prototype())
    first, other = job(lane), job(lane)
    lane.jobs.append(other)
    assert asyncio.run(run.run_cell(first)) == 0.0  # put back at the end, not run
    assert first.deferred is True and lane.deferred == 1 and list(lane.jobs) == [other, first]
    assert calls == ["claim"]
    # `other` ran meanwhile and another cell was put back: the lane has only deferred work, so this one
    # waits for the other process's run (then serves it), and is no longer counted as put back.
    lane.jobs.clear()
    second = job(lane)
    second.deferred = True
    lane.jobs.append(second)
    lane.deferred = 2
    assert asyncio.run(run.run_cell(first)) == 0.25
    assert first.deferred is False and lane.deferred == 1 and calls == ["claim", "claim", "wait", "run"]
    assert list(lane.jobs) == [second]
    assert asyncio.run(run.run_cell(job(lane))) == 0.25 and lane.deferred == 1  # claimed: it runs
    assert calls[-2:] == ["claim", "run"]


def test_a_batch_api_that_fails_leaves_a_note_and_the_runs_go_live(monkeypatch) -> None:
    from ipyagent.core import ProviderError

    steps: list[str] = []

    class Batches:
        def __init__(self, owner: Any, **options: Any) -> None:
            steps.append(f"made {options} by the run: {owner is run}")

        async def take(self, lanes: list[_Lane]) -> None:
            steps.append(f"take {lanes}")
            raise ProviderError("server_error", "the batch API is down")

        async def collect(self) -> None:
            steps.append("collect")

    class Live:
        async def run(self) -> None:
            steps.append("live")

    monkeypatch.setattr(matrix, "BatchRunner", Batches)
    run = make_run(batch={"poll_s": 2})
    asyncio.run(run._batched(["lane"], Live()))  # type: ignore[list-item, arg-type]
    assert steps == ["made {'poll_s': 2} by the run: True", "take ['lane']", "live"]
    note = ("batch: the batch API is down; run the same evaluation again (batch=True, the same run store) to "
            "collect the batches sent")
    assert run.ev.notes == [note]
    steps.clear()
    Batches.take = lambda self, lanes: asyncio.sleep(0)  # type: ignore[method-assign]
    asyncio.run(run._batched([], Live()))  # type: ignore[arg-type]
    assert sorted(steps) == ["collect", "live", "made {'poll_s': 2} by the run: True"]


def test_a_stored_run_is_served_spending_nothing_checked_by_its_deadline(monkeypatch) -> None:
    monkeypatch.setattr(matrix, "time", SimpleNamespace(monotonic=lambda: 100.0))
    run = make_run(run_options={"timeout": 7})
    checked = []

    async def check(cell: EvalResult, row: Any, deadline: float) -> None:
        checked.append((cell.text, row, deadline))

    run._check = check  # type: ignore[method-assign]
    lane = _Lane("openai:a", 1, prototype=SimpleNamespace(timeout=30))
    stored = (7, "key", '{"input_tokens": 3, "output_tokens": 4}', 0.5, 1.25, '{"text": "Paris"}')
    served = job(lane, hit=stored)
    assert asyncio.run(run._run_cell(served)) == 0.0  # served from the store: nothing spent
    cell = served.result
    assert (cell.cached, cell.run_id, cell.text, cell.cost, cell.total_s) == (True, 7, "Paris", 0.5, 1.25)
    assert checked == [("Paris", {"q": 0}, 107.0)] and run.ev.results == [cell]
    assert run.uncommitted == {}  # nothing was sent: no commit for the worker's next run to wait for
    # Without a timeout in the run options, the agent's own.
    make = make_run()
    make._check = check  # type: ignore[method-assign]
    asyncio.run(make._run_cell(job(lane, hit={"id": 8, "metadata": {"text": "Rome"}})))
    assert checked[-1] == ("Rome", {"q": 0}, 130.0)


class PricedDriver:
    """A prototype's driver: USD per token (None: an unknown price) and the rate gate it holds."""

    def __init__(self, per_token: float | None) -> None:
        self.per_token, self.rate_gate = per_token, "its own gate"

    def price(self, usage: Any) -> float | None:
        return None if self.per_token is None else self.per_token * (usage.input_tokens + usage.output_tokens)


def whole_run(monkeypatch, *, fail: BaseException | None = None, store: Any = "store", writer_error: str | None = None,
              **options: Any) -> tuple[_Run, dict[str, Any]]:
    """`_Run.run` over lanes a (priced), b and c (unknown prices) and d (its agent not built), with the scheduler,
    `keep` and the writer replaced by recorders (`seen`); the live scheduler raises `fail` when given."""
    seen: dict[str, Any] = {"kept": [], "batched": []}
    made = {name: SimpleNamespace(provider=f"openai:{name}", driver=PricedDriver(1e-6 if name == "a" else None))
            for name in "abc"}

    class Live:
        def __init__(self, lanes: list[_Lane], budget: Any, **hooks: Any) -> None:
            seen["live"], seen["lanes"], seen["budget"], seen["hooks"] = self, lanes, budget, hooks

        async def run(self) -> None:
            seen["gates"] = [lane.prototype.driver.rate_gate is lane.gate for lane in seen["lanes"] if lane.prototype]
            if fail is not None:
                raise fail

    def keep(ev: Evaluation, kept_in: Any, *, finished: bool) -> str | None:
        assert ev is run.ev
        seen["kept"].append((kept_in, finished))
        return "what changed"

    monkeypatch.setattr(matrix, "Scheduler", Live)
    monkeypatch.setattr(matrix, "keep", keep)
    run = make_run(list("abcd"), factory=lambda name: made[name], **options)
    run.store = store
    run.ev.baseline = "c"
    run._key = lambda *args: None  # type: ignore[method-assign]
    run.writer = SimpleNamespace(close=lambda: seen.setdefault("closed", True), error=writer_error)  # type: ignore

    async def batched(lanes: list[_Lane], live: Any) -> None:
        seen["batched"].append(([lane.name for lane in lanes], live is seen["live"]))
        await live.run()

    run._batched = batched  # type: ignore[method-assign]
    seen["drivers"] = [made[name].driver for name in "abc"]
    return run, seen


def test_the_whole_run_renames_the_baseline_lends_the_lanes_gates_and_keeps_the_evaluation(monkeypatch) -> None:
    run, seen = whole_run(monkeypatch)
    ev = asyncio.run(run.run(list("abcd"), [{"q": 0}]))
    assert ev.baseline == "openai:c" and ev.providers == ["openai:a", "openai:b", "openai:c", "d"]
    assert seen["gates"] == [True, True, True] and [d.rate_gate for d in seen["drivers"]] == ["its own gate"] * 3
    assert ev.notes == ["budget: no known price for openai:b, openai:c; their runs count only when they report a cost",
                        "what changed"]
    assert seen["kept"] == [("store", True)] and seen["closed"] and seen["batched"] == []
    assert [r.provider for r in ev.results] == ["d"]  # its agent could not be built: failed at once
    assert seen["budget"] is run.budget and [lane.name for lane in seen["lanes"]] == ev.providers
    assert seen["hooks"] == {"estimate": run.estimate, "run": run.run_cell, "skip": run.skip}


def test_a_batched_run_hands_over_the_lanes_built_and_the_live_scheduler(monkeypatch) -> None:
    run, seen = whole_run(monkeypatch, batch=True, budget=None)
    ev = asyncio.run(run.run(list("abcd"), [{"q": 0}]))
    assert seen["batched"] == [(["openai:a", "openai:b", "openai:c"], True)] and seen["gates"] == [True] * 3
    assert ev.notes == ["what changed"]  # no budget: no note on prices


def test_an_interrupted_run_is_kept_unfinished_and_a_failing_store_is_not_kept(monkeypatch) -> None:
    run, seen = whole_run(monkeypatch, fail=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run.run(list("abcd"), [{"q": 0}]))
    assert seen["kept"] == [("store", False)] and [d.rate_gate for d in seen["drivers"]] == ["its own gate"] * 3
    failing, seen = whole_run(monkeypatch, writer_error="the run store failed: disk full")
    ev = asyncio.run(failing.run(list("abcd"), [{"q": 0}]))
    assert seen["kept"] == [] and ev.notes[-1] == "the run store failed: disk full"
    unstored, seen = whole_run(monkeypatch, store=None)
    asyncio.run(unstored.run(list("abcd"), [{"q": 0}]))
    assert seen["kept"] == []


def live_cell(monkeypatch, result: Any, exc: BaseException | None = None, **options: Any) -> tuple[_Run, list[Any]]:
    """A run whose agent runs, record, checks and finish are recorders (`log`), on a clock at 100 s."""
    monkeypatch.setattr(matrix, "time", SimpleNamespace(monotonic=lambda: 100.0))
    log: list[Any] = []
    run = make_run(on_start=lambda cell: log.append(("start", cell.prompt)), **options)

    async def agent_run(agent: Any, prompt: str, given: dict[str, Any]) -> Any:
        log.append(("send", agent, prompt, given))
        return result, exc, 2.5, 0.5

    def record(key: Any, provider: str, prompt: str, cell: EvalResult, got: Any, meta: dict[str, Any],
               **more: Any) -> Any:
        log.append(("record", key, provider, prompt, cell, got, meta, more))
        return asyncio.get_running_loop().create_future()

    async def check(cell: EvalResult, row: Any, deadline: float) -> None:
        log.append(("check", cell.prompt, row, deadline))

    run._agent_run, run._record, run._check = agent_run, record, check  # type: ignore[method-assign]
    run._fresh = lambda prototype: f"fresh {prototype.provider}"  # type: ignore[method-assign]
    run._finish = lambda cell: log.append(("finish", cell.prompt))  # type: ignore[method-assign]
    return run, log


def answered(text: str = "Paris", cost: float | None = 0.25, note: str | None = None) -> SimpleNamespace:
    from ipyagent.core import Usage

    return SimpleNamespace(text=text, output={"city": text}, usage=Usage(input_tokens=3, output_tokens=4), cost=cost,
                           tool_calls=[], error=None, interrupted=False,
                           metadata={"price_note": note} if note else None)


def test_a_live_run_is_sent_fresh_with_its_variants_system_filled_recorded_checked_and_finished(monkeypatch) -> None:
    result = answered()
    run, log = live_cell(monkeypatch, result, run_options={"timeout": 7})
    lane = _Lane("openai:a", 1, prototype=SimpleNamespace(provider="openai:m", timeout=30))
    cell = _Cell(lane, EvalResult(0, "openai:a", "q0", {}, variant="terse", repeat=1), {"q": 0},
                 Variant("terse", "", system="be terse"), key="k0")
    assert asyncio.run(run._run_cell(cell)) == 0.25
    start, send, record, check, finish = log
    assert start == ("start", "q0") and send[:3] == ("send", "fresh openai:m", "q0")
    assert send[3]["timeout"] == 7 and send[3]["options"].system == "be terse"
    assert record[1:6] == ("k0", "openai:m", "q0", cell.result, result)
    assert record[6] == {"evaluation": run.ev.id, "row": 0, "provider_key": "openai:a", "variant": "terse", "repeat": 1}
    assert record[7] == {"text": "Paris", "output": {"city": "Paris"}, "ok": True, "cost": 0.25, "seconds": 2.5,
                         "ttft": 0.5, "error": None, "usage": result.usage.model_dump()}
    assert check == ("check", "q0", {"q": 0}, 107.0) and finish == ("finish", "q0")
    assert (lane.outputs, lane.costs) == ([4], [0.25]) and run.ev.notes == []
    assert (cell.result.text, cell.result.total_s, cell.result.ttft_s) == ("Paris", 2.5, 0.5)


def test_a_failed_run_is_recorded_with_its_error_and_an_unknown_price_noted_once(monkeypatch) -> None:
    from ipyagent.core import ProviderError

    run, log = live_cell(monkeypatch, None, ProviderError("rate_limit", "slow down"))
    lane = _Lane("openai:a", 1, prototype=SimpleNamespace(provider="openai:m", timeout=30))
    failed = job(lane, "q1")
    assert asyncio.run(run._run_cell(failed)) is None
    send, record = log[1], log[2]
    assert send[3] == {} and "options" not in send[3]  # no system of its own: the run options as they are
    assert record[5] is None and record[7]["ok"] is False and record[7]["usage"] is None
    assert record[7]["error"] == {"type": "rate_limit", "message": "slow down"} and log[3][3] == 130.0
    assert (lane.outputs, lane.costs) == ([0], [])
    for _ in range(2):
        noted, _log = live_cell(monkeypatch, answered(cost=None, note="no price for m"))
        noted.ev = run.ev
        assert asyncio.run(noted._run_cell(job(lane))) is None
    assert run.ev.notes == ["no price for m"]
    priced, _log = live_cell(monkeypatch, answered(cost=0.5, note="ignored: the cost is known"))
    asyncio.run(priced._run_cell(job(lane)))
    assert priced.ev.notes == []


def test_a_workers_run_counts_as_finished_only_after_its_last_run_is_committed(monkeypatch) -> None:
    run, log = live_cell(monkeypatch, answered())
    lane = _Lane("openai:a", 1, prototype=SimpleNamespace(provider="openai:m", timeout=30))

    async def two_runs() -> None:
        await run._run_cell(job(lane, "first"))
        (worker, first_commit), = run.uncommitted.items()
        assert worker is asyncio.current_task() and not first_commit.done()
        asyncio.get_running_loop().call_soon(lambda: (log.append("committed"), first_commit.set_result(None)))
        await run._run_cell(job(lane, "second"))
        assert run.uncommitted[worker] is not first_commit

    asyncio.run(two_runs())
    steps = [entry if isinstance(entry, str) else entry[:2] for entry in log]
    assert steps[steps.index(("start", "second")):] == [("start", "second"), ("send", "fresh openai:m"),
                                                        ("record", None), ("check", "second"), "committed",
                                                        ("finish", "second")]


def test_with_tracing_on_a_cell_runs_inside_its_span(monkeypatch) -> None:
    import contextlib

    spans = []

    @contextlib.contextmanager
    def span(name: str, attributes: dict[str, Any], finish: Any) -> Any:
        spans.append((name, attributes, finish))
        yield None

    monkeypatch.setattr(matrix, "current_tracing", lambda: object())
    monkeypatch.setattr(matrix, "evaluation_span", span)
    monkeypatch.setattr(matrix, "cell_checks", lambda cell: ("the checks of", cell))
    run = make_run()
    calls = cell_runner(run, [True])
    lane = _Lane("openai:a", 1)
    cell = job(lane)
    cell.result.variant = "terse"
    assert asyncio.run(run.run_cell(cell)) == 0.25 and calls == ["claim", "run"]
    attributes = matrix.cell_attributes(run.ev.id, cell.result)
    assert spans == [("evaluate openai:a", attributes, ("the checks of", cell.result))]
    assert spans[0][1]["ipyagent.evaluation.id"] == run.ev.id and spans[0][1]["ipyagent.evaluation.variant"] == "terse"


class City(BaseModel):
    name: str


def test_a_stored_runs_output_is_read_with_the_runs_schema(monkeypatch) -> None:
    run = make_run(run_options={"output_schema": City})

    async def check(cell: EvalResult, row: Any, deadline: float) -> None:
        pass

    run._check = check  # type: ignore[method-assign]
    lane = _Lane("openai:a", 1, prototype=SimpleNamespace(timeout=30))
    served = job(lane, hit={"id": 8, "metadata": {"text": "Lima", "output": {"name": "Lima"}}})
    asyncio.run(run._run_cell(served))
    assert served.result.output == City(name="Lima")


class Store:
    """A run store whose `stored_runs` answers from `runs` (key -> stored run) and records the keys asked."""

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs, self.asked = runs, []

    def stored_runs(self, keys: list[str]) -> dict[str, Any]:
        self.asked.append(list(keys))
        return {key: self.runs[key] for key in keys if key in self.runs}


def test_each_run_is_queued_in_its_lane_unless_the_store_has_it(monkeypatch) -> None:
    run = make_run(repeat=2, cache=True)
    run.store = Store({"p1 terse 0": {"id": 3}})  # type: ignore[assignment]
    keyed = []

    def key(agent: Any, prompt: str, variant: Variant, repeat: int) -> str | None:
        keyed.append(agent)
        return None if prompt == "p0" and repeat == 1 else f"{prompt} {variant.name} {repeat}"

    run._key = key  # type: ignore[method-assign]
    variant = Variant("terse", "{{ row }}")
    plan = SimpleNamespace(variants=[variant], prompts={"terse": ["p0", "p1"]}, errors={"terse": [None, None]})
    lane = _Lane("openai:a", 1, prototype=prototype())
    rows = [{"q": 0}, 5]
    served = run._queue([lane], rows, plan)
    assert keyed == [lane.prototype] * 4
    assert run.store.asked == [["p0 terse 0", "p1 terse 0", "p1 terse 1"]]  # the keyless run is not asked for
    assert [(j.key, j.hit) for j in served] == [("p1 terse 0", {"id": 3})]
    queued = list(lane.jobs)
    assert [(j.key, j.hit) for j in queued] == [("p0 terse 0", None), (None, None), ("p1 terse 1", None)]
    for job_, n, repeat in zip([*queued[:2], served[0], queued[2]], [0, 0, 1, 1], [0, 1, 0, 1]):
        cell = job_.result
        assert (cell.row, cell.provider, cell.prompt, cell.variant, cell.repeat) == (n, "openai:a", f"p{n}", "terse",
                                                                                      repeat)
        assert cell.fields == ({"q": 0} if n == 0 else {"value": 5})
        assert job_.lane is lane and job_.row is rows[n] and job_.variant is variant
    # The cache off: every run queued, none asked for.
    off = make_run(cache=False)
    off.store, off._key = Store({"k": {"id": 3}}), lambda *args: "k"  # type: ignore[assignment, method-assign]
    other = _Lane("openai:a", 1, prototype=prototype())
    assert off._queue([other], [0], plan) == [] and off.store.asked == [] and len(other.jobs) == 1


def served_run(monkeypatch, assertions: list[Any], runs: dict[str, Any]) -> tuple[_Run, dict[str, Any], list[Any]]:
    """`whole_run` with the cache on, each lane's run keyed by its provider in a `Store` of `runs`, and the
    two ways of serving a stored run (`_serve`, `run_cell`) recorders (`log`)."""
    run, seen = whole_run(monkeypatch, store=Store(runs), cache=True, assertions=assertions)
    run._key = lambda agent, prompt, variant, repeat: agent.provider  # type: ignore[method-assign]
    log: list[Any] = []
    run._serve = lambda cell, hit, row: log.append(("serve", cell.provider, hit, row))  # type: ignore[method-assign]

    async def run_cell(job: _Cell) -> float:
        log.append(("run_cell", job.result.provider, job.hit, job.row))
        return 0.0

    run.run_cell = run_cell  # type: ignore[method-assign]
    monkeypatch.setattr(matrix, "cached_run", lambda row: ("decoded", row))
    return run, seen, log


def test_stored_runs_checked_without_waiting_are_served_at_once_in_queue_order(monkeypatch) -> None:
    runs = {"openai:a": {"id": 1}, "openai:b": ("row", 2)}  # decoded (a claim's) or the store's row
    run, seen, log = served_run(monkeypatch, [parse_assertion("contains:a")], runs)
    assert run.checked_at_once is True
    asyncio.run(run.run(list("abcd"), [{"q": 0}]))
    assert log == [("serve", "openai:a", {"id": 1}, {"q": 0}), ("serve", "openai:b", ("decoded", ("row", 2)), {"q": 0})]
    assert [job_.result.provider for job_ in seen["lanes"][2].jobs] == ["openai:c"]  # not stored: live


def test_stored_runs_go_through_run_cell_when_a_check_waits_or_tracing_is_on(monkeypatch) -> None:
    runs = {"openai:a": {"id": 1}, "openai:b": ("row", 2)}
    regex, _seen, log = served_run(monkeypatch, [parse_assertion("regex:a")], runs)
    assert regex.checked_at_once is False
    asyncio.run(regex.run(list("abcd"), [{"q": 0}]))
    assert log == [("run_cell", "openai:a", {"id": 1}, {"q": 0}), ("run_cell", "openai:b", ("row", 2), {"q": 0})]
    traced, _seen, log = served_run(monkeypatch, [parse_assertion("contains:a")], runs)
    monkeypatch.setattr(matrix, "current_tracing", lambda: object())
    asyncio.run(traced.run(list("abcd"), [{"q": 0}]))
    assert [entry[:2] for entry in log] == [("run_cell", "openai:a"), ("run_cell", "openai:b")]


def test_the_plans_note_the_judges_runs_no_baseline_and_a_frozen_heap(monkeypatch) -> None:
    from ipyagent.agent.evaluation.checks import JudgeAssertion

    judge = JudgeAssertion("openai:judge")
    run, seen = whole_run(monkeypatch, assertions=[judge], budget=None)
    run.ev.baseline = None
    frozen: list[str] = []
    monkeypatch.setattr(matrix, "gc", SimpleNamespace(freeze=lambda: frozen.append("frozen")))
    real = matrix.make_plan

    def noted(*args: Any, **options: Any) -> Any:
        plan = real(*args, **options)
        plan.note = lambda: "1 row could not be rendered"
        return plan

    monkeypatch.setattr(matrix, "make_plan", noted)
    judged = []

    async def judge_run(given: Any, prompt: str) -> tuple[str, float, None]:
        judged.append((given, prompt))
        return "PASS", 0.01, None

    run._judge_run = judge_run  # type: ignore[method-assign]
    ev = asyncio.run(run.run(list("abcd"), [{"q": 0}]))
    assert ev.baseline is None and ev.notes == ["1 row could not be rendered", "what changed"] and frozen == []
    assert asyncio.run(judge.run("grade this")) == ("PASS", 0.01, None) and judged == [(judge, "grade this")]
    again, _seen = whole_run(monkeypatch)
    asyncio.run(again.run(list("abcd"), [{"q": 0}], frozen=True))
    assert frozen == ["frozen"]
