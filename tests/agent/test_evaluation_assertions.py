"""The evaluation's assertions (`agent/evaluation/checks/assertions.py`) on hand-made results: each
kind's verdict and its reason word for word, the rows' templates rendered once, the shared outcomes,
the spec parser's errors, a function's scores, and the judge's prompt and verdicts."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from ipyagent.agent.evaluation.checks import assertions as module
from ipyagent.agent.evaluation.checks.assertions import (
    DEFAULT_RUBRIC,
    PASS_SCORE,
    Assertion,
    CallableAssertion,
    JsonAssertion,
    JudgeAssertion,
    Outcome,
    SchemaAssertion,
    TextAssertion,
    Verdict,
    parse_assertion,
    parse_verdict,
)
from ipyagent.agent.evaluation.checks.limits import CHECK_TIMEOUT_S, Stoppable


def result(text: str | None = "", output: Any = None, prompt: str = "Q?") -> SimpleNamespace:
    return SimpleNamespace(text=text, output=output, prompt=prompt, error=None)


def check(assertion: Assertion, text: str | None, row: Any = None, **fields: Any) -> Outcome:
    return asyncio.run(assertion.check(result(text, **fields), row))


def test_an_outcome_and_the_base_assertion() -> None:
    outcome = Outcome("x", True)
    assert (outcome.score, outcome.reason, outcome.cost) == (None, None, None)
    full = Outcome("n", False, 0.25, "why", 0.5)
    assert full.to_dict() == {"name": "n", "passed": False, "score": 0.25, "reason": "why", "cost": 0.5}
    base = Assertion()
    assert (base.name, base.needs_model, base.bounded, base.instant, base.timeout) == (
        "", False, False, False, CHECK_TIMEOUT_S)
    assert base.prepare({"a": 1}) is None and repr(base) == "<Assertion >"
    with pytest.raises(NotImplementedError):
        asyncio.run(base.check(result(), None))
    assert (PASS_SCORE, DEFAULT_RUBRIC) == (0.5, "The answer is correct, complete and responsive to the question.")


def test_text_assertions_refuse_an_unknown_kind_or_no_value() -> None:
    with pytest.raises(ValueError, match=r"^unknown text assertion 'has'$"):
        TextAssertion("has", "x")
    with pytest.raises(ValueError, match=r"^equals: needs a value after the colon, e.g. equals:Paris$"):
        TextAssertion("equals", "")
    with pytest.raises(ValueError, match=r"^regex:Lim\(a: not a valid pattern \(missing \)") as caught:
        TextAssertion("regex", "Lim(a")
    assert caught.value.__suppress_context__


def test_each_text_kind_passes_and_fails_with_its_reason() -> None:
    contains, icontains = TextAssertion("contains", "Paris"), TextAssertion("icontains", "PARIS")
    equals, regex = TextAssertion("equals", " Paris "), TextAssertion("regex", "Par.s$")
    assert contains.name == "contains:Paris" and contains.kind == "contains" and contains.value == "Paris"
    assert contains.bounded and contains.instant and equals.instant and icontains.instant and not regex.instant
    assert check(contains, "in Paris today") == Outcome("contains:Paris", True)
    assert not check(contains, "in paris").passed
    assert check(contains, "x") == Outcome("contains:Paris", False, reason="the answer does not contain 'Paris'")
    assert check(TextAssertion("regex", "^$"), None).passed  # no answer is an empty one
    assert check(icontains, "in paris").passed and not check(icontains, "in Lyon").passed
    assert check(icontains, "STRASSE", None).passed is False
    assert TextAssertion("icontains", "straße").check_now("STRASSE", None).passed  # casefold, not lower
    assert check(equals, "\n Paris\t").passed and not check(equals, "Paris!").passed
    assert check(regex, "to Paris").passed and not check(regex, "Paris, yes").passed
    assert check(contains, None).reason == "the answer does not contain 'Paris'"
    assert check(icontains, "").reason == "the answer does not contain (any case) 'PARIS'"
    assert check(equals, "").reason == "the answer does not equal ' Paris '"
    assert check(regex, "").reason == "the answer has no match for 'Par.s$'"
    with pytest.raises(ValueError, match=r"^a regex check is awaited: check\(result, row\)$"):
        regex.check_now("Paris", None)


def test_a_long_wanted_value_is_quoted_cut_at_80() -> None:
    exact, longer = "x" * 80, "y" * 81
    assert check(TextAssertion("contains", exact), "").reason == f"the answer does not contain {exact!r}"
    assert check(TextAssertion("contains", longer), "").reason == f"the answer does not contain {'y' * 77 + '...'!r}"


def test_outcomes_are_shared_one_pass_and_one_failure_per_wanted_value() -> None:
    equals = TextAssertion("equals", "{{ row.a }}")
    one, two = {"a": "1"}, {"a": "2"}
    assert check(equals, "1", one) is check(equals, " 1", one) and check(equals, "1", one).reason is None
    first, again, other = check(equals, "x", one), check(equals, "y", one), check(equals, "x", two)
    assert first is again and first is not other and first.reason == "the answer does not equal '1'"
    assert other.reason == "the answer does not equal '2'" and set(equals._failed) == {"1", "2"}


def test_a_timed_out_pattern_fails_naming_its_limit(monkeypatch) -> None:
    async def never(pattern: Any, text: str, limit: float) -> None:
        assert limit == 0.25

    monkeypatch.setattr(module, "search", never)
    regex = TextAssertion("regex", "a+")
    regex.timeout = 0.25
    outcome = check(regex, "aaa")
    assert outcome == Outcome("regex:a+", False, reason="timed out: the pattern ran past 0.25 s")


def test_a_templated_value_is_rendered_once_per_row() -> None:
    contains = TextAssertion("contains", "{{ row.city }}")
    static = TextAssertion("contains", "{ row.city }")
    statement = TextAssertion("contains", "{% if 1 %}x{% endif %}")
    assert contains.templated and not static.templated and statement.templated and statement.want({}) == "x"
    assert static.want({"city": "Rome"}) == "{ row.city }"
    row = {"city": "Rome"}
    contains.prepare(row)
    assert contains._rendered[id(row)] == (row, "Rome", None)
    row["city"] = "Oslo"  # the same row object: its rendering is kept
    assert contains.want(row) == "Rome"
    fresh = {"city": "Oslo"}
    assert contains.want(fresh) == "Oslo" and check(contains, "to Oslo", fresh).passed
    # A row whose id is reused by another object is rendered again.
    stale = {"city": "Lima"}
    contains._rendered[id(stale)] = ({"city": "other"}, "Nope", None)
    assert contains.want(stale) == "Lima"


def test_a_templated_pattern_is_compiled_per_row_and_a_bad_one_names_its_value() -> None:
    regex = TextAssertion("regex", "{{ row.p }}")
    assert regex._pattern is None
    row = {"p": "^Par"}
    regex.prepare(row)
    assert regex._rendered[id(row)][2].search("Paris") and check(regex, "Paris", row).passed
    with pytest.raises(ValueError, match=r"^'Lim\(a' is not a valid pattern \(missing \)") as caught:
        regex.prepare({"p": "Lim(a"})
    assert caught.value.__suppress_context__
    with pytest.raises(Exception, match="has no attribute 'p'"):
        regex.prepare({})


def test_json_accepts_a_whole_value_or_one_fenced_block() -> None:
    json_check = JsonAssertion()
    assert json_check.name == "json" and json_check.bounded and json_check.instant
    assert check(json_check, ' {"a": 1} ').passed and check(json_check, "[1, 2]").passed
    assert check(json_check, '```json\n{"a": 1}\n```').passed and check(json_check, "```\n[1]```").passed
    assert check(json_check, '```my-lang_2 \n{"a": 1}\n```').passed
    assert check(json_check, '```JSON\n{"a": 1}\n```') == Outcome("json", True)  # the tag in any case
    assert check(json_check, '```json\n{"a":\n 1}\n```').passed  # the block spans lines
    assert check(json_check, 'Answer: {"a": 1}').passed is False
    assert not check(json_check, 'x```json\n{"a": 1}\n```').passed
    failed = check(json_check, None)
    assert failed.reason == "not JSON: Expecting value: line 1 column 1 (char 0)" and failed.name == "json"


def test_schema_passes_on_a_structured_output() -> None:
    schema = SchemaAssertion()
    assert schema.name == "schema" and schema.bounded and schema.instant
    assert check(schema, "", output={"a": 1}) == Outcome("schema", True)
    assert check(schema, "", output=0).passed  # falsy but present
    assert check(schema, "{}") == Outcome("schema", False, reason="no structured output")


def test_a_function_returns_a_bool_or_a_score() -> None:
    def named(result: Any, row: Any) -> Any:
        return row

    function = CallableAssertion(named)
    assert function.name == "python:named" and function.threads is None
    assert CallableAssertion(named, "mine").name == "mine"
    assert check(function, "", True) == Outcome("python:named", True)
    assert check(function, "", False) == Outcome("python:named", False, reason="returned False")
    # None (a function without a return) is not False: the reason says what it returned and what to return
    assert check(function, "", None) == Outcome(
        "python:named", False, reason="returned None; return a bool or a score in [0, 1]")
    assert check(function, "", 0.5) == Outcome("python:named", True, score=0.5)
    assert check(function, "", 1) == Outcome("python:named", True, score=1.0)
    assert check(function, "", 0) == Outcome("python:named", False, score=0.0, reason="score 0 < 0.5")
    assert check(function, "", 0.49) == Outcome("python:named", False, score=0.49, reason="score 0.49 < 0.5")
    assert check(function, "", 1.5) == Outcome(
        "python:named", False, reason="returned 1.5; return a bool or a score in [0, 1]")
    assert check(function, "", -0.1).reason == "returned -0.1; return a bool or a score in [0, 1]"
    assert check(function, "", "yes").reason == "returned 'yes'; return a bool or a score in [0, 1]"


def test_a_function_gets_the_result_and_the_row_and_its_error_is_the_reason() -> None:
    seen = []

    def look(result: Any, row: Any) -> bool:
        seen.append((result.text, row))
        raise KeyError("gone")

    outcome = check(CallableAssertion(look), "answer", {"r": 1})
    assert seen == [("answer", {"r": 1})] and outcome == Outcome("python:look", False, reason="raised KeyError: 'gone'")

    class Scorer:
        def __call__(self, result: Any, row: Any) -> float:
            return 0.75

    assert CallableAssertion(Scorer()).name == "python:Scorer"
    with pytest.raises(TypeError, match=r"^an assertion must be callable, not int$"):
        CallableAssertion(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("stop", [SystemExit, KeyboardInterrupt])
@pytest.mark.parametrize("where", ["inline", "async", "thread"])
def test_a_check_raising_systemexit_or_keyboardinterrupt_fails_and_the_loop_goes_on(stop, where) -> None:
    """Such a check once hung the evaluation (or killed its loop thread with a traceback)."""
    def sync(result: Any, row: Any) -> bool:
        raise stop("bye")

    async def later(result: Any, row: Any) -> bool:
        raise stop("bye")

    assertion = CallableAssertion(later if where == "async" else sync, name="python:c")
    if where == "thread":
        assertion.threads = Stoppable()
    assert check(assertion, "x") == Outcome("python:c", False, reason=f"raised {stop.__name__}: bye")
    if assertion.threads is not None:
        assertion.threads.close()


def test_a_cancelled_check_is_not_a_failed_check_but_goes_on_cancelled() -> None:
    async def later(result: Any, row: Any) -> bool:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        check(CallableAssertion(later), "x")


def test_an_async_function_is_awaited_and_a_sync_one_runs_in_the_threads() -> None:
    async def later(result: Any, row: Any) -> float:
        return 0.6

    threads: list[str] = []

    class Threads(Stoppable):
        async def call(self, function: Any, *args: Any) -> Any:
            threads.append(function.__name__)
            return await super().call(function, *args)

    def sync(result: Any, row: Any) -> bool:
        return result.text == "yes" and row == {"r": 1}

    awaited = CallableAssertion(later)
    awaited.threads = Threads()
    assert check(awaited, "") == Outcome("python:later", True, score=0.6) and threads == []
    threaded = CallableAssertion(sync)
    threaded.threads = Threads()
    assert check(threaded, "yes", {"r": 1}).passed and threads == ["sync"]
    threaded.threads.close()
    # A sync function returning an awaitable (a coroutine) is awaited too.
    assert check(CallableAssertion(lambda r, row: later(r, row)), "").score == 0.6


def test_parse_verdict_reads_json_or_a_leading_word() -> None:
    assert parse_verdict('{"pass": true, "reason": "ok"}') == Verdict(True, "ok")
    assert parse_verdict('{"passed": false}') == Verdict(False, "")
    assert parse_verdict('{"pass": false, "passed": true, "reason": null}') == Verdict(False, "")
    assert parse_verdict('{"pass": " YES ", "reason": 3}') == Verdict(True, "3")
    assert parse_verdict('{"pass": "Pass"}').passed and parse_verdict('{"pass": "true"}').passed
    assert parse_verdict('{"pass": "no"}') == Verdict(False, "")
    assert parse_verdict("  ** PASSED: all good.\n") == Verdict(True, "all good.")
    assert parse_verdict("fail - wrong city") == Verdict(False, "wrong city")
    assert parse_verdict('PASS {"pass": false}') == Verdict(False, "")  # the JSON object wins
    assert parse_verdict('Pass ["no"]') == Verdict(True, '["no"]')  # JSON that is not an object: the word
    with pytest.raises(ValueError, match=r"^the judge's reply is not a verdict: 'maybe'$"):
        parse_verdict("maybe")
    with pytest.raises(ValueError) as caught:
        parse_verdict("x" * 200)
    assert str(caught.value) == f"the judge's reply is not a verdict: {'x' * 120!r}"
    with pytest.raises(ValueError):
        parse_verdict('{"pass": 1, "reason": "x"}')
    assert parse_verdict("Failing:* no") == Verdict(False, "no") and parse_verdict("pass") == Verdict(True, "")


def test_the_judges_are_built_once_each_before_the_first_request() -> None:
    built: list[str] = []

    def factory(provider: str) -> str:
        built.append(provider)
        return f"agent {provider}"

    checks = [TextAssertion("contains", "x"), JudgeAssertion("openai:a"), JudgeAssertion("openai:b", "kind"),
              JudgeAssertion("openai:a", "other rubric")]
    assert module.build_judges(checks, factory) == {"openai:a": "agent openai:a", "openai:b": "agent openai:b"}
    assert built == ["openai:a", "openai:b"]
    assert module.build_judges([JsonAssertion()], factory) == {} and len(built) == 2


def test_a_judge_that_cannot_be_built_is_one_line_naming_it() -> None:
    def factory(provider: str) -> str:
        if provider == "openai:nokey":
            raise RuntimeError("OPENAI_API_KEY is not set: set it in the environment")
        return provider

    with pytest.raises(ValueError) as caught:
        module.build_judges([JudgeAssertion("openai:ok"), JudgeAssertion("openai:nokey")], factory)
    assert str(caught.value) == ("judge:openai:nokey: the judge cannot be built: OPENAI_API_KEY is not set: "
                                 "set it in the environment")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_judge_needs_a_model_and_renders_its_rubric() -> None:
    with pytest.raises(ValueError) as caught:
        JudgeAssertion("nomodel")
    assert str(caught.value).startswith("judge:nomodel: give the judge as judge:PROVIDER:MODEL (or an alias), "
                                        "e.g. judge:")
    judge = JudgeAssertion("openai:gpt-4.1-mini")
    assert judge.name == "judge:openai:gpt-4.1-mini" and judge.rubric == DEFAULT_RUBRIC and judge.needs_model
    assert judge.run is None and not judge.bounded
    with pytest.raises(RuntimeError, match=r"^a judge assertion runs inside an evaluation$"):
        check(judge, "x")
    graded = JudgeAssertion("openai:m", "Names {{ row.city }}.")
    graded.prepare({"city": "Rome"})
    with pytest.raises(Exception, match="city"):
        graded.prepare({})
    prompt = graded.prompt_for(result(None, prompt="Capital?"), {"city": "Rome"})
    assert prompt == ('You are grading an answer against a rubric. Reply with one JSON object and nothing else:\n'
                      '{"pass": true or false, "reason": "one short sentence"}\n\nRubric:\nNames Rome.\n\n'
                      'Question:\nCapital?\n\nAnswer:\n')
    assert "Answer:\nParis" in graded.prompt_for(result("Paris"), {"city": "Rome"})
    # A rubric is a template only with {{ or {%: a {# #} in plain text stays as written.
    assert "Rubric:\nBe {# kind #} right.\n" in JudgeAssertion("openai:m", "Be {# kind #} right.").prompt_for(
        result("x"), None)
    assert "Rubric:\nyes\n" in JudgeAssertion("openai:m", "{% if 1 %}yes{% endif %}").prompt_for(result("x"), None)


def test_a_judge_s_reply_error_and_cost_make_its_outcome() -> None:
    judge = JudgeAssertion("openai:m")
    replies = iter([('{"pass": true, "reason": "fine"}', 0.01, None), ("PASS", None, None),
                    ("", 0.02, "HTTP 500"), ("hmm", 0.03, None)])
    sent = []

    async def run(prompt: str) -> tuple[str, float | None, str | None]:
        sent.append(prompt)
        return next(replies)

    judge.run, judge.rubric = run, "Names {{ row.city }}."
    outcome = check(judge, "Paris", {"city": "Rome"}, prompt="Capital?")
    assert outcome == Outcome("judge:openai:m", True, reason="fine", cost=0.01)
    assert sent[0] == judge.prompt_for(result("Paris", prompt="Capital?"), {"city": "Rome"}) and "Rome" in sent[0]
    judge.rubric = DEFAULT_RUBRIC
    assert check(judge, "x") == Outcome("judge:openai:m", True, reason=None, cost=None)
    # No verdict is no failure of the answer: a CheckError, with what the judge's run cost
    with pytest.raises(module.CheckError) as failed:
        check(judge, "x")
    assert (str(failed.value), failed.value.cost) == ("the judge failed: HTTP 500", 0.02)
    with pytest.raises(module.CheckError) as unreadable:
        check(judge, "x")
    assert (str(unreadable.value), unreadable.value.cost) == ("the judge's reply is not a verdict: 'hmm'", 0.03)
    assert unreadable.value.__suppress_context__ and module.CheckError("m").cost is None


def test_parse_assertion_reads_each_spec() -> None:
    given = JsonAssertion()
    assert parse_assertion(given) is given

    def fn(result: Any, row: Any) -> bool:
        return True

    assert isinstance(parse_assertion(fn), CallableAssertion) and parse_assertion(fn).name == "python:fn"
    text = parse_assertion("  ConTains:Paris:x")
    assert isinstance(text, TextAssertion) and text.kind == "contains" and text.value == "Paris:x"
    assert isinstance(parse_assertion("json"), JsonAssertion)
    assert isinstance(parse_assertion("schema", has_schema=True), SchemaAssertion)
    made = parse_assertion("python: mine ", namespace={"mine": fn})
    assert isinstance(made, CallableAssertion) and made.name == "python:mine" and made.function is fn
    judge = parse_assertion("judge: openai:m ", rubric="Be right.")
    assert isinstance(judge, JudgeAssertion) and judge.provider == "openai:m" and judge.rubric == "Be right."


def test_parse_assertion_says_what_to_do_with_a_bad_spec() -> None:
    def refused(spec: Any, **options: Any) -> str:
        with pytest.raises(ValueError) as caught:
            parse_assertion(spec, **options)
        return str(caught.value)

    assert refused(3) == "an assertion is a spec string (contains:TEXT, ...) or a callable, not int"
    assert refused("schema") == "--assert schema checks the structured output: give the model with --schema MODEL"
    assert refused("python:nope") == ("python:nope: no function 'nope' in the namespace; define def nope(result, "
                                      "row): ... first")
    assert refused("python:", namespace={"x": 1}) == (
        "python:: no function '' in the namespace; define def check(result, row): ... first")
    assert refused("python:x", namespace={"x": 1}) == "python:x: 'x' is a int, not a function"
    unknown = ("unknown assertion {!r}; use contains:TEXT, icontains:TEXT, regex:PATTERN, equals:TEXT, json, "
               "schema, python:NAME or judge:PROVIDER:MODEL")
    for spec in ("json:x", "schema:x", "has:x"):
        assert refused(spec, has_schema=True) == unknown.format(spec)
