"""MCP servers for the tests: ours (mcp_server.py, which notes each call it receives), the
reference time server, and the reference servers of the MCP project installed with npm by
``make install`` into ``build/mcp-servers`` (`EVERYTHING`, `FILESYSTEM`, pinned in
``tests/support/mcp_npm/``); the `record` fixture is offered by tests/conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .waiting import wait_until

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TEST_SERVER = [sys.executable, str(HERE / "mcp_server.py")]


TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]

#: npm packages of the reference servers, as `make install` puts them.
NPM_MODULES = ROOT / "build" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
EVERYTHING_JS = NPM_MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM_JS = NPM_MODULES / "server-filesystem" / "dist" / "index.js"


def node_server(script: Path, *args: str) -> list[str]:
    """The command of an npm reference server (``node SCRIPT ARGS``); fails the test, saying how to
    get it, when `make install` has not installed it."""
    node = shutil.which("node")
    if node is None or not script.exists():
        pytest.fail(f"{script.relative_to(ROOT)} is missing: run `make install` (it installs the reference MCP "
                    "servers with npm into build/mcp-servers)")
    return [node, str(script), *args]


def everything() -> list[str]:
    """``@modelcontextprotocol/server-everything`` over stdio."""
    return node_server(EVERYTHING_JS, "stdio")


def filesystem(*roots: str | Path) -> list[str]:
    """``@modelcontextprotocol/server-filesystem`` allowed `roots`."""
    return node_server(FILESYSTEM_JS, *map(str, roots))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP on 127.0.0.1 (its own process group, stopped at the
    end): yields its ``/mcp`` URL once it accepts connections."""
    command = node_server(EVERYTHING_JS, "streamableHttp")
    port = _free_port()
    env = {**os.environ, "PORT": str(port)}  # it listens on every interface; the tests connect to 127.0.0.1
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    def listening() -> bool:
        if process.poll() is not None:
            pytest.fail(f"server-everything (HTTP) exited: {process.stderr.read().decode(errors='replace')[-500:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        if not wait_until(listening, 30, every=0.05):
            pytest.fail("server-everything (HTTP) did not listen within 30 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        process.stderr.close()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file where the test server notes each call it receives (the subprocess inherits the variable)."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv("MCP_TEST_RECORD", str(path))
    return path


def received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wrapped_server(pidfile: Path, *, leave_group: bool = False) -> list[str]:
    """The test server behind a ``sh -c`` wrapper that first starts a Python child writing its PID to
    `pidfile` and sleeping; with `leave_group` the child calls ``setsid`` first (it leaves the group).
    One line, so it fits a ``%mcp add`` magic line."""
    child = "; ".join(["import os, sys, time", *(["os.setsid()"] if leave_group else []), "p = sys.argv[1]",
                       "open(p + '.tmp', 'w').write(str(os.getpid()))", "os.rename(p + '.tmp', p)", "time.sleep(600)"])
    py = shlex.quote(sys.executable)
    server = f"{py} {shlex.quote(TEST_SERVER[1])}"
    return ["sh", "-c", f"{py} -c {shlex.quote(child)} {shlex.quote(str(pidfile))} & {server}"]


def pid_in(pidfile: Path, timeout: float = 15.0) -> int:
    """The PID `wrapped_server`'s child wrote (waiting for it up to `timeout` seconds)."""
    assert wait_until(pidfile.exists, timeout), f"no PID in {pidfile}"
    return int(pidfile.read_text())
