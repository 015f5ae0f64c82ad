"""An in-process IPython shell with ipyagent loaded (no kernel, so the text view), and a local
OpenAI-compatible server it can be pointed at; the fixtures are offered by tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.terminal.interactiveshell import TerminalInteractiveShell
from IPython.testing.globalipapp import start_ipython

from ipyagent.drivers.registry import BUILTIN

from .stub_server import FIXTURES, Reply, StubServer

#: The recorded reply the `server` fixture sends.
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


#: The key `connected` sets, which no output may show.
SECRET = "sk-magics-secret-9f8e7d6c5b4a"


#: Every built-in provider's key variable (cleared by `ip`).
KEY_VARS = sorted({spec.api_key_env for spec in BUILTIN.values() if spec.api_key_env})


@pytest.fixture
def ip(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """IPython's test shell (temporary history, no pager) with ipyagent loaded, no provider key or
    base URL in the environment; afterwards the extension is unloaded and every name a test put in
    the user's namespace is taken out again (the shell is one per process)."""
    for var in KEY_VARS + ["OPENAI_BASE_URL", "OLLAMA_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)
    shell = start_ipython() or TerminalInteractiveShell.instance()  # start_ipython: the first call only
    before = set(shell.user_ns)
    shell.run_line_magic("load_ext", "ipyagent")
    assert getattr(shell, "kernel", None) is None
    yield shell
    shell.run_line_magic("unload_ext", "ipyagent")
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(Reply.sse_file(TEXT)) as s:
        yield s


@pytest.fixture
def connected(ip, server: StubServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1")
    out = capsys.readouterr().out
    assert out.strip() == f"provider: openai:m at {server.url}/v1"
    return ip
