"""Context sent to a model passes the one redactor's context rule (issue 26): in cell templates
(a secret-named variable, attribute or item, a mapping's entries, any value's text), ``--with``
and ``--cells``; each cell says how many values it masked (a warning naming the opt-out,
``%agent inspect``, the transcript's footer), and ``%agent settings redact_context=false`` sends
them as they are."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError

from ipyagent.agent import current_default

from ..support.stub_server import StubServer, openai_text_reply

PASSWORD = "Pa55-correct-horse-42"
TOKEN = "tok-0123456789abcdef"


@pytest.fixture
def model(ip, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-masking-test-0123456789")
    ip.user_ns.update(cfg={"db": f"postgres://app:{PASSWORD}@db/x", "password": "hunter2", "retries": 3},
                      access_token=TOKEN, settings=type("Settings", (), {"api_key": "ak-12345678", "region": "eu"})())
    with StubServer(openai_text_reply("Noted.")) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1")
        yield server
    for name in ("cfg", "access_token", "settings"):
        ip.user_ns.pop(name, None)


def sent(server: StubServer) -> str:
    return json.dumps(server.requests[-1]["body"]["messages"][-1])


def test_template_values_are_masked_by_name_by_entry_and_by_text(ip, model, capsys) -> None:
    ip.run_cell_magic("agent", "", "{{ cfg }} {{ access_token }} {{ settings.api_key }} {{ cfg['password'] }} "
                                   "{{ settings.region }} {{ cfg.retries }}")
    body = sent(model)
    assert PASSWORD not in body and TOKEN not in body and "ak-12345678" not in body and "hunter2" not in body
    assert body.count("[redacted]") == 5 and " eu 3" in body  # what is not secret goes as it is
    err = capsys.readouterr().err
    assert "ipyagent: 5 values masked (cell template 5) in what this cell sends" in err
    assert "%agent settings redact_context=false sends them as they are" in err


def test_with_and_inspect_say_how_many_values_each_block_lost(ip, model, capsys) -> None:
    ip.run_cell_magic("agent", "--with cfg", "Is {{ access_token }} right?")
    assert PASSWORD not in sent(model) and "hunter2" not in sent(model) and TOKEN not in sent(model)
    capsys.readouterr()
    ip.run_line_magic("agent", "inspect")
    out = capsys.readouterr().out
    assert "masked: 3 values masked (cell template 1, cfg 2); %agent settings redact_context=false" in out
    assert "  variable cfg (dict): ≈" in out and "tokens, 2 values masked" in out


def test_the_opt_out_sends_values_as_they_are_and_says_so(ip, model, capsys) -> None:
    ip.run_line_magic("agent", "settings redact_context=false")
    out, err = capsys.readouterr()
    assert "redact_context is off" in err and "%agent settings redact_context=true turns it back on" in err
    assert out.startswith("redact_context=false  max_tool_calls=128  store_max_size=2 GB")
    ip.run_cell_magic("agent", "--with cfg", "{{ cfg }} {{ access_token }}")
    assert PASSWORD in sent(model) and TOKEN in sent(model)
    assert "masked" not in capsys.readouterr().err
    ip.run_line_magic("agent", "settings redact_context=true")
    ip.run_cell_magic("agent", "", "{{ cfg }}")
    assert PASSWORD not in sent(model)


def test_settings_show_check_and_set(ip, capsys) -> None:
    ip.run_line_magic("agent", "settings")
    assert capsys.readouterr().out.strip() == ("redact_context=true  max_tool_calls=128  store_max_size=2 GB  "
                                               "eval_output_max=1 MB")
    ip.run_line_magic("agent", "settings max_tool_calls=5 store_max_size=500MB")
    assert capsys.readouterr().out.strip() == ("redact_context=true  max_tool_calls=5  store_max_size=500 MB  "
                                               "eval_output_max=1 MB")
    assert current_default().max_tool_calls == 5
    names = "one of redact_context, max_tool_calls, store_max_size, eval_output_max"
    for line, said in (("settings colour=blue", names),
                       ("settings max_tool_calls=-1", "max_tool_calls takes a whole number from 0 to 10,000"),
                       ("settings max_tool_calls=99999999999999999999", "max_tool_calls takes a whole number"),
                       ("settings max_tool_calls=10001", "not '10001'"),
                       ("settings redact_context=maybe", "redact_context takes true or false"),
                       ("settings store_max_size=big", "store_max_size takes a size")):
        with pytest.raises(UsageError, match=said):
            ip.run_line_magic("agent", line)


def test_a_cells_max_tool_calls_has_a_ceiling(ip) -> None:
    """`%agent settings max_tool_calls=99999999999999999999` was accepted: no limit at all."""
    with pytest.raises(UsageError, match="--max-tool-calls must be 10,000 or less, not 10001"):
        ip.run_cell_magic("agent", "--max-tool-calls 10001", "hello")


@pytest.mark.parametrize("magic, line", [("agent", "grade 1 a fail it's wrong"), ("mcp", "add x -- echo 'hi")])
def test_an_unclosed_quote_says_how_to_quote(ip, magic: str, line: str) -> None:
    """It said "%agent: No closing quotation" (shlex's words) and nothing about what to do."""
    with pytest.raises(UsageError, match=f"%{magic}: no closing quotation in .*; put text that holds a ' in double"):
        ip.run_line_magic(magic, line)


def test_inspect_shows_a_models_escape_sequences_instead_of_running_them(ip, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-masking-test-0123456789")
    ip.run_line_magic("agent", f"store {tmp_path / 'runs.sqlite'}")
    with StubServer(openai_text_reply("Done\x1b]52;c;cm0gLXJm\x07 and \x1b[2J clear")) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "", "Hi")
    capsys.readouterr()
    ip.run_line_magic("agent", "inspect")
    ip.run_line_magic("agent", "runs")
    out = capsys.readouterr().out
    assert "Done␛]52;c;cm0gLXJm␇ and ␛[2J clear" in out and "\x1b" not in out and "\x07" not in out
    ip.run_line_magic("agent", "store off")


def test_inspect_says_its_request_is_masked_for_showing_not_as_it_went(ip, model, tmp_path, capsys) -> None:
    """break-s12 #5: inspect called the masked body "the request as sent" while a key typed in the cell
    went out as typed. What is sent stays as it is; the listing says what it masks."""
    typed = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    ip.run_line_magic("agent", f"store {tmp_path / 'runs.sqlite'}")
    ip.run_cell_magic("agent", "", f"my token {typed} and {{{{ access_token }}}}")
    assert typed in sent(model) and TOKEN not in sent(model)  # typed: sent as typed; a template value: masked
    capsys.readouterr()
    ip.run_line_magic("agent", "inspect")
    out = capsys.readouterr().out
    assert typed not in out and TOKEN not in out
    assert ("requests: secrets are masked in this listing; a {{ }} value was masked before it was sent, "
            "text typed in the cell was sent as typed") in out
    assert "\n  body (secrets masked): {" in out and "\n  body: " not in out
    ip.run_line_magic("agent", "store off")
