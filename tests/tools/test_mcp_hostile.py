"""An MCP server that breaks the protocol (tests/support/mcp_raw_server.py, raw JSON-RPC over stdio):
what the SDK cannot read or validate goes to the server's log, redacted, never to the kernel's
streams; what the server answers wrongly is one line for the model; a live server is not restarted."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from ipyagent.agent import run_sync
from ipyagent.core import ErrorArtifact, TextArtifact
from ipyagent.tools.mcp import MCPServer, MCPServerError

from ..support.waiting import wait_until

RAW_SERVER = [sys.executable, str(Path(__file__).parents[1] / "support" / "mcp_raw_server.py")]
SECRET = "zzRAWSECRETtoken4242"
#: Seconds after which a test that would hang fails instead (a guard, not a measure).
GUARD = 60


def raw(servers: list[MCPServer], tmp_path: Path, mode: str = "normal", **kw: object) -> MCPServer:
    env = {"RAW_SECRET": SECRET, "RAW_MODE": mode, "RAW_RECORD": str(tmp_path / "requests.jsonl")}
    server = MCPServer("raw", RAW_SERVER, env=env, **kw)  # type: ignore[arg-type]
    servers.append(server)
    return server


def initializes(tmp_path: Path) -> int:
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    return sum(json.loads(line)["method"] == "initialize" for line in lines)


def test_notifications_the_sdk_cannot_validate_go_to_the_servers_log_redacted(
    servers: list[MCPServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = raw(servers, tmp_path)
    caplog.set_level(logging.DEBUG)  # what reaches the root logger would reach the kernel's stderr
    result = run_sync(server.call("leak", {}))
    assert result == TextArtifact(value="leaked?")
    assert wait_until(lambda: server.log().count("Failed to validate notification") == 2)
    log = server.log()
    assert "notifications/message" in log and "notifications/progress" in log and "[redacted]" in log
    assert SECRET not in server.log_path.read_text()  # redacted before it is written
    assert [r.getMessage() for r in caplog.records if "validate" in r.getMessage()] == []
    assert SECRET not in caplog.text


def test_other_libraries_client_logger_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    from ipyagent.tools import mcp as mcp_module

    mcp_module.log_dir()  # the SDK's loggers are routed
    with caplog.at_level(logging.INFO):
        logging.getLogger("client").info("a record of some other library")
    assert [r.getMessage() for r in caplog.records] == ["a record of some other library"]


def test_a_live_servers_own_32000_error_is_a_failed_call_not_a_restart(
    servers: list[MCPServer], tmp_path: Path
) -> None:
    server = raw(servers, tmp_path)
    for _ in range(2):
        failed = run_sync(server.call("rpc_error", {}))
        assert isinstance(failed, ErrorArtifact) and failed.value == "MCP server 'raw': internal: token=[redacted]"
    assert run_sync(server.call("echo", {"text": "still here"})) == TextArtifact(value="still here")
    assert server.state == "running" and server.restarts == 0 and initializes(tmp_path) == 1


def test_a_start_refused_with_32000_says_the_servers_reason(servers: list[MCPServer], tmp_path: Path) -> None:
    server = raw(servers, tmp_path, "refuse")
    with pytest.raises(MCPServerError) as raised:
        run_sync(server.start())
    assert "failed: MCPError: not today: token=[redacted]" in str(raised.value)
    assert "exited" not in str(raised.value) and SECRET not in str(raised.value)


@pytest.mark.parametrize("tool, cause", [
    ("deep", "its answer could not be read: Invalid JSON: recursion limit exceeded"),
    ("null", "its answer could not be read: result: Input should be an object"),
])
def test_an_answer_the_sdk_cannot_read_fails_the_call_at_once(
    servers: list[MCPServer], tmp_path: Path, tool: str, cause: str
) -> None:
    server = raw(servers, tmp_path)
    failed = run_sync(asyncio.wait_for(server.call(tool, {}), GUARD))  # before: it waited for the run's deadline
    assert isinstance(failed, ErrorArtifact) and failed.value.startswith(f"MCP server 'raw': {cause}")
    assert "\n" not in failed.value and SECRET not in failed.value
    assert run_sync(server.call("echo", {"text": "next"})) == TextArtifact(value="next")
    assert server.restarts == 0 and initializes(tmp_path) == 1


def test_garbage_lines_are_logged_and_the_answer_after_them_is_read(servers: list[MCPServer], tmp_path: Path) -> None:
    server = raw(servers, tmp_path)
    assert run_sync(server.call("garbage", {})) == TextArtifact(value="after garbage")
    assert "transport error" in server.log()


def test_a_tool_list_the_sdk_cannot_read_fails_the_start_at_once_naming_it(
    servers: list[MCPServer], tmp_path: Path
) -> None:
    server = raw(servers, tmp_path, "deep_schema", start_timeout=GUARD)
    with pytest.raises(MCPServerError) as raised:
        run_sync(server.start())
    message = str(raised.value)
    assert "its answer could not be read: Invalid JSON: recursion limit exceeded" in message
    assert "initialize" not in message and "start timeout" not in message
    assert "For further information" not in message  # the last line of pydantic's error in the log


def test_a_result_the_sdk_cannot_validate_is_one_short_line(servers: list[MCPServer], tmp_path: Path) -> None:
    server = raw(servers, tmp_path)
    failed = run_sync(server.call("bad_content", {}))
    assert isinstance(failed, ErrorArtifact) and failed.exception_type == "ValidationError"
    first = "its result is not a valid CallToolResult: content.0.TextContent.text: Field required (and "
    assert failed.value.startswith(f"MCP server 'raw': {first}") and failed.value.endswith(" more)")
    assert "\n" not in failed.value and "pydantic.dev" not in failed.value


def test_a_start_error_quotes_the_servers_last_line_not_a_traceback(servers: list[MCPServer]) -> None:
    script = 'echo "Error: no database" >&2; echo "  detail one" >&2; exit 3'
    server = MCPServer("gone", ["sh", "-c", script])
    servers.append(server)
    with pytest.raises(MCPServerError, match=r"its last log line: 'Error: no database'"):
        run_sync(server.start())
