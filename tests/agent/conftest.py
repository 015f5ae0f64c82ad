"""Fixtures the agent layer's tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ipyagent.memory import RunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    """A new SQLite run store under the test's tmp_path, closed after the test."""
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


@pytest.fixture
def open_store() -> Iterator[Callable[[Path], RunStore]]:
    """Opens run stores for a test (`open_store(path)`, as a new kernel would) and closes them after
    it: a store left to the collector warns "unclosed database" on Python 3.13, in whichever test
    runs when it is collected."""
    opened: list[RunStore] = []

    def open_one(path: Path) -> RunStore:
        opened.append(RunStore(path))
        return opened[-1]

    yield open_one
    for one in opened:
        one.close()
