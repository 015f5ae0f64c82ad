"""`agent/evaluation/runner.py` decision by decision, with fakes in place of the matrix, the store, the loop and
the tracer: the store opened (or not) and its note, the argument checks at each edge, the run options, the
heap's freeze, `_run_matrix`'s set-up and its ends (finished, cancelled, failed), the evaluation described,
the prompt variants, what `evaluation_run` hands the matrix, and `evaluate`'s paths (background, batch, an
interrupt)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from ipyagent import Evaluation
from ipyagent.agent.evaluation import runner
from ipyagent.agent.evaluation.checks import CHECK_TIMEOUT_S
from ipyagent.agent.evaluation.plan import Variant
from ipyagent.agent.evaluation.runner import (
    _analysis_options,
    _check_arguments,
    _describe,
    _open_store,
    _run_options,
    _show_batch,
    frozen_heap,
    make_variants,
)
from ipyagent.memory import StoreError


class FakeStore:
    """A run store: its path, whether it was closed; a path named "bad" cannot be opened."""

    def __init__(self, path: Any) -> None:
        if str(path).endswith("bad"):
            raise StoreError("cannot open bad")
        self.path, self.closed = path, False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "RunStore", FakeStore)
    monkeypatch.setattr(runner, "store_location", lambda given: f"located:{given}")
    monkeypatch.setattr(runner, "default_store_path", lambda: "default")


# _open_store

@pytest.mark.usefixtures("stores")
def test_a_store_given_is_used_as_it_is_and_not_owned() -> None:
    given = FakeStore("mine")
    assert _open_store(given, True) == (given, False, None)
    assert _open_store(given, False) == (given, False, None)


@pytest.mark.usefixtures("stores")
def test_no_store_notes_that_caching_is_off_only_when_caching() -> None:
    assert _open_store(False, True) == (None, False, "caching is off: there is no run store")
    assert _open_store(False, False) == (None, False, None)


@pytest.mark.usefixtures("stores")
def test_a_path_is_located_and_none_is_the_default_both_opened_and_owned() -> None:
    opened, owned, note = _open_store("here", True)
    assert (opened.path, owned, note) == ("located:here", True, None)
    opened, owned, note = _open_store(None, False)
    assert (opened.path, owned, note) == ("default", True, None)


@pytest.mark.usefixtures("stores")
def test_a_store_turned_off_notes_it_only_when_caching(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "default_store_path", lambda: None)
    assert _open_store(None, True) == (None, False, "caching is off: no run store ($IPYAGENT_RUN_STORE is off)")
    assert _open_store(None, False) == (None, False, None)


@pytest.mark.usefixtures("stores")
def test_a_store_that_cannot_open_is_a_note_whether_caching_or_not() -> None:
    note = "cannot open bad; runs are neither cached nor recorded"
    assert _open_store("bad", True) == (None, False, note)
    assert _open_store("bad", False) == (None, False, note)


# _check_arguments

def test_the_arguments_at_their_edges_pass() -> None:
    _check_arguments(["p"], 1, None)
    _check_arguments(["p"], 1, 0.0, 1, 1e-9)
    _check_arguments(["p", "q"], 8, 2.5, 3, CHECK_TIMEOUT_S)


@pytest.mark.parametrize(("args", "message"), [
    (([], 1, None), "evaluate needs at least one provider"),
    ((["p"], 0, None), "concurrency must be 1 or more, not 0"),
    ((["p"], -2, None), "concurrency must be 1 or more, not -2"),
    ((["p"], 1, -0.01), "budget must be a number of USD, 0 or more (leave it out for no limit), not -0.01"),
    ((["p"], 1, math.nan), "budget must be a number of USD, 0 or more (leave it out for no limit), not nan"),
    ((["p"], 1, math.inf), "budget must be a number of USD, 0 or more (leave it out for no limit), not inf"),
    ((["p"], 1, None, 0), "repeat must be a whole number, 1 or more, not 0"),
    ((["p"], 1, None, 2.0), "repeat must be a whole number, 1 or more, not 2.0"),
    ((["p"], 1, None, "2"), "repeat must be a whole number, 1 or more, not '2'"),
    ((["p"], 1, None, 1, 0), "the check timeout must be more than 0 seconds, not 0"),
    ((["p"], 1, None, 1, -1.0), "the check timeout must be more than 0 seconds, not -1.0"),
    ((["p"], 1, None, 1, math.nan), "the check timeout must be more than 0 seconds, not nan"),
])
def test_each_bad_argument_is_refused_with_its_message(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _check_arguments(*args)
    assert str(caught.value) == message


# _run_options

def test_run_options_keep_only_what_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "coerce_settings", lambda s: ("settings", s))
    monkeypatch.setattr(runner, "image_blocks", lambda i: ("blocks", i))
    assert _run_options(None, None, None, None, None) == {}
    assert _run_options({}, "", [], {}, 0) == {}  # falsy: not set
    assert _run_options({"type": "object"}, "tool", ["img"], {"temperature": 0}, 2.5) == {
        "output_schema": {"type": "object"}, "output_strategy": "tool", "images": ("blocks", ["img"]),
        "settings": ("settings", {"temperature": 0}), "timeout": 2.5,
    }
    assert _run_options(None, None, None, None, 1.0) == {"timeout": 1.0}
    assert _run_options(None, None, "one.png", None, None) == {"images": ("blocks", "one.png")}


# frozen_heap

@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("thawed")
def test_the_freeze_is_counted_shared_and_thawed_by_the_last_even_on_an_error() -> None:
    assert runner._frozen_for == [0]
    with pytest.raises(RuntimeError), frozen_heap() as outer:
        assert outer is True and runner._frozen_for == [1] and gc.get_freeze_count() > 0
        with frozen_heap() as inner:
            assert inner is True and runner._frozen_for == [2]
        assert runner._frozen_for == [1] and gc.get_freeze_count() > 0
        raise RuntimeError("the evaluation failed")
    assert runner._frozen_for == [0] and gc.get_freeze_count() == 0


@pytest.mark.usefixtures("thawed")
def test_a_users_freeze_is_neither_counted_nor_thawed() -> None:
    gc.freeze()
    with frozen_heap() as ours:
        assert ours is False and runner._frozen_for == [0]
    assert gc.get_freeze_count() > 0 and runner._frozen_for == [0]


# _run_matrix

class FakeRun:
    """The matrix (`matrix._Run`): what it was built with, run with and whether it was closed; `outcome`:
    what run() returns, or the exception it raises."""

    made: ClassVar[list[FakeRun]] = []
    outcome: ClassVar[Any] = "the evaluation"

    def __init__(self, ev: Evaluation, **options: Any) -> None:
        self.ev, self.options, self.ran, self.closed = ev, options, None, False
        FakeRun.made.append(self)

    async def run(self, entries: list[Any], rows: list[Any], *, frozen: bool) -> Any:
        self.ran = (entries, rows, frozen, self.ev.started, list(spans), runner._frozen_for[0])
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    async def close(self) -> None:
        self.closed = True


spans: list[tuple[str, dict[str, Any]]] = []


@contextmanager
def fake_span(name: str, attributes: dict[str, Any]) -> Iterator[None]:
    spans.append((name, attributes))
    yield


@pytest.fixture
def matrix(monkeypatch: pytest.MonkeyPatch, stores: None, thawed: None) -> type[FakeRun]:
    FakeRun.made, FakeRun.outcome = [], "the evaluation"
    spans.clear()
    clock = itertools.cycle([10.0, 12.5])
    monkeypatch.setattr(runner, "_Run", FakeRun)
    monkeypatch.setattr(runner, "evaluation_span", fake_span)
    monkeypatch.setattr(runner, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    return FakeRun


def run_matrix(ev: Evaluation, store: Any, cache: bool = True) -> Any:
    return asyncio.run(runner._run_matrix(ev, ["agent"], ["a", "b"], store=store, cache=cache, concurrency=3))


def test_the_matrix_runs_traced_frozen_timed_and_closed_with_the_store_it_opened(matrix: type[FakeRun]) -> None:
    ev = Evaluation(["openai:m", "openai:n"], ["a", "b"])
    assert run_matrix(ev, "here") == "the evaluation"
    made = matrix.made[0]
    store = made.options.pop("store")
    assert made.ev is ev and made.options == {"cache": True, "concurrency": 3}
    assert store.path == "located:here" and store.closed and ev.store_path == "located:here"
    attributes = {"gen_ai.operation.name": "evaluate", "ipyagent.evaluation.id": ev.id,
                  "ipyagent.evaluation.rows": 2, "ipyagent.evaluation.columns": ["openai:m", "openai:n"]}
    assert made.ran == (["agent"], ["a", "b"], True, 10.0, [("evaluation", attributes)], 1)
    assert (ev.started, ev.wall_s, ev.notes, ev.interrupted, made.closed) == (10.0, 2.5, [], False, True)
    assert gc.get_freeze_count() == 0 and runner._frozen_for == [0]


def test_a_store_given_is_not_closed_and_a_missing_one_is_a_note(matrix: type[FakeRun]) -> None:
    given, ev = FakeStore("mine"), Evaluation(["openai:m"], ["a"])
    run_matrix(ev, given, cache=False)
    assert matrix.made[0].options["store"] is given and not given.closed and ev.store_path == "mine"
    assert matrix.made[0].options["cache"] is False and ev.notes == []
    ev = Evaluation(["openai:m"], ["a"])
    matrix.made.clear()
    run_matrix(ev, False)
    assert matrix.made[0].options["store"] is None and ev.store_path is None
    assert ev.notes == ["caching is off: there is no run store"]


def test_a_cancelled_matrix_is_marked_interrupted_and_still_timed_and_closed(matrix: type[FakeRun]) -> None:
    matrix.outcome = asyncio.CancelledError()
    ev = Evaluation(["openai:m"], ["a"])
    with pytest.raises(asyncio.CancelledError):
        run_matrix(ev, "here")
    made = matrix.made[0]
    assert ev.interrupted and ev.wall_s == 2.5 and made.closed and made.options["store"].closed
    assert gc.get_freeze_count() == 0


def test_a_failing_matrix_is_not_interrupted_and_still_closed(matrix: type[FakeRun]) -> None:
    matrix.outcome = RuntimeError("broken")
    ev = Evaluation(["openai:m"], ["a"])
    with pytest.raises(RuntimeError, match="broken"):
        run_matrix(ev, "here")
    made = matrix.made[0]
    assert not ev.interrupted and ev.wall_s == 2.5 and made.closed and made.options["store"].closed


@pytest.mark.usefixtures("thawed")
def test_a_users_freeze_reaches_the_matrix_as_not_ours(matrix: type[FakeRun]) -> None:
    gc.freeze()
    run_matrix(Evaluation(["openai:m"], ["a"]), False)
    assert matrix.made[0].ran[2] is False and matrix.made[0].ran[5] == 0


# _describe

def test_the_evaluation_is_described_with_labels_only_for_names_that_differ() -> None:
    checks = [SimpleNamespace(name="contains:x"), SimpleNamespace(name="json")]
    variants = [Variant("terse", "t"), Variant("long", "l")]
    agent = SimpleNamespace(provider="openai:a")
    providers = ["fast", "openai:m", agent, "openai:m"]
    keys = ["openai:f", "openai:m", "openai:a", "openai:m #2"]
    ev = Evaluation([], [])
    assert _describe(ev, providers, keys, ["r"], checks, variants, 3, 1.5) is ev  # type: ignore[arg-type]
    assert (ev.providers, ev.rows, ev.assertions, ev.budget) == (keys, ["r"], ["contains:x", "json"], 1.5)
    assert (ev.variants, ev.repeat) == (["terse", "long"], 3)
    assert ev.labels == {"openai:f": "fast", "openai:m #2": "openai:m"}
    _describe(ev, ["openai:m"], ["openai:m"], [], [], [Variant(None, "t")], 1, None)
    assert (ev.variants, ev.labels, ev.budget, ev.assertions) == ([], {}, None, [])


# make_variants

def test_no_variant_names_is_the_template_alone() -> None:
    assert make_variants("{{ row }}", None, None) == [Variant(None, "{{ row }}")]
    assert make_variants("{{ row }}", {}, {}) == [Variant(None, "{{ row }}")]


def test_variants_are_named_by_prompts_then_systems_each_with_its_template() -> None:
    assert make_variants(None, {"a": "A", "b": "B"}, {"b": "sys b"}) == [Variant("a", "A"), Variant("b", "B", "sys b")]
    assert make_variants(None, {"b": "B", "a": "A"}, {"a": "sys a"}) == [Variant("b", "B"), Variant("a", "A", "sys a")]
    got = make_variants("T", None, {"x": "sys x", "y": "sys y"})
    assert got == [Variant("x", "T", "sys x"), Variant("y", "T", "sys y")]


def test_a_variant_with_no_template_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as caught:
        make_variants(None, {"a": "A"}, {"c": "sys c", "d": "sys d"})
    assert str(caught.value) == "no prompt template for c, d; give template= or prompts="
    with pytest.raises(ValueError) as caught:
        make_variants(None, None, None)
    assert str(caught.value) == "no prompt template for the prompt; give template= or prompts="


def test_template_and_prompts_together_are_refused() -> None:
    with pytest.raises(ValueError) as caught:
        make_variants("T", {"a": "A"}, None)
    assert str(caught.value) == (
        "give the prompt as template or as prompts={name: template}, not both (template=None)")
    assert make_variants("T", {}, None) == [Variant(None, "T")]  # an empty dict is no prompts


@pytest.mark.parametrize("name", ["", "a/b", "a b", "a\tb", "tail\n", 3])
def test_a_variant_name_that_cannot_name_a_column_is_refused(name: Any) -> None:
    with pytest.raises(ValueError) as caught:
        make_variants("T", None, {name: "s"})
    assert str(caught.value) == (
        f"a variant's name is one word without '/' (it names a column provider/NAME), not {name!r}")


# _analysis_options

def test_analysis_options_set_only_what_is_given_and_check_the_baseline() -> None:
    ev = Evaluation(["openai:m", "openai:n"], ["a"], labels={"openai:n": "good"})
    seed, name = ev.seed, ev.name
    _analysis_options(ev, None, None, None)
    assert (ev.baseline, ev.seed, ev.name) == (None, seed, name)
    _analysis_options(ev, "good", 0, "")
    assert (ev.baseline, ev.seed, ev.name) == ("openai:n", 0, "")
    with pytest.raises(ValueError) as caught:
        _analysis_options(ev, "nobody", None, None)
    assert str(caught.value) == "baseline: no column 'nobody'; the columns are openai:m, openai:n"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# _show_batch

class Line:
    """A batch progress line: its text, batches in progress."""

    def __init__(self, text: str, in_progress: int) -> None:
        self.text, self.in_progress = text, in_progress

    def __str__(self) -> str:
        return self.text


def test_the_batch_line_is_rewritten_in_place_and_ends_when_no_batch_runs(capsys: pytest.CaptureFixture) -> None:
    _show_batch(Line("2 batches", 2))
    _show_batch(Line("done", 0))
    assert capsys.readouterr().err == "\r2 batches" + " " * 8 + "\rdone" + " " * 8 + "\n"


def test_the_batch_line_is_flushed_each_time_even_without_its_line_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook's stderr shows what was written only when flushed (or at a line's end)."""
    log: list[str] = []
    monkeypatch.setattr(runner.sys, "stderr", SimpleNamespace(write=log.append, flush=lambda: log.append("FLUSH")))
    _show_batch(Line("1 batch", 1))
    assert log[-1] == "FLUSH" and "".join(log[:-1]) == "\r1 batch" + " " * 8


# evaluation_run

class FakeAgent:
    """An `Agent`: the id and options it was built with."""

    def __init__(self, provider: str, **options: Any) -> None:
        self.provider, self.options = provider, options


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `evaluation_run` hands `_run_matrix` (returned in place of its coroutine)."""
    monkeypatch.setattr(runner, "Agent", FakeAgent)
    monkeypatch.setattr(runner, "_run_matrix", lambda *args, **kwargs: {"args": args, **kwargs})
    return {}


@pytest.mark.usefixtures("handed")
def test_evaluation_run_hands_the_matrix_its_plan_and_default_factories() -> None:
    agent = FakeAgent("anthropic:c")
    got = runner.evaluation_run(["openai:m", agent, "openai:m"], "{{ row }}", ["x", "y"],
                                assertions=["json", "judge:openai:j"], system="be brief", tools=["t"], max_steps=4,
                                timeout=3.0, api_key="k", repeat=2,
                                concurrency=5, budget=1.0, cache=False, store=False, check_timeout=2.0,
                                namespace={"n": 1}, raw=True, redact_context=True, batch={"poll_s": 1})
    ev, entries, rows = got.pop("args")
    assert entries == ["openai:m", agent, "openai:m"] and rows == ["x", "y"]
    assert (ev.providers, ev.rows, ev.assertions, ev.repeat, ev.budget) == (
        ["openai:m", "anthropic:c", "openai:m #2"], ["x", "y"], ["json", "judge:openai:j"], 2, 1.0)
    assert [type(a).__name__ for a in got.pop("assertions")] == ["JsonAssertion", "JudgeAssertion"]
    assert got.pop("variants") == [Variant(None, "{{ row }}")]
    judges = got.pop("judge_factory")
    made, judge = got.pop("factory")("openai:z"), judges("openai:j")
    assert (made.provider, made.options) == ("openai:z", {"system": "be brief", "tools": ["t"], "max_steps": 4,
                                                            "api_key": "k"})
    assert (judge.provider, judge.options) == ("openai:j", {"api_key": "k"})
    assert judges("openai:j") is judge  # built once, before the matrix: the matrix is handed it
    assert got == {"store": False, "cache": False, "repeat": 2, "check_timeout": 2.0, "concurrency": 5,
                   "budget": 1.0, "run_options": {"timeout": 3.0}, "namespace": {"n": 1}, "raw": True,
                   "redacting": True, "on_start": None, "on_result": None, "batch": {"poll_s": 1}}


@pytest.mark.usefixtures("handed")
def test_evaluation_run_hands_every_run_option_and_parses_checks_with_its_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "coerce_settings", lambda s: ("settings", s))
    monkeypatch.setattr(runner, "image_blocks", lambda i: ("blocks", i))
    parsed: list[Any] = []
    monkeypatch.setattr(runner, "parse_assertion", lambda a, **kw: parsed.append((a, kw)) or SimpleNamespace(name=a))
    got = runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], assertions=["a", "b"], rubric="be right",
                                namespace={"n": 1}, output_schema={"type": "object"}, output_strategy="tool",
                                images=["i.png"], settings={"temperature": 0}, timeout=2.0)
    assert got["run_options"] == {"output_schema": {"type": "object"}, "output_strategy": "tool",
                                  "images": ("blocks", ["i.png"]), "settings": ("settings", {"temperature": 0}),
                                  "timeout": 2.0}
    options = {"namespace": {"n": 1}, "rubric": "be right", "has_schema": True}
    assert parsed == [("a", options), ("b", options)]


def test_a_judge_that_cannot_be_built_stops_the_evaluation_before_the_matrix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_run_matrix", lambda *args, **kwargs: pytest.fail("the matrix was started"))

    def judge_factory(pid: str) -> Any:
        raise ValueError("OPENAI_API_KEY is not set: set it in the environment")

    with pytest.raises(ValueError) as caught:
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], assertions=["judge:openai:j"],
                              judge_factory=judge_factory, factory=str)
    assert str(caught.value) == ("judge:openai:j: the judge cannot be built: OPENAI_API_KEY is not set: "
                                 "set it in the environment")


@pytest.mark.usefixtures("handed")
def test_evaluation_run_defaults() -> None:
    got = runner.evaluation_run(["openai:m"], "{{ row }}", ["x"])
    ev = got.pop("args")[0]
    made = got.pop("factory")("openai:z")
    assert made.options == {"system": None, "tools": None, "max_steps": 10}
    with pytest.raises(KeyError):  # no judge among the checks: none built
        got.pop("judge_factory")("openai:j")
    assert got.pop("variants") == [Variant(None, "{{ row }}")]
    assert got == {"store": None, "cache": True, "repeat": 1, "check_timeout": CHECK_TIMEOUT_S, "concurrency": 4,
                   "budget": None, "run_options": {}, "namespace": None, "raw": False, "redacting": False,
                   "on_start": None, "on_result": None, "batch": False, "assertions": []}
    assert (ev.repeat, ev.budget, ev.baseline, ev.name, ev.variants, ev.labels) == (1, None, None, None, [], {})


@pytest.mark.usefixtures("handed")
def test_evaluation_run_fills_the_evaluation_given_with_its_variants_and_options() -> None:
    given = Evaluation([], [])
    factory, judge_factory = (lambda pid: pid), (lambda pid: f"judge {pid}")
    start, result = (lambda r: None), (lambda r: None)
    got = runner.evaluation_run(["openai:m"], None, ["x"], prompts={"a": "A", "b": "B"}, systems={"a": "S"},
                                evaluation=given, baseline="openai:m/a", seed=7, name="cell 3", factory=factory,
                                judge_factory=judge_factory, on_start=start, on_result=result,
                                assertions=["judge:openai:j"])
    ev = got["args"][0]
    assert ev is given and (ev.variants, ev.baseline, ev.seed, ev.name) == (["a", "b"], "openai:m/a", 7, "cell 3")
    assert got["factory"] is factory and got["judge_factory"]("openai:j") == "judge openai:j"
    assert got["on_start"] is start and got["on_result"] is result
    assert got["variants"] == [Variant("a", "A", "S"), Variant("b", "B")]


@pytest.mark.usefixtures("handed")
def test_a_schema_lets_the_schema_check_in_even_an_empty_one() -> None:
    with pytest.raises(ValueError):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], assertions=["schema"])
    got = runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], assertions=["schema"], output_schema={})
    assert [a.name for a in got["assertions"]] == ["schema"]


@pytest.mark.usefixtures("handed")
def test_an_alias_is_resolved_to_its_key_and_kept_as_a_label(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "resolve_alias", lambda pid: {"fast": "openai:f"}.get(pid, pid))
    ev = runner.evaluation_run(["fast", "openai:m"], "{{ row }}", ["x"])["args"][0]
    assert ev.providers == ["openai:f", "openai:m"] and ev.labels == {"openai:f": "fast"}


@pytest.mark.usefixtures("handed")
def test_evaluation_run_checks_everything_before_the_matrix() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], concurrency=0)
    with pytest.raises(ValueError, match="check timeout"):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], check_timeout=0)
    with pytest.raises(ValueError, match="repeat"):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], repeat=0)
    with pytest.raises(ValueError, match="budget"):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], budget=-1)
    with pytest.raises(TypeError):
        runner.evaluation_run(["openai:m"], "{{ row }}", "not rows")
    with pytest.raises(ValueError, match="baseline"):
        runner.evaluation_run(["openai:m"], "{{ row }}", ["x"], baseline="nobody")


# aevaluate, evaluate

def test_aevaluate_runs_the_evaluation_on_ipyagents_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(runner, "evaluation_run", lambda *args, **kwargs: ("run", args, kwargs))

    async def in_background(run: Any) -> Any:
        calls.append(run)
        return "done"

    monkeypatch.setattr(runner, "run_in_background", in_background)
    assert asyncio.run(runner.aevaluate(["p"], "T", ["r"], seed=3)) == "done"
    assert calls == [("run", (["p"], "T", ["r"]), {"seed": 3})]


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The loop's entry points, recorded: `aevaluate`'s and `evaluation_run`'s arguments, `run_sync`'s outcome."""
    seen: dict[str, Any] = {"outcome": "finished"}
    monkeypatch.setattr(runner, "aevaluate", lambda *args, **kwargs: ("aevaluate", args, kwargs))
    monkeypatch.setattr(runner, "evaluation_run", lambda *args, **kwargs: ("evaluation_run", args, kwargs))

    def run_sync(coroutine: Any) -> Any:
        seen["ran"] = coroutine
        if isinstance(seen["outcome"], BaseException):
            raise seen["outcome"]
        return seen["outcome"]

    monkeypatch.setattr(runner, "run_sync", run_sync)
    return seen


def test_evaluate_runs_in_the_foreground_with_an_evaluation_of_its_own(loop: dict[str, Any]) -> None:
    assert runner.evaluate(["p"], "T", ["r"], seed=3) == "finished"
    name, args, kwargs = loop["ran"]
    assert (name, args) == ("aevaluate", (["p"], "T", ["r"]))
    ev = kwargs.pop("evaluation")
    assert isinstance(ev, Evaluation) and (ev.providers, ev.rows) == ([], []) and kwargs == {"seed": 3}


def test_evaluate_fills_the_evaluation_given(loop: dict[str, Any]) -> None:
    given = Evaluation([], [])
    runner.evaluate(["p"], "T", ["r"], evaluation=given)
    assert loop["ran"][2] == {"evaluation": given}


def test_a_batch_in_the_foreground_shows_its_progress_line(loop: dict[str, Any]) -> None:
    runner.evaluate(["p"], "T", ["r"], batch=True)
    assert loop["ran"][2]["batch"] == {"on_progress": _show_batch}
    runner.evaluate(["p"], "T", ["r"], batch={"poll_s": 2})
    assert loop["ran"][2]["batch"] == {"poll_s": 2}
    runner.evaluate(["p"], "T", ["r"], batch=False)
    assert loop["ran"][2]["batch"] is False


def test_evaluate_in_the_background_starts_the_run_and_returns_at_once(loop: dict[str, Any]) -> None:
    given = Evaluation([], [])
    started: list[Any] = []
    given.run_in_background = lambda run: started.append(run) or "started"  # type: ignore[method-assign]
    assert runner.evaluate(["p"], "T", ["r"], background=True, evaluation=given, batch=True) == "started"
    assert started == [("evaluation_run", (["p"], "T", ["r"]), {"evaluation": given, "batch": True})]
    assert "ran" not in loop


@pytest.mark.parametrize(("stdin", "asked"), [(None, False), (SimpleNamespace(isatty=lambda: False), False),
                                              (SimpleNamespace(isatty=lambda: True), True)])
def test_an_interrupt_returns_what_finished_and_asks_at_a_terminal(
        loop: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        stdin: Any, asked: bool) -> None:
    loop["outcome"] = KeyboardInterrupt()
    given = Evaluation(["openai:m"], ["a", "b", "c"])
    given.results.append(SimpleNamespace(status="ok"))  # type: ignore[arg-type]
    left: list[Any] = []
    monkeypatch.setattr(runner, "leave_or_cancel", lambda ev, ask: left.append((ev, ask)) or "")
    monkeypatch.setattr(runner.sys, "stdin", stdin)
    assert runner.evaluate(["p"], "T", ["r"], evaluation=given) is given
    assert given.interrupted and left == [(given, asked)]
    assert capsys.readouterr().err == ("ipyagent: evaluation interrupted: 1 of 3 runs finished; "
                                       "the returned Evaluation holds them\n")


def test_an_interrupt_tells_what_was_left_running(
        loop: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    loop["outcome"] = KeyboardInterrupt()
    monkeypatch.setattr(runner, "leave_or_cancel", lambda ev, ask: "2 batches left running")
    ev = runner.evaluate(["p"], "T", ["r"])
    assert ev.interrupted
    assert capsys.readouterr().err.endswith("holds them\n2 batches left running\n")
