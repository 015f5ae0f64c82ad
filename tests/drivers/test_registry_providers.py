"""Registry: Azure OpenAI deployments, aliases, GOOGLE_API_KEY for Gemini, and third-party drivers
through the ``ipyagent.drivers`` entry-point group (a throwaway dist-info on sys.path)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from collections.abc import Iterator

import pytest
from IPython.core.error import UsageError

from ipyagent import Agent
from ipyagent.core import ConfigurationError
from ipyagent.drivers import create_driver, providers, set_alias
from ipyagent.drivers.protocols.azure_openai import DEFAULT_API_VERSION
from ipyagent.drivers.registry import ALIASES

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer, openai_text_reply

OPENAI_TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
AZURE_TEXT = FIXTURES / "openai-chat" / "azure-stream-content-filter-reasoning-usage.chunks.jsonl"
GEMINI_TEXT = FIXTURES / "gemini" / "stream-text.sse"
SECRET = "azure-secret-0123456789abcdef"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION", "GEMINI_API_KEY",
                "GOOGLE_API_KEY", "GEMINI_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    saved = dict(ALIASES)
    yield
    ALIASES.clear()
    ALIASES.update(saved)


# -- Azure OpenAI -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [None, "2025-04-01-preview"])
def test_azure_deployment_url_api_key_header_and_version(monkeypatch, version):
    with StubServer(Reply.chunks_file(AZURE_TEXT)) as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", SECRET)
        if version:
            monkeypatch.setenv("AZURE_OPENAI_API_VERSION", version)
        result = Agent("azure-openai:my-gpt4o").run("Hello")
    request = server.requests[0]
    assert (
        request["path"] == f"/openai/deployments/my-gpt4o/chat/completions?api-version={version or DEFAULT_API_VERSION}"
    )
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["api-key"] == SECRET and "authorization" not in headers
    assert "model" not in request["body"] and request["body"]["messages"][-1]["content"] == "Hello"
    expected = expected_from(AZURE_TEXT)
    assert result.text == expected.text and result.provider == "azure-openai:my-gpt4o"


def test_azure_needs_its_endpoint_and_its_key(monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", SECRET)
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_ENDPOINT is not set") as info:
        create_driver("azure-openai:dep")
    assert SECRET not in str(info.value)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_API_KEY is not set"):
        create_driver("azure-openai:dep")  # an endpoint from the environment does not make the key optional


# -- Gemini keys ------------------------------------------------------------------------------


def test_gemini_takes_google_api_key_and_prefers_gemini_api_key(monkeypatch):
    with StubServer(Reply.sse_file(GEMINI_TEXT)) as server:
        monkeypatch.setenv("GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GOOGLE_API_KEY", "google-key-1")
        assert Agent("gemini:gemini-2.5-flash").run("Hi").ok
        monkeypatch.setenv("GEMINI_API_KEY", "gemini-key-2")
        assert Agent("gemini:gemini-2.5-flash").run("Hi").ok
    keys = [{k.lower(): v for k, v in r["headers"].items()}["x-goog-api-key"] for r in server.requests]
    assert keys == ["google-key-1", "gemini-key-2"]
    monkeypatch.delenv("GOOGLE_API_KEY")
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GEMINI_BASE_URL")
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY is not set"):
        create_driver("gemini:gemini-2.5-flash")


# -- aliases -------------------------------------------------------------------------------------


def test_aliases_in_provider_and_agent_magics(ip, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-alias-test")
    with StubServer(Reply.sse_file(OPENAI_TEXT)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        ip.run_line_magic("provider", "--alias fast openai:gpt-6-luna")
        assert capsys.readouterr().out.strip() == "alias: fast = openai:gpt-6-luna"
        ip.run_line_magic("provider", "--alias smart openai:gpt-6.1-terra")
        ip.run_line_magic("provider", "fast")
        assert capsys.readouterr().out.splitlines()[-1].startswith("provider: openai:gpt-6-luna at ")
        ip.run_cell_magic("agent", "", "One.")
        ip.run_cell_magic("agent", "-p smart -o res", "Two.")
        ip.run_line_magic("provider", "--list")
        listing = capsys.readouterr().out
    assert [r["body"]["model"] for r in server.requests] == ["gpt-6-luna", "gpt-6.1-terra"]
    assert ip.user_ns["res"].provider == "openai:gpt-6.1-terra"
    assert any(
        line.split()[:3] == ["fast", "alias", "="] and line.endswith("openai:gpt-6-luna")
        for line in listing.splitlines()
    )
    assert Agent("fast").provider == "openai:gpt-6-luna"  # from Python too


def test_aliases_and_p_keep_their_server_options(ip, monkeypatch):
    """-p with the %provider id, and an alias declared with --base-url, go to that server, not api.openai.com."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-travel")
    with StubServer(openai_text_reply("ok")) as server:
        ip.run_line_magic("provider", f"openai:llama-3-70b --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "-p openai:llama-3-70b", "hi")
        ip.run_line_magic("provider", f"--alias local openai:qwen --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "-p local", "hi again")
        ip.run_line_magic("provider", "local")
        ip.run_cell_magic("agent", "", "and again")
    assert [r["body"]["model"] for r in server.requests] == ["llama-3-70b", "qwen", "qwen"]
    assert all("authorization" not in {k.lower() for k in r["headers"]} for r in server.requests)


def test_bad_aliases_are_one_short_line(ip, capsys):
    ip.run_line_magic("provider", "--alias no:colons openai:gpt-4.1-mini")
    ip.run_line_magic("provider", "--alias fine nope:model")
    err = capsys.readouterr().err
    assert "alias 'no:colons': use letters" in err and "unknown provider 'nope'" in err
    assert "fine" not in ALIASES
    with pytest.raises(UsageError, match="needs the id"):
        ip.run_line_magic("provider", "--alias fast")
    with pytest.raises(ConfigurationError, match="or an alias"):
        create_driver("notanalias")
    assert set_alias("x1", "openai:gpt-4.1-mini") == "openai:gpt-4.1-mini"
    assert set_alias("x2", "x1") == "openai:gpt-4.1-mini"  # an alias of an alias stands for the id


# -- third-party drivers through the entry-point group ------------------------------------------------

TINY_DRIVER = '''
"""A tiny third-party driver: POST /echo {"prompt": ...}, the reply is plain text lines."""
from ipyagent.core import TextDelta
from ipyagent.drivers import BasePromptDriver, Capabilities, StreamDecoder, StreamMeta


class TinyDecoder(StreamDecoder):
    def feed(self, line):
        return (TextDelta(0, line + "\\n"),) if line else ()

    def finish(self):
        self.note(StreamMeta(stop_raw="done"))
        return ()


class TinyDriver(BasePromptDriver):
    protocol = "tiny"
    default_base_url = "http://127.0.0.1:9"
    api_key_env = "TINY_API_KEY"
    capabilities = Capabilities(tools=False)
    framing = "lines"

    def headers(self):
        return {"X-Tiny-Key": self._api_key or ""}

    def build_request(self, prompt_stack):
        return "/echo", {"model": self.model, "prompt": prompt_stack.messages[-1].text}

    def decoder(self):
        return TinyDecoder()
'''


@pytest.fixture
def tiny_plugin(tmp_path, monkeypatch) -> Iterator[None]:
    (tmp_path / "ipyagent_tiny_driver.py").write_text(textwrap.dedent(TINY_DRIVER))
    dist = tmp_path / "ipyagent_tiny-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ipyagent-tiny\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ipyagent.drivers]\ntiny = ipyagent_tiny_driver:TinyDriver\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("ipyagent_tiny_driver", None)


def test_entry_points_are_scanned_again_only_when_the_import_path_changes(tmp_path, monkeypatch) -> None:
    """Every driver created asks for the providers: the entry points are read once, and again after
    a package is installed into a folder on the path (its dist-info folder changes the folder)."""
    from ipyagent.drivers import registry

    import os

    os.utime(tmp_path, ns=(0, 0))  # modified long ago: the install below changes its time whatever the clock's grain
    monkeypatch.syspath_prepend(str(tmp_path))
    scans = []
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda **kw: scans.append(1) or real(**kw))
    assert "later" not in providers() and "later" not in providers()
    assert len(scans) == 1
    dist = tmp_path / "ipyagent_later-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ipyagent-later\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ipyagent.drivers]\nlater = ipyagent_later:LaterDriver\n")
    assert providers()["later"].driver == "ipyagent_later:LaterDriver" and len(scans) == 2


def test_a_driver_from_an_entry_point_is_found_and_runs(tiny_plugin, monkeypatch, ip, capsys):
    spec = providers()["tiny"]
    assert spec.driver == "ipyagent_tiny_driver:TinyDriver" and "ipyagent-tiny" in spec.description
    with pytest.raises(ConfigurationError, match="TINY_API_KEY is not set"):
        create_driver("tiny:echo-1")  # the class's own key variable is honoured
    monkeypatch.setenv("TINY_API_KEY", "tiny-secret")
    lines = [b"Hello from", b"a plugin."]
    with StubServer(Reply(headers={"Content-Type": "text/plain"}, pieces=[line + b"\n" for line in lines])) as server:
        result = Agent("tiny:echo-1", base_url=server.url, api_key_env="TINY_API_KEY").run("Say hello")
    assert result.ok and result.text == "".join(line.decode() + "\n" for line in lines)
    assert server.requests[0]["path"] == "/echo" and server.requests[0]["body"] == {
        "model": "echo-1",
        "prompt": "Say hello",
    }
    assert {k.lower(): v for k, v in server.requests[0]["headers"].items()}["x-tiny-key"] == "tiny-secret"
    assert result.cost is None  # no price known for a plug-in
    ip.run_line_magic("provider", "--list")
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tiny "))
    assert "from ipyagent-tiny" in line
    json.dumps(spec.__dict__)  # a plain record


def test_the_readme_s_third_party_driver_runs_as_written() -> None:
    """The README's example driver (the block defining `TinyDecoder`) streams a reply."""
    import asyncio
    import re
    from pathlib import Path

    import httpx2

    from ipyagent.core import PromptStack

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    [code] = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "class TinyDecoder" in block]
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    body = b"hello\r\nworld\n[END]\nnot read\n"
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, content=body))
    driver = namespace["TinyDriver"]("m", transport=transport)  # type: ignore[operator]
    stack = PromptStack()
    stack.add_user_message("hi")
    done = asyncio.run(driver.run(stack))
    assert done.message.text == "hello\nworld\n" and done.stop_reason.raw == "end"


def test_a_replayed_provider_names_its_cassette_not_the_recorded_url(ip, capsys):
    """It said 'at https://api.openai.com/v1 (replaying a cassette: no network, no key)': a URL beside
    'no network' reads as a contradiction, and the file, the useful thing, was not named."""
    cassette = Path(__file__).parents[2] / "notebooks" / "context.cassette.jsonl"
    ip.run_line_magic("provider", f"replay:{cassette}")
    said = capsys.readouterr().out.strip().splitlines()[0]
    assert said.endswith(f" replayed from the cassette {cassette} (no network, no key)") and "http" not in said


def test_a_built_in_provider_is_found_without_scanning_the_entry_points(monkeypatch) -> None:
    """A plug-in cannot take a built-in name, so a built-in provider is resolved without reading the
    installed packages' entry points (most of a first ``%provider``); an unknown name still lists
    the plug-ins' providers."""
    from ipyagent.drivers import registry

    scans = []
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda **kw: scans.append(1) or real(**kw))
    monkeypatch.setattr(registry, "_plugins", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert create_driver("openai:m").provider == "openai"
    assert scans == []
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'"):
        create_driver("nope:m")
    assert scans == [1]
