"""``%mcp`` in terminal IPython (IPython's test shell, no kernel): add, list, %tools, %%agent --tools,
log, remove, unload; each bad input is one line and the shell keeps working."""

from __future__ import annotations

import os
import shlex
import signal
import sys

import pytest
from IPython.core.error import UsageError

from ipyagent.agent import run_sync

from ..support.processes import children, gone
from ..support.stub_server import StubServer, openai_text_reply
from ..support.mcp_servers import TEST_SERVER, pid_in, received, wrapped_server
from ..support.replies import tool_call_reply

TIME = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
TEST = f"{sys.executable} {TEST_SERVER[1]}"


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


# -- no process outlives its server; what a server prints is shown safely -------------------


def _server(shell, name: str):
    return shell.magics_manager.registry["AgentMagics"].mcp_servers[name]


@pytest.mark.parametrize("how", ["remove", "reload_ext"])
def test_remove_and_reload_end_the_servers_whole_process_group(shell, capsys, tmp_path, how: str) -> None:
    shell.run_line_magic("mcp", f"add fam --start -- {shlex.join(wrapped_server(tmp_path / 'child.pid'))}")
    assert capsys.readouterr().out.startswith("mcp: fam running")
    child, leader = pid_in(tmp_path / "child.pid"), _server(shell, "fam").processes.leader
    if how == "remove":
        shell.run_line_magic("mcp", "remove fam")
        assert capsys.readouterr().out.strip() == "mcp: removed fam (server stopped)"
    else:
        shell.run_line_magic("reload_ext", "ipyagent")
    assert gone(leader, timeout=0) and gone(child, timeout=0)  # a sh -c wrapper's child too, before the magic returns


def test_a_process_that_left_its_group_is_named_in_list_and_remove(shell, capsys, tmp_path) -> None:
    command = shlex.join(wrapped_server(tmp_path / "child.pid", leave_group=True))
    shell.run_line_magic("mcp", f"add fork --start -- {command}")
    child = pid_in(tmp_path / "child.pid")
    try:
        capsys.readouterr()
        shell.run_line_magic("mcp", "list")
        assert f"  it left process {child} running outside its process group" in capsys.readouterr().out
        shell.run_line_magic("mcp", "remove fork")
        assert capsys.readouterr().out.strip() == (
            f"mcp: removed fork (server stopped); it left process {child} running "
            f"outside its process group (not stopped by ipyagent: kill {child})")
    finally:
        os.kill(child, signal.SIGKILL)


def test_escape_sequences_from_a_server_never_reach_the_terminal(shell, capsys) -> None:
    from ..support.mcp_server import HOSTILE_DESCRIPTION

    script = f"printf 'warn \\033]0;title\\007\\033[2J\\n' >&2; exec {TEST}"
    shell.run_line_magic("mcp", f"add evil --env MCP_TEST_HOSTILE=1 --start -- sh -c {shlex.quote(script)}")
    outputs = [capsys.readouterr().out]
    for magic, line in (("tools", ""), ("mcp", "list"), ("mcp", "log evil")):
        shell.run_line_magic(magic, line)
        outputs.append(capsys.readouterr().out)
    assert "\x1b" in HOSTILE_DESCRIPTION
    for out in outputs:
        assert not any(c in out for c in "\x1b\x07\x9b"), out
    tools, listing, log = outputs[1:]
    assert "Looks harmless.␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇␛[2J Really." in tools
    assert "  evil_hostile: Looks harmless.␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇␛[2J Really." in listing
    assert "warn ␛]0;title␇␛[2J" in log


def test_log_and_start_error_mask_a_key_the_server_printed(shell, capsys) -> None:
    leak = "sk-live-" + "Z" * 24
    shell.run_line_magic("mcp", f"add leaky --start -- sh -c {shlex.quote(f'echo using {leak} >&2; exit 1')}")
    err = capsys.readouterr().err
    assert "its last log line: 'using [redacted]'" in err and leak not in err
    shell.run_line_magic("mcp", "list")
    shell.run_line_magic("mcp", "log leaky")
    out = capsys.readouterr().out
    assert "using [redacted]" in out and leak not in out
def _everything() -> str:
    from ..support.mcp_servers import everything

    return " ".join(everything())


def test_add_with_roots_sampling_options_then_list_roots_and_log_levels(shell, capsys, tmp_path) -> None:
    data, docs = tmp_path / "data", tmp_path / "docs"
    data.mkdir()
    docs.mkdir()
    shell.run_line_magic("mcp", f"add ev --root {data} --sampling openai:m --approve-sampling --elicitation-timeout 5 "
                                f"--start -- {_everything()}")
    assert capsys.readouterr().out.startswith("mcp: ev running; tools: ev_echo,")
    server = shell.magics_manager.registry["AgentMagics"].mcp_servers["ev"]
    assert (server.sampling, server.approve_sampling, server.elicitation_timeout) == ("openai:m", True, 5)
    shell.run_line_magic("mcp", "list")
    out = capsys.readouterr().out
    assert out.startswith("ev  running, approve-sampling, sampling by openai:m  ") and f"  roots: {data}\n" in out
    assert f"URI: {data.as_uri()}" in run_sync(server.call("get-roots-list", {})).to_text()
    shell.run_line_magic("mcp", f"roots ev {docs}")
    assert capsys.readouterr().out.strip() == f"mcp: ev roots: {docs} (the server was told)"
    shell.run_line_magic("mcp", "log ev")
    log = capsys.readouterr().out
    assert "server log [info] everything-server: Roots updated: 1 root(s) received from client" in log
    assert "roots changed: " in log
    shell.run_line_magic("mcp", "log ev --level info")
    leveled = capsys.readouterr().out
    assert "Roots updated" in leveled and "ipyagent: running" not in leveled and "ipyagent: starting" not in leveled
    shell.run_line_magic("mcp", "log ev --level warning")
    assert capsys.readouterr().out.strip() == "(no log messages of ev at level warning or above)"


@pytest.mark.parametrize("line, expected", [
    ("add x --root /no/such/folder -- true", "--root '/no/such/folder' is not a folder"),
    ("add x --sampling gpt-4 -- true", "--sampling takes PROVIDER:MODEL"),
    ("add x --elicitation-timeout 0 -- true", "--elicitation-timeout must be more than 0"),
    ("roots", "name the server"),
    ("roots nobody", "no MCP server 'nobody'"),
])
def test_bad_new_arguments_are_usage_errors(shell, line: str, expected: str) -> None:
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("mcp", line)
    assert expected in str(caught.value)


def test_log_level_must_be_an_mcp_level(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add time -- {TIME}")
    with pytest.raises(UsageError, match="--level takes one of debug, info, notice"):
        shell.run_line_magic("mcp", "log time --level loud")


def test_in_the_terminal_a_sampling_request_and_an_elicitation_are_asked_on_stdin(shell, capsys, monkeypatch) -> None:
    """Sampling: the request is printed and ``y`` sends it to the cell's model; elicitation: a prompt per
    field, a bad answer asked again, the values reach the server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-magics")
    answers = iter(["y",  # send the sampling request
                    "y", "", "Ada Lovelace", "yes", "", "", "", "", "abc", "7"])  # answer the form: name... integer
    prompts: list[str] = []

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        return next(answers, "")

    monkeypatch.setattr("builtins.input", fake_input)
    shell.run_line_magic("mcp", f"add ev -- {_everything()}")
    calls = [("call_s", "ev_trigger-sampling-request", {"prompt": "six times seven?", "maxTokens": 9})]
    with StubServer(tool_call_reply(calls), openai_text_reply("forty-two"),
                    tool_call_reply([("call_e", "ev_trigger-elicitation-request", {})]),
                    openai_text_reply("ok")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        shell.run_cell_magic("agent", "--tools ev.trigger-sampling-request,ev.trigger-elicitation-request -o res", "Go")
    out = capsys.readouterr().out
    assert "MCP server ev asks the model (at most 9 tokens):" in prompts[0]
    assert "user: Resource trigger-sampling-request context: six times seven?" in prompts[0]
    sampled = model.requests[1]["body"]["messages"][-1]["content"]
    assert sampled == "Resource trigger-sampling-request context: six times seven?"
    assert "[sampling request from ev answered by openai:m (" in out
    assert prompts[2].startswith("  String (Your full, legal name) *: ")
    assert any("give a whole number" in line for line in out.splitlines())
    tool_results = [m["content"] for m in model.requests[3]["body"]["messages"] if m["role"] == "tool"]
    assert "- Name: Ada Lovelace" in tool_results[-1] and "- Favorite Integer: 7" in tool_results[-1]
    assert "[ev asked you for input: you answered]" in out
