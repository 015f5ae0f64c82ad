"""``%mcp`` in terminal IPython (IPython's test shell, no kernel): add, list, %tools, %%agent --tools,
log, remove, unload; each bad input is one line and the shell keeps working."""

from __future__ import annotations

import sys

import pytest
from IPython.core.error import UsageError

from ..support.processes import children, gone
from ..support.stub_server import StubServer, openai_text_reply
from ..support.mcp_servers import TEST_SERVER, received
from ..support.replies import tool_call_reply

TIME = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
TEST = f"{sys.executable} {TEST_SERVER[1]}"


@pytest.fixture
def shell(ip, capsys):  # noqa: F811
    yield ip
    ip.run_line_magic("unload_ext", "ipyagent")  # closes every server
    ip.run_line_magic("load_ext", "ipyagent")
    capsys.readouterr()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_add_list_tools_log_remove(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add time -- {TIME}")
    assert capsys.readouterr().out.strip().startswith("mcp: added time (")
    assert children("mcp_server_time") == []  # starts on first use, not at add
    shell.run_line_magic("mcp", "list")
    out = capsys.readouterr().out
    assert out.startswith("time  stopped  ") and "mcp_server_time" in out
    shell.run_line_magic("tools", "")  # a use: it starts, and lists tools with their schemas
    out = capsys.readouterr().out
    assert "time  (MCP server: " in out and "  time_get_current_time: Get current time" in out
    assert "      timezone: string, required — " in out and '"required": [\n' in out  # parameters, then the schema
    [pid] = children("mcp_server_time")
    shell.run_line_magic("mcp", "list")
    out = capsys.readouterr().out
    assert out.startswith("time  running  ") and "  time_convert_time: Convert time between timezones" in out
    shell.run_line_magic("mcp", "log time")
    assert "ipyagent: running; tools: get_current_time, convert_time" in capsys.readouterr().out
    shell.run_line_magic("mcp", "remove time")
    assert capsys.readouterr().out.strip() == "mcp: removed time (server stopped)"
    assert gone(pid)
    shell.run_line_magic("mcp", "list")
    assert capsys.readouterr().out.startswith("no MCP servers")


def test_agent_cell_calls_a_server_tool(shell, capsys, monkeypatch, record) -> None:  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-magics")
    shell.run_line_magic("mcp", f"add test --env MCP_TEST_RECORD={record} --start -- {TEST}")
    out = capsys.readouterr().out
    assert out.startswith("mcp: test running; tools: test_echo, test_slow, test_picture")
    with StubServer(tool_call_reply([("call_m1", "test_echo", {"text": "from the model", "times": 2})]),
                    openai_text_reply("Echoed.")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        shell.run_cell_magic("agent", "--tools test.echo,test.picture -o res", "Echo something")
    assert [t["function"]["name"] for t in model.requests[0]["body"]["tools"]] == ["test_echo", "test_picture"]
    assert received(record) == [{"tool": "echo", "arguments": {"text": "from the model", "times": 2}}]
    [tool_msg] = [m for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_msg == {"role": "tool", "tool_call_id": "call_m1", "content": "from the model from the model"}
    res = shell.user_ns["res"]
    assert res.ok and res.text == "Echoed." and res.tool_calls[0].native_name == "test_echo"


def test_agent_cell_with_an_approve_server_asks_first(shell, capsys, monkeypatch, record) -> None:  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-magics")
    shell.run_line_magic("mcp", f"add test --approve --env MCP_TEST_RECORD={record} -- {TEST}")
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")  # the terminal's approval prompt: deny
    with StubServer(tool_call_reply([("call_a", "test_echo", {"text": "rm -rf"})]), openai_text_reply("ok")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        shell.run_cell_magic("agent", "--tools test", "Do it")
    assert received(record) == []
    [tool_msg] = [m for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert "denied" in tool_msg["content"]


@pytest.mark.parametrize("line, expected", [
    ("add nope -- definitely-not-a-command-xyz", "command 'definitely-not-a-command-xyz' not found"),
    (f"add quits --start -- {sys.executable} -c \"import sys; print('bad config', file=sys.stderr); sys.exit(2)\"",
     "exited during start-up; its last log line: 'bad config'"),
    (f"add mute --start --timeout 1 -- {sys.executable} -c \"import time; time.sleep(60)\"",
     "did not answer `initialize` within 1 s"),
    ("add web --start --url http://127.0.0.1:9/mcp", "cannot connect to http://127.0.0.1:9/mcp"),
], ids=["no-such-command", "exits-at-start", "never-initializes", "url-refuses"])
def test_servers_that_cannot_start_are_one_line(shell, capsys, line: str, expected: str) -> None:
    shell.run_line_magic("mcp", line)
    out, err = capsys.readouterr()
    assert len(lines(err)) == 1 and err.startswith("ipyagent: MCP server") and expected in err, err
    assert "Traceback" not in out + err
    assert children("time.sleep(60)") == []  # the one that never answered was stopped
    shell.run_line_magic("mcp", "list")  # the shell keeps working
    assert capsys.readouterr().out


def test_a_tool_name_that_does_not_exist_is_one_line(shell, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-magics")
    shell.run_line_magic("mcp", f"add time -- {TIME}")
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("agent", "--tools time.get_the_weather", "Hi")
    assert str(caught.value) == ("--tools time: MCP server 'time' has no tool 'get_the_weather'; "
                                 "it has get_current_time, convert_time")


@pytest.mark.parametrize("line, expected", [
    ("", "use one of: add, list, remove, restart, log"),
    ("frobnicate", "unknown subcommand 'frobnicate'"),
    ("add x", "give a command after -- or --url URL"),
    ("add 9x -- true", "must start with a letter"),
    ("add x --url ftp://host/mcp", "must start with http:// or https://"),
    ("add x --env NOEQUALS -- true", "--env needs KEY=VALUE"),
    ("add x --header K=V -- true", "--header and --transport go with --url"),
    ("add x --timeout 0 -- true", "--timeout must be more than 0"),
    ("remove nobody", "no MCP server 'nobody'"),
    ("log", "takes one server name"),
    ("log x -n many", "-n needs a number"),
])
def test_bad_arguments_are_usage_errors(shell, line: str, expected: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        shell.run_line_magic("mcp", line)
    assert expected in str(caught.value)


def test_adding_a_name_twice_is_refused(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add time -- {TIME}")
    with pytest.raises(UsageError, match="already added"):
        shell.run_line_magic("mcp", f"add time -- {TIME}")


def test_unload_stops_every_server(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add time --start -- {TIME}")
    [pid] = children("mcp_server_time")
    shell.run_line_magic("unload_ext", "ipyagent")
    assert gone(pid)
    shell.run_line_magic("load_ext", "ipyagent")
    shell.run_line_magic("mcp", "list")
    assert capsys.readouterr().out.strip().endswith("%mcp add NAME --url URL")


def test_restart_starts_a_new_process(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add time --start -- {TIME}")
    [first] = children("mcp_server_time")
    shell.run_line_magic("mcp", "restart time")
    assert capsys.readouterr().out.strip().endswith("tools: time_get_current_time, time_convert_time")
    [second] = children("mcp_server_time")
    assert second != first and gone(first)
