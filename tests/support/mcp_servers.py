"""MCP servers for the tests: ours (mcp_server.py, which notes each call it receives) and the
reference time server; the `record` fixture is offered by tests/conftest.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
TEST_SERVER = [sys.executable, str(HERE / "mcp_server.py")]


TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file where the test server notes each call it receives (the subprocess inherits the variable)."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv("MCP_TEST_RECORD", str(path))
    return path


def received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
