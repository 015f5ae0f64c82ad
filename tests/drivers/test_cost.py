"""The price of a run (genai-prices): on `AgentResult.cost` and in the footer; "unknown price" otherwise.

Expected figures are computed in the test with genai-prices from the usage and
model each recording reports.
"""

from __future__ import annotations

import asyncio
import gc
import io
import re
import json
from pathlib import Path

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from ipyagent import Agent
from ipyagent.core import Usage
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.catalog.pricing import Cost, Ledger, format_usd, price, total_cost
from ipyagent.notebook.views.run_view import TextView

from ..support.recordings import expected_from, recording_events
from ..support.stub_server import FIXTURES, Reply, StubServer

OPENAI_TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
GEMINI_THINKING = FIXTURES / "gemini" / "stream-thinking.sse"
OLLAMA_TEXT = FIXTURES / "ollama" / "chat-stream-text.ndjson"


def recorded_openai_model(path: Path) -> str:
    return next(json.loads(d)["model"] for _, d in recording_events(path) if d != "[DONE]")


def run_with_view(driver) -> tuple[object, str]:
    """(the result, the footer line) of a run shown in a terminal view; `printed` keeps the rest."""
    out = io.StringIO()
    view = TextView(driver.id, stream=out)
    result = Agent(driver).run("Hello", on_event=view.feed)
    run_with_view.printed = out.getvalue()
    return result, next(line for line in reversed(out.getvalue().splitlines()) if line.startswith("["))


def test_known_model_is_priced_on_the_result_and_in_the_footer():
    usage = expected_from(OPENAI_TEXT).usage
    model = recorded_openai_model(OPENAI_TEXT)  # the model the server says answered
    expected = calc_price(PriceUsage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"]),
                          model, provider_id="openai")
    with StubServer(Reply.sse_file(OPENAI_TEXT)) as server:
        result, footer = run_with_view(OpenAIChatPromptDriver("gpt-4o", base_url=server.url, api_key="sk-test"))
    assert result.ok
    assert (result.cost.input_usd, result.cost.output_usd, result.cost.total_usd) == (
        float(expected.input_price), float(expected.output_price), float(expected.total_price))
    assert result.cost == float(expected.total_price) > 0  # a Cost is also a float: the total in USD
    assert footer.endswith(f" · {format_usd(float(expected.total_price))}]")


def test_gemini_thoughts_are_billed_as_output():
    last = [
        json.loads(d)["usageMetadata"] for _, d in recording_events(GEMINI_THINKING) if "usageMetadata" in json.loads(d)
    ][-1]
    model = [json.loads(d)["modelVersion"] for _, d in recording_events(GEMINI_THINKING)][-1]
    assert last.get("thoughtsTokenCount")
    expected = calc_price(PriceUsage(input_tokens=last["promptTokenCount"],
                                     output_tokens=last["candidatesTokenCount"] + last["thoughtsTokenCount"]),
                          model, provider_id="google")
    with StubServer(Reply.sse_file(GEMINI_THINKING)) as server:
        result = Agent(GeminiPromptDriver("gemini-2.5-pro", base_url=server.url, api_key="k")).run("Think.")
    assert result.ok
    assert result.cost.total_usd == pytest.approx(float(expected.total_price), rel=1e-12)


def test_unknown_price_is_none_and_said_so():
    lines = [line for line in OLLAMA_TEXT.read_text().splitlines() if line.strip()]
    reply = Reply(headers={"Content-Type": "application/x-ndjson"}, pieces=[(line + "\n").encode() for line in lines])
    with StubServer(reply) as server:
        result, footer = run_with_view(OllamaPromptDriver("llama3.2", base_url=server.url))
    assert result.ok and result.cost is None
    assert "price" not in footer and "$" not in footer  # no cost figure: said once, under it, why and how to set it
    note = (r"price unknown: genai-prices has no price for ollama:llama3\.2; "
            r"set it with %provider \.\.\. --price-as PROVIDER:MODEL")
    assert re.search(rf"\n{note} \(price_as= in Python\)\n{re.escape(footer)}\n$", run_with_view.printed)
    assert price("openai", "no-such-model-xyz", Usage(input_tokens=10, output_tokens=10)) is None
    assert price("some-plugin", "gpt-4.1-mini", Usage(input_tokens=10, output_tokens=10)) is None


def test_cache_tokens_are_priced_as_genai_prices_does():
    usage = Usage(input_tokens=12_000, output_tokens=800, cache_read_tokens=9_000, cache_write_tokens=1_000)
    for provider, gp_provider, model in [
        ("openai", "openai", "gpt-4.1-mini"),
        ("anthropic", "anthropic", "claude-sonnet-4-5"),
    ]:
        expected = calc_price(
            PriceUsage(input_tokens=12_000, output_tokens=800, cache_read_tokens=9_000, cache_write_tokens=1_000),
            model,
            provider_id=gp_provider,
        )
        got = price(provider, model, usage)
        assert got is not None and got.total_usd == float(expected.total_price)
    no_cache = price("openai", "gpt-4.1-mini", Usage(input_tokens=12_000, output_tokens=800))
    assert no_cache.input_usd > price("openai", "gpt-4.1-mini", usage).input_usd  # cached reads are cheaper


def test_turn_costs_add_up_and_one_unknown_makes_the_total_unknown():
    a, b = Cost(0.001, 0.002, 0.003), Cost(0.01, 0.02, 0.03)
    total = total_cost([a.to_dict(), b.to_dict()])
    assert (total.input_usd, total.output_usd, total.total_usd) == (
        a.input_usd + b.input_usd,
        a.output_usd + b.output_usd,
        a + b,
    )
    assert isinstance(a + b, Cost) and sorted([b, a]) == [a, b] and f"{a:.4f}" == "0.0030"
    assert total_cost([a.to_dict(), None]) is None and total_cost([]) is None
    assert [format_usd(x) for x in (0.00117, 0.0105, 0.5, 12.345, 0)] == ["$0.00117", "$0.0105", "$0.5", "$12.35", "$0"]


def test_a_usage_already_priced_is_not_computed_again(monkeypatch) -> None:
    """An evaluation prices thousands of turns of one model: each (model, usage) is computed once."""
    import genai_prices

    from ipyagent.drivers.catalog import pricing

    calls = []
    real = genai_prices.calc_price
    monkeypatch.setattr(genai_prices, "calc_price", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw))
    monkeypatch.setattr(pricing, "_PRICED", {})
    first = price("openai", "gpt-4.1-mini", Usage(input_tokens=1234, output_tokens=56))
    again = price("openai", "gpt-4.1-mini", Usage(input_tokens=1234, output_tokens=56))
    other = price("openai", "gpt-4.1-mini", Usage(input_tokens=1234, output_tokens=57))
    assert calls == ["gpt-4.1-mini", "gpt-4.1-mini"] and pricing.loaded()
    expected = calc_price(PriceUsage(input_tokens=1234, output_tokens=56), "gpt-4.1-mini", provider_id="openai")
    assert again == first == pytest.approx(float(expected.total_price)) and again.input_usd == first.input_usd
    assert other > first
    assert price("openai", "no-such-model-xyz", Usage(input_tokens=1)) is None
    assert price("openai", "no-such-model-xyz", Usage(input_tokens=1)) is None and calls.count("no-such-model-xyz") == 1


@pytest.mark.parametrize("options, hops, priced", [
    ({}, 1, True),  # the provider's own host: the first price reads the tables, off the loop
    ({"price_known": False}, 0, False),  # a local server: no price, nothing to read
    ({"price_known": False, "price_as": "openai:gpt-4.1-mini"}, 1, True),
])
def test_a_turn_is_priced_off_the_loop_only_when_the_price_reads_the_tables(
    monkeypatch: pytest.MonkeyPatch, options: dict, hops: int, priced: bool
) -> None:
    """Before genai-prices' tables are loaded, a turn's price is computed in a thread, so the
    first one (~0.15 s) does not stall the other streams; a turn that has no price to read
    (a host other than the provider's own) is priced on the loop, never a thread hop."""
    from concurrent.futures import ThreadPoolExecutor

    from ipyagent.drivers import turn
    from ipyagent.drivers.aggregate import StreamMeta
    from ipyagent.drivers.catalog import pricing

    submitted: list[object] = []

    class Counted(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    executor = Counted(1)
    monkeypatch.setattr(turn, "_pricing_executor", lambda: executor)
    monkeypatch.setattr(pricing, "_PRICED", {})  # the tables not loaded yet
    driver = OpenAIChatPromptDriver("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key="sk-test", **options)
    try:
        cost = asyncio.run(driver._bill(StreamMeta(), Usage(input_tokens=1000, output_tokens=10), "gpt-4.1-mini"))
    finally:
        executor.shutdown()
    assert (len(submitted), cost is not None) == (hops, priced)


def test_a_ledger_keeps_its_turns_as_numbers_not_an_object_per_turn() -> None:
    """A session's ledger keeps every turn (an evaluation's 30,000): they read back as tuples, in
    order, the unknown price as None, but the ledger holds no object per turn."""
    ledger = Ledger()
    for n in range(1000):
        ledger.record("openai", "gpt-x" if n % 2 else "gpt-y", None if n == 7 else n / 1000,
                      Usage(input_tokens=n, output_tokens=2 * n))
    turns = ledger.turns
    assert turns[:2] == [("openai", "gpt-y", 0.0, 0, 0), ("openai", "gpt-x", 0.001, 1, 2)]
    assert turns[7] == ("openai", "gpt-x", None, 7, 14) and len(turns) == 1000
    assert ledger.total == sum(n / 1000 for n in range(1000) if n != 7)
    assert ledger.by_provider()["openai"] == {"turns": 1000, "input_tokens": 499500, "output_tokens": 999000,
                                              "usd": ledger.total, "unknown": 1}
    held = gc.get_referents(*vars(ledger).values())
    held += [inner for outer in held for inner in gc.get_referents(outer)]
    assert len(held) < 100  # a list of a tuple per turn: over 1,000
    ledger.reset()
    assert ledger.turns == [] and ledger.total == 0.0
