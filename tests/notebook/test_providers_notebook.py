"""notebooks/providers.ipynb under nbclient: the same %%agent cell against five providers, served by a
local server with the bytes of the notebook's cassettes (each provider's real streaming format)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from ipyagent.drivers.catalog.pricing import format_usd
from ipyagent.notebook.render.html import markdown_to_html

from ..support.kernels import transcript_of, view_html
from ..support.recordings import sse_events
from ..support.stub_server import Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "providers.ipynb"
ORDER = ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
KEYS = {
    "OPENAI_API_KEY": "sk-test-providers",
    "ANTHROPIC_API_KEY": "sk-ant-test-providers",
    "GEMINI_API_KEY": "gemini-test-providers",
}
#: genai-prices provider of each (None: no known price).
PRICED_AS = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "ollama": None,
}


def cassette(provider: str) -> dict[str, Any]:
    (entry,) = [
        json.loads(line)
        for line in (ROOT / "notebooks" / f"providers-{provider}.cassette.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return entry


def read_reply(provider: str, body: str) -> tuple[str, int, int, str]:
    """(text, input tokens, output tokens, model) of a recorded reply, read with json alone."""
    if provider == "ollama":
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        return (
            "".join(x["message"]["content"] for x in lines),
            lines[-1]["prompt_eval_count"],
            lines[-1]["eval_count"],
            lines[-1]["model"],
        )
    events = [json.loads(data) for _, data in sse_events(body) if data != "[DONE]"]
    if provider == "openai":
        usage = next(e["usage"] for e in events if e.get("usage"))
        text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
        return text, usage["prompt_tokens"], usage["completion_tokens"], events[-1]["model"]
    if provider == "openai-responses":
        done = next(e["response"] for e in events if e["type"] == "response.completed")
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        return text, done["usage"]["input_tokens"], done["usage"]["output_tokens"], done["model"]
    if provider == "anthropic":
        start = next(e["message"] for e in events if e["type"] == "message_start")
        out = [e["usage"]["output_tokens"] for e in events if e["type"] == "message_delta"][-1]
        text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
        u = start["usage"]
        return (
            text,
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
            out,
            start["model"],
        )
    usage = [e["usageMetadata"] for e in events if "usageMetadata" in e][-1]
    text = "".join(p.get("text", "") for e in events for c in e["candidates"] for p in c["content"]["parts"])
    return text, usage["promptTokenCount"], usage["candidatesTokenCount"], events[-1]["modelVersion"]


def serve(entry: dict[str, Any]) -> Reply:
    body: str = entry["response"]["body"]
    sep = "\n\n" if "\n\n" in body else "\n"
    return Reply(headers={"Content-Type": entry["response"]["headers"]["content-type"]},
                 pieces=[(p + sep).encode() for p in body.split(sep) if p])


def test_providers_notebook_shows_the_same_view_for_each_provider(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    entries = {p: cassette(p) for p in ORDER}
    with StubServer(*(serve(entries[p]) for p in ORDER)) as server:
        for var, value in KEYS.items():
            monkeypatch.setenv(var, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("GEMINI_BASE_URL", f"{server.url}/v1beta")
        monkeypatch.setenv("OLLAMA_BASE_URL", server.url)
        nb = nbformat.read(NOTEBOOK, as_version=4)
        NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    # Each provider was really called, in its own format, with the request its cassette holds (so replays match).
    assert len(server.requests) == len(ORDER)
    for provider, request in zip(ORDER, server.requests):
        url = urlsplit(entries[provider]["request"]["url"])
        assert request["path"] == url.path + (f"?{url.query}" if url.query else ""), provider
        assert request["body"] == entries[provider]["request"]["body"], provider
    # --max-tokens 300 under each provider's own name (the notebook compares at the same settings)
    bodies = [r["body"] for r in server.requests]
    assert [bodies[0]["max_completion_tokens"], bodies[1]["max_output_tokens"], bodies[2]["max_tokens"],
            bodies[3]["generationConfig"]["maxOutputTokens"], bodies[4]["options"]["num_predict"]] == [300] * 5
    headers = [{k.lower(): v for k, v in r["headers"].items()} for r in server.requests]
    assert headers[0]["authorization"] == headers[1]["authorization"] == f"Bearer {KEYS['OPENAI_API_KEY']}"
    assert (
        headers[2]["x-api-key"] == KEYS["ANTHROPIC_API_KEY"] and headers[3]["x-goog-api-key"] == KEYS["GEMINI_API_KEY"]
    )
    assert "authorization" not in headers[4]

    agent_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%agent")]
    assert len({c.source for c in agent_cells}) == 1 and len(agent_cells) == len(ORDER)  # the same cell each time
    provider_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%provider")]
    for provider, provider_cell, cell in zip(ORDER, provider_cells, agent_cells):
        text, tokens_in, tokens_out, model = read_reply(provider, entries[provider]["response"]["body"])
        provider_id = f"{provider}:{entries[provider]['model']}"
        assert provider_cell.outputs[0]["text"].startswith(f"provider: {provider_id} at {server.url}")
        body, footer = view_html(nb, cell)
        assert body == markdown_to_html(text), provider
        assert f"{provider_id} · {tokens_in} in / {tokens_out} out tokens · first token " in footer, footer
        assert "replayed" not in footer
        if PRICED_AS[provider]:
            expected = calc_price(
                PriceUsage(input_tokens=tokens_in, output_tokens=tokens_out), model, provider_id=PRICED_AS[provider]
            )
            assert footer.endswith(f" · {format_usd(float(expected.total_price))} · max tokens 300"), footer
        else:
            assert footer.endswith(" s · max tokens 300"), footer  # no cost figure: the saved note says why
            assert "--price-as PROVIDER:MODEL" in transcript_of(cell)["price_note"]
