"""While evaluations run, the heap from before them is frozen (`runner.frozen_heap`): their full
collections do not go over the notebook's data again and again. The last one to end thaws it; a
freeze the user made is left alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ipyagent import Agent, evaluate
from ipyagent.agent.evaluation.runner import frozen_heap

from ..support.evaluation import answering
from ..support.stub_server import StubServer


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_heap_is_frozen_while_evaluations_run_and_thawed_by_the_last() -> None:
    kept = [object() for _ in range(10)]
    with frozen_heap() as outer:
        frozen = gc.get_freeze_count()
        assert outer and frozen >= len(kept)
        with frozen_heap() as inner:  # another evaluation (a background one) meanwhile: no second freeze
            assert inner and gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen  # still frozen while the first runs
    assert gc.get_freeze_count() == 0


def test_a_freeze_the_user_made_is_left_as_it_is() -> None:
    gc.freeze()
    theirs = gc.get_freeze_count()
    with frozen_heap() as ours:
        assert not ours and gc.get_freeze_count() == theirs
    assert gc.get_freeze_count() == theirs


def test_an_evaluation_runs_with_the_heap_frozen(store) -> None:
    seen: list[int] = []
    with StubServer(responder=answering(lambda q: "ok")) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "{{ row }}", ["a", "b"], store=store,
                      on_result=lambda r: seen.append(gc.get_freeze_count()))
    assert len(ev.results) == 2 and len(seen) == 2 and all(seen)
    assert gc.get_freeze_count() == 0


def _queued_cells_frozen(store) -> list[bool]:
    """Whether each result of an evaluation of 3 rows x 2 was frozen when it was given (tracked, yet in
    none of the collector's generations: `gc.get_objects` leaves the frozen out)."""
    seen: list[bool] = []

    def frozen(result) -> None:
        seen.append(gc.is_tracked(result) and not any(o is result for o in gc.get_objects()))

    with StubServer(responder=answering(lambda q: "ok")) as server:
        evaluate([Agent("openai:m", base_url=server.url), Agent("openai:n", base_url=server.url)], "{{ row }}",
                 ["a", "b", "c"], store=store, on_result=frozen)
    return seen


def test_the_matrix_queued_is_frozen_with_the_heap(store) -> None:
    """Its cells live till the end: the evaluation's full collections need not go over them."""
    assert _queued_cells_frozen(store) == [True] * 6
    assert gc.get_freeze_count() == 0


def test_a_freeze_the_user_made_is_not_added_to(store) -> None:
    gc.freeze()
    theirs = gc.get_freeze_count()
    assert _queued_cells_frozen(store) == [False] * 6
    assert gc.get_freeze_count() <= theirs  # some of what they froze may have died since
