"""Shared test set-up: every test's run store is a fresh file under its tmp_path, so no
test writes `.ipyagent/runs.sqlite` into the repository (kernels started by a test
inherit the variable); the fixtures every layer's tests share.

The tests mirror ``src/ipyagent``: ``tests/<layer>/`` holds the tests of that layer,
``tests/support/`` what they share that is not a test (local servers, recordings,
kernels, drivers for tests), ``tests/browser/`` the JupyterLab suite."""

from __future__ import annotations

import pytest

# Fixtures several layers' tests use: an in-process IPython shell with ipyagent loaded (`ip`), a
# local server with a recorded reply (`server`) and the shell pointed at it (`connected`), and the
# file where the test MCP server notes its calls (`record`).
from .support.mcp_servers import record  # noqa: F401
from .support.postgres import PostgresCluster, Unavailable
from .support.shell import connected, ip, server  # noqa: F401


@pytest.fixture(autouse=True)
def _run_store_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "ipyagent-runs.sqlite"))


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster on 127.0.0.1 for the whole run (`support.postgres`); the tests
    that need it skip, with the reason, where it cannot start."""
    cluster = PostgresCluster()
    try:
        cluster.start()
    except Unavailable as exc:
        pytest.skip(f"the PostgreSQL run store is not tested here: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request, tmp_path):
    """Where a run store is made, once per back end: a new SQLite file, a new PostgreSQL database's URL."""
    if request.param == "sqlite":
        return tmp_path / ".ipyagent" / "runs.sqlite"
    return request.getfixturevalue("postgres").new_database()
