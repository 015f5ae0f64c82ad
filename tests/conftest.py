"""Shared test set-up: every test's run store is a fresh file under its tmp_path, so no
test writes `.ipyagent/runs.sqlite` into the repository (kernels started by a test
inherit the variable)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _run_store_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "ipyagent-runs.sqlite"))


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The drivers' retry waits (seconds), recorded instead of slept."""
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    import ipyagent.drivers.base

    monkeypatch.setattr(ipyagent.drivers.base, "retry_sleep", fake_sleep)
    return slept
