"""`%provider` and `%%agent` in an in-process IPython shell (no kernel, so the text view)."""

from __future__ import annotations

import socket

import pytest
from IPython.core.error import UsageError

from ipyagent.agent import AgentResult
from ipyagent.drivers.registry import BUILTIN

from ..support.recordings import expected_from
from ..support.stub_server import StubServer
from ..support.shell import SECRET, TEXT


def sent_messages(server: StubServer, n: int = -1) -> list[dict]:
    return server.requests[n]["body"]["messages"]


# -- %provider ------------------------------------------------------------------------------


def test_provider_list_says_set_but_never_shows_a_key(ip, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GROQ_API_KEY", SECRET + "-groq")
    ip.run_line_magic("provider", "--list")
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    lines = {line.split()[0]: line for line in captured.out.splitlines() if line.strip()}
    for name, spec in BUILTIN.items():
        assert name in lines, name
        if spec.api_key_env:
            state = "set" if spec.api_key_env in ("OPENAI_API_KEY", "GROQ_API_KEY") else "not set"
            assert f"{spec.api_key_env} {state} " in lines[name] + " ", lines[name]
        else:
            assert "no key needed" in lines[name]
    assert "replay" in lines


def test_unknown_provider_is_one_short_line(ip, capsys) -> None:
    ip.run_line_magic("provider", "nope:x")
    captured = capsys.readouterr()
    message = captured.out + captured.err
    assert "Traceback" not in message
    assert len(message.strip().splitlines()) == 1
    assert "unknown provider 'nope'" in message
    for name in BUILTIN:
        assert name in message
    # The session's provider did not change.
    ip.run_line_magic("provider", "")
    assert "openai:gpt-6-luna (default)" in capsys.readouterr().out


def test_missing_key_names_the_variable(ip, capsys) -> None:
    ip.run_line_magic("provider", "openai:gpt-4.1-mini")
    captured = capsys.readouterr()
    assert "OPENAI_API_KEY" in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err


def test_a_price_as_without_a_model_is_one_line_and_sets_nothing(ip, capsys) -> None:
    """``%provider`` checks the choice without making a driver (`choose_provider`): what the driver
    would refuse is refused there, as one line."""
    ip.run_line_magic("provider", "openai:m --base-url http://127.0.0.1:9/v1 --price-as gpt-4o")
    captured = capsys.readouterr()
    assert "price_as takes PROVIDER:MODEL" in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err and "provider: openai:m" not in captured.out


def test_bad_option_raises_usage_error_with_usage(ip) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("provider", "--bogus")
    text = str(info.value)
    assert "--bogus" in text
    assert "usage:" in text and "%provider" in text and "--base-url" in text


@pytest.mark.parametrize("magic", ["agent", "compare"])
def test_a_cell_magic_usage_names_the_cell_magic(ip, magic) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic(magic, "--bogus openai:m", "hi")
    assert f"usage: %%{magic} " in str(info.value)


# -- %%agent --------------------------------------------------------------------------------


def test_agent_cell_renders_template_and_binds_result(connected, server, capsys) -> None:
    ip = connected
    exp = expected_from(TEXT)
    ip.user_ns["city"] = "Paris"
    returned = ip.run_cell_magic("agent", "-o res", 'Weather in {{ city }}? {"keep": "braces"}\n')
    assert sent_messages(server) == [{"role": "user", "content": 'Weather in Paris? {"keep": "braces"}'}]
    res = ip.user_ns["res"]
    assert returned is None  # no Out[n] echo: -o binds it, and %agent last / ipyagent.last_result() keep it
    assert isinstance(res, AgentResult) and ip.run_line_magic("agent", "last") is res
    assert res.text == exp.text
    assert (
        res.usage.input_tokens == exp.usage["prompt_tokens"]
        and res.usage.output_tokens == exp.usage["completion_tokens"]
    )
    assert res.stop_reason == "end_turn"
    assert res.error is None and not res.interrupted
    # No kernel: the reply is printed as text, then the footer.
    out = capsys.readouterr().out
    assert exp.text in out
    footer = out.strip().splitlines()[-1]
    assert footer.startswith("[openai:m · 14 in / 30 out tokens · first token ") and footer.endswith("]")


def test_agent_cells_continue_then_new_resets(connected, server) -> None:
    ip = connected
    exp = expected_from(TEXT)
    ip.run_cell_magic("agent", "", "first")
    ip.run_cell_magic("agent", "", "second")
    assert sent_messages(server) == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": exp.text},
        {"role": "user", "content": "second"},
    ]
    ip.run_cell_magic("agent", "--new", "third")
    assert sent_messages(server) == [{"role": "user", "content": "third"}]
    ip.run_cell_magic("agent", "", "fourth")
    assert [m["content"] for m in sent_messages(server) if m["role"] == "user"] == ["third", "fourth"]


def test_agent_system_prompt_goes_first(connected, server) -> None:
    ip = connected
    ip.run_cell_magic("agent", '--system "Answer in French."', "hello")
    assert sent_messages(server) == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "hello"},
    ]
    ip.run_cell_magic("agent", "", "again")  # the system prompt stays for the conversation
    assert [m["role"] for m in sent_messages(server)] == ["system", "user", "assistant", "user"]
    ip.run_cell_magic("agent", "--new --system 'Be brief.'", "hi")
    assert sent_messages(server) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_agent_undefined_variable_and_raw(connected, server) -> None:
    ip = connected
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("agent", "", "Weather in {{ town }}?")
    assert "town" in str(info.value) and "--raw" in str(info.value)
    assert server.requests == []  # nothing was sent
    ip.run_cell_magic("agent", "--raw", "Weather in {{ town }}? {% if x %}")
    assert sent_messages(server) == [{"role": "user", "content": "Weather in {{ town }}? {% if x %}"}]


@pytest.mark.parametrize("body", ["", "   \n\t\n"])
def test_agent_empty_cell_is_a_usage_error(connected, server, body) -> None:
    with pytest.raises(UsageError, match="empty"):
        connected.run_cell_magic("agent", "", body)
    assert server.requests == []


def test_agent_bad_option_is_a_usage_error(connected) -> None:
    with pytest.raises(UsageError, match="usage:"):
        connected.run_cell_magic("agent", "--bogus", "hi")


def test_agent_connection_error_is_one_line(ip, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    ip.run_line_magic("provider", f"openai:m --base-url {url}")
    capsys.readouterr()
    result = ip.run_cell_magic("agent", "-o res", "hello?")  # no exception
    res = ip.user_ns["res"]
    assert result is None
    assert res.error is not None and res.error.type == "connection"
    assert res.text == "" and res.stop_reason is None and not res.ok
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    naming = [line for line in captured.out.splitlines() if url in line]
    assert len(naming) == 1 and naming[0].startswith("[error] "), captured.out
    assert captured.out.strip().splitlines()[-1].endswith("failed]")
    assert SECRET not in captured.out + captured.err


def test_unload_removes_magics_and_load_again_works(ip) -> None:
    assert ip.find_cell_magic("agent") is not None and ip.find_line_magic("provider") is not None
    ip.run_line_magic("unload_ext", "ipyagent")
    assert ip.find_cell_magic("agent") is None
    assert ip.find_line_magic("provider") is None
    ip.run_line_magic("load_ext", "ipyagent")
    assert ip.find_cell_magic("agent") is not None
    assert ip.find_line_magic("provider") is not None
