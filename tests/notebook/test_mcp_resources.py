"""An MCP server's resources and prompts in terminal IPython: ``%mcp resources`` and ``%mcp prompts``
list them (server-everything, and our test server), ``%%agent --with mcp:NAME/URI`` and a template's
``mcp_resource(...)`` send a resource as a redacted context block within its budget, ``%mcp prompt``
puts a server prompt in a new cell and ``%%agent --prompt NAME/PROMPT`` sends its messages before
the cell's text, ``%mcp subscribe`` counts the updates the server sends."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.error import UsageError

from ..support.mcp_servers import TEST_SERVER, everything
from ..support.stub_server import StubServer, openai_text_reply

TEST = f"{sys.executable} {TEST_SERVER[1]}"
SECRET = "zq-mcp-resource-secret-8b1f2e"
FEATURES = "demo://resource/static/document/features.md"


def test_resources_and_prompts_of_server_everything_are_listed(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    capsys.readouterr()
    shell.run_line_magic("mcp", "resources ev")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ev: 7 resources, 2 templates (%%agent --with mcp:ev/URI)"
    assert f"  {FEATURES}  features.md (text/markdown): " in "\n".join(out)
    assert "  template demo://resource/dynamic/text/{resourceId}  " in "\n".join(out)
    shell.run_line_magic("mcp", "prompts ev")
    out = capsys.readouterr().out
    assert out.startswith("ev: 4 prompts (%mcp prompt ev PROMPT [ARG=VALUE ...])\n")
    assert "  args-prompt(city*, state): " in out and "  simple-prompt(): " in out


def test_a_resource_goes_to_the_model_as_a_redacted_context_block(shell, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-resources")
    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    shell.run_line_magic("mcp", f"add notes --env MCP_TEST_SECRET={SECRET} -- {TEST}")
    shell.user_ns["server"] = "notes"
    with StubServer(openai_text_reply("Read."), openai_text_reply("Cut."), openai_text_reply("Seen.")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        shell.run_cell_magic("agent", f"--with mcp:ev/{FEATURES},mcp:notes/test://notes --context-budget 4000",
                               "What do these say?")
        shell.run_cell_magic("agent", f"--with mcp:ev/{FEATURES} --context-budget 20", "And in short?")
        shell.run_cell_magic("agent", "", '{{ mcp_resource(server, "test://notes") }}\nWhat is the key?')
    first = model.requests[0]["body"]["messages"][-1]["content"]
    assert f'<context source="mcp" name="ev/{FEATURES}" type="text/markdown">\n# Everything Server' in first
    assert "`trigger-long-running-operation`" in first and "truncated" not in first  # the whole document
    assert '<context source="mcp" name="notes/test://notes" type="text/plain">\ndeploy notes\napi key: ' in first
    assert SECRET not in str(model.requests)  # the server's secret never reaches the model
    second = model.requests[1]["body"]["messages"][-1]["content"]
    assert 'truncated="true"' in second and "`trigger-long-running-operation`" not in second  # its ends only
    assert "# Everything Server - Features" in second and "characters left out" in second
    third = model.requests[2]["body"]["messages"][-1]["content"]
    assert '<context source="mcp" name="notes/test://notes"' in third and "What is the key?" in third
    assert "deploy notes" in third


@pytest.mark.parametrize("spec, expected", [
    ("mcp:ev", "an MCP resource is mcp:NAME/URI (%mcp resources NAME lists them)"),
    ("mcp:nobody/test://x", "no MCP server 'nobody'; added: ev"),
    ("mcp:ev/demo://nope",
     "MCP server 'ev' could not read demo://nope: MCP error -32602: Resource demo://nope not found"),
])
def test_a_bad_resource_is_one_line_and_nothing_is_sent(shell, spec: str, expected: str) -> None:
    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    with StubServer(openai_text_reply("never")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        with pytest.raises(UsageError) as caught:
            shell.run_cell_magic("agent", f"--with {spec}", "Read it")
    assert str(caught.value) == f"--with {spec}: {expected}"
    assert model.requests == []


def test_a_prompt_goes_into_a_new_cell(shell, capsys) -> None:
    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    shell.run_line_magic("mcp", f"add notes -- {TEST}")
    capsys.readouterr()
    shell.run_line_magic("mcp", "prompt ev args-prompt city=Paris")
    assert shell.rl_next_input == "%%agent\nWhat's weather in Paris?"
    assert "mcp: prompt args-prompt of ev (1 message) is in a new cell below" in capsys.readouterr().out
    shell.run_line_magic("mcp", "prompt notes review path=app.py")
    assert shell.rl_next_input == ("%%agent\nReview app.py (strict: no).\n\n(the prompt's assistant message:)\n"
                                   "> Which parts first?\n\nStart with the tests.")
    shell.rl_next_input = None
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("mcp", "prompt ev args-prompt")
    assert str(caught.value) == ("%mcp prompt: prompt 'args-prompt' needs 'city'=VALUE; "
                                 "its arguments: city*, state (* required)")
    with pytest.raises(UsageError, match="an argument is ARG=VALUE, not 'Paris'"):
        shell.run_line_magic("mcp", "prompt ev args-prompt Paris")
    assert shell.rl_next_input is None


def _sent(request: dict) -> list[tuple[str, str]]:
    """(role, text) of each message a Chat Completions request carried."""
    def text(content: Any) -> str:
        return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)

    return [(m["role"], text(m["content"])) for m in request["body"]["messages"]]


def test_agent_prompt_sends_the_server_prompt_then_the_cell(shell, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-prompt")
    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    shell.run_line_magic("mcp", f"add notes -- {TEST}")
    capsys.readouterr()
    with StubServer(openai_text_reply("Tests first."), openai_text_reply("Sunny."),
                    openai_text_reply("Done.")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        shell.run_cell_magic("agent", "--new --prompt notes/review 'path=my app.py' strict=yes", "Be brief.")
        assert "mcp: prompt notes/review (3 messages), then the cell's text" in capsys.readouterr().out
        shell.run_cell_magic("agent", "--new --prompt ev/args-prompt city=Paris", "\n")  # a blank body
        assert "mcp: prompt ev/args-prompt (1 message), alone (the cell is empty)" in capsys.readouterr().out
        shell.run_cell_magic("agent", f"--new --prompt notes/review path=token={SECRET}", "Go on.")
    assert _sent(model.requests[0]) == [("user", "Review my app.py (strict: yes)."),
                                        ("assistant", "Which parts first?"),
                                        ("user", "Start with the tests."), ("user", "Be brief.")]
    assert _sent(model.requests[1]) == [("user", "What's weather in Paris?")]  # the prompt alone
    third = _sent(model.requests[2])
    assert [role for role, _ in third] == ["user", "assistant", "user", "user"]
    assert third[0][1].startswith("Review token=") and third[-1] == ("user", "Go on.")
    assert SECRET not in str(model.requests)  # through the context rule, like any context


@pytest.mark.parametrize("words, expected", [
    ("review", "a server prompt is NAME/PROMPT (%mcp prompts NAME lists them)"),
    ("nobody/review", "no MCP server 'nobody'; added: notes"),
    ("notes/nope", "notes has no prompt 'nope'; its prompts: review"),
    ("notes/review", "prompt 'review' needs 'path'=VALUE; its arguments: path*, strict (* required)"),
    ("notes/review app.py", "an argument is ARG=VALUE, not 'app.py'"),
])
def test_a_bad_agent_prompt_is_one_line_and_nothing_is_sent(shell, monkeypatch, words: str, expected: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-prompt")
    shell.run_line_magic("mcp", f"add notes -- {TEST}")
    with StubServer(openai_text_reply("never")) as model:
        shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
        with pytest.raises(UsageError) as caught:
            shell.run_cell_magic("agent", f"--prompt {words}", "Go")
    assert str(caught.value) == f"--prompt {words.split()[0]}: {expected}"
    assert model.requests == []


def test_a_subscribed_resource_counts_its_updates_in_the_list(shell, capsys) -> None:
    """server-everything sends ``notifications/resources/updated`` for subscribed URIs once
    ``toggle-subscriber-updates`` is on (every 5 s); the list counts them."""
    from ipyagent.agent import run_sync

    shell.run_line_magic("mcp", f"add ev -- {' '.join(everything())}")
    capsys.readouterr()
    shell.run_line_magic("mcp", f"subscribe ev {FEATURES}")
    assert capsys.readouterr().out.strip() == f"mcp: subscribed to {FEATURES} of ev; %mcp list counts its updates"
    shell.run_line_magic("mcp", "list")
    assert f"  subscribed: {FEATURES} (no update yet)" in capsys.readouterr().out
    server = shell.magics_manager.registry["AgentMagics"].mcp_servers["ev"]
    run_sync(server.call("toggle-subscriber-updates", {}))
    _until_noted(server, lambda: server.requests.updates.get(FEATURES, 0) >= 1)
    shell.run_line_magic("mcp", "list")
    assert f"  resource updated: {FEATURES} (1 time" in capsys.readouterr().out
    shell.run_line_magic("mcp", "log ev")
    assert f"ipyagent: resource updated: {FEATURES}" in capsys.readouterr().out
    with pytest.raises(UsageError, match="could not subscribe to test://notes: "):
        shell.run_line_magic("mcp", f"add notes -- {TEST}")
        shell.run_line_magic("mcp", "subscribe notes test://notes")


def _until_noted(server: Any, done: Callable[[], Any], limit: float = 30.0) -> None:
    """Wait until `done()` holds, woken by each line the server's client notes in its log (`_note`:
    it notes every notification it handles), not by polling.

    Raises:
        AssertionError: no note made `done()` hold within `limit` seconds of the last one.
    """
    noted, note = threading.Event(), server._note

    def noting(line: str) -> None:
        note(line)
        noted.set()

    server._note = noting
    try:
        while not done():
            noted.clear()
            if done():
                return
            assert noted.wait(limit), f"no notification from the server for {limit} s"
    finally:
        del server._note


def test_server_log_messages_go_to_the_log_redacted_and_by_level(shell, capsys) -> None:
    """Logging notifications (``notifications/message``): server-everything's simulated logging, read
    back with ``%mcp log NAME --level``; a message that holds a secret is logged redacted."""
    import mcp_types

    from ipyagent.agent import run_sync
    from ipyagent.tools import MCP_LOG_LEVELS

    shell.run_line_magic("mcp", f"add evlog --env EV_API_KEY={SECRET} -- {' '.join(everything())}")
    server = shell.magics_manager.registry["AgentMagics"].mcp_servers["evlog"]
    run_sync(server.call("toggle-simulated-logging", {}))  # one message at once, then one every 5 s


    def simulated() -> list[str]:  # "Info-level message", "Alert level-message"
        rows = server.log(200, level="debug").splitlines()
        return [r for r in rows if "level-message" in r.replace("-level ", "level-")]

    _until_noted(server, lambda: bool(simulated()))
    line = simulated()[0]
    level = line.split("server log [", 1)[1].split("]", 1)[0]
    assert level in MCP_LOG_LEVELS and line.lower().replace(" level-", "-level ").endswith(f"{level}-level message")
    above = MCP_LOG_LEVELS[MCP_LOG_LEVELS.index(level) + 1:]
    capsys.readouterr()
    shell.run_line_magic("mcp", f"log evlog --level {level}")
    assert line in capsys.readouterr().out
    if above:  # a level above it does not show it
        shell.run_line_magic("mcp", f"log evlog --level {above[-1]}")
        assert line not in capsys.readouterr().out
    notice = mcp_types.LoggingMessageNotificationParams(level="warning", logger="deployer",
                                                        data=f"deploying with key {SECRET}")
    run_sync(server.requests.log(notice))  # what the SDK calls on a server's notifications/message
    shell.run_line_magic("mcp", "log evlog --level warning")
    assert "ipyagent: server log [warning] deployer: deploying with key [redacted]" in capsys.readouterr().out
    assert SECRET not in server.log_path.read_text()
