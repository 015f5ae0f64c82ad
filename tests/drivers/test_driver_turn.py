"""One turn through the driver template (`drivers/base.py`, DESIGN.md "drivers"): send (with
retries, the response deadline, the rate gate) -> relay -> complete (the stop-reason check,
max_tokens recovery, prices, metadata), replies labelled otherwise, a failed turn's partial
message, and the body drain that lets a connection serve the next request. Issue 12: each test
fails when its decision flips (mutation testing, `make mutation`).

`tests/support/toy_driver.py`'s toy protocol keeps the template apart from any provider. No test sleeps:
pauses run on a virtual clock (`tests/support/virtual_clock.py`), retry waits are recorded (`no_sleep`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
import tenacity

from ipyagent.core import PromptStack, StopKind, TextDelta, Usage
from ipyagent.drivers import StreamDecoder, StreamMeta, base, http, turn
from ipyagent.drivers.catalog import pricing
from ipyagent.drivers.base import BasePromptDriver

from ..support.toy_driver import (
    JSON,
    NDJSON,
    TEXT,
    Coded,
    Pieces,
    Scripted,
    Toy,
    assert_error,
    hi_stack,
    ndjson,
    run_turn,
)
from ..support.virtual_clock import VirtualClockLoop


# -- one turn: send -> relay -> complete ----------------------------------------------------------



def test_a_turn_posts_the_request_and_announces_it_without_the_key() -> None:
    transport = Scripted((200, NDJSON, [ndjson(*TEXT)]))
    driver = Toy("m", api_key="sk-toy-started-1234567", transport=transport, base_url="http://h/v1?key=q-key-1")
    events = run_turn(driver)
    [request] = transport.requests
    assert (request.method, str(request.url)) == ("POST", "http://h/v1?key=q-key-1/chat")
    assert json.loads(request.content) == {"model": "m", "roles": ["user"]} and request.headers[
        "authorization"
    ].endswith("1234567")
    started = events[0]
    assert (started.type, started.provider, started.model) == ("model_started", "toy", "m")
    assert started.request == {"url": "http://h/v1?key=[redacted]", "body": {"model": "m", "roles": ["user"]}}
    assert [e.type for e in events] == ["model_started", "text_delta", "text_delta", "model_completed"]
    done = events[-1]
    assert done.message.text == "Hello" and done.usage == Usage(input_tokens=7, output_tokens=2)
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.end_turn, "end_turn")
    assert transport.body.closed  # the response is closed when the turn ends


def test_the_rule_strategy_puts_the_schema_into_the_prompt_and_the_others_do_not() -> None:
    for strategy, roles in [("rule", ["system", "user"]), ("tool", ["user"])]:
        stack = hi_stack()
        stack.output_schema, stack.output_strategy = (
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            strategy,
        )
        driver = Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT))))
        run_turn(driver, stack)
        assert [m.role for m in driver.built.messages] == roles


def test_stream_facts_before_the_first_delta_count_too() -> None:
    transport = Scripted((200, {**NDJSON, "x-request-id": "req-header"}, ndjson({"model": "m-2024-06"}, *TEXT)))
    done = run_turn(Toy("m", transport=transport))[-1]
    assert (done.metadata["model"], done.metadata["request_id"], done.metadata["provider"]) == (
        "m-2024-06",
        "req-header",
        "toy",
    )
    later = Scripted((200, {**NDJSON, "x-request-id": "req-header"}, ndjson(*TEXT[:2], {"id": "req-body"}, *TEXT[2:])))
    assert run_turn(Toy("m", transport=later))[-1].metadata["request_id"] == "req-body"  # the stream's own id first
    none = Scripted((200, NDJSON, ndjson(*TEXT)))
    assert run_turn(Toy("m", transport=none))[-1].metadata["request_id"] is None
    anthropic_style = Scripted((200, {**NDJSON, "Request-Id": "req_011"}, ndjson(*TEXT)))
    assert run_turn(Toy("m", transport=anthropic_style))[-1].metadata["request_id"] == "req_011"
    both = Scripted((200, {**NDJSON, "request-id": "req-b", "x-request-id": "req-a"}, ndjson(*TEXT)))
    assert run_turn(Toy("m", transport=both))[-1].metadata["request_id"] == "req-a"


def test_the_start_of_a_turn_names_no_request_id_it_cannot_know_yet() -> None:
    transport = Scripted((200, {**NDJSON, "x-request-id": "req-header"}, ndjson(*TEXT)))
    started, *_, done = run_turn(Toy("m", transport=transport))
    assert started.type == "model_started" and not hasattr(started, "request_id")  # yielded before the request is sent
    assert done.metadata["request_id"] == "req-header"


def test_a_reply_with_only_a_stop_reason_is_an_empty_message() -> None:
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"stop": "end_turn"})))))[-1]
    assert done.type == "model_completed" and done.message.content == [] and done.usage == Usage()


def test_a_raw_stop_reason_without_a_kind_is_read_from_the_message() -> None:
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"text": "a"}, {"stop": ""})))))[-1]
    assert done.type == "model_completed" and (done.stop_reason.kind, done.stop_reason.raw) == (
        StopKind.end_turn,
        "raw",
    )


def test_a_stream_without_a_stop_reason_was_cut_short() -> None:
    failed = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"text": "par"}, {"usage": [1, 1]})))))[-1]
    assert_error(
        failed.error,
        "invalid_response",
        "the toy stream ended before the model finished (no stop reason arrived); the text so far is kept",
        retryable=False,
    )
    assert failed.partial.text == "par" and failed.partial.status == "failed"


def test_a_call_cut_by_max_tokens_is_reported_and_otherwise_kept_with_its_error_for_the_model() -> None:
    call = [{"text": "Let me"}, {"call": ["c1", "lookup", '{"q": "ab']}]
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*call, {"stop": "max_tokens"})))))[-1]
    assert done.type == "model_completed" and done.message.text == "Let me" and done.message.tool_calls == []
    assert done.metadata["partial_tool_calls"] == [{"id": "c1", "name": "lookup", "raw_arguments": '{"q": "ab'}]
    assert done.message.metadata["partial_tool_calls"] == done.metadata["partial_tool_calls"]
    assert done.stop_reason.kind is StopKind.max_tokens
    kept = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*call, {"stop": "tool_use"})))))[-1]
    assert (
        kept.type == "model_completed" and kept.message.text == "Let me" and "partial_tool_calls" not in kept.metadata
    )
    [block] = [b for b in kept.message.content if b.type == "action_call"]
    assert (block.action.tag, block.action.name, block.action.input, block.raw_arguments) == (
        "c1",
        "lookup",
        {},
        '{"q": "ab',
    )
    assert (
        block.error
        == "tool call 1 (id 'c1', tool 'lookup') was not run: its arguments are not valid JSON (Unterminated "
        """string starting at): '{"q": "ab'; call the tool again with its name and its arguments as one JSON object"""
    )
    assert kept.stop_reason.kind is StopKind.tool_use
    whole = run_turn(
        Toy("m", transport=Scripted((200, NDJSON, ndjson({"call": ["c1", "f", "{}"]}, {"stop": "max_tokens"}))))
    )[-1]
    assert "partial_tool_calls" not in whole.metadata


def test_a_delta_whose_text_is_not_text_fails_the_turn_there_and_keeps_the_text_so_far() -> None:
    """A server's number or null where text goes (a text delta, tool call arguments, an id) fails the
    turn at that delta: it never reaches the view, and the text before it is kept."""
    for bad, what in (
        ({"text": None}, "a text_delta whose text is NoneType (None)"),
        ({"text": 5}, "a text_delta whose text is int (5)"),
        ({"call": ["c1", "f", 7]}, "a tool_call_delta whose arguments is int (7)"),
        ({"call": [3, "f", "{}"]}, "a tool_call_delta whose call_id is int (3)"),
        ({"call": ["c1", ["f"], "{}"]}, "a tool_call_delta whose name is list (['f'])"),
    ):
        events = run_turn(
            Toy("m", transport=Scripted((200, NDJSON, ndjson({"text": "a"}, bad, {"text": "b"}, {"stop": "end_turn"}))))
        )
        failed = events[-1]
        assert_error(
            failed.error,
            "invalid_response",
            f"toy sent a reply ipyagent could not read (TypeError: {what}, not text)",
            retryable=False,
        )
        assert failed.partial.text == "a" and [e.text for e in events if isinstance(e, TextDelta)] == ["a"]
    first = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"text": 5}, {"stop": "end_turn"})))))[
        -1
    ]  # the head
    assert "a text_delta whose text is int (5)" in first.error.message and first.partial.content == []
    fine = run_turn(
        Toy("m", transport=Scripted((200, NDJSON, ndjson({"call": [None, None, "{}"]}, {"stop": "end_turn"}))))
    )[-1]
    assert (
        fine.type == "model_completed"
    )  # no id, no name: None is allowed there (the loop tells the model its call names no tool)


def test_deltas_that_form_no_message_fail_the_turn_and_leave_an_empty_partial() -> None:
    broken = [{"text": "a"}, {"call": ["c1", "f", "{}"], "at": 0}]  # text and a call at one index
    failed = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*broken, {"stop": "end_turn"})))))[-1]
    assert_error(
        failed.error, "invalid_response", "content block 0 holds text and ToolCallDelta deltas", retryable=False
    )
    assert failed.partial.role == "assistant" and failed.partial.content == []
    cut = run_turn(Toy("m", transport=Scripted((200, NDJSON, [ndjson(*broken), httpx2.ReadError("reset")]))))[-1]
    assert cut.error.type == "connection" and cut.partial.content == [] and cut.partial.status == "failed"


def test_a_failed_turn_keeps_its_text_and_says_what_broke() -> None:
    key = "sk-toy-echoed-0123456789"
    transport = Scripted((200, NDJSON, [ndjson({"text": "Hel"}), ndjson({"text": "lo"}), httpx2.ReadError("reset")]))
    failed = run_turn(Toy("m", api_key=key, transport=transport))[-1]
    assert_error(
        failed.error, "connection", "connection to http://toy.invalid/v1/chat failed: ReadError: reset", retryable=True
    )
    assert failed.partial.text == "Hello" and len(transport.requests) == 1  # after a delta: not retried
    assert failed.partial.status == "failed" and failed.partial.error.model_dump() == failed.error.to_dict()
    assert not {"partial", "failed", "error"} & set(failed.partial.metadata)
    assert (failed.metadata["provider"], failed.metadata["model"], failed.metadata["attempts"]) == ("toy", "m", 1)
    assert "partial" not in failed.metadata


def test_a_provider_error_echoing_the_key_is_redacted_in_message_and_body(no_sleep: list[float]) -> None:
    key = "sk-toy-echoed-0123456789"
    body = json.dumps({"message": f"bad key {key}", "type": "authentication", "detail": {"key": key}}).encode()
    failed = run_turn(Coded("m", api_key=key, transport=Scripted((401, JSON, body))))[-1]
    assert failed.error.message == "toy returned HTTP 401: bad key [redacted] (check the API key given as api_key=)"
    assert failed.error.raw == {
        "message": "bad key [redacted]",
        "type": "authentication",
        "detail": {"key": "[redacted]"},
    }
    assert failed.partial.error.message == failed.error.message


@pytest.mark.parametrize(
    "statuses, attempts, gave_up", [([503, 503], 2, True), ([503, 400], 2, False), ([503], 1, False)]
)
def test_gave_up_after_n_attempts_only_when_retries_ran_out(
    no_sleep: list[float], statuses: list[int], attempts: int, gave_up: bool
) -> None:
    transport = Scripted(*[(status, JSON, b"{}") for status in statuses])
    failed = run_turn(Toy("m", api_key="k-1", max_attempts=len(statuses), transport=transport))[-1]
    assert failed.metadata["attempts"] == attempts and len(transport.requests) == attempts
    assert failed.error.message.endswith(f" (gave up after {attempts} attempts)") is gave_up


@pytest.fixture
def spent(monkeypatch: pytest.MonkeyPatch) -> pricing.Ledger:
    """A ledger the tests record each turn's event in (as a run does), each turn priced at 0.25 + 0.5 USD."""
    monkeypatch.setattr(Toy, "price", lambda self, usage, model=None: pricing.Cost(0.25, 0.5))
    return pricing.Ledger()


def test_a_replayed_turn_is_not_counted_as_spending(spent: pricing.Ledger) -> None:
    live = Scripted((200, NDJSON, ndjson({"model": "m-1"}, *TEXT)))
    done = run_turn(Toy("m", transport=live))[-1]
    spent.record_turn(done.metadata, done.usage)
    assert spent.turns == [("toy", "m-1", 0.75, 7, 2)]
    assert done.metadata["cost"] == pricing.Cost(0.25, 0.5).to_dict() and done.metadata["replayed"] is False
    replay = Scripted((200, NDJSON, ndjson(*TEXT)))
    replay.replays = True  # type: ignore[attr-defined]
    done = run_turn(Toy("m", transport=replay))[-1]
    spent.record_turn(done.metadata, done.usage)
    assert len(spent.turns) == 1 and done.metadata["replayed"] is True


def test_a_failed_turn_s_partial_leaves_a_cut_call_out_and_describes_it() -> None:
    cut = [ndjson({"text": "Let me"}, {"call": ["c2", "find", '{"q": "ab']}), httpx2.ReadError("reset")]
    failed = run_turn(Toy("m", transport=Scripted((200, NDJSON, cut))))[-1]
    assert failed.partial.text == "Let me" and failed.partial.tool_calls == []
    assert failed.partial.metadata["partial_tool_calls"] == [{"id": "c2", "name": "find", "raw_arguments": '{"q": "ab'}]


def test_usage_sent_before_a_failure_is_the_partial_s_priced_and_spent(monkeypatch: pytest.MonkeyPatch,
                                                                       spent: pricing.Ledger) -> None:
    billed = [ndjson({"model": "m-1"}, {"text": "Hel"}, {"usage": [7, 2]}), httpx2.ReadError("reset")]
    failed = run_turn(Toy("m", transport=Scripted((200, NDJSON, billed))))[-1]
    usage = Usage(input_tokens=7, output_tokens=2)
    assert failed.type == "model_failed" and failed.partial.text == "Hel" and failed.partial.usage == usage
    assert failed.metadata["cost"] == failed.partial.metadata["cost"] == pricing.Cost(0.25, 0.5).to_dict()
    spent.record_turn(failed.metadata, failed.partial.usage)
    assert failed.metadata["model"] == "m-1" and spent.turns == [("toy", "m-1", 0.75, 7, 2)]
    replay = Scripted((200, NDJSON, billed))
    replay.replays = True  # type: ignore[attr-defined]
    replayed = run_turn(Toy("m", transport=replay))[-1]
    spent.record_turn(replayed.metadata, replayed.partial.usage)
    assert replayed.partial.usage == usage and len(spent.turns) == 1  # a replay spends nothing
    unbilled = run_turn(Toy("m", transport=Scripted((200, NDJSON, [ndjson({"text": "Hel"}), httpx2.ReadError("x")]))))[
        -1
    ]
    spent.record_turn(unbilled.metadata, unbilled.partial.usage)
    assert unbilled.partial.usage is None and "cost" not in unbilled.metadata and len(spent.turns) == 1
    monkeypatch.setattr(Toy, "price", lambda self, usage, model=None: None)  # a model without a known price
    unpriced = run_turn(Toy("m", transport=Scripted((200, NDJSON, billed))))[-1]
    assert unpriced.partial.usage == usage and unpriced.metadata["cost"] is None and "cost" in unpriced.metadata
    spent.record_turn(unpriced.metadata, unpriced.partial.usage)
    assert spent.turns[-1] == ("toy", "m-1", None, 7, 2)


def test_the_first_price_is_looked_up_off_the_loop_then_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    threads: list[tuple[str, Any, Any]] = []

    def price(self: Toy, usage: Usage, model: str | None = None) -> None:
        threads.append((threading.current_thread().name, usage, model))

    monkeypatch.setattr(Toy, "price", price)
    for loaded in (False, True):
        monkeypatch.setattr(pricing, "loaded", lambda loaded=loaded: loaded)
        done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"model": "m-1"}, *TEXT)))))[-1]
        assert done.metadata["cost"] is None and "cost" in done.metadata
    usage = Usage(input_tokens=7, output_tokens=2)
    assert threads[0][0].startswith("ipyagent-price") and threads[1][0] == "MainThread"
    assert threads[0][1:] == threads[1][1:] == (usage, "m-1")


def test_the_message_has_its_own_copy_of_the_metadata() -> None:
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))))[-1]
    assert done.message.metadata == done.metadata and done.message.metadata is not done.metadata
    assert done.message.usage == done.usage


def test_settings_and_system_blocks_travel_in_the_metadata() -> None:
    from ipyagent.core import ModelSettings, SystemBlock

    stack = hi_stack()
    stack.settings = ModelSettings(temperature=0.2)
    stack.system_blocks = [SystemBlock(text="be brief", source="user")]
    stack.system_dropped = [SystemBlock(text="old notes", source="memory", dynamic=True)]
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))), stack)[-1]
    assert done.metadata["settings"] == {"temperature": 0.2}
    assert done.metadata["system_blocks"] == [
        stack.system_blocks[0].summary(True),
        stack.system_dropped[0].summary(False),
    ]
    assert [b["kept"] for b in done.metadata["system_blocks"]] == [True, False]
    dropped_only = hi_stack()
    dropped_only.system_dropped = stack.system_dropped
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))), dropped_only)[-1]
    assert done.metadata["system_blocks"] == [stack.system_dropped[0].summary(False)]
    plain = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))))[-1]
    assert "settings" not in plain.metadata and "system_blocks" not in plain.metadata


# -- sending: the deadline, the rate gate, reading up to the first delta ----------------------------


def _virtual(monkeypatch: pytest.MonkeyPatch, driver: BasePromptDriver, stack: PromptStack | None = None,
             on_event: Any = None) -> list[Any]:
    """The turn's events, run on a virtual clock (pauses take no time; `time.monotonic` follows)."""
    from ipyagent.drivers import turn as _turn

    from ..support.virtual_clock import run_virtual

    async def main() -> list[Any]:
        events = []
        try:
            async for event in driver.stream(stack or hi_stack()):
                events.append(event)
                if on_event is not None:
                    on_event(event)
        finally:
            await driver.close()
        return events

    return run_virtual(main, monkeypatch, base, _turn)


class Slow(httpx2.AsyncBaseTransport):
    """Answers after `wait` seconds (on the loop's clock) with `reply`."""

    def __init__(self, wait: float, reply: tuple[int, dict[str, str], Any]) -> None:
        self.wait, self.inner = wait, Scripted(reply)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(self.wait)
        return await self.inner.handle_async_request(request)


def test_first_token_and_total_latency_are_measured_from_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = Toy("m", transport=Slow(1.5, (200, NDJSON, [ndjson({"text": "a"}), 2.0, ndjson({"stop": "end_turn"})])))
    done = _virtual(monkeypatch, driver)[-1]
    assert done.metadata["ttft_s"] == 1.5 and done.metadata["latency_s"] == 3.5


def test_a_server_that_never_answers_is_cut_at_the_response_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = Toy("m", response_timeout=20, max_attempts=3, transport=Slow(3600, (200, NDJSON, ndjson(*TEXT))))
    failed = _virtual(monkeypatch, driver)[-1]
    assert_error(
        failed.error,
        "timeout",
        "toy did not finish its response within 20 s (response_timeout); the text so far is kept",
        retryable=False,
    )
    assert failed.metadata["attempts"] == 1 and failed.metadata["latency_s"] == 20


def test_an_error_body_that_never_ends_is_cut_at_the_response_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = Toy("m", response_timeout=20, transport=Scripted((500, JSON, [b'{"message": ', 3600, b'"x"}'])))
    failed = _virtual(monkeypatch, driver)[-1]
    assert failed.error.type == "timeout" and failed.metadata["latency_s"] == 20


def test_a_trickling_stream_is_cut_at_the_deadline_with_its_text_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = [ndjson({"text": "a"}), 15, ndjson({"text": "b"}), 15, ndjson({"stop": "end_turn"})]
    failed = _virtual(monkeypatch, Toy("m", response_timeout=20, transport=Scripted((200, NDJSON, pieces))))[-1]
    assert failed.error.type == "timeout" and failed.partial.text == "ab" and failed.metadata["latency_s"] == 20


def test_deltas_are_relayed_before_the_body_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    more = asyncio.Event()
    seen: list[str] = []

    def on_event(event: Any) -> None:
        seen.append(event.type)
        if event.type == "text_delta":
            more.set()  # the rest of the body comes only once the first delta is out

    transport = Scripted((200, NDJSON, [ndjson({"text": "a"}), more, ndjson({"stop": "end_turn"})]))
    events = _virtual(monkeypatch, Toy("m", transport=transport, response_timeout=60), on_event=on_event)
    assert [e.type for e in events] == ["model_started", "text_delta", "model_completed"]


def test_the_wait_before_a_retry_is_slept_once(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = Scripted((429, {"retry-after": "2", **JSON}, b"{}"), (200, NDJSON, ndjson(*TEXT)))
    done = _virtual(monkeypatch, Toy("m", api_key="k-1", transport=transport))[-1]
    assert (
        done.metadata["retry_waits"] == [2.0] and done.metadata["latency_s"] == 2.0
    )  # not 4: tenacity does not sleep too


def test_a_connection_that_fails_before_the_first_delta_is_tried_again(no_sleep: list[float]) -> None:
    transport = Scripted(
        (200, NDJSON, [ndjson({"model": "m-1"}), httpx2.ReadError("reset")]), (200, NDJSON, ndjson(*TEXT))
    )
    events = run_turn(Toy("m", transport=transport))
    assert events[-1].type == "model_completed" and len(transport.requests) == 2
    assert events[-1].metadata["last_error"] == "connection to http://toy.invalid/v1/chat failed: ReadError: reset"
    assert events[1].error.message == events[-1].metadata["last_error"]  # the RetryScheduled notice


def test_a_read_timeout_says_whether_the_answer_had_begun(no_sleep: list[float]) -> None:
    stalled = Scripted((200, NDJSON, [ndjson({"text": "Hel"}), httpx2.ReadTimeout("idle")]))
    failed = run_turn(Toy("m", read_timeout=7.5, transport=stalled))[-1]
    assert_error(failed.error, "timeout", "toy began its answer, then sent nothing for 7.5 s (read_timeout); "
                 "the text so far is kept (http://toy.invalid/v1/chat)", retryable=True)
    assert failed.partial.text == "Hel" and len(stalled.requests) == 1
    silent = Scripted((200, NDJSON, [ndjson({"model": "m-1"}), httpx2.ReadTimeout("idle")]))
    failed = run_turn(Toy("m", read_timeout=7.5, max_attempts=1, transport=silent))[-1]  # no delta yet
    assert_error(failed.error, "timeout", "toy did not answer within 7.5 s (http://toy.invalid/v1/chat)",
                 retryable=True)


def test_a_refused_connection_names_the_url() -> None:
    class Down(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            raise httpx2.ConnectError("refused")

    failed = run_turn(Toy("m", max_attempts=1, transport=Down()))[-1]
    assert_error(failed.error, "connection", "could not connect to http://toy.invalid/v1/chat: refused "
                 "(check the base URL http://toy.invalid/v1: is a server listening there? --base-url sets it)",
                 retryable=True)


class Gate:
    """A lane's shared back-off, as the evaluation scheduler's `RateGate` is used."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    async def wait(self) -> None:
        self.log.append("wait")

    def hold(self, seconds: float | None) -> None:
        self.log.append(("hold", seconds))


def test_after_a_retry_an_error_that_is_not_retried_ends_the_turn(no_sleep: list[float]) -> None:
    for second in [
        (400, JSON, b"{}"),
        (429, {"retry-after": "31", **JSON}, b"{}"),
    ]:  # a refusal; a wait over max_retry_wait
        transport = Scripted((503, JSON, b"{}"), second, (200, NDJSON, ndjson(*TEXT)))
        failed = run_turn(Toy("m", api_key="k-1", max_attempts=3, max_retry_wait=30, transport=transport))[-1]
        assert failed.type == "model_failed" and len(transport.requests) == 2 and failed.error.status == second[0]
        assert failed.error.message.endswith(
            "HTTP 400: HTTP 400 from http://toy.invalid/v1"
            if second[0] == 400
            else "(asked to wait 31 s, more than max_retry_wait=30 s: not retried; try again later)"
        )


def test_a_wait_over_max_retry_wait_is_said_at_the_first_try_too(no_sleep: list[float]) -> None:
    transport = Scripted((429, {"retry-after": "45", **JSON}, b"{}"))
    failed = run_turn(Toy("m", api_key="k-1", max_retry_wait=30, transport=transport))[-1]
    assert failed.error.message == ("toy returned HTTP 429: HTTP 429 from http://toy.invalid/v1 (asked to wait 45 s, "
                                    "more than max_retry_wait=30 s: not retried; try again later)")
    assert len(transport.requests) == 1 and no_sleep == []
    at_limit = Scripted((429, {"retry-after": "30", **JSON}, b"{}"))
    failed = run_turn(Toy("m", api_key="k-1", max_attempts=2, max_retry_wait=30, transport=at_limit))[-1]
    assert failed.error.message.endswith("(gave up after 2 attempts)") and no_sleep == [30]


def test_a_rate_limit_holds_the_whole_lane_and_every_try_waits_for_it(no_sleep: list[float]) -> None:
    gate = Gate()
    driver = Toy("m", api_key="k-1", transport=Scripted((429, {"retry-after": "3", **JSON}, b"{}"), (500, JSON, b"{}"),
                                                        (200, NDJSON, ndjson(*TEXT))))
    driver.rate_gate = gate
    assert run_turn(driver)[-1].type == "model_completed"
    assert gate.log == ["wait", ("hold", 3.0), "wait", "wait"]  # a 500 holds nobody
    alone = Toy(
        "m", api_key="k-1", transport=Scripted((429, {"retry-after": "3", **JSON}, b"{}"), (200, NDJSON, ndjson(*TEXT)))
    )
    assert run_turn(alone)[-1].type == "model_completed"  # no gate: each request alone


# -- replies labelled otherwise: a whole JSON object, an unlabelled stream, an error page ---------


class Whole(Toy):
    """Reads a whole JSON reply ``{"say": TEXT}`` (a proxy that ignored ``stream: true``)."""

    def whole(self, data: dict[str, Any]) -> Any:
        return [TextDelta(0, data["say"]), StreamMeta(stop_kind=StopKind.end_turn, stop_raw="whole")]


@pytest.mark.parametrize(
    "content_type", ["application/x-ndjson", "application/x-ndjson; charset=utf-8", "Application/X-NDJSON"]
)
def test_a_reply_labelled_as_the_stream_goes_to_the_parser_as_it_is(content_type: str) -> None:
    transport = Scripted((200, {"content-type": content_type, "x-seen": "1"}, [ndjson(*TEXT[:2]), ndjson(*TEXT[2:])]))
    driver = Toy("m", transport=transport)
    assert run_turn(driver)[-1].message.text == "Hello"
    assert driver.seen.headers["content-type"] == content_type and driver.seen.headers["x-seen"] == "1"


def test_a_driver_that_names_no_stream_type_parses_every_reply() -> None:
    class Any_(Toy):
        stream_types = ()

    driver = Any_("m", transport=Scripted((200, {"content-type": "text/html"}, ndjson(*TEXT))))
    assert run_turn(driver)[-1].message.text == "Hello" and driver.seen.headers["content-type"] == "text/html"


def test_one_whole_json_reply_is_read_whole_however_it_is_cut() -> None:
    pieces = [b"  \n", b'{"sa', b'y": "all ', b'at once"}']
    done = run_turn(Whole("m", transport=Scripted((200, JSON, pieces))))[-1]
    assert done.type == "model_completed" and done.message.text == "all at once" and done.stop_reason.raw == "whole"


def test_several_json_objects_are_read_as_the_stream() -> None:
    driver = Whole("m", transport=Scripted((200, JSON, [ndjson(*TEXT[:1]), ndjson(*TEXT[1:])])))
    done = run_turn(driver)[-1]
    assert done.message.text == "Hello" and driver.seen.headers["content-type"] == "application/x-ndjson"


@pytest.mark.parametrize(
    "start", [b"data: ", b"event: message\ndata: ", b"id: 1\ndata: ", b"retry: 10\ndata: ", b": ping\ndata: ", b"[\n"]
)
def test_a_stream_labelled_otherwise_is_read_as_the_stream(start: bytes) -> None:
    body = start + ndjson(*TEXT[:1]) + ndjson(*TEXT[1:])
    transport = Scripted((200, {"content-type": "text/plain", "content-length": str(len(body)), "x-request-id": "r-9"},
                          [body[:len(start) + 3], body[len(start) + 3:]]))
    driver = Toy("m", transport=transport)
    done = run_turn(driver)[-1]
    assert done.message.text == "Hello" and done.metadata["request_id"] == "r-9"
    seen = driver.seen
    assert seen.headers.get_list("content-type") == ["application/x-ndjson"] and "content-length" not in seen.headers
    assert seen.headers["x-request-id"] == "r-9" and seen.status_code == 200 and seen.request is transport.requests[0]


def test_an_empty_reply_is_said_to_be_empty() -> None:
    failed = run_turn(Toy("m", transport=Scripted((200, {"content-type": "text/plain"}, [b"", b"  "]))))[-1]
    assert_error(failed.error, "invalid_response",
                 "toy answered HTTP 200 (content type 'text/plain') with a body that is not its stream: an empty body",
                 retryable=False)


@pytest.mark.parametrize(
    "headers, shown", [({"content-type": "text/html; charset=utf-8"}, "'text/html'"), ({}, "'none'")]
)
def test_a_reply_that_is_neither_stream_nor_json_is_shown_in_one_line(headers: dict[str, str], shown: str) -> None:
    page = b"<html>Sign in to the proxy \xff with key sk-toy-page-0123456789abcdef\n\n" + b"." * 300
    driver = Toy("m", api_key="sk-toy-page-0123456789abcdef", transport=Scripted((200, headers, [page, b"more"])))
    failed = run_turn(driver)[-1]
    line = " ".join(page.decode("utf-8", "replace").replace("sk-toy-page-0123456789abcdef", "[redacted]").split())
    quoted = line[:299] + "…"  # redacted, one line, then cut to 300 characters
    assert_error(failed.error, "invalid_response",
                 f"toy answered HTTP 200 (content type {shown}) with a body that is not its stream: {quoted!r}",
                 retryable=False)


def test_what_is_shown_of_such_a_reply_starts_at_its_first_non_blank_character() -> None:
    failed = run_turn(
        Toy("m", transport=Scripted((200, {"content-type": "text/html"}, [b"\n", b"  ", b"<p>oops</p>", b"more"])))
    )[-1]
    assert failed.error.message.endswith("with a body that is not its stream: '<p>oops</p>'")


def test_a_compressed_reply_labelled_otherwise_is_read_once_decompressed() -> None:
    import gzip

    body = gzip.compress(b"data: " + ndjson(*TEXT))
    headers = {"content-type": "text/plain", "content-encoding": "gzip", "content-length": str(len(body))}
    driver = Toy("m", transport=Scripted((200, headers, [body])))
    assert run_turn(driver)[-1].message.text == "Hello"
    assert "content-encoding" not in driver.seen.headers  # the replayed bytes are already decompressed


# -- the body drain: a finished reply's connection goes back to the pool ---------------------------


def _drained(pieces: list[Any], *, read: int = 1, deadline: float = 60.0, before: bool = False) -> tuple[bool, int]:
    """(what `drain` answered, pieces sent) for a body of which `read` pieces were read first."""
    async def main() -> tuple[bool, int]:
        body = Pieces(pieces)
        stream = http._Deadlined(body, asyncio.get_running_loop().time() + deadline)
        try:
            if not before:
                chunks = aiter(stream)
                for _ in range(read):
                    await anext(chunks)
            return await stream.drain(), body.sent
        finally:
            await stream.aclose()  # as the response's `aclose` does

    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_the_rest_of_a_body_is_read_up_to_64_kib() -> None:
    kib = 1024
    assert _drained([b"head", b"x" * 32 * kib, b"y" * 32 * kib]) == (True, 3)  # exactly DRAIN_BYTES: read to the end
    assert _drained([b"head", b"x" * 32 * kib, b"y" * (32 * kib + 1), b"z"]) == (
        False,
        3,
    )  # one byte more: closed instead
    assert _drained([b"head"]) == (True, 1)
    assert http.DRAIN_BYTES == 64 * kib and http.DRAIN_S == 0.5


def test_the_rest_of_a_body_is_read_for_half_a_second_and_never_past_the_deadline() -> None:
    assert _drained([b"head", 0.4, b"tail"]) == (True, 2)
    assert _drained([b"head", 0.3, b"a", 0.3, b"b"]) == (False, 2)  # 0.6 s in all
    assert _drained([b"head", 0.3, b"tail"], deadline=0.2) == (False, 1)


def test_a_body_that_breaks_or_was_never_read_is_not_drained() -> None:
    assert _drained([b"head", httpx2.ReadError("reset")]) == (False, 1)
    assert _drained([b"head", b"tail"], before=True) == (False, 0)


def test_a_reply_s_tail_after_its_stop_signal_is_read_so_the_connection_is_reused() -> None:
    transport = Scripted((200, NDJSON, [ndjson(*TEXT, {"end": 1}), b"trailing: ignored\n", b"more\n"]))
    done = run_turn(Toy("m", transport=transport))[-1]
    assert done.type == "model_completed" and transport.body.sent == 3 and transport.body.closed


def test_each_read_of_the_body_ends_by_the_deadline() -> None:
    async def main() -> list[bytes]:
        now = asyncio.get_running_loop().time()
        stream = http._Deadlined(Pieces([b"a", 5, b"b"]), now + 3)
        got = []
        with pytest.raises(TimeoutError):
            async for chunk in stream:
                got.append(chunk)
        assert asyncio.get_running_loop().time() == now + 3
        await stream.aclose()
        assert stream._chunks is None and stream.stream.closed
        return got

    loop = VirtualClockLoop()
    try:
        assert loop.run_until_complete(main()) == [b"a"]
    finally:
        loop.close()


# -- what a failed turn says -----------------------------------------------------------------------


@pytest.mark.parametrize("seconds, said", [
    (0.5, "0.5 s"), (31, "31 s"), (119.9, "119.9 s"), (120, "2 min"), (7199, "120 min"), (7200, "2 h"),
    (172_799, "48 h"), (172_800, "2 days"), (5e11, "5787037 days"), (1e7 * 86400 - 1, "10000000 days"),
    (1e7 * 86400, "over 10,000,000 days"), (1e300, "over 10,000,000 days"),
])
def test_a_wait_is_said_in_the_largest_unit_it_holds_twice(seconds: float, said: str) -> None:
    assert base.as_duration(seconds) == said


class Silent(StreamDecoder):
    """Reads every SSE event as nothing."""

    def feed(self, frame: Any) -> tuple[()]:
        return ()


class SSEToy(Toy):
    """The toy protocol's stream types, read as SSE events that carry nothing: what a page sent
    as the stream (no event at all) is told apart from a stream cut short."""

    framing = "sse"

    def decoder(self) -> Any:
        return Silent()


@pytest.mark.parametrize("body, quoted", [
    (b"504 Gateway Timeout", "'504 Gateway Timeout'"),
    (b"  \n<html><body><h1>502</h1> Bad gateway</body></html>", "'<html><body><h1>502</h1> Bad gateway</body></html>'"),
    (b"sk-" + b"k" * 5, "'[redacted]'"),  # the key: redacted
    (b"{}", "'{}'"), (b"[]", "'[]'"), (b"{malformed json: <<<chaos>>>", "'{malformed json: <<<chaos>>>'"),
    (b"", "an empty body"), (b"\n \n", "an empty body"),
    (b": ping\n\n", None), (b"data:\n\n", None), (b"event: x\n\n", None), (b"id: 1\n\n", None), (b"retry: 5\n\n", None),
    (b"\n\n: ping\n\n", None),  # SSE with no event: a stream that ended early
    (b"\xff\xfebad gateway", "'\ufffd\ufffdbad gateway'"),  # not UTF-8: shown as far as it reads
])
def test_a_reply_with_no_event_is_quoted_unless_it_looks_like_a_stream(body: bytes, quoted: str | None) -> None:
    failed = run_turn(SSEToy("m", api_key="sk-kkkkk", transport=Scripted((200, NDJSON, [body]))))[-1]
    message = failed.error.message
    assert failed.error.type == "invalid_response" and not failed.error.retryable
    if quoted is None:
        assert message == ("the toy stream ended before the model finished (no stop reason arrived); "
                           "the text so far is kept")
    else:
        assert message == ("toy answered HTTP 200 (content type 'application/x-ndjson') "
                           f"with a body that is not its stream: {quoted}")
        assert "sk-kkkkk" not in message


def test_a_reply_that_gave_a_delta_is_not_quoted_when_it_is_cut() -> None:
    class Echo(StreamDecoder):
        def feed(self, sse: Any) -> tuple[TextDelta, ...]:
            return (TextDelta(0, sse.data),) if sse.data else ()

    class Texting(SSEToy):
        def decoder(self) -> Any:
            return Echo()

    failed = run_turn(Texting("m", transport=Scripted((200, NDJSON, [b"junk first\ndata: partial\n\n"]))))[-1]
    assert failed.error.message.endswith("the text so far is kept") and failed.partial.text == "partial"


def test_a_usage_that_could_not_be_read_leaves_the_turn_unpriced_and_says_so(spent: pricing.Ledger) -> None:
    done = run_turn(
        Toy(
            "m",
            transport=Scripted(
                (200, NDJSON, ndjson({"text": "a"}, {"bad_usage": "input_tokens is 1.5"}, {"stop": "end_turn"}))
            ),
        )
    )[-1]
    assert done.type == "model_completed" and done.usage == Usage() and done.metadata["cost"] is None
    assert done.metadata["usage_error"] == ("toy sent a usage block ipyagent could not read (input_tokens is 1.5); "
                                            "this turn's usage and price are unknown")
    spent.record_turn(done.metadata, done.usage)
    assert spent.turns[-1][2] is None  # the ledger's turn is unpriced, not $0


def test_a_turn_whose_stream_names_no_model_is_the_model_asked_for() -> None:
    done = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))))[-1]
    assert done.metadata["model"] == "m" and done.message.metadata["model"] == "m"


def test_a_turn_failing_before_any_delta_keeps_an_empty_assistant_message() -> None:
    failed = run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson({"usage": [1, 0]})))))[-1]
    assert failed.type == "model_failed" and failed.partial.role == "assistant" and failed.partial.content == []
    assert failed.partial.status == "failed" and failed.partial.usage == Usage(input_tokens=1)


@pytest.mark.parametrize("raw, kept", [(None, None), ("stop", "stop"), ("", ""), (5, "5")])
def test_a_raw_stop_reason_is_kept_as_text(raw: Any, kept: str | None) -> None:
    meta = StreamMeta(stop_kind=StopKind.end_turn, stop_raw=raw)
    from ipyagent.core import Message

    assert turn.stop_reason(meta, Message(role="assistant")).raw == kept


def test_tenacity_is_set_up_only_for_a_try_that_failed_and_may_be_retried(monkeypatch: pytest.MonkeyPatch,
                                                                           no_sleep: list[float]) -> None:
    """Its retrier is a reference cycle that held each turn and its response until the garbage
    collector ran: a turn that answers, or fails without a retry to come, never builds one."""
    built: list[int] = []
    real = tenacity.AsyncRetrying
    # the turn imports its retrier from tenacity when a try has failed
    monkeypatch.setattr(tenacity, "AsyncRetrying", lambda *a, **kw: built.append(1) or real(*a, **kw))
    assert run_turn(Toy("m", transport=Scripted((200, NDJSON, ndjson(*TEXT)))))[-1].type == "model_completed"
    assert (
        run_turn(Toy("m", max_attempts=3, transport=Scripted((400, JSON, b"{}"))))[-1].error.type == "invalid_request"
    )
    assert run_turn(Toy("m", max_attempts=1, transport=Scripted((500, JSON, b"{}"))))[-1].error.type == "server"
    assert built == []
    assert run_turn(Toy("m", max_attempts=2, transport=Scripted((500, JSON, b"{}"), (200, NDJSON, ndjson(*TEXT)))))[
        -1
    ].type == "model_completed" and built == [1]
