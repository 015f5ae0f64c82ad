"""Fixtures the notebook layer's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def shell(ip: Any, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """`ip` (the root conftest's shell with ipyagent loaded) whose MCP servers are all closed after
    the test: the extension is unloaded (which closes every server) and loaded again."""
    yield ip
    ip.run_line_magic("unload_ext", "ipyagent")
    ip.run_line_magic("load_ext", "ipyagent")
    capsys.readouterr()
