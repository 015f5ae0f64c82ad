"""Fixtures the agent layer's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ipyagent.memory import RunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    """A new SQLite run store under the test's tmp_path, closed after the test."""
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()
