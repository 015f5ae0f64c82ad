"""``%provider`` and ``%agent`` refuse, in one line, what they would otherwise keep wrongly, drop
without a word or find out only at the first request (break-s12, section 8): nothing is set,
nothing is sent."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from ipyagent import Agent


def _options(ip) -> dict:
    return ip.magics_manager.registry["ProviderMagics"].alias_options


def test_an_alias_s_base_url_default_is_the_provider_s_own(ip, capsys, monkeypatch) -> None:
    """Not the word "default" kept as a URL (its first request failed "must start with http://"),
    and over the base URL of the alias it names."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000")
    ip.run_line_magic("provider", "--alias local openai:qwen --base-url http://127.0.0.1:9/v1")
    ip.run_line_magic("provider", "--alias own local --base-url default")
    assert capsys.readouterr().out.splitlines()[-1] == "alias: own = openai:qwen"
    assert _options(ip)["own"] == {"base_url": None}
    assert Agent("own").driver.base_url == "https://api.openai.com/v1"
    assert Agent("local").driver.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("given", ["--temperature 0", "--max-tokens 10", "--timeout 5", "--clear-settings"])
def test_an_alias_refuses_settings_it_cannot_keep(ip, given) -> None:
    with pytest.raises(UsageError, match=r"an alias keeps a provider and its options, not settings .*"
                                         r"%%agent -p unset1 --temperature 0"):
        ip.run_line_magic("provider", f"--alias unset1 openai:qwen --base-url http://127.0.0.1:9/v1 {given}")
    assert "unset1" not in _options(ip)  # aliases are the process's: a name no other test sets


def test_a_record_path_that_cannot_be_written_sets_nothing(ip, capsys, tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "c.jsonl"
    ip.run_line_magic("provider", "openai:m --base-url http://127.0.0.1:9/v1")
    capsys.readouterr()
    ip.run_line_magic("provider", f"openai:other --base-url http://127.0.0.1:9/v1 --record {bad}")
    ip.run_line_magic("provider", f"--alias unset2 openai:other --base-url http://127.0.0.1:9/v1 --record {bad}")
    out, err = capsys.readouterr()
    line = f"ipyagent: --record '{bad}': {tmp_path / 'file'} is a file, not a folder; name a file in a folder"
    assert out == "" and err.splitlines() == [line, line]
    assert "unset2" not in _options(ip)
    ip.run_line_magic("provider", "")
    assert capsys.readouterr().out.startswith("provider: openai:m at http://127.0.0.1:9/v1")


def test_price_as_a_model_without_a_price_sets_nothing(ip, capsys) -> None:
    ip.run_line_magic("provider", "openai:x --base-url http://127.0.0.1:9/v1 --price-as nosuch:model")
    ip.run_line_magic("provider", "--alias unset3 openai:x --base-url http://127.0.0.1:9/v1 --price-as nosuch:model")
    out, err = capsys.readouterr()
    line = ("ipyagent: --price-as 'nosuch:model': genai-prices has no price for it; name a model it prices "
            "(%provider --models PROVIDER lists them with their prices)")
    assert out == "" and err.splitlines() == [line, line]
    assert "unset3" not in _options(ip)


def test_a_base_url_variable_that_cannot_be_sent_to_is_one_line(ip, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    ip.run_line_magic("provider", "openai:m")
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "ipyagent: the variable OPENAI_BASE_URL must start with http:// or https://, e.g. http://localhost:8000/v1 "
        "or http://[::1]:8000/v1 (got 'localhost:8000/v1')"]


@pytest.mark.parametrize("sub", ["cost", "last", "threads", "memory", "evals"])
def test_a_subcommand_without_arguments_refuses_one(ip, sub) -> None:
    with pytest.raises(UsageError, match=rf"^%agent {sub} takes no argument \(given '--bogus'\): type %agent {sub}$"):
        ip.run_line_magic("agent", f"{sub} --bogus")


def test_a_long_argument_is_cut_in_the_refusal(ip) -> None:
    with pytest.raises(UsageError) as refused:
        ip.run_line_magic("agent", "cost " + "b" * 10_000)
    assert str(refused.value) == f"%agent cost takes no argument (given '{'b' * 40}…'): type %agent cost"


@pytest.mark.parametrize("sub", ["replay", "inspect"])
def test_a_run_id_of_10000_characters_is_not_echoed_whole(ip, sub) -> None:
    with pytest.raises(UsageError) as refused:
        ip.run_line_magic("agent", f"{sub} {'a' * 10_000}")
    assert str(refused.value) == (f"%agent: '{'a' * 24}'… (10,000 characters) is not a run id "
                                  "(ids are 12 characters; %agent runs lists them)")
    with pytest.raises(UsageError, match=f"no run '{'a' * 64}'"):  # up to 64: looked up
        ip.run_line_magic("agent", f"{sub} {'a' * 64}")
