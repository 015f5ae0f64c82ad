"""Fixtures the tools' tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ipyagent.agent import run_sync
from ipyagent.tools.mcp import MCPServer


@pytest.fixture
def servers() -> Iterator[list[MCPServer]]:
    """The MCP servers a test makes (it appends them); each is closed after the test."""
    made: list[MCPServer] = []
    yield made
    for server in made:
        run_sync(server.aclose())
