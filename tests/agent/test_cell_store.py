"""Where an `EvalResult` keeps its numbers (`cell_store`): a matrix keeps tens of thousands of results,
so their times and prices are kept in arrays shared by a block of results, not as a float object each."""

from __future__ import annotations

import copy
import pickle
from array import array
from decimal import Decimal

from ipyagent.agent.evaluation.cell_store import SIZE
from ipyagent.agent.evaluation.results import FIELDS, EvalResult

FLOATS = ("cost", "judge_cost", "ttft_s", "total_s")


def apart(result: EvalResult, *names: str) -> set[str]:
    """The fields of `result` kept as given in its block's `other` (not in its arrays)."""
    return {name for name in names if vars(EvalResult)[name].key + result._at in result._block.other}


def test_results_keep_their_times_and_prices_in_one_array_per_block():
    results = [EvalResult(n, "openai:a", "p", {}, cost=n * 0.001, ttft_s=0.1, total_s=n / 3) for n in range(3 * SIZE)]
    blocks = {id(r._block) for r in results}
    assert len(blocks) <= 4  # 192 results: 3 blocks, 4 when the first began in one already in use
    first = results[0]._block
    assert isinstance(first.floats, array) and first.floats.typecode == "d"
    assert not hasattr(results[0], "__dict__")
    assert not set(FLOATS) & set(EvalResult.__slots__)  # no slot (nor float object) per value
    for n, r in enumerate(results):
        assert (r.cost, r.judge_cost, r.ttft_s, r.total_s) == (n * 0.001, None, 0.1, n / 3)
        assert type(r.cost) is float


def test_a_value_reads_back_as_it_was_given():
    r = EvalResult(0, "openai:a", "p", {})
    assert (r.cost, r.judge_cost, r.ttft_s, r.total_s) == (None, None, None, None)
    nan = float("nan")
    for value in (0.25, 0, 3, Decimal("0.1"), nan, True, None, 1.5):
        r.cost = value
        assert r.cost is value or (type(r.cost) is float and r.cost == value), value
        assert type(r.cost) is type(value)
    assert r.cost == 1.5 and not apart(r, "cost")
    other = EvalResult(1, "openai:a", "p", {}, cost=2, ttft_s=nan)
    assert type(other.cost) is int and other.ttft_s is nan and r.cost == 1.5


def test_a_copy_or_a_pickle_takes_a_place_of_its_own():
    r = EvalResult(0, "openai:a", "p", {"q": 1}, cost=0.5, total_s=2.0, run_id="r1")
    twin = copy.copy(r)
    twin.cost, twin.total_s = 9.0, None
    assert (r.cost, r.total_s) == (0.5, 2.0) and twin == EvalResult(0, "openai:a", "p", {"q": 1}, cost=9.0,
                                                                        run_id="r1")
    assert copy.deepcopy(r) == r and pickle.loads(pickle.dumps(r)) == r


def test_a_result_compares_shows_and_exports_by_its_fields_in_order():
    r = EvalResult(3, "openai:a", "say", {"q": 1}, variant="v", cost=0.5, judge_cost=0.25, ttft_s=0.1, total_s=0.2)
    assert r == EvalResult(3, "openai:a", "say", {"q": 1}, "v", 0, cost=0.5, judge_cost=0.25, ttft_s=0.1, total_s=0.2)
    assert r != EvalResult(3, "openai:a", "say", {"q": 1}, "v", cost=0.5, judge_cost=0.25, ttft_s=0.1, total_s=0.3)
    assert repr(r).startswith("EvalResult(row=3, provider='openai:a', prompt='say', fields={'q': 1}, variant='v', ")
    assert "cost=0.5, judge_cost=0.25, ttft_s=0.1, total_s=0.2, cached=False" in repr(r)
    plain = [n for n in FIELDS if n not in ("outcomes", "output")]
    assert list(r.to_dict()) == [*plain, "column", "output", "outcomes"]
    assert EvalResult.__match_args__ == FIELDS


def test_a_run_id_is_kept_as_a_number_and_reads_back_equal():
    from ipyagent.memory import new_run_id

    assert "run_id" not in EvalResult.__slots__
    ids = [new_run_id() for _ in range(SIZE)]
    results = [EvalResult(n, "openai:a", "p", {}, run_id=run_id) for n, run_id in enumerate(ids)]
    assert [r.run_id for r in results] == ids and all(type(r.run_id) is str for r in results)
    kept_apart = lambda: [r for r in results if apart(r, "run_id")]  # noqa: E731
    assert not kept_apart() and results[0]._block.ids.typecode == "Q"
    r = results[0]
    for odd in ("r1", "ABCDEF012345", "0x0123456789", "1_2345678901", " 12345678901", "0123456789abc", 12):
        r.run_id = odd
        assert r.run_id is odd  # not 12 lowercase hex digits: kept as given
    for value in ("000000000000", "ffffffffffff", None, "0123456789ab"):
        r.run_id = value
        assert r.run_id == value
    assert not kept_apart() and [x.run_id for x in results[1:]] == ids[1:]


def test_the_fields_almost_always_unset_take_no_slot_and_read_back_as_set():
    rare = {"error_type": None, "error": None, "human": None, "human_note": ""}
    assert not set(rare) & set(EvalResult.__slots__)
    r = EvalResult(0, "openai:a", "p", {}, status="failed", error_type="rate_limit", error="429", human=False,
                   human_note="meh")
    quiet = EvalResult(1, "openai:a", "p", {})
    assert (r.error_type, r.error, r.human, r.human_note) == ("rate_limit", "429", False, "meh")
    assert [getattr(quiet, name) for name in rare] == list(rare.values())
    note = "".join(["no", "ted"])
    quiet.human_note, quiet.human = note, True
    assert quiet.human_note is note and quiet.human is True and r.human is False
    places = lambda cell: apart(cell, *rare)  # noqa: E731
    assert len(places(quiet)) == 2
    for name, default in rare.items():
        setattr(r, name, default)
        setattr(quiet, name, default)
    assert not places(r) and not places(quiet) and r == EvalResult(0, "openai:a", "p", {}, status="failed", human=None)


def test_a_block_of_results_adds_few_objects_for_the_collector_to_visit():
    import gc

    gc.collect()
    before = len(gc.get_objects())
    results = [EvalResult(n, "openai:a", "p", {}, cost=0.5, run_id="0123456789ab") for n in range(4 * SIZE)]
    added = len(gc.get_objects()) - before
    # each result and its outcomes list; a block and its two arrays per SIZE (256) results, not per 64
    assert added <= 2 * len(results) + 5 * 3 + 5


def test_keeping_an_evaluation_reads_each_run_id_once_for_the_grades_and_once_for_the_document(tmp_path, monkeypatch):
    from ipyagent.agent.evaluation import cell_store
    from ipyagent.agent.evaluation.export import document
    from ipyagent.agent.evaluation.history import keep
    from ipyagent.agent.evaluation.results import Evaluation
    from ipyagent.memory import RunStore, new_run_id

    ev = Evaluation(["openai:a"], [{"q": n} for n in range(5)], assertions=[])
    ev.results = [EvalResult(n, "openai:a", "p", {"q": n}, run_id=new_run_id()) for n in range(5)]
    reads = []
    plain = cell_store.IdField.__get__

    def counted(self, obj, owner=None):
        if obj is not None:
            reads.append(obj)
        return plain(self, obj, owner)

    monkeypatch.setattr(cell_store.IdField, "__get__", counted)
    document(ev)
    assert len(reads) == 5  # a run id is a new str at each read
    reads.clear()
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        keep(ev, store, finished=True)
    finally:
        store.close()
    assert len(reads) == 10
