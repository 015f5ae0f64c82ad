"""Fixtures the drivers' tests share."""

from __future__ import annotations

import pytest

import ipyagent.drivers.turn


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The drivers' retry waits (seconds), recorded instead of slept."""
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(ipyagent.drivers.turn, "retry_sleep", fake_sleep)
    return slept
