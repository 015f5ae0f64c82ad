"""`ipyagent.evaluate`: rows × providers, each cell a fresh run, assertions, the scheduler's
lanes (concurrency, 429 back-off for the whole lane, budget, interrupt), the cache in the
run store, and the `Evaluation`'s data."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import weakref
from typing import Any

import pytest
from pydantic import BaseModel

from ipyagent import Agent, Evaluation, aevaluate, evaluate
from ipyagent.agent.evaluation.checks import Outcome, parse_assertion, parse_verdict
from ipyagent.agent.evaluation.templates import TemplateError, normalize_rows, render_template
from ipyagent.agent.loop_thread import run_in_background
from ipyagent.agent.evaluation.scheduler import Budget
from ipyagent.drivers.rate_gate import RateGate
from ipyagent.drivers.registry import BUILTIN
from ipyagent.memory.store import RunStore

from ..support.stub_server import Reply, StubServer, openai_text_reply
from ..support.evaluation import CAPITALS, answering, capital_of, last_user_text

KEY_VARS = sorted({spec.api_key_env for spec in BUILTIN.values() if spec.api_key_env})


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def test_every_cell_is_a_fresh_run_with_its_row_rendered(store) -> None:
    with StubServer(responder=answering(capital_of)) as a, StubServer(responder=answering(lambda q: "No idea")) as b:
        ev = evaluate([Agent("openai:m1", base_url=a.url), Agent("openai:m2", base_url=b.url)],
                      "Capital of {{ row.country }}?", CAPITALS, assertions=["contains:{{ row.capital }}"], store=store)
    # one request per row and provider, each a conversation of one user message
    for server in (a, b):
        assert sorted(last_user_text(r["body"]) for r in server.requests) == sorted(
            f"Capital of {r['country']}?" for r in CAPITALS
        )
        assert all(len(r["body"]["messages"]) == 1 for r in server.requests)
    assert len(ev.results) == 6 and ev.total == 6
    assert [r.passed for r in ev.ordered()] == [True, False] * 3
    miss = ev.cell(1, "openai:m2")
    assert miss.text == "No idea" and miss.outcomes == [
        Outcome("contains:{{ row.capital }}", False, reason="the answer does not contain 'Tokyo'")
    ]
    summary = {s["provider"]: s for s in ev.summary_records()}
    assert summary["openai:m1"]["pass_rate"] == 1.0 and summary["openai:m2"]["pass_rate"] == 0.0
    assert summary["openai:m1"]["runs"] == 3 and summary["openai:m1"]["total_p50_s"] is not None


def test_an_agent_given_as_provider_keeps_its_system_blocks_budget(store) -> None:
    from ipyagent.core import SystemBlock

    blocks = [SystemBlock(text="You are terse.", source="user"),
              # ~102 tokens: over the budget
              SystemBlock(text="Notes: " + "n" * 400, source="memory", priority=1, dynamic=True)]
    with StubServer(responder=answering(capital_of)) as server:
        evaluate(
            [Agent("openai:m", base_url=server.url, system=blocks, system_budget=20)],
            "Capital of {{ row.country }}?",
            CAPITALS[:1],
            store=store,
        )
    assert server.requests[0]["body"]["messages"][0] == {"role": "system", "content": "You are terse."}


def test_a_cell_runs_on_an_agent_constructed_with_everything_of_the_one_given(
    store, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Agent] = []
    fresh = Agent.fresh
    monkeypatch.setattr(Agent, "fresh", lambda self: made.append(fresh(self)) or made[-1])

    def word_count(text: str) -> int:
        """Count the words of `text`."""
        return len(text.split())

    with StubServer(responder=answering(capital_of)) as server:
        given = Agent("openai:m", base_url=server.url, tools=[word_count], timeout=7, max_steps=3, system="Be terse.",
                      react=False, approve=print)
        given.messages.append(given.prompt_stack("earlier").messages[-1])
        evaluate([given], "Capital of {{ row.country }}?", CAPITALS[:1], store=store)
    [cell] = made
    assert cell is not given and cell.driver is given.driver and cell.toolbox is given.toolbox
    assert (cell.timeout, cell.max_steps, cell.system, cell.react, cell.approve, cell.memory) == (
        7,
        3,
        "Be terse.",
        False,
        print,
        None,
    )
    assert cell.settings == given.settings
    body = server.requests[0]["body"]
    # system, question
    assert [t["function"]["name"] for t in body["tools"]] == ["word_count"] and len(body["messages"]) == 2


def test_text_assertions_decide_and_say_why() -> None:
    class R:
        text = 'Answer: {"city": "Paris"}'
        output = None
        prompt = "q"

    row = {"capital": "paris"}

    def check(spec: str) -> Outcome:
        return asyncio.run(parse_assertion(spec).check(R(), row))

    assert check("contains:Paris").passed and not check("contains:paris").passed
    assert check("icontains:{{ row.capital }}").passed
    assert check(r"regex:\{.*\}").passed and not check(r"regex:^\d+$").passed
    assert not check("equals:Paris").passed
    assert check("equals:  Answer: {\"city\": \"Paris\"}  ").passed  # both sides stripped
    assert not check("json").passed  # text around the object: not JSON
    R.text = '```json\n{"city": "Paris"}\n```'
    assert check("json").passed
    with pytest.raises(ValueError, match="unknown assertion"):
        parse_assertion("startswith:x")
    with pytest.raises(ValueError, match="--schema"):
        parse_assertion("schema")
    with pytest.raises(ValueError, match="no function 'nope'"):
        parse_assertion("python:nope", namespace={})
    with pytest.raises(ValueError, match="not a valid pattern"):
        parse_assertion("regex:(")
    with pytest.raises(ValueError, match="needs a value"):
        parse_assertion("contains:")


def test_python_assertions_return_bools_or_scores_and_failures_are_reasons() -> None:
    class R:
        text, output, prompt = "Lima", None, "q"

    async def judge_async(result, row):
        return 0.75

    cases = {
        lambda r, row: r.text == row: (True, None, None),
        lambda r, row: 0.4: (False, 0.4, "score 0.4 < 0.5"),
        judge_async: (True, 0.75, None),
        lambda r, row: 1 / 0: (False, None, "raised ZeroDivisionError: division by zero"),
        lambda r, row: "yes": (False, None, "returned 'yes'; return a bool or a score in [0, 1]"),
    }
    for function, (passed, score, reason) in cases.items():
        outcome = asyncio.run(parse_assertion(function).check(R(), "Lima"))
        assert (outcome.passed, outcome.score, outcome.reason) == (passed, score, reason)
    named = parse_assertion("python:same", namespace={"same": lambda r, row: True})
    assert named.name == "python:same"


def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: what to say.
    """
    return text.upper()


def test_a_judge_grades_each_answer_and_its_cost_is_counted_apart(store) -> None:
    def verdict(prompt: str) -> str:
        answer = prompt.split("Answer:\n", 1)[1]
        good = "Paris" in answer or "Tokyo" in answer
        return json.dumps({"pass": good, "reason": "names the capital" if good else "wrong city"})

    with StubServer(responder=answering(lambda q: "Paris" if "France" in q else "Osaka")) as model, \
            StubServer(responder=answering(verdict)) as judge:
        # Local servers have an unknown price unless price_as names it.
        ev = evaluate(
            ["openai:gpt-4.1-mini"],
            "Capital of {{ row.country }}?",
            CAPITALS[:2],
            assertions=["judge:openai:gpt-4.1-nano"],
            rubric="Names the capital of the country.",
            factory=lambda pid: Agent(pid, base_url=model.url, system="Be brief.", tools=[shout], price_as=pid),
            judge_factory=lambda pid: Agent(pid, base_url=judge.url, price_as=pid),
            store=store,
        )
    assert len(judge.requests) == 2
    assert "Names the capital of the country." in last_user_text(judge.requests[0]["body"])
    # The judge gets neither the runs' system prompt nor their tools.
    assert all(len(r["body"]["messages"]) == 1 and "tools" not in r["body"] for r in judge.requests)
    first, second = ev.ordered()
    assert first.passed and first.outcomes[0].reason == "names the capital"
    assert not second.passed and second.outcomes[0].reason == "wrong city"
    assert first.judge_cost is not None and first.judge_cost > 0  # the judge's price, apart from the run's
    assert ev.summary_records()[0]["judge_cost"] == pytest.approx(first.judge_cost + second.judge_cost)
    assert parse_verdict("FAIL: too vague").passed is False
    with pytest.raises(ValueError, match="not a verdict"):
        parse_verdict("maybe")


def test_a_judge_without_a_verdict_is_an_error_of_its_cell_not_a_failure(store) -> None:
    replies = iter(["I am not sure.", '{"pass": true, "reason": "fine"}', '{"pass": true, "reason": "fine"}'])
    with StubServer(responder=answering(capital_of)) as model, \
            StubServer(responder=answering(lambda prompt: next(replies))) as judge:
        def once() -> Any:
            return evaluate(["openai:m"], "Capital of {{ row.country }}?", CAPITALS[:2],
                            assertions=["judge:openai:j"], factory=lambda pid: Agent(pid, base_url=model.url),
                            judge_factory=lambda pid: Agent(pid, base_url=judge.url), store=store, concurrency=1)

        ev = once()
        first, second = ev.ordered()
        assert (first.status, first.error_type, first.text) == ("failed", "check", "The capital is Paris.")
        assert first.error == "judge:openai:j: the judge's reply is not a verdict: 'I am not sure.'"
        assert second.passed and second.ok
        summary = ev.summary_records()[0]
        assert (summary["passed"], summary["failed"], summary["errors"]) == (1, 0, 1)  # not "the model failed"
        again = once()  # the answers and the judge's replies from the store: the same error, no request
        assert len(model.requests) == 2 and len(judge.requests) == 2
        assert [(r.status, r.error_type) for r in again.ordered()] == [("failed", "check"), ("ok", None)]
        assert again.summary_records()[0]["errors"] == 1


def test_the_cache_serves_a_rerun_without_requests_and_survives_a_new_store(store_location) -> None:
    path = store_location  # a SQLite file, a PostgreSQL database
    with StubServer(responder=answering(capital_of)) as server:
        agent = lambda: Agent("openai:m", base_url=server.url)
        first = evaluate(
            [agent()], "Capital of {{ row.country }}?", CAPITALS, assertions=["contains:{{ row.capital }}"], store=path
        )
        assert len(server.requests) == 3 and not any(r.cached for r in first.results)
        again = evaluate(
            [agent()], "Capital of {{ row.country }}?", CAPITALS, assertions=["contains:{{ row.capital }}"], store=path
        )
        assert len(server.requests) == 3  # no request
        assert all(r.cached for r in again.results) and [r.text for r in again.ordered()] == [
            r.text for r in first.ordered()
        ]
        assert [r.passed for r in again.ordered()] == [True] * 3
        assert [r.output_tokens for r in again.ordered()] == [r.output_tokens for r in first.ordered()]
        changed = evaluate([agent()], "Capital city of {{ row.country }}?", CAPITALS, store=path)  # another request
        assert len(server.requests) == 6 and not any(r.cached for r in changed.results)
        forced = evaluate([agent()], "Capital of {{ row.country }}?", CAPITALS, store=path, cache=False)
        assert len(server.requests) == 9 and not any(r.cached for r in forced.results)
    reopened = RunStore(path)  # another process (a restarted kernel) reads the same file
    try:
        runs = reopened.runs(thread="evaluation", limit=100)
        assert len(runs) == 9 and all(r["cache_key"] for r in runs)
        assert {r["metadata"]["text"] for r in runs} == {capital_of(f"Capital of {c['country']}?") for c in CAPITALS}
        assert [n["role"] for n in reopened.nodes(runs[0]["id"])] == ["user", "assistant"]
    finally:
        reopened.close()


def test_a_cached_rerun_reads_its_runs_in_one_query_and_decodes_each_as_it_serves_it(store, monkeypatch) -> None:
    """The runs a re-run serves are read in one statement per 500 keys, as rows; each is decoded as its
    cell is served and let go: the garbage collector never has every decoded run to go over at once."""
    from ipyagent.agent.evaluation import matrix

    with StubServer(responder=answering(capital_of)) as server:
        run = lambda: evaluate([Agent("openai:m", base_url=server.url), Agent("openai:n", base_url=server.url)],
                               "Capital of {{ row.country }}?", CAPITALS, store=store)
        first = run()
        statements: list[str] = []
        store._db.conn.set_trace_callback(statements.append)
        live: list[Any] = []

        class Decoded(dict):  # a dict that can be watched (weakref)
            pass

        def decode(row: tuple) -> dict:
            assert all(ref() is None for ref in live)  # the runs served before are gone
            found = Decoded(matrix_decode(row))
            live.append(weakref.ref(found))
            return found

        matrix_decode = matrix.cached_run
        monkeypatch.setattr(matrix, "cached_run", decode)
        again = run()
    assert len(server.requests) == 6 and all(r.cached for r in again.results) and len(live) == 6
    assert [r.text for r in again.ordered()] == [r.text for r in first.ordered()]
    assert len([s for s in statements if "cache_key IN" in s]) == 1


def test_a_cells_outcomes_are_a_list_without_spare_slots(store) -> None:
    """A matrix keeps a list of outcomes per cell: sized to its checks, first run and cached re-run alike."""
    with StubServer(responder=answering(capital_of)) as server:
        run = lambda: evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", CAPITALS,
                               assertions=["contains:{{ row.capital }}", "icontains:a"], store=store)
        first, again = run(), run()
    for ev in (first, again):
        assert all(sys.getsizeof(r.outcomes) == sys.getsizeof([None, None]) for r in ev.results)
        assert [len(r.outcomes) for r in ev.results] == [2, 2, 2]


def test_one_request_in_two_columns_keeps_each_columns_answers_in_the_cache(store) -> None:
    asked = iter(range(100))
    with StubServer(responder=answering(lambda q: f"answer {next(asked)}")) as server:
        twins = lambda: [Agent("openai:m", base_url=server.url), Agent("openai:m", base_url=server.url)]
        first = evaluate(twins(), "Capital of {{ row.country }}?", CAPITALS, store=store, concurrency=1)
        again = evaluate(twins(), "Capital of {{ row.country }}?", CAPITALS, store=store, concurrency=1)
    assert first.columns == ["openai:m", "openai:m #2"] and len(server.requests) == 6
    assert all(r.cached for r in again.results)
    for column in first.columns:  # each column served its own answers, not the other column's
        assert [again.cell(n, column).text for n in range(3)] == [first.cell(n, column).text for n in range(3)]
    assert len({r.text for r in again.results}) == 6

def test_a_failed_run_is_not_served_from_the_cache(store) -> None:
    with StubServer(Reply(status=400, headers={"Content-Type": "application/json"},
                          pieces=[b'{"error": {"message": "bad", "type": "invalid_request_error"}}'])) as server:
        for _ in range(2):
            ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["a"], store=store)
            assert ev.results[0].error_type == "invalid_request" and not ev.results[0].cached
        assert len(server.requests) == 2


def test_a_429_holds_its_whole_lane_for_retry_after_while_others_go_on(store, monkeypatch) -> None:
    """On the virtual clock (every provider in the process, each pause on the loop's clock), so the
    order is exact under any load: the limited lane waits Retry-After to the second, the other goes on."""
    import ipyagent.agent.evaluation.scheduler as scheduler
    import ipyagent.drivers.rate_gate as rate_gate
    from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

    from ..support.virtual_clock import LoopServer, run_virtual

    rows, first = [f"q{n}" for n in range(8)], [True]
    too_many = Reply(status=429, headers={"Content-Type": "application/json", "Retry-After": "1"},
                     pieces=[b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'])
    ok = answering(lambda q: "ok", wait=0.05)

    def limited_first(body: Any) -> Reply:  # then answered, 50 ms after each request
        was_first, first[0] = first[0], False
        return too_many if was_first else ok(body)

    slow, fast = LoopServer(responder=limited_first), LoopServer(responder=ok)
    agents = [Agent(OpenAIChatPromptDriver(model, api_key="k", transport=server))
              for model, server in (("limited", slow), ("free", fast))]
    ev = run_virtual(lambda: aevaluate(agents, "{{ row }}", rows, concurrency=2, store=store), monkeypatch,
                     rate_gate, scheduler, own_loop=True)
    assert all(r.ok for r in ev.results), [r.error for r in ev.results if not r.ok]
    t429 = slow.request_times[0]
    # The one in flight with it had been sent already; every later request of the lane waited for Retry-After.
    later = slow.request_times[2:]
    assert len(later) == 7 and min(later) == t429 + 1  # 6 rows and the retry
    # The other lane did not wait: it was done before the limited lane resumed.
    assert len(fast.request_times) == 8 and max(fast.request_times) < t429 + 1


def test_rate_gate_holds_never_shorten() -> None:
    gate = RateGate()
    gate.hold(5)
    gate.hold(0.1)
    assert gate.closed_for > 4 and gate.holds == 2


def test_budget_stops_scheduling_before_the_estimate_would_pass_it(store) -> None:
    async def reservations() -> None:
        budget = Budget(1.0)
        assert await budget.reserve(lambda: 0.6) == 0.6
        waiting = asyncio.ensure_future(budget.reserve(lambda: 0.5))  # 0.6 in flight could settle for less
        await asyncio.sleep(0)
        assert not waiting.done()
        budget.settle(0.6, 0.2)  # it did: room for 0.5
        assert await waiting == 0.5 and budget.spent == pytest.approx(0.2) and budget.reserved == 0.5
        budget.settle(0.5, 0.7)
        assert await budget.reserve(lambda: 0.2) is None and budget.refused == 1  # nothing in flight: refused
        assert await budget.reserve(lambda: 0.05) == 0.05  # a cheaper one still fits

    asyncio.run(reservations())

    rows = [f"question {n}" for n in range(12)]
    # Long enough that a run costs more than the first estimate (256 output tokens at the same price).
    with StubServer(responder=answering(lambda q: "word " * 100)) as server:
        probe = evaluate(
            [Agent("openai:gpt-4.1-mini", base_url=server.url, price_as="openai:gpt-4.1-mini")],
            "{{ row }}",
            rows[:1],
            store=store,
            cache=False,
        )
        one = probe.results[0].cost
        assert one and one > 0
        ev = evaluate(
            [Agent("openai:gpt-4.1-mini", base_url=server.url, price_as="openai:gpt-4.1-mini")],
            "{{ row }}",
            rows,
            budget=one * 4.5,
            concurrency=1,
            store=store,
            cache=False,
        )
    ran = [r for r in ev.results if r.status != "skipped"]
    skipped = [r for r in ev.results if r.status == "skipped"]
    assert ev.budget_stopped and skipped and all(r.error_type == "budget" for r in skipped)
    assert len(ran) == 4 and len(server.requests) == 1 + len(ran)  # a fifth would pass 4.5 runs' worth
    assert sum(r.cost for r in ran) <= one * 4.5
    assert len(ev.results) == 12


def test_the_budget_holds_under_concurrency_and_counts_what_it_skipped(store) -> None:
    # gpt-4.1: $2 / M tokens in, $8 / M out; 20,000 tokens out (--max-tokens, the first estimate): $0.16 a run.
    reply = lambda body: openai_text_reply("ok", usage=(10, 20_000))
    with StubServer(responder=reply) as server:
        ev = evaluate([Agent("openai:gpt-4.1", base_url=server.url, price_as="openai:gpt-4.1")], "{{ row }}",
                      [f"q{n}" for n in range(20)], budget=0.50, concurrency=8, settings={"max_output_tokens": 20_000},
                      store=store)
    ran = [r for r in ev.results if r.ran]
    assert [round(r.cost, 5) for r in ran] == [0.16002] * 3 and len(server.requests) == 3
    assert ev.spent == pytest.approx(3 * 0.16002) and ev.spent <= 0.50 and ev.reserved == 0
    assert ev.skipped == 17 and ev.budget_stopped
    assert ev.to_json()["skipped"] == 17


def test_an_interrupt_stops_every_run_keeps_the_finished_and_closes_connections(store) -> None:
    rows = [f"q{n}" for n in range(6)]
    done = threading.Event()
    finished: list[Any] = []

    def on_result(result):
        finished.append(result)
        if len(finished) == 2:
            done.set()

    def reply(body):
        slow = last_user_text(body) not in ("q0", "q1")
        return openai_text_reply("a long answer " * 20, piece=4, delay=0.2 if slow else 0.0)

    ev = Evaluation([], [])
    with StubServer(responder=reply) as server:
        async def main():
            task = asyncio.ensure_future(run_in_background(aevaluate(
                [Agent("openai:m", base_url=server.url)], "{{ row }}", rows, concurrency=6, store=store,
                on_result=on_result, evaluation=ev)))
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, done.wait, 10)
            assert await loop.run_in_executor(None, server.wait_for, lambda: len(server.requests) >= 6, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert server.wait_for(lambda: len(server.hangups) >= 4, 10)
    assert ev.interrupted and len(ev.results) == 2
    assert {r.prompt for r in ev.results} == {"q0", "q1"} and all(r.ok for r in ev.results)
    assert len(server.hangups) == 4  # the four streams in flight were closed, not read to the end


def test_a_provider_that_cannot_be_built_fails_its_cells_only(store) -> None:
    with StubServer(responder=answering(lambda q: "fine")) as server:
        ev = evaluate(
            ["anthropic:claude-x", Agent("openai:m", base_url=server.url)], "{{ row }}", ["a", "b"], store=store
        )
    broken = [r for r in ev.results if r.provider == "anthropic:claude-x"]
    assert len(broken) == 2 and all(r.error_type == "configuration" and "ANTHROPIC_API_KEY" in r.error for r in broken)
    assert all(r.ok for r in ev.results if r.provider == "openai:m")
    assert broken[0].failures() == [f"configuration: {broken[0].error}"]


class City(BaseModel):
    name: str
    country: str


def test_structured_output_and_the_schema_assertion(store) -> None:
    def answer(question: str) -> str:
        return '{"name": "Paris", "country": "France"}' if "France" in question else "Tokyo"

    with StubServer(responder=answering(answer)) as server:
        ev = evaluate(
            [Agent("openai:m", base_url=server.url)],
            "{{ row.country }}",
            CAPITALS[:2],
            assertions=["schema"],
            output_schema=City,
            output_strategy="rule",
            store=store,
        )
        france, japan = ev.ordered()
        assert france.passed and france.output == City(name="Paris", country="France")
        assert not japan.passed and japan.error_type == "invalid_output"
        again = evaluate(
            [Agent("openai:m", base_url=server.url)],
            "{{ row.country }}",
            CAPITALS[:1],
            assertions=["schema"],
            output_schema=City,
            output_strategy="rule",
            store=store,
        )
    assert again.results[0].cached and again.results[0].output == City(name="Paris", country="France")


def test_rows_of_every_kind_are_normalized() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(CAPITALS)
    assert normalize_rows(frame) == CAPITALS
    assert normalize_rows(("a", "b")) == ["a", "b"]
    with pytest.raises(TypeError, match="--over needs"):
        normalize_rows("abc")
    twice = pd.DataFrame([["France", "Paris", "Lyon"]], columns=["country", "capital", "capital"])
    with pytest.raises(TypeError, match="columns 'capital' appear more than once; rename them"):
        normalize_rows(twice)  # pandas warned and kept one of them
    assert render_template("{{ row }}!", "hi") == "hi!"
    assert render_template("{{ row.country }} {{ x }}", CAPITALS[0], {"x": 1}) == "France 1"


def test_a_row_template_reads_only_the_names_it_uses_from_the_namespace() -> None:
    class Namespace(dict):  # a notebook's: every name a row's render touches is logged
        read: list[str] = []

        def __getitem__(self, name: str) -> Any:
            self.read.append(name)
            return super().__getitem__(name)

        def items(self) -> Any:
            self.read.append("*")
            return super().items()

    names = Namespace(x=1, api_key="sk-live-1234567890abcdef", big=list(range(1000)), unused="u")
    assert render_template("{{ row }} {{ x }} {{ api_key }}", "r", names, redacting=True) == "r 1 [redacted]"
    assert sorted(names.read) == ["api_key", "x"]  # never the whole namespace, per row
    assert render_template("{% for n in big[:2] %}{{ n }}{% endfor %}", "r", names) == "01"
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render_template("{{ nope }}", "r", names)


MESSY = [{"country": "France", "capital": "Paris", "pattern": "Par.s"},
         {"country": "Japan", "pattern": "Tok.o"},  # no capital: the contains check cannot be rendered
         {"country": "Peru", "capital": "Lima", "pattern": "Lim(a"}]  # an invalid pattern


def test_a_row_that_cannot_be_rendered_is_a_template_error_and_the_others_run(store) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", MESSY,
                      assertions=["contains:{{ row.capital }}", "regex:{{ row.pattern }}"], store=store)
    # Only row 0 was sent; rows 1 and 2 are template_error runs naming the row, the check and why.
    assert [last_user_text(r["body"]) for r in server.requests] == ["Capital of France?"]
    first, second, third = ev.ordered()
    assert first.ok and first.passed
    assert (second.status, second.error_type, second.passed) == ("template_error", "template", None)
    assert (
        second.error
        == "row 1: check contains:{{ row.capital }}: the template: 'dict object' has no attribute 'capital'"
    )
    assert third.status == "template_error" and third.error.startswith(
        "row 2: check regex:{{ row.pattern }}: 'Lim(a' is not a valid pattern (missing )")
    assert ev.notes[0] == f"2 rows could not be rendered (not sent: template_error): {second.error}; {third.error}"
    assert len(ev.notes) == 2 and ev.notes[1].startswith("price unknown: ") and "--price-as PROVIDER:MODEL" \
        in ev.notes[1]  # a local server: why the cost is unknown, once
    summary = ev.summary_records()[0]
    assert (summary["runs"], summary["template_errors"], summary["pass_rate"]) == (1, 2, 1.0)


def test_a_missing_value_in_a_dataframe_is_its_rows_template_error_not_a_failed_answer(store) -> None:
    """A None/NaN in the column a check reads was the text "nan": a right answer failed its check and the
    NaN made the evaluation's JSON invalid for the notebook (jupyter_client warned in the cell)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"country": ["France", "Japan"], "capital": ["Paris", None], "size": [1.5, float("nan")]})
    with StubServer(responder=answering(capital_of)) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", frame,
                      assertions=["contains:{{ row.capital }}"], store=store)
    assert [last_user_text(r["body"]) for r in server.requests] == ["Capital of France?"]
    france, japan = ev.ordered()
    assert france.passed and (japan.status, japan.passed) == ("template_error", None)
    assert japan.error == ("row 1: check contains:{{ row.capital }}: the template: "
                           "'dict object' has no attribute 'capital'")
    json.dumps(ev.to_json(), allow_nan=False, default=str)  # no NaN left anywhere


def test_a_prompt_that_cannot_be_rendered_names_its_row_and_no_row_rendered_sends_nothing(store) -> None:
    rows = [{"country": "a"}, {"land": "b"}, {"country": "  "}]
    with StubServer(responder=answering(lambda q: "x")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row.country }}", rows, store=store)
        assert [r.error for r in ev.ordered()] == [
            None, "row 1: the template: 'dict object' has no attribute 'country'",
            "row 2: the prompt is empty once rendered"]
        assert len(server.requests) == 1
        with pytest.raises(
            ValueError,
            match="no row could be rendered, so nothing was sent: 2 rows could not be "
            "rendered .*row 0: the template: 'dict object' has no attribute 'country'",
        ):
            evaluate([Agent("openai:m", base_url=server.url)], "{{ row.country }}", [{"x": 1}, {"y": 2}], store=store)
        assert len(server.requests) == 1


def test_the_dataframe_has_a_row_per_cell_with_the_issue_columns(store, tmp_path) -> None:
    pytest.importorskip("pandas")
    with StubServer(responder=answering(capital_of)) as a, StubServer(responder=answering(lambda q: "?")) as b:
        ev = evaluate(
            [Agent("openai:m1", base_url=a.url), Agent("openai:m2", base_url=b.url)],
            "Capital of {{ row.country }}?",
            CAPITALS,
            assertions=["contains:{{ row.capital }}", "regex:\\."],
            store=store,
        )
    frame = ev.to_dataframe()
    assert len(frame) == 6
    for column in ["row", "country", "capital", "provider", "prompt", "output", "structured", "passed",
                   "contains:{{ row.capital }}", "regex:\\.", "error", "input_tokens", "output_tokens", "cost",
                   "ttft_s", "total_s", "cached"]:
        assert column in frame.columns, column
    assert list(frame["row"]) == [0, 0, 1, 1, 2, 2]
    assert list(frame["provider"]) == ["openai:m1", "openai:m2"] * 3
    assert frame.loc[0, "output"] == "The capital is Paris." and frame.loc[0, "prompt"] == "Capital of France?"
    assert frame.loc[1, "failures"].startswith("contains:{{ row.capital }}: the answer does not contain 'Paris'")
    csv_text = ev.to_csv(tmp_path / "ev.csv").read_text()
    assert csv_text.splitlines()[0].startswith("row,country,capital,column,provider,alias,variant,repeat,prompt,output")
    doc = json.loads(ev.to_json(tmp_path / "ev.json").read_text())
    assert len(doc["results"]) == 6 and doc["summary"][0]["provider"] == "openai:m1"
    assert doc["results"][0]["outcomes"][0]["passed"] is True


def test_a_store_made_before_the_cache_gains_its_column(tmp_path) -> None:
    import sqlite3

    from ipyagent.memory import store_schema

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(store_schema._SCHEMA + "PRAGMA user_version = 1;")
    conn.execute("INSERT INTO runs (id, status, started_at) VALUES ('old', 'ok', 0)")
    conn.commit()
    conn.close()
    reopened = RunStore(path)
    try:
        assert reopened.run("old")["cache_key"] is None
        reopened.add_finished_runs(
            [{"run": {"status": "ok", "cache_key": "k", "metadata": {"text": "t"}}, "nodes": []}]
        )
        assert reopened.cached_runs(["k", "missing"])["k"]["metadata"] == {"text": "t"}
    finally:
        reopened.close()


def test_settings_go_into_every_request_and_into_the_cache_key(store) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        run = lambda t: evaluate([Agent("openai:m", base_url=server.url)], "{{ row.country }}", CAPITALS[:2],
                                 settings={"temperature": t}, store=store)
        run(0.1)
        assert [r["body"]["temperature"] for r in server.requests] == [0.1, 0.1]
        assert all(r.cached for r in run(0.1).results) and len(server.requests) == 2
        assert not any(r.cached for r in run(0.7).results) and len(server.requests) == 4


def test_a_run_past_its_timeout_is_a_cell_with_the_error(store) -> None:
    held: list[Reply] = []

    def reply(body: dict[str, Any]) -> Reply:
        if last_user_text(body) != "slow":
            return openai_text_reply("an answer " * 10, piece=4)
        # Two pieces, then nothing until the test ends: past any timeout, whatever the machine's load
        # (a quick run still has the whole timeout to answer).
        held.append(openai_text_reply("an answer " * 10, piece=4, hold_after=3))
        return held[-1]

    with StubServer(responder=reply) as server:
        try:
            ev = evaluate(
                [Agent("openai:m", base_url=server.url)], "{{ row }}", ["quick", "slow"], timeout=3.0, store=store
            )
        finally:
            for one in held:
                one.release.set()
    quick, slow = ev.ordered()
    assert quick.ok and slow.status == "failed" and slow.error_type == "timeout"
    assert slow.text  # the partial answer is kept


def test_a_regex_past_its_time_limit_fails_timed_out_and_a_linear_one_answers() -> None:
    class R:
        text, output, prompt = "a" * 50 + "b", None, "q"

    def outcome(spec: str) -> Outcome:
        check = parse_assertion(spec)
        check.timeout = 0.05
        return asyncio.run(check.check(R(), {}))

    # The regex engine answers the classic catastrophic pattern at once (no match) ...
    assert outcome("regex:^(a+)+$") == Outcome("regex:^(a+)+$", False, reason="the answer has no match for '^(a+)+$'")
    # ... and stops one it cannot, past the limit: a failed check, not a hung kernel.
    assert outcome("regex:^(a|a)+$") == Outcome("regex:^(a|a)+$", False,
                                                reason="timed out: the pattern ran past 0.05 s")
    assert outcome("regex:a{50}b").passed


def test_a_cells_checks_together_end_by_the_runs_deadline(store) -> None:
    catastrophic = [f"regex:^(a|a)+${'$' * n}" for n in range(3)]  # three patterns the engine cannot answer
    with StubServer(responder=answering(lambda q: "a" * 50 + "b")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["q"], assertions=catastrophic,
                      check_timeout=0.3, timeout=0.5, store=store)
    first, second, third = ev.results[0].outcomes
    # Its own 0.3 s limit when the model answered at once, else the run's deadline (a loaded machine).
    assert not first.passed and first.reason.startswith(("timed out: the pattern ran past", "timed out: the check"))
    assert not second.passed and second.reason.startswith("timed out")
    # The run's deadline (0.5 s), or a check timeout after the checks began, had passed: the third never ran.
    assert third.reason == "timed out: no time was left before the run's deadline"


def test_a_python_check_past_its_limit_fails_timed_out_and_its_thread_is_stopped(store) -> None:
    entered, left = threading.Event(), threading.Event()

    def spin(result, row):
        entered.set()
        try:
            while True:
                pass
        finally:
            left.set()

    with StubServer(responder=answering(lambda q: "fine")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["a"], assertions=[spin, "contains:fine"],
                      check_timeout=0.2, timeout=2, store=store)
    (cell,) = ev.results
    assert entered.is_set() and left.wait(10)  # the loop was ended in its thread
    spun = cell.outcomes[0]
    assert (spun.name, spun.passed) == ("python:spin", False)
    assert re.fullmatch(r"timed out: the check ran past [0-9.]+ s", spun.reason)  # by the run's deadline
    assert cell.outcomes[1].passed and not cell.passed


def test_an_interrupt_stops_a_python_check_in_its_thread(store) -> None:
    entered, left = threading.Event(), threading.Event()

    def spin(result, row):
        entered.set()
        try:
            while True:
                pass
        finally:
            left.set()

    with StubServer(responder=answering(lambda q: "fine")) as server:
        async def main():
            task = asyncio.ensure_future(run_in_background(aevaluate(
                [Agent("openai:m", base_url=server.url)], "{{ row }}", ["a"], assertions=[spin], store=store)))
            await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
    assert left.wait(10)


def test_repeats_are_fresh_requests_with_their_own_cache_keys_and_flaky_rows_are_found(store) -> None:
    answers = iter(["Paris", "Lyon", "Paris"] + ["Tokyo"] * 3)  # France's three repeats disagree

    def reply(body):
        return openai_text_reply(next(answers))

    with StubServer(responder=reply) as server:
        run = lambda: evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", CAPITALS[:2],
                               repeat=3, assertions=["contains:{{ row.capital }}"], concurrency=1, store=store)
        ev = run()
        assert len(server.requests) == 6  # each repeat its own request
        again = run()
        assert len(server.requests) == 6 and all(r.cached for r in again.results)  # all served from the store
    assert ev.total == 6 and [r.repeat for r in ev.cells(0, "openai:m")] == [0, 1, 2]
    assert [r.text for r in again.cells(0, "openai:m")] == ["Paris", "Lyon", "Paris"]  # each repeat its own answer
    assert ev.flaky() == [(0, "openai:m")]
    summary = ev.summary_records()[0]
    assert (summary["runs"], summary["passed"], summary["flaky"]) == (6, 5, 1)
    assert summary["pass_rate"] == pytest.approx(5 / 6)
    assert [(r["row"], r["repeat"], r["passed"]) for r in ev.records()][:3] == [
        (0, 0, True),
        (0, 1, False),
        (0, 2, True),
    ]
    with pytest.raises(ValueError, match="repeat must be a whole number, 1 or more"):
        evaluate(["openai:m"], "{{ row }}", ["a"], repeat=0)


def test_prompt_and_system_variants_are_columns_named_provider_slash_variant(store) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ev = evaluate(
            [Agent("openai:m", base_url=server.url)],
            None,
            CAPITALS[:2],
            prompts={
                "terse": "{{ row.country }}? One word.",
                "steps": "Think, then name the capital of {{ row.country }}.",
            },
            systems={"steps": "You reason step by step."},
            assertions=["contains:{{ row.capital }}"],
            store=store,
        )
        sent = sorted((r["body"]["messages"][0]["content"] if len(r["body"]["messages"]) > 1 else "",
                       last_user_text(r["body"])) for r in server.requests)
        again = evaluate(
            [Agent("openai:m", base_url=server.url)],
            None,
            CAPITALS[:2],
            prompts={
                "terse": "{{ row.country }}? One word.",
                "steps": "Think, then name the capital of {{ row.country }}.",
            },
            systems={"steps": "You reason step by step."},
            store=store,
        )
        assert len(server.requests) == 4 and all(r.cached for r in again.results)
    assert ev.columns == ["openai:m/terse", "openai:m/steps"] and ev.variants == ["terse", "steps"]
    assert sent == [("", "France? One word."), ("", "Japan? One word."),
                    ("You reason step by step.", "Think, then name the capital of France."),
                    ("You reason step by step.", "Think, then name the capital of Japan.")]
    assert ev.cell(1, "openai:m/steps").prompt == "Think, then name the capital of Japan."
    assert {r["column"]: r["variant"] for r in ev.records()} == {"openai:m/terse": "terse", "openai:m/steps": "steps"}
    assert [s["column"] for s in ev.summary_records()] == ["openai:m/terse", "openai:m/steps"]
    with pytest.raises(ValueError, match="not both"):
        evaluate(["openai:m"], "{{ row }}", ["a"], prompts={"a": "{{ row }}"})
    with pytest.raises(ValueError, match="one word without '/'"):
        evaluate(["openai:m"], None, ["a"], prompts={"a/b": "{{ row }}"})
    with pytest.raises(ValueError, match="no prompt template for only_system"):
        evaluate(["openai:m"], None, ["a"], systems={"only_system": "Be brief."})
