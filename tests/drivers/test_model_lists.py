"""Model lists: each provider's list response parsed (files in tests/model_lists, written by us in
each API's documented format), fetched over HTTP with paging, and ``%provider --models``.

Formats: OpenAI API reference, "Models: List models" (``GET /v1/models``); Anthropic API
reference, "Models: List Models" (``GET /v1/models``, ``has_more`` / ``last_id`` / ``after_id``);
Gemini API reference, "models.list" (``GET /v1beta/models``, ``nextPageToken``); Ollama API,
"List Local Models" (``GET /api/tags``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ipyagent.drivers import create_driver
from ipyagent.drivers.catalog.models import parse_anthropic, parse_gemini, parse_ollama, parse_openai

from ..support.stub_server import Reply, StubServer

LISTS = Path(__file__).parent / "model_lists"


def listed(name: str) -> dict:
    return json.loads((LISTS / name).read_text())


def json_reply(name: str, status: int = 200) -> Reply:
    return Reply(status=status, headers={"Content-Type": "application/json"}, pieces=[(LISTS / name).read_bytes()])


def fetch(provider_id: str, url: str, **options) -> list:
    driver = create_driver(provider_id, base_url=url, **options)

    async def main() -> list:
        try:
            return await driver.list_models()
        finally:
            await driver.close()

    return asyncio.run(main())


def test_each_format_parses():
    rows, following = parse_openai(listed("openai.json"))
    assert [r.id for r in rows][:2] == ["gpt-4.1-mini", "gpt-4o-2024-08-06"] and following is None
    rows, following = parse_anthropic(listed("anthropic-page1.json"))
    assert rows[0].id == "claude-sonnet-4-5-20250929" and rows[0].name == "Claude Sonnet 4.5"
    assert following == {"after_id": "claude-opus-4-1-20250805"}
    assert parse_anthropic(listed("anthropic-page2.json"))[1] is None
    rows, following = parse_gemini(listed("gemini.json"))
    assert [(r.id, r.context_window) for r in rows] == [("gemini-2.5-flash", 1048576), ("gemma-3-27b-it", 131072)]
    assert following is None  # an empty nextPageToken ends the list; the embedding-only model is left out
    rows, _ = parse_ollama(listed("ollama.json"))
    assert [r.id for r in rows] == ["llama3.2:latest", "qwen3:8b"] and rows[0].details["parameter_size"] == "3.2B"


def test_anthropic_pages_are_followed():
    with StubServer(json_reply("anthropic-page1.json"), json_reply("anthropic-page2.json")) as server:
        rows = fetch("anthropic:*", server.url)
    assert [r.id for r in rows] == [
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1-20250805",
        "claude-3-5-haiku-20241022",
    ]
    assert [(r["method"], r["path"]) for r in server.requests] == [
        ("GET", "/models?limit=1000"),
        ("GET", "/models?limit=1000&after_id=claude-opus-4-1-20250805"),
    ]
    assert server.requests[0]["headers"]["anthropic-version"] == "2023-06-01"


@pytest.mark.parametrize(
    "provider, name, path",
    [
        ("openai", "openai.json", "/models"),
        ("gemini", "gemini.json", "/models?pageSize=1000"),
        ("ollama", "ollama.json", "/api/tags"),
    ],
)
def test_each_endpoint(provider, name, path):
    with StubServer(json_reply(name)) as server:
        rows = fetch(f"{provider}:*", server.url)
    assert rows and server.requests[0]["path"] == path and server.requests[0]["method"] == "GET"
    assert all(r.input_usd_per_mtok is None for r in rows)  # a user-named host: no price


async def _listed_by(driver) -> list:
    async with driver:  # closed on the loop it connected on
        return await driver.list_models()


def test_the_providers_own_host_gets_context_windows_and_prices(monkeypatch):
    with StubServer(json_reply("openai.json")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-models")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        rows = {r.id: r for r in asyncio.run(_listed_by(create_driver("openai:*")))}
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test-models"
    mini = rows["gpt-4.1-mini"]
    assert (
        mini.context_window
        and mini.input_usd_per_mtok == pytest.approx(0.4)
        and mini.output_usd_per_mtok == pytest.approx(1.6)
    )
    assert rows["ft:gpt-4.1-mini-2025-04-14:acme::B1x2y3z4"].input_usd_per_mtok is None  # unknown to genai-prices


def test_models_magic_lists_once_per_session(ip, monkeypatch, capsys):
    with StubServer(json_reply("openai.json")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-models")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        ip.run_line_magic("provider", "--models openai")
        first = capsys.readouterr().out
        ip.run_line_magic("provider", "--models openai")
        again = capsys.readouterr().out
    assert first.startswith("4 models from openai at ") and "%provider openai:MODEL" in first
    assert any(line.split()[:4] == ["gpt-4.1-mini", "1M", "$0.4", "$1.6"] for line in first.splitlines()), first
    assert "(listed earlier this session)" in again and len(server.requests) == 1


def test_models_of_the_session_provider_at_its_base_url(ip, capsys):
    with StubServer(json_reply("ollama.json")) as server:
        ip.run_line_magic("provider", f"ollama:llama3.2 --base-url {server.url}")
        capsys.readouterr()
        ip.run_line_magic("provider", "--models")
    out = capsys.readouterr().out
    assert out.startswith("2 models from ollama") and "qwen3:8b" in out and "8.2B" in out


@pytest.mark.parametrize(
    "status, message", [(404, "has no model list (GET /models answered HTTP 404)"), (401, "HTTP 401")]
)
def test_a_missing_endpoint_is_one_clear_line(ip, capsys, status, message):
    with StubServer(
        Reply(status=status, headers={"Content-Type": "application/json"}, pieces=[b'{"error": "nope"}'])
    ) as server:
        ip.run_line_magic("provider", f"--models openai:x --base-url {server.url}")
    captured = capsys.readouterr()
    assert captured.err.startswith("ipyagent: could not list the models of openai: ") and message in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_models_in_a_notebook(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    with StubServer(json_reply("gemini.json")) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-models")
        monkeypatch.setenv("GEMINI_BASE_URL", server.url)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext ipyagent"),
                                             nbformat.v4.new_code_cell("%provider --models gemini")])
        NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    text = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert text.startswith("2 models from gemini") and "gemini-2.5-flash" in text and "gemma-3-27b-it" in text
    assert server.requests[0]["headers"]["x-goog-api-key"] == "gemini-test-models"
