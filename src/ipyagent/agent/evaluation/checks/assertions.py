"""Assertions of an evaluation: checks of one run's answer, each giving pass/fail and why.

A spec string (``%%compare --assert SPEC``, or an item of ``evaluate(assertions=[...])``):

========================  ==============================================================
``contains:TEXT``         the answer contains TEXT (case-sensitive)
``icontains:TEXT``        the answer contains TEXT, ignoring case
``regex:PATTERN``         PATTERN (Python `re`) matches somewhere in the answer
``equals:TEXT``           the answer, stripped, equals TEXT stripped
``json``                  the answer is a JSON value (a fenced ```json block counts)
``schema``                the structured output validated against the run's output schema
``python:NAME``           a function called with ``(result, row)``
``judge:PROVIDER:MODEL``  an LLM judge grades the answer against the rubric (an alias works too)
========================  ==============================================================

TEXT and PATTERN are Jinja templates over the row (``equals:{{ row.answer }}``), rendered
(and a pattern compiled) for every row before the first request (`Assertion.prepare`): a
row for which one cannot be is not run. A pattern runs on the `regex` package with a time
limit (`limits`). A function (``python:NAME``, or a callable given directly) returns a
bool, or a score in [0, 1] that passes at 0.5 or more; it may be async; a synchronous one
runs in a thread that a deadline or an interrupt stops. Any assertion that raises fails
with the exception as its reason, one that runs past its limit fails "timed out"; a run
that failed fails every assertion unchecked. A judge that gives no verdict (its request
failed, its reply is not one) raises `CheckError`: its cell is an error, not a failure.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ....drivers import example_id, resolve_alias
from ...structured import parse_json
from ..templates import render_template
from .limits import CHECK_TIMEOUT_S, Stoppable, compile_pattern, search

#: A score at or above this passes.
PASS_SCORE = 0.5
#: What the judge is asked when no rubric is given.
DEFAULT_RUBRIC = "The answer is correct, complete and responsive to the question."

JUDGE_PROMPT = """You are grading an answer against a rubric. Reply with one JSON object and nothing else:
{{"pass": true or false, "reason": "one short sentence"}}

Rubric:
{rubric}

Question:
{prompt}

Answer:
{answer}"""


class CheckError(Exception):
    """A check that gave no verdict: its judge's request failed, or the judge's reply is no verdict.
    The evaluation makes it its cell's error, not a failure of the answer. `cost`: the judge's run
    (USD; None: unknown or none)."""

    def __init__(self, message: str, cost: float | None = None) -> None:
        super().__init__(message)
        self.cost = cost


@dataclass(slots=True)
class Outcome:
    """One assertion's verdict on one run.

    Attributes:
        name: the assertion (its spec, ``contains:Paris``).
        passed: whether it passed.
        score: a function's score in [0, 1] (None for a plain pass/fail).
        reason: why it failed (or the judge's reason, pass or fail); None when obvious.
        cost: the judge's cost in USD (None: no judge, or an unknown price).
    """

    name: str
    passed: bool
    score: float | None = None
    reason: str | None = None
    cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "score": self.score, "reason": self.reason, "cost": self.cost}


class Assertion:
    """A check of one run. Subclasses set `name` and implement `check` (and `prepare` when
    they have a row template)."""

    name: str = ""
    #: True when checking may send a request (a judge): the scheduler runs it in its own lane.
    needs_model: bool = False
    #: True when `check` keeps to its own time limit (`timeout`) and never blocks the loop;
    #: the evaluation runs any other check under a deadline it enforces.
    bounded: bool = False
    #: True when the check is linear in the answer and never waits (contains, equals, json, schema):
    #: it always runs, even when its cell's time for checks is spent.
    instant: bool = False
    #: Seconds a check may take (``--check-timeout``); set by the evaluation.
    timeout: float = CHECK_TIMEOUT_S

    def prepare(self, row: Any) -> None:
        """Render and compile what this check needs for `row`, ahead of any request.

        Raises:
            ValueError: it cannot be for this row (the reason, without the check's name).
        """

    async def check(self, result: Any, row: Any) -> Outcome:
        """`result` has ``text``, ``output`` (structured output), ``prompt``, ``error``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _render(text: str, row: Any) -> str:
    if "{{" not in text and "{%" not in text:
        return text

    return render_template(text, row)


class TextAssertion(Assertion):
    """``contains``, ``icontains``, ``regex`` and ``equals`` over the answer text."""

    KINDS = ("contains", "icontains", "regex", "equals")

    bounded = True

    def __init__(self, kind: str, value: str) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown text assertion {kind!r}")
        if not value:
            raise ValueError(f"{kind}: needs a value after the colon, e.g. {kind}:Paris")
        self.kind, self.value, self.name = kind, value, f"{kind}:{value}"
        self.instant = kind != "regex"
        self._passed = Outcome(self.name, True)  # one for every cell it passes: a matrix keeps thousands
        self._failed: dict[str, Outcome] = {}  # the value wanted -> the one outcome of every cell it fails
        self.templated = "{{" in value or "{%" in value
        self._rendered: dict[int, tuple[Any, str, Any]] = {}  # id(row) -> (row, value for it, its pattern)
        self._pattern: Any = None
        if kind == "regex" and not self.templated:
            try:
                self._pattern = compile_pattern(value)
            except ValueError as exc:
                raise ValueError(f"regex:{value}: {exc}") from None

    def prepare(self, row: Any) -> None:
        self._for(row)

    def _for(self, row: Any) -> tuple[str, Any]:
        """(the value for `row`, its compiled pattern for a regex), rendered once per row (every
        column's answer to it is checked).

        Raises:
            ValueError: the template does not render for `row`, or the pattern does not compile.
        """
        if not self.templated:
            return self.value, self._pattern
        seen = self._rendered.get(id(row))
        if seen is None or seen[0] is not row:
            value = _render(self.value, row)
            pattern = None
            if self.kind == "regex":
                try:
                    pattern = compile_pattern(value)
                except ValueError as exc:
                    raise ValueError(f"{value!r} is {exc}") from None
            seen = self._rendered[id(row)] = (row, value, pattern)
        return seen[1], seen[2]

    def want(self, row: Any) -> str:
        """The value for `row` (its template rendered)."""
        return self._for(row)[0]

    async def check(self, result: Any, row: Any) -> Outcome:
        text = result.text or ""
        want, pattern = self._for(row)
        if self.kind == "regex":
            found = await search(pattern, text, self.timeout)
            if found is None:
                return Outcome(self.name, False, reason=f"timed out: the pattern ran past {self.timeout:g} s")
            return self._outcome(found, want)
        return self.check_now(text, row)

    def check_now(self, text: str, row: Any) -> Outcome:
        """The verdict of ``contains``, ``icontains`` and ``equals`` (no waiting; not ``regex``)."""
        want = self.want(row)
        if self.kind == "contains":
            ok = want in text
        elif self.kind == "icontains":
            ok = want.casefold() in text.casefold()
        elif self.kind == "equals":
            ok = text.strip() == want.strip()
        else:
            raise ValueError("a regex check is awaited: check(result, row)")
        return self._outcome(ok, want)

    def _outcome(self, ok: bool, want: str) -> Outcome:
        if ok:
            return self._passed
        failed = self._failed.get(want)
        if failed is None:
            failed = self._failed[want] = self._failure(want)
        return failed

    def _failure(self, want: str) -> Outcome:
        quoted = want if len(want) <= 80 else want[:77] + "..."
        what = {"contains": "does not contain", "icontains": "does not contain (any case)",
                "regex": "has no match for", "equals": "does not equal"}[self.kind]
        return Outcome(self.name, False, reason=f"the answer {what} {quoted!r}")


class JsonAssertion(Assertion):
    """The answer parses as JSON (a whole text, or one fenced code block)."""

    name = "json"
    bounded = instant = True

    async def check(self, result: Any, row: Any) -> Outcome:
        text = (result.text or "").strip()
        fenced = re.match(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```$", text, re.S)
        try:
            json.loads(fenced.group(1) if fenced else text)
        except ValueError as exc:
            return Outcome(self.name, False, reason=f"not JSON: {exc}")
        return Outcome(self.name, True)


class SchemaAssertion(Assertion):
    """The run's structured output validated against its output schema (``--schema``)."""

    name = "schema"
    bounded = instant = True

    async def check(self, result: Any, row: Any) -> Outcome:
        if result.output is not None:
            return Outcome(self.name, True)
        return Outcome(self.name, False, reason="no structured output")


class CallableAssertion(Assertion):
    """A function called with ``(result, row)``; returns a bool or a score in [0, 1] (may be async)."""

    def __init__(self, function: Callable[..., Any], name: str | None = None) -> None:
        if not callable(function):
            raise TypeError(f"an assertion must be callable, not {type(function).__name__}")
        self.function = function
        self.name = name or f"python:{getattr(function, '__name__', type(function).__name__)}"
        self.threads: Stoppable | None = None  # set by the evaluation: a synchronous function runs there

    async def check(self, result: Any, row: Any) -> Outcome:
        try:
            if self.threads is None or inspect.iscoroutinefunction(self.function):
                value = self.function(result, row)
            else:
                value = await self.threads.call(self.function, result, row)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError:  # the run's deadline or an interrupt: it goes on
            raise
        except BaseException as exc:  # noqa: BLE001 - a failing check is a failed assertion, not a crash:
            # SystemExit or KeyboardInterrupt raised by a check once stopped the evaluation's loop
            return Outcome(self.name, False, reason=f"raised {type(exc).__name__}: {exc}")
        if isinstance(value, bool):
            return Outcome(self.name, value, reason=None if value else "returned False")
        if isinstance(value, (int, float)) and 0.0 <= float(value) <= 1.0:
            score = float(value)
            ok = score >= PASS_SCORE
            return Outcome(self.name, ok, score=score, reason=None if ok else f"score {score:g} < {PASS_SCORE:g}")
        return Outcome(self.name, False, reason=f"returned {value!r}; return a bool or a score in [0, 1]")


@dataclass(slots=True)
class Verdict:
    passed: bool
    reason: str


def parse_verdict(text: str) -> Verdict:
    """A judge's reply -> `Verdict`: a JSON object with ``pass`` (or ``passed``) and
    ``reason``, or failing that a reply starting with PASS or FAIL.

    Raises:
        ValueError: neither shape; the message quotes the reply.
    """

    try:
        data = parse_json(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        verdict = data.get("pass", data.get("passed"))
        if isinstance(verdict, str):
            verdict = verdict.strip().lower() in ("true", "pass", "yes")
        if isinstance(verdict, bool):
            return Verdict(verdict, str(data.get("reason") or ""))
    word = re.match(r"\s*\**\s*(pass|fail)\w*\b[\s:*.-]*(.*)", text, re.I | re.S)
    if word:
        return Verdict(word.group(1).lower() == "pass", word.group(2).strip())
    raise ValueError(f"the judge's reply is not a verdict: {text[:120]!r}")


class JudgeAssertion(Assertion):
    """An LLM judge (``judge:PROVIDER:MODEL``) grading the answer against `rubric`.

    The judge's runs go through the evaluation's scheduler (their own lane, cached by
    request like every run); the evaluation fills `run` in before checking.
    """

    needs_model = True

    def __init__(self, provider: str, rubric: str | None = None) -> None:
        if ":" not in resolve_alias(provider):
            raise ValueError(f"judge:{provider}: give the judge as judge:PROVIDER:MODEL (or an alias), "
                             f"e.g. judge:{example_id()}")
        self.provider, self.rubric = provider, rubric or DEFAULT_RUBRIC
        self.name = f"judge:{provider}"
        self.run: Callable[[str], Any] | None = None  # async (prompt) -> (text, cost, error); set by the evaluation

    def prepare(self, row: Any) -> None:
        _render(self.rubric, row)

    def prompt_for(self, result: Any, row: Any) -> str:
        return JUDGE_PROMPT.format(rubric=_render(self.rubric, row), prompt=result.prompt, answer=result.text or "")

    async def check(self, result: Any, row: Any) -> Outcome:
        if self.run is None:
            raise RuntimeError("a judge assertion runs inside an evaluation")
        text, cost, error = await self.run(self.prompt_for(result, row))
        if error is not None:
            raise CheckError(f"the judge failed: {error}", cost)
        try:
            verdict = parse_verdict(text)
        except ValueError as exc:
            raise CheckError(str(exc), cost) from None
        return Outcome(self.name, verdict.passed, reason=verdict.reason or None, cost=cost)


def build_judges(checks: list[Assertion], factory: Callable[[str], Any]) -> dict[str, Any]:
    """The agent of each judge among `checks`, by provider as given, built with `factory` before
    the first request: a judge that cannot be stops the evaluation, not each row's verdict.

    Raises:
        ValueError: a judge's provider cannot be built (an API key not set, ...): one line
            naming the check and the reason.
    """
    built: dict[str, Any] = {}
    for check in checks:
        if isinstance(check, JudgeAssertion) and check.provider not in built:
            try:
                built[check.provider] = factory(check.provider)
            except Exception as exc:  # noqa: BLE001 - whatever the driver raises: its message says what to set
                raise ValueError(f"{check.name}: the judge cannot be built: {exc}") from None
    return built


def parse_assertion(
    spec: Any, *, namespace: Mapping[str, Any] | None = None, rubric: str | None = None, has_schema: bool = False
) -> Assertion:
    """An `Assertion` from a spec string (see the module doc), a callable, or an `Assertion`.

    Args:
        namespace: where ``python:NAME`` looks NAME up (the notebook's user namespace).
        rubric: the judges' rubric (``--rubric``).
        has_schema: whether the runs have an output schema (``schema`` needs one).

    Raises:
        ValueError: an unknown kind, a missing value, a bad pattern, ``schema`` without a
            schema, ``python:NAME`` not defined or not callable (one line saying what to do).
    """
    if isinstance(spec, Assertion):
        return spec
    if callable(spec):
        return CallableAssertion(spec)
    if not isinstance(spec, str):
        raise ValueError(f"an assertion is a spec string (contains:TEXT, ...) or a callable, not {type(spec).__name__}")
    kind, sep, value = spec.partition(":")
    kind = kind.strip().lower()
    if kind in TextAssertion.KINDS:
        return TextAssertion(kind, value)
    if kind == "json" and not value:
        return JsonAssertion()
    if kind == "schema" and not value:
        if not has_schema:
            raise ValueError("--assert schema checks the structured output: give the model with --schema MODEL")
        return SchemaAssertion()
    if kind == "python":
        name = value.strip()
        function = (namespace or {}).get(name)
        if function is None:
            raise ValueError(
                f"python:{name}: no function {name!r} in the namespace; define def {name or 'check'}(result, "
                "row): ... first"
            )
        if not callable(function):
            raise ValueError(f"python:{name}: {name!r} is a {type(function).__name__}, not a function")
        return CallableAssertion(function, f"python:{name}")
    if kind == "judge":
        return JudgeAssertion(value.strip(), rubric)
    raise ValueError(
        f"unknown assertion {spec!r}; use contains:TEXT, icontains:TEXT, regex:PATTERN, equals:TEXT, "
        "json, schema, python:NAME or judge:PROVIDER:MODEL"
    )
