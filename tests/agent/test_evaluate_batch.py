"""Batch mode (`evaluate(..., batch=True)`): a matrix through each provider's batch API, against
local fake servers built to the providers' references (`support.batch_servers`)."""

from __future__ import annotations

import threading

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from ipyagent import Agent, evaluate
from ipyagent.agent import leave_or_cancel
from ipyagent.memory import RunStore
from tests.support.batch_servers import USAGE_IN, USAGE_OUT, BatchServer
from tests.support.stub_server import Reply, StubServer, openai_text_reply

ROWS = [f"question {n}" for n in range(200)]
NOW = {"poll_s": 0.0}  # batch mode, looking at the batches again at once (the fake servers end them by looks)
#: (provider id, API root under the server, genai-prices provider and model its price is taken as)
APIS = {
    "openai": ("openai:gpt-4o-mini", "/v1", "openai", "gpt-4o-mini"),
    "anthropic": ("anthropic:claude-sonnet-4-5", "/v1", "anthropic", "claude-sonnet-4-5"),
    "gemini": ("gemini:gemini-2.5-flash", "/v1beta", "google", "gemini-2.5-flash"),
}


def _agent(api: str, url: str) -> Agent:
    provider_id, root, price_provider, model = APIS[api]
    price_as = f"{provider_id.split(':')[0]}:{model}"
    return Agent(provider_id, base_url=url + root, price_as=price_as)


@pytest.fixture(autouse=True)
def _keys_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "test-key")


def _batch_price(api: str) -> float:
    """One answer's batch price, from genai-prices itself: its batch variant of the model's price."""
    _, _, provider, model = APIS[api]
    usage = PriceUsage(input_tokens=USAGE_IN, output_tokens=USAGE_OUT)
    batch = calc_price(usage, model, provider_id=provider, price_context={"processing": "batch"})
    live = calc_price(usage, model, provider_id=provider)
    assert batch.total_price < live.total_price  # the model has a batch price
    return float(batch.total_price)


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_200_row_matrix_completes_through_the_batch_api_at_the_batch_price(api, tmp_path,
                                                                            open_store) -> None:
    store = open_store(tmp_path / "runs.sqlite")
    lines = []
    with BatchServer(polls=3) as server:
        ev = evaluate([_agent(api, server.url)], "{{ row }}", ROWS, store=store,
                      assertions=["icontains:answer to {{ row }}"],
                      batch={"poll_s": 0.0, "on_progress": lambda p: lines.append(str(p))})
        assert server.created == 1  # 200 requests: one batch, within every API's limits
        # The runs are in the store as live ones are: the same matrix again is served from the cache.
        cached = evaluate([_agent(api, server.url)], "{{ row }}", ROWS, batch=NOW, store=store)
        assert server.created == 1
    assert len(ev.results) == 200 and all(r.ok and r.passed for r in ev.results), ev.notes
    by_row = {r.row: r for r in ev.results}
    assert by_row[7].text == "answer to question 7"
    assert by_row[7].input_tokens == USAGE_IN and by_row[7].output_tokens == USAGE_OUT
    assert by_row[7].cost == pytest.approx(_batch_price(api))
    assert ev.spent == pytest.approx(200 * _batch_price(api))
    assert lines[0].startswith("batch: 200 submitted · 200 in progress · 0 done · 0 failed · ~$")
    assert lines[-1].startswith("batch: 200 submitted · 0 in progress · 200 done · 0 failed")
    assert all(r.cached for r in cached.results) and cached.results[0].text.startswith("answer to ")
    assert _keys(store) == []  # collected: the store forgot the batch


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_restarted_kernel_collects_the_batch_it_sent_instead_of_sending_it_again(api, tmp_path,
                                                                                  open_store) -> None:
    path = tmp_path / "runs.sqlite"
    with BatchServer(polls=10**9) as server:  # the batch runs until the test lets it end
        submitted = threading.Event()
        first = evaluate([_agent(api, server.url)], "{{ row }}", ROWS, store=open_store(path),
                         background=True, batch={"poll_s": 0.0, "on_progress": lambda p: submitted.set()})
        assert submitted.wait(60)
        assert first.cancel()  # the kernel goes away while the batch runs
        assert server.created == 1 and not first.results and not server.cancelled
        server.polls = 0  # the batch ends at its next look
        store = open_store(path)  # a new kernel: its own store connection
        assert len(_keys(store)) == 200 and len(set(store.batched(_keys(store)).values())) == 1
        second = evaluate([_agent(api, server.url)], "{{ row }}", ROWS, batch=NOW, store=store)
        assert server.created == 1  # collected, not sent again
    assert len(second.results) == 200 and all(r.ok for r in second.results), second.notes
    assert {r.text for r in second.results} == {f"answer to {q}" for q in ROWS}


def _keys(store: RunStore) -> list[str]:
    """The cache keys the store holds a batch for."""
    return [row["cache_key"] for row in store._db.execute("SELECT cache_key FROM batches").fetchall()]


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_failed_request_fails_its_cell_and_an_expired_batch_is_sent_again_next_time(api, tmp_path,
                                                                                     open_store) -> None:
    store = open_store(tmp_path / "runs.sqlite")
    rows = ROWS[:6]
    with BatchServer(answer=lambda q: None if q == "question 2" else f"answer to {q}") as server:
        ev = evaluate([_agent(api, server.url)], "{{ row }}", rows, batch=NOW, store=store)
    failed = [r for r in ev.results if not r.ok]
    assert [r.row for r in failed] == [2] and "refused" in failed[0].error and failed[0].passed is False
    assert sum(r.ok for r in ev.results) == 5
    with BatchServer(expire=True) as server:
        expired = evaluate([_agent(api, server.url)], "{{ row }}", ["late 1", "late 2"], batch=NOW,
                           store=store)
        assert all(not r.ok and r.error_type == "timeout" for r in expired.results), [r.error for r in expired.results]
        assert _keys(store) == []  # forgotten: the next run sends them again
        evaluate([_agent(api, server.url)], "{{ row }}", ["late 1", "late 2"], batch=NOW,
                 store=store)
        assert server.created == 2


def test_a_provider_without_a_batch_api_runs_live_with_a_note(tmp_path, open_store) -> None:
    def respond(request):
        if request["method"] == "GET":  # GET /v1/batches: this server has no batch API
            return Reply(status=404, headers={"Content-Type": "application/json"}, pieces=[b'{"error": "no"}'])
        return openai_text_reply("live answer")

    with StubServer(respond=respond) as server:
        agent = Agent("openai:local-model", base_url=server.url + "/v1")
        ev = evaluate([agent], "{{ row }}", ROWS[:3], batch=NOW, store=open_store(tmp_path / "r.sqlite"))
    assert [r.text for r in ev.results] == ["live answer"] * 3
    assert any(n.startswith("batch: openai:local-model runs live: openai has no batch API at") for n in ev.notes)
    assert sum(1 for r in server.requests if r["method"] == "POST") == 3


def test_an_interrupt_leaves_the_batch_running_and_says_how_to_collect_it_or_cancels_it(
        tmp_path, monkeypatch, open_store) -> None:
    with BatchServer(polls=10**9) as server:
        submitted = threading.Event()
        ev = evaluate([_agent("openai", server.url)], "{{ row }}", ROWS[:5],
                      store=open_store(tmp_path / "r.sqlite"),
                      background=True, batch={"poll_s": 0.0, "on_progress": lambda p: submitted.set()})
        assert submitted.wait(60) and ev.cancel()
        [(_, batch_id)] = ev.pending_batches
        # Nobody to ask (a notebook): left running, and the line says how to collect it.
        line = leave_or_cancel(ev, ask=False)
        assert f"batch(es) {batch_id} left running at the provider" in line and "batch=True" in line
        assert not server.cancelled
        monkeypatch.setattr("builtins.input", lambda prompt: "n")  # asked, and the answer is no
        assert "left running" in leave_or_cancel(ev, ask=True) and not server.cancelled
        monkeypatch.setattr("builtins.input", lambda prompt: "y")
        said = leave_or_cancel(ev, ask=True)
        assert said == f"ipyagent: batch(es) {batch_id} cancelled; answered runs were not collected"
        assert server.cancelled == [batch_id] and not ev.pending_batches


def test_a_batch_the_provider_no_longer_knows_fails_its_runs_and_is_sent_again_next_time(tmp_path,
                                                                                       open_store) -> None:
    path = tmp_path / "runs.sqlite"
    with BatchServer(polls=10**9) as server:
        submitted = threading.Event()
        first = evaluate([_agent("openai", server.url)], "{{ row }}", ROWS[:4], store=open_store(path),
                         background=True, batch={"poll_s": 0.0, "on_progress": lambda p: submitted.set()})
        assert submitted.wait(60) and first.cancel()
        server.batches.clear()  # deleted at the provider (or past its retention)
        server.polls = 0
        gone = evaluate([_agent("openai", server.url)], "{{ row }}", ROWS[:4], batch=NOW, store=open_store(path))
        assert all(not r.ok and "unknown to the provider" in r.error for r in gone.results), gone.notes
        again = evaluate([_agent("openai", server.url)], "{{ row }}", ROWS[:4], batch=NOW, store=open_store(path))
        assert server.created == 2 and all(r.ok for r in again.results)
