"""Settings from a cell (``%%agent``, ``%%compare``, ``%provider``), the switchable default
(`ipyagent.using`) and ``-p`` keeping the session's base URL: what local servers receive."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from IPython.core.error import UsageError

import ipyagent
from ipyagent.agent import defaults

from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.replies import REPLIES

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


@pytest.fixture
def openai_server() -> Iterator[StubServer]:
    with StubServer(Reply.sse_file(TEXT)) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh_default() -> Iterator[None]:
    defaults.reset_default()
    yield
    defaults.reset_default()


def test_compare_sends_each_provider_its_own_field_names(ip, capsys) -> None:
    with (
        StubServer(REPLIES["openai"]()) as a,
        StubServer(REPLIES["anthropic"]()) as b,
        StubServer(REPLIES["gemini"]()) as c,
    ):
        ip.run_line_magic("provider", f"--alias a openai:a --base-url {a.url}")
        ip.run_line_magic("provider", f"--alias b anthropic:b --base-url {b.url}")
        ip.run_line_magic("provider", f"--alias c gemini:c --base-url {c.url}")
        ip.run_cell_magic("compare", "a b c --temperature 0 --max-tokens 64 -o comparison", "Say hi")
        comparison = ip.user_ns["comparison"]
    assert all(f.ok for f in comparison.figures), [f.error for f in comparison.figures]
    openai, anthropic, gemini = (s.requests[0]["body"] for s in (a, b, c))
    assert openai["temperature"] == 0 and openai["max_completion_tokens"] == 64 and "max_tokens" not in openai
    assert anthropic["temperature"] == 0 and anthropic["max_tokens"] == 64
    assert gemini["generationConfig"] == {"temperature": 0, "maxOutputTokens": 64}


def test_agent_cell_settings_reach_the_body_and_the_footer(ip, openai_server, capsys) -> None:
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url}")
    ip.run_cell_magic(
        "agent", "-t 0 --max-tokens 64 --seed 7 --stop END --stop '\\n\\n' --reasoning low -o result", "Hello"
    )
    result = ip.user_ns["result"]
    body = openai_server.requests[0]["body"]
    assert (body["temperature"], body["max_completion_tokens"], body["seed"], body["reasoning_effort"]) == (
        0,
        64,
        7,
        "low",
    )
    assert body["stop"] == ["END", "\n\n"]
    assert result.ok and result.metadata["settings"]["temperature"] == 0
    assert "temperature 0 · max tokens 64" in capsys.readouterr().out  # the footer line


def test_provider_settings_are_session_defaults_under_the_cell_ones(ip, openai_server, capsys) -> None:
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url} --temperature 0.5 --max-tokens 100")
    assert "settings: temperature 0.5 · max tokens 100" in capsys.readouterr().out
    ip.run_cell_magic("agent", "", "one")
    ip.run_cell_magic("agent", "-t 0", "two")
    ip.run_line_magic("provider", "--seed 3")  # no id: changes the settings only
    ip.run_cell_magic("agent", "", "three")
    ip.run_line_magic("provider", "--clear-settings")
    ip.run_cell_magic("agent", "", "four")
    bodies = [r["body"] for r in openai_server.requests]
    assert [(b.get("temperature"), b.get("max_completion_tokens"), b.get("seed")) for b in bodies] == [
        (0.5, 100, None), (0, 100, None), (0.5, 100, 3), (None, None, None)]
    ip.run_line_magic("provider", "")
    assert "settings: the provider's defaults" in capsys.readouterr().out


@pytest.mark.parametrize("line, message", [
    ("-t 5", "--temperature 5.0"), ("--reasoning extreme", "low, medium, high or a number of tokens"),
    ("--max-tokens 0", "--max-tokens 0"), ("--top-p 2", "--top-p"),
])
def test_bad_settings_are_one_usage_line(ip, openai_server, line, message) -> None:
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url}")
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("agent", line, "hi")
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("provider", line)
    assert openai_server.requests == []


def test_unsupported_setting_in_a_cell_is_one_line_and_sends_nothing(ip, capsys) -> None:
    with StubServer(REPLIES["openai-responses"]()) as server:
        ip.run_line_magic("provider", f"openai-responses:m --base-url {server.url}")
        ip.run_cell_magic("agent", "--stop END -o result", "hi")
        result = ip.user_ns["result"]
    assert server.requests == []
    assert result.error.type == "unsupported_capability" and "openai-responses model m" in result.error.message
    assert "stop" in capsys.readouterr().out


def test_p_keeps_the_session_base_url_and_key_variable(ip, openai_server, monkeypatch) -> None:
    monkeypatch.setenv("CORP_KEY", "sk-corp-123456")
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url} --api-key-env CORP_KEY")
    ip.run_cell_magic("agent", "-p openai:other -o result", "hi")
    result = ip.user_ns["result"]
    assert result.ok, result.error
    request = openai_server.requests[0]
    assert request["body"]["model"] == "other" and request["headers"]["Authorization"] == "Bearer sk-corp-123456"


def test_base_url_default_goes_back_to_the_providers_own_root(ip, openai_server, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000")
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url}")
    ip.run_line_magic("provider", "openai:other")
    assert openai_server.url in capsys.readouterr().out  # kept for another model of the provider
    ip.run_line_magic("provider", "openai:other --base-url default")
    out = capsys.readouterr().out
    assert "https://api.openai.com/v1" in out and openai_server.url not in out
    import ipyagent.agent.defaults as defaults
    assert "base_url" not in defaults.session_default().driver_options


def test_a_base_url_the_client_cannot_parse_is_one_line_and_sets_nothing(ip, openai_server, capsys) -> None:
    """Not accepted, then a traceback at the next cell's request (the HTTP client's InvalidURL)."""
    ip.run_line_magic("provider", f"openai:m --base-url {openai_server.url}")
    capsys.readouterr()
    ip.run_line_magic("provider", "openai:x --base-url http://[::1")
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "ipyagent: --base-url 'http://[::1' is not a valid URL (Invalid IPv6 URL); "
        "e.g. http://localhost:8000/v1 or http://[::1]:8000/v1"]
    ip.run_line_magic("provider", "--alias bad openai:x --base-url http://h:abc/v1")
    assert "is not a valid URL (Port could not be cast" in capsys.readouterr().err
    ip.run_cell_magic("agent", "-o result", "hi")  # the provider before the refused one
    assert ip.user_ns["result"].ok and openai_server.requests[0]["body"]["model"] == "m"


# -- the default you can switch for a block ---------------------------------------------------------


def test_using_switches_the_default_for_the_block_only(ip, openai_server) -> None:
    with StubServer(REPLIES["anthropic"]()) as other:
        ip.run_line_magic("provider", f"openai:session --base-url {openai_server.url}")
        assert ipyagent.Agent().provider == "openai:session"  # %provider and Agent() agree
        with ipyagent.using(f"anthropic:blocky", base_url=other.url, temperature=0) as inside:
            assert inside.provider == "anthropic:blocky"
            agent = ipyagent.Agent()
            assert agent.run("hi").ok
            ip.run_cell_magic("agent", "", "from the cell, inside the block")
        assert ipyagent.Agent().provider == "openai:session"
    assert other.requests[0]["body"]["temperature"] == 0 and other.requests[0]["body"]["model"] == "blocky"
    assert [r["body"]["model"] for r in other.requests] == ["blocky", "blocky"]
    ip.run_cell_magic("agent", "", "after the block")
    assert (
        openai_server.requests[-1]["body"]["model"] == "session"
        and "temperature" not in openai_server.requests[-1]["body"]
    )


def test_using_is_isolated_per_thread() -> None:
    with StubServer(REPLIES["openai"]()) as first, StubServer(REPLIES["openai"]()) as second:
        barrier = threading.Barrier(2)
        results: dict[str, object] = {}

        def work(name: str, url: str) -> None:
            with ipyagent.using(f"openai:{name}", base_url=url, seed=len(name)):
                barrier.wait()  # both blocks are open at once
                results[name] = ipyagent.Agent().run("hi")

        threads = [
            threading.Thread(target=work, args=("one", first.url)),
            threading.Thread(target=work, args=("three", second.url)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all(r.ok for r in results.values())  # type: ignore[attr-defined]
    assert [(r["body"]["model"], r["body"]["seed"]) for r in first.requests] == [("one", 3)]
    assert [(r["body"]["model"], r["body"]["seed"]) for r in second.requests] == [("three", 5)]
    assert defaults.current_default().provider == defaults.DEFAULT_PROVIDER


def test_using_is_isolated_per_asyncio_task() -> None:
    with StubServer(REPLIES["openai"]()) as first, StubServer(REPLIES["gemini"]()) as second:

        async def work(provider: str, url: str, started: asyncio.Event, other: asyncio.Event) -> str:
            with ipyagent.using(provider, base_url=url):
                started.set()
                await other.wait()  # the other task's block is open too
                agent = ipyagent.Agent()
                result = await agent.arun("hi")
                assert result.ok, result.error
                return agent.provider

        async def main() -> list[str]:
            a, b = asyncio.Event(), asyncio.Event()
            return list(await asyncio.gather(work("openai:t1", first.url, a, b), work("gemini:t2", second.url, b, a)))

        assert asyncio.run(main()) == ["openai:t1", "gemini:t2"]
    assert [r["body"]["model"] for r in first.requests] == ["t1"]
    assert [r["path"] for r in second.requests] == ["/models/t2:streamGenerateContent?alt=sse"]
    assert defaults.current_default() == defaults.session_default()


def test_agent_settings_and_run_settings_layer_over_the_default(openai_server) -> None:
    with ipyagent.using("openai:m", base_url=openai_server.url, temperature=1.0, seed=1):
        agent = ipyagent.Agent(settings={"temperature": 0.5, "max_output_tokens": 10})
    agent.run("hi", settings=ipyagent.ModelSettings(temperature=0.0))
    agent.run("again")
    first, second = (r["body"] for r in openai_server.requests)
    assert (first["temperature"], first["seed"], first["max_completion_tokens"]) == (0.0, 1, 10)
    assert second["temperature"] == 0.5
