"""Fixtures the memory layer's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ipyagent.memory import RunStore


@pytest.fixture
def store(store_location: Any) -> Iterator[RunStore]:
    """A new run store, once per back end (SQLite, PostgreSQL: `store_location`), closed after the test."""
    s = RunStore(store_location)
    yield s
    s.close()
