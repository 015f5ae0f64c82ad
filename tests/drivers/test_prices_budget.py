"""Prices behind a user-named base URL, --price-as, %agent cost and --budget."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

import ipyagent
from ipyagent.agent import session_default

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
REPORTED = "gpt-4o-2024-08-06"  # the model the recording says answered


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(Reply.sse_file(TEXT)) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh_ledger() -> Iterator[None]:
    session_default().ledger.reset()  # the session's spending: every run's ledger unless it is given another
    yield
    session_default().ledger.reset()


def price_of(model: str) -> float:
    usage = expected_from(TEXT).usage
    return float(calc_price(PriceUsage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"]),
                            model, provider_id="openai").total_price)


def test_a_user_named_base_url_has_an_unknown_price_unless_price_as_says(server, monkeypatch) -> None:
    assert ipyagent.Agent("openai:m", base_url=server.url).run("hi").cost is None
    priced = ipyagent.Agent("openai:m", base_url=server.url, price_as="openai:gpt-4.1-mini").run("hi")
    assert priced.cost == pytest.approx(price_of("gpt-4.1-mini"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # the provider's own variable stands for the provider
    assert ipyagent.Agent("openai:m").run("hi").cost == pytest.approx(price_of(REPORTED))
    with pytest.raises(ipyagent.core.ProviderError, match="PROVIDER:MODEL"):
        ipyagent.Agent("openai:m", base_url=server.url, price_as="gpt-4.1-mini")


def test_price_as_on_provider_shows_in_the_footer_and_cost(ip, server, capsys) -> None:
    ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
    ip.run_cell_magic("agent", "", "hi")
    out = capsys.readouterr().out
    assert "unknown price" not in out
    assert (f"price unknown: {server.url} is not openai's own API; "
            "set it with %provider ... --price-as PROVIDER:MODEL (price_as= in Python)") in out
    ip.run_line_magic("provider", f"openai:m --base-url {server.url} --price-as openai:gpt-4.1-mini")
    ip.run_cell_magic("agent", "-o result", "hi")
    result = ip.user_ns["result"]
    assert result.cost == pytest.approx(price_of("gpt-4.1-mini"))
    ip.run_line_magic("agent", "cost")
    out = capsys.readouterr().out
    assert "openai  2 turns  28 in / 60 out tokens" in out and "+ 1 turn at an unknown price" in out
    assert f"total: ${price_of('gpt-4.1-mini'):.7f}".rstrip("0") in out and "(known prices only)" in out


def test_budget_refuses_new_runs_once_spent(ip, server, capsys) -> None:
    ip.run_line_magic("provider", f"openai:m --base-url {server.url} --price-as openai:gpt-4o --budget 0.0001")
    assert "budget: $0.0001 for this session" in capsys.readouterr().out
    ip.run_cell_magic("agent", "-o first", "first")
    assert ip.user_ns["first"].ok  # spent 0: it runs, and passes the budget
    ip.run_cell_magic("agent", "-o refused", "second")
    refused = ip.user_ns["refused"]
    assert refused.error.type == "budget" and "of its $0.0001 budget" in refused.error.message
    assert len(server.requests) == 1  # nothing sent for the refused run
    ip.run_cell_magic("compare", "openai:m openai:n -o comparison", "third")
    comparison = ip.user_ns["comparison"]
    assert [f.error_type for f in comparison.figures] == ["budget", "budget"] and len(server.requests) == 1
    ip.run_line_magic("agent", "cost")
    assert "new runs are refused" in capsys.readouterr().out
    ip.run_line_magic("provider", "--budget 1")
    ip.run_cell_magic("agent", "", "fourth")
    assert ip.run_line_magic("agent", "last").ok and len(server.requests) == 2


def test_a_batch_turn_costs_genai_prices_batch_price_or_half_the_live_one() -> None:
    from ipyagent.core import Usage
    from ipyagent.drivers.catalog import pricing

    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    tokens = PriceUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    # gpt-4o-mini has a batch price in genai-prices: that one.
    listed = calc_price(tokens, "gpt-4o-mini", provider_id="openai", price_context={"processing": "batch"})
    assert pricing.price("openai", "gpt-4o-mini", usage, batch=True) == pytest.approx(float(listed.total_price))
    # claude-3-5-haiku has none (retired before genai-prices kept batch prices): the documented 50 %.
    live = pricing.price("anthropic", "claude-3-5-haiku-latest", usage)
    assert calc_price(tokens, "claude-3-5-haiku-latest", provider_id="anthropic",
                      price_context={"processing": "batch"}).total_price == pytest.approx(Decimal(str(float(live))))
    batched = pricing.price("anthropic", "claude-3-5-haiku-latest", usage, batch=True)
    assert batched == pytest.approx(live * pricing.BATCH_DISCOUNT) and pricing.BATCH_DISCOUNT == 0.5
    assert batched.input_usd == pytest.approx(live.input_usd / 2)
