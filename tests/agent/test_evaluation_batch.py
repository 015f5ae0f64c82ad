"""Batch mode's own parts (`agent/evaluation/batch.py`) with a hand-made run, lane and batch API, no server:
the progress line, a line's custom id, which lanes go in a batch and the note for those that run live, a
run's estimate at the batch price, what is sent, collected, held and skipped, each answer filled in, and
the interrupt's choice to leave or cancel the batches."""

from __future__ import annotations

import asyncio
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation import batch
from ipyagent.agent.evaluation.batch import (
    ESTIMATED_OUTPUT_TOKENS,
    GONE,
    BatchProgress,
    BatchRunner,
    _batch_api,
    _Batched,
    _estimate,
    _poll,
    _stack,
    cancel_batches,
    leave_or_cancel,
    line_id,
)
from ipyagent.agent.evaluation.matrix import _Cell, _Lane
from ipyagent.agent.evaluation.plan import Variant
from ipyagent.agent.evaluation.scheduler import Budget
from ipyagent.core import ModelSettings, ProviderError, Usage
from ipyagent.drivers import BatchAnswer, BatchState


def test_the_progress_line_counts_each_state_and_the_estimate() -> None:
    assert str(BatchProgress(1200, 1000, 150, 50, 0.0123, ["b"])) == \
        "batch: 1,200 submitted · 1,000 in progress · 150 done · 50 failed · ~$0.0123 at batch prices"
    assert BatchProgress() == BatchProgress(0, 0, 0, 0, 0.0, [])


def test_a_lines_custom_id_is_its_own_or_its_metadatas_key() -> None:
    assert line_id({"custom_id": "k1", "metadata": {"key": "k2"}}) == "k1"
    assert line_id({"custom_id": "", "metadata": {"key": "k2"}}) == "k2"
    assert line_id({"metadata": None}) == "None" and line_id({"custom_id": 7}) == "7"


# -- a hand-made run --------------------------------------------------------------------------


class Api:
    """A batch API: records what it was sent, polled, asked and cancelled."""

    def __init__(self, *, available: bool = True, per_batch: int = 2) -> None:
        self.is_available, self.per_batch = available, per_batch
        self.sent: list[list[dict[str, Any]]] = []
        self.states: dict[str, list[BatchState]] = {}
        self.given: dict[str, list[BatchAnswer]] = {}
        self.asked: list[tuple[str, list[str]]] = []
        self.cancelled: list[str] = []

    async def available(self) -> bool:
        return self.is_available

    def body(self, stack: Any) -> dict[str, Any]:
        if stack.prompt == "refused":
            raise ProviderError("invalid_request", "no")
        return {"prompt": stack.prompt}

    def chunks(self, items: list[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        lines = [{"custom_id": key, "body": body} for key, body in items]
        return [lines[i:i + self.per_batch] for i in range(0, len(lines), self.per_batch)]

    async def submit(self, chunk: list[dict[str, Any]]) -> str:
        self.sent.append(chunk)
        return f"b{len(self.sent)}"

    async def poll(self, batch_id: str) -> BatchState:
        if batch_id == "gone":
            raise ProviderError("not_found", "no such batch")
        if batch_id == "down":
            raise ProviderError("server_error", "down")
        return self.states[batch_id].pop(0)

    async def answers(self, state: BatchState, ids: list[str]) -> list[BatchAnswer]:
        self.asked.append((state.id, ids))
        return self.given.get(state.id, [])

    def decode(self, body: dict[str, Any]) -> Any:
        if body.get("bad"):
            raise ProviderError("bad_response", "unreadable")
        usage = Usage(input_tokens=3, output_tokens=4)
        return SimpleNamespace(message=SimpleNamespace(text=body["text"]), usage=usage, cost=body.get("cost"))

    async def cancel(self, batch_id: str) -> None:
        if batch_id == "stuck":
            raise ProviderError("server_error", "cannot cancel")
        self.cancelled.append(batch_id)


class Store:
    def __init__(self, batched: dict[str, str] | None = None) -> None:
        self.held, self.added, self.dropped = batched or {}, [], []

    def batched(self, keys: list[str]) -> dict[str, str]:
        return {k: self.held[k] for k in keys if k in self.held}

    def add_batch(self, batch_id: str, provider: str, ids: list[str]) -> None:
        self.added.append((batch_id, provider, ids))

    def drop_batch(self, batch_id: str) -> None:
        self.dropped.append(batch_id)


class Run:
    """What the batch runner reads of `matrix._Run` and calls on it, recorded in `log`."""

    def __init__(self, *, store: Store | None = None, budget: float | None = None, **run_options: Any) -> None:
        self.ev = Evaluation(["openai:a"], [{"q": 0}])
        self.store, self.budget, self.run_options, self.check_timeout = store, Budget(budget), run_options, 5.0
        self.log: list[Any] = []
        self.writer = SimpleNamespace(flush=lambda: self.log.append("flush"), error=None)

    def _key(self, prototype: Any, prompt: str, variant: Variant, repeat: int) -> str | None:
        self.log.append(("key", prompt, prototype.provider, variant.system))
        return None if prompt == "keyless" else f"k-{prompt}-{repeat}"

    def skip(self, job: _Cell, reason: str) -> None:
        self.log.append(("skip", job.result.prompt, reason))

    def _record(self, key: str, provider: str, prompt: str, cell: EvalResult, result: Any, meta: dict[str, Any],
                **more: Any) -> Any:
        assert cell.prompt == prompt
        self.log.append(("record", key, provider, prompt, result, meta, more))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.add_done_callback(lambda _: self.log.append(("committed", key)))
        asyncio.get_running_loop().call_soon(done.set_result, None)
        return done

    async def _check(self, cell: EvalResult, row: Any, deadline: float) -> None:
        self.log.append(("check", cell.prompt, row, deadline))

    def _finish(self, cell: EvalResult) -> None:
        self.log.append(("finish", cell.prompt))


def stack_of(prompt: str, options: Any, tools: tuple[Any, ...] = (), builtin: tuple[Any, ...] = ()) -> Any:
    return SimpleNamespace(prompt=prompt, options=options,
                           messages=[SimpleNamespace(content=["system"]), SimpleNamespace(content=["text"])],
                           tools=list(tools), builtin_tools=list(builtin))


def prototype(price: Any = 0.001, *, react: bool = False, tools: tuple[Any, ...] = (), builtin: tuple[Any, ...] = (),
              **settings: Any) -> Any:
    priced: list[Usage] = []

    def price_of(usage: Usage, batch: bool) -> Any:
        priced.append(usage)
        if price == "unknown":
            raise KeyError("no price")
        return price if batch else 99.0

    driver = SimpleNamespace(provider="openai", base_url="http://host/v1", price=price_of, priced=priced)
    return SimpleNamespace(provider="openai:m", system="be brief", settings=ModelSettings(**settings), driver=driver,
                           uses_react=react,
                           prompt_stack=lambda prompt, options: stack_of(prompt, options, tools, builtin))


def lane_of(*prompts: str, proto: Any = None, name: str = "openai:a") -> _Lane:
    lane = _Lane(name, 2, prototype=proto if proto is not None else prototype())
    lane.jobs = deque(_Cell(lane, EvalResult(n, name, p, {}, repeat=1), {"q": n}, Variant(None, "", system="sys"))
                      for n, p in enumerate(prompts))
    return lane


def test_the_first_request_carries_the_variants_system_the_run_options_and_the_images() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    run = Run(settings={"temperature": 0}, output_strategy="tool", images=["img"], output_schema=schema)
    lane = lane_of("hi")
    stack = _stack(run, lane.jobs[0])  # type: ignore[arg-type]
    assert stack.prompt == "hi" and stack.messages[-1].content == ["text", "img"]
    options = stack.options
    assert (options.system, options.settings, options.output_strategy, options.output_schema) == \
        ("sys", {"temperature": 0}, "tool", schema)
    assert _stack(Run(), lane.jobs[0]).messages[-1].content == ["text"]  # type: ignore[arg-type]


def test_a_lane_runs_live_with_a_note_without_a_batch_api_or_when_a_run_may_take_more_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api()
    monkeypatch.setattr(batch, "batch_api", lambda driver: api)
    run = Run()
    assert asyncio.run(_batch_api(run, lane_of("a"))) is api and run.ev.notes == []  # type: ignore[arg-type]
    api.is_available = False
    assert asyncio.run(_batch_api(run, lane_of("a", name="x"))) is None  # type: ignore[arg-type]
    monkeypatch.setattr(batch, "batch_api", lambda driver: None)
    assert asyncio.run(_batch_api(run, lane_of("a", name="y"))) is None  # type: ignore[arg-type]
    monkeypatch.setattr(batch, "batch_api", lambda driver: Api())
    schema = Run(output_schema={"type": "object"})
    assert asyncio.run(_batch_api(schema, lane_of("a", name="z"))) is None  # type: ignore[arg-type]
    for proto in (prototype(react=True), prototype(tools=("t",)), prototype(builtin=("web_search",))):
        assert asyncio.run(_batch_api(run, lane_of("a", name="w", proto=proto))) is None  # type: ignore
    turns = "a batch sends one model turn a run, and these runs may take more (tools, an output schema)"
    assert run.ev.notes == ["batch: x runs live: openai has no batch API at http://host/v1",
                            "batch: y runs live: openai has no batch API at http://host/v1",
                            *[f"batch: w runs live: {turns}"] * 3]
    assert schema.ev.notes == [f"batch: z runs live: {turns}"]


def test_a_runs_estimate_is_its_prompts_tokens_in_and_the_output_limit_out_at_the_batch_price() -> None:
    from ipyagent.memory import estimate_text

    proto = prototype(0.25, max_output_tokens=100)
    batched = _Batched(lane_of("x" * 41, proto=proto), Api())  # type: ignore[arg-type]
    batched.jobs["k"] = batched.lane.jobs[0]
    assert _estimate(Run(), batched, "k") == 0.25  # type: ignore[arg-type]
    assert proto.driver.priced == [Usage(input_tokens=estimate_text("be brief" + "x" * 41), output_tokens=100)]
    proto.driver.priced.clear()
    assert _estimate(Run(settings={"max_output_tokens": 7}), batched, "k") == 0.25  # type: ignore[arg-type]
    assert proto.driver.priced[0].output_tokens == 7
    bare = _Batched(lane_of("x", proto=prototype(None)), Api())  # type: ignore[arg-type]
    bare.jobs["k"] = bare.lane.jobs[0]
    assert _estimate(Run(), bare, "k") == 0.0  # type: ignore[arg-type]
    assert bare.lane.prototype.driver.priced[0].output_tokens == ESTIMATED_OUTPUT_TOKENS == 256
    unknown = _Batched(lane_of("x", proto=prototype("unknown")), Api())  # type: ignore[arg-type]
    unknown.jobs["k"] = unknown.lane.jobs[0]
    assert _estimate(Run(), unknown, "k") == 0.0  # type: ignore[arg-type]


def test_a_batch_the_provider_no_longer_knows_has_ended_and_other_errors_go_up() -> None:
    api = Api()
    api.states["b1"] = [BatchState("b1", "in_progress", False)]
    assert asyncio.run(_poll(api, "b1")) == BatchState("b1", "in_progress", False)  # type: ignore[arg-type]
    assert asyncio.run(_poll(api, "gone")) == BatchState("gone", GONE, True)  # type: ignore[arg-type]
    with pytest.raises(ProviderError, match="down"):
        asyncio.run(_poll(api, "down"))  # type: ignore[arg-type]
    assert GONE == "unknown to the provider"


def runner_on(run: Run, api: Api, monkeypatch: pytest.MonkeyPatch, **options: Any) -> BatchRunner:
    monkeypatch.setattr(batch, "batch_api", lambda driver: api)
    return BatchRunner(run, **options)  # type: ignore[arg-type]


def test_take_batches_the_runs_it_can_build_and_leaves_the_rest_to_the_live_lanes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    run, api = Run(), Api()
    runner = runner_on(run, api, monkeypatch)
    monkeypatch.setattr(batch, "batch_api", lambda driver: None if getattr(driver, "none", False) else api)
    lane = lane_of("a", "keyless", "refused", "b", "c")
    lane.jobs[3].key = "given"
    idle, failed, unbatched = _Lane("idle", 1, prototype=prototype()), _Lane("failed", 1), lane_of("u", name="u")
    failed.jobs.append(lane.jobs[0])
    unbatched.prototype.driver.none = True
    asyncio.run(runner.take([idle, failed, unbatched, lane, lane_of("s", name="openai:s")]))
    assert [job.result.prompt for job in lane.jobs] == ["keyless", "refused"] and len(failed.jobs) == 1
    assert len(unbatched.jobs) == 1 and ("key", "a", "openai:m", "sys") in run.log
    batched, second = runner.lanes
    assert list(batched.jobs) == ["k-a-1", "given", "k-c-1"] and batched.jobs["given"].key == "given"
    assert batched.bodies == {"k-a-1": {"prompt": "a"}, "given": {"prompt": "b"}, "k-c-1": {"prompt": "c"}}
    assert batched.stacks["k-a-1"].prompt == "a" and lane.jobs[1].key is None
    assert [[line["custom_id"] for line in chunk] for chunk in api.sent] == [["k-a-1", "given"], ["k-c-1"],
                                                                              ["k-s-1"]]
    assert run.ev.batch_progress is runner.progress and runner.progress.batches == ["b1", "b2", "b3"]
    assert run.ev.pending_batches == [(api, "b1"), (api, "b2"), (api, "b3")] and list(second.jobs) == ["k-s-1"]
    assert (runner.progress.submitted, runner.progress.in_progress) == (4, 4)  # both lanes
    assert runner.progress.estimate == pytest.approx(0.004)
    nothing = Run()
    asyncio.run(runner_on(nothing, Api(available=False), monkeypatch).take([lane_of("a")]))
    assert nothing.ev.batch_progress is None


def test_submit_collects_the_stored_batches_and_skips_the_runs_past_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store({"k-a-1": "old", "k-b-1": "old"})
    run, api = Run(store=store, budget=0.0025), Api()
    runner = runner_on(run, api, monkeypatch)
    lane = lane_of("a", "b", "c", "d", "e")
    asyncio.run(runner.take([lane]))
    (batched,) = runner.lanes
    assert batched.batches == {"old": ["k-a-1", "k-b-1"], "b1": ["k-c-1", "k-d-1"]}
    assert store.added == [("b1", "openai:a", ["k-c-1", "k-d-1"])]
    assert run.log[-1:] == [("skip", "e", "budget")] and list(batched.jobs) == ["k-a-1", "k-b-1", "k-c-1", "k-d-1"]
    assert run.budget.reserved == pytest.approx(0.002) and run.budget.refused == 1
    assert batched.estimates == {"k-c-1": 0.001, "k-d-1": 0.001, "k-e-1": 0.001}  # the stored ones: none
    assert runner.progress.estimate == pytest.approx(0.004)  # the stored batches' runs estimated too
    assert len(lane.prototype.driver.priced) == 5  # each run priced once
    assert runner.progress.batches == ["old", "b1"] and runner.progress.submitted == 4
    assert run.ev.pending_batches == [(api, "b1")]  # only what this process sent, until collect


def collected(monkeypatch: pytest.MonkeyPatch, store: Store | None, states: dict[str, list[BatchState]],
              given: dict[str, list[BatchAnswer]], *prompts: str) -> tuple[Run, Api, BatchRunner, list[Any]]:
    """A run whose lane's `prompts` went in batches of two and were collected; what each report said."""
    run, api = Run(store=store, budget=1.0), Api()
    reports: list[Any] = []
    runner = runner_on(run, api, monkeypatch, poll_s=0, on_progress=lambda p: reports.append(
        (p.in_progress, p.done, p.failed, [b for _, b in run.ev.pending_batches])))
    monkeypatch.setattr(batch, "time", SimpleNamespace(monotonic=lambda: 100.0))
    asyncio.run(runner.take([lane_of(*prompts)]))
    runner.lanes[0].started = 90.0
    api.states, api.given = states, given
    asyncio.run(runner.collect())
    return run, api, runner, reports


def test_collect_polls_until_every_batch_ends_and_fills_its_runs_from_the_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from decimal import Decimal

    store = Store()
    states = {"b1": [BatchState("b1", "in_progress", False), BatchState("b1", "ended", True)],
              "b2": [BatchState("b2", "ended", True)]}
    given = {"b1": [BatchAnswer("k-a-1", {"text": "Paris", "cost": Decimal("0.002")}),
                    BatchAnswer("k-b-1", {"text": "Lima"})],
             "b2": [BatchAnswer("k-c-1", error="refused", error_type="invalid_request")]}
    run, api, runner, reports = collected(monkeypatch, store, states, given, "a", "b", "c")
    assert reports == [(3, 0, 0, ["b1", "b2"]), (2, 0, 1, ["b1"]), (0, 2, 1, [])]
    assert api.asked == [("b2", ["k-c-1"]), ("b1", ["k-a-1", "k-b-1"])] and store.dropped == ["b2", "b1"]
    assert runner.progress.estimate == pytest.approx(0.002)  # the answers' costs replaced the estimates
    assert run.budget.spent == pytest.approx(0.003) and run.budget.reserved == 0.0  # Lima's price: its estimate
    paris = next(c for c in (j.result for j in runner.lanes[0].jobs.values()) if c.prompt == "a")
    assert (paris.text, paris.output, paris.tool_calls, paris.input_tokens, paris.output_tokens) == \
        ("Paris", None, (), 3, 4)
    assert paris.cost == 0.002 and type(paris.cost) is float and paris.total_s == 10.0 and paris.ttft_s is None
    records = [entry for entry in run.log if entry[0] == "record"]
    key, provider, prompt, result, meta, more = records[1][1:]
    assert (key, provider, prompt) == ("k-a-1", "openai:m", "a")
    assert [m.text if hasattr(m, "text") else m.content for m in result.messages] == [["text"], "Paris"]  # the last
    assert meta == {"evaluation": run.ev.id, "row": 0, "provider_key": "openai:a", "variant": None, "repeat": 1,
                    "batch": "b1"}
    assert more == {"text": "Paris", "output": None, "ok": True, "cost": 0.002, "seconds": 10.0, "ttft": None,
                    "error": None, "usage": Usage(input_tokens=3, output_tokens=4).model_dump()}
    failed = records[0]
    assert failed[4] is None and failed[6]["error"] == {"type": "invalid_request", "message": "refused"}
    assert failed[6]["ok"] is False and failed[6]["usage"] is None and failed[6]["cost"] is None
    assert ("check", "a", {"q": 0}, 105.0) in run.log and ("finish", "a") in run.log
    b1 = run.log[run.log.index(records[1]):]
    assert [e[0] if isinstance(e, tuple) else e for e in b1] == \
        ["record", "check", "finish", "record", "check", "finish", "flush", "committed", "committed"]


def test_a_run_without_an_answer_fails_by_how_its_batch_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    states = {"b1": [BatchState("b1", "Expired", True)], "b2": [BatchState("b2", "cancelled", True)]}
    given = {"b1": [BatchAnswer("k-b-1", {"bad": True})]}
    run, _, runner, reports = collected(monkeypatch, None, states, given, "a", "b", "c")
    cells = {j.result.prompt: j.result for j in runner.lanes[0].jobs.values()}
    assert (cells["a"].status, cells["a"].error_type, cells["a"].error) == (
        "failed", "timeout", "the batch ended (Expired) without an answer for this request")
    assert (cells["b"].error_type, cells["b"].error, cells["b"].text) == ("bad_response", "unreadable", "")
    assert (cells["c"].error_type, cells["c"].error) == (
        "provider_error", "the batch ended (cancelled) without an answer for this request")
    assert reports[-1][:3] == (0, 0, 3) and run.budget.spent == 0.0
    assert runner.progress.estimate == 0.0


def test_a_batch_gone_from_the_provider_asks_for_no_answers_and_an_unknown_key_is_passed_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    run, api = Run(store=store, budget=None), Api()
    runner = runner_on(run, api, monkeypatch, poll_s=0)
    asyncio.run(runner.take([lane_of("a", "b")]))
    (batched,) = runner.lanes
    batched.batches["b1"].insert(0, "not-ours")
    del batched.estimates["k-a-1"]  # a run a stored batch held: no estimate held for it
    batched.estimates["k-b-1"] = 0.0005
    run.writer.error = "the store failed"
    asyncio.run(runner._finish(batched, BatchState("b1", GONE, True)))
    assert api.asked == [] and store.dropped == []  # kept: the commit failed
    assert batched.jobs["k-a-1"].result.error == f"the batch ended ({GONE}) without an answer for this request"
    assert runner.progress.estimate == pytest.approx(0.002 - 0.001 - 0.0005)  # a: estimated now; b: as held
    assert run.budget.reserved == pytest.approx(0.002 - 0.0005)  # nothing held for a: nothing released
    assert len([e for e in run.log if e[0] == "record"]) == 2


def test_after_an_interrupt_the_batches_are_left_running_or_cancelled_when_the_person_says_yes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    answers = iter(["n", " YES ", "y"])

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    monkeypatch.setattr("builtins.input", answer)
    cancelled: list[Any] = []
    monkeypatch.setattr(batch, "cancel_batches", lambda ev: cancelled.append(ev))
    ev = SimpleNamespace(pending_batches=[(None, "b1"), (None, "b2")])
    left = ("ipyagent: batch(es) b1, b2 left running at the provider; run the same evaluation again with "
            "batch=True on the same run store to collect them (ev.cancel_batches() cancels them)")
    assert leave_or_cancel(ev, False) == left and asked == [] and cancelled == []
    assert leave_or_cancel(ev, True) == left
    assert asked == ["ipyagent: cancel the batch(es) b1, b2 at the provider? [y/N] "]
    done = "ipyagent: batch(es) b1, b2 cancelled; answered runs were not collected"
    assert leave_or_cancel(ev, True) == done and leave_or_cancel(ev, True) == done and cancelled == [ev, ev]
    for error in (EOFError, KeyboardInterrupt, RuntimeError):
        def refuse(prompt: str, error: type[BaseException] = error) -> str:
            raise error
        monkeypatch.setattr("builtins.input", refuse)
        assert leave_or_cancel(ev, True) == left
    assert leave_or_cancel(SimpleNamespace(pending_batches=None), True) == "" == leave_or_cancel(object(), True)


def test_cancel_batches_cancels_each_and_keeps_those_that_refused(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(batch, "run_sync", asyncio.run)
    api = Api()
    ev = SimpleNamespace(pending_batches=[(api, "b1"), (api, "stuck"), (api, "b2")])
    assert cancel_batches(ev) == ["b1", "b2"] and api.cancelled == ["b1", "b2"]
    assert ev.pending_batches == [(api, "stuck")]
    assert capsys.readouterr().err == "ipyagent: batch stuck not cancelled: cannot cancel\n"
