"""The driver template's own decisions (`drivers/base.py`, DESIGN.md "drivers") outside a turn's
stream: defaults and option checks, the HTTP client, error types and texts, Retry-After and
backoff, what is retried, capability and settings checks, prices, model lists, closing. Issue 12:
each test fails when its decision flips (mutation testing, `make mutation`).

`tests/support/toy_driver.py`'s toy protocol keeps the template apart from any provider. No test sleeps:
retry waits are recorded (`no_sleep`), backoff jitter is pinned, waits run on a virtual clock."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from typing import Any

import httpx2
import pytest
from tenacity import RetryCallState

from ipyagent.core import PromptStack, ProviderError, StopKind, Usage, redact
from ipyagent.drivers import StreamMeta, http, turn
from ipyagent.drivers.catalog import models, pricing
from ipyagent.drivers.base import BasePromptDriver, Capabilities, error_excerpt, parse_retry_after

from ..support.toy_driver import JSON, NDJSON, Coded, Scripted, Toy, assert_error, hi_stack, ndjson, run_turn
from ..support.virtual_clock import VirtualClockLoop


# -- construction: defaults and option checks ----------------------------------------------------


def test_defaults_documented_in_the_signature() -> None:
    driver = Toy("m")
    assert (driver.read_timeout, driver.response_timeout, driver.max_attempts, driver.max_retry_wait) == (
        60.0,
        300.0,
        3,
        30.0,
    )
    assert driver.price_known is True and driver.price_as is None and driver.provider_options == {}
    assert (driver.provider, driver.model, driver.base_url, driver.id) == ("toy", "m", "http://toy.invalid/v1", "toy:m")
    assert driver.transport is None and driver._client is None


def test_given_values_are_kept_and_the_url_loses_its_trailing_slash() -> None:
    transport = Scripted()
    driver = Toy("m", provider="groq", base_url="http://h:1/api//", read_timeout=5, response_timeout=9, max_attempts=5,
                 max_retry_wait=2.5, transport=transport, provider_options={"temperature_name": "t"}, price_known=False)
    assert (driver.provider, driver.base_url, driver.read_timeout, driver.response_timeout) == (
        "groq",
        "http://h:1/api",
        5,
        9,
    )
    assert (driver.max_attempts, driver.max_retry_wait, driver.transport, driver.price_known) == (
        5,
        2.5,
        transport,
        False,
    )
    assert driver.provider_options == {"temperature_name": "t"}
    assert Toy("m", base_url="http://h/XX/").base_url == "http://h/XX"  # only the slash goes


@pytest.mark.parametrize("given, kept", [(0, 1), (-3, 1), (1, 1), (2, 2)])
def test_max_attempts_is_at_least_one(given: int, kept: int) -> None:
    assert Toy("m", max_attempts=given).max_attempts == kept


def test_price_as_must_name_provider_and_model() -> None:
    with pytest.raises(ProviderError) as raised:
        Toy("m", price_as="gpt-4.1")
    assert_error(
        raised.value,
        "invalid_request",
        "price_as takes PROVIDER:MODEL (openai:gpt-6-luna), not 'gpt-4.1'",
        retryable=False,
    )
    assert Toy("m", price_as="openai:gpt-4.1").price_as == "openai:gpt-4.1"


def test_unknown_provider_options_are_named_with_the_known_ones() -> None:
    with pytest.raises(ProviderError) as raised:
        Toy("m", provider_options={"temperature_name": 1, "zeta": 2, "alpha": 3})
    assert_error(
        raised.value,
        "invalid_request",
        "unknown provider option(s) ['alpha', 'zeta'] for toy; known: ['temperature_name']",
        retryable=False,
    )


def test_the_key_is_stripped_sent_as_bearer_and_known_to_the_redactor() -> None:
    key = "sk-toy-7f3a9c1e55d04b2a"
    driver = Toy("m", api_key=f" {key}\n")
    assert driver.headers() == {"Accept": "application/x-ndjson", "Authorization": f"Bearer {key}"}
    assert key not in redact(f"echoed {key}")
    assert Toy("m").headers() == {"Accept": "application/x-ndjson"}  # no key: no Authorization header
    assert Toy("m", api_key="").headers() == {"Accept": "application/x-ndjson"}


def test_credentials_in_the_base_url_are_known_to_the_redactor() -> None:
    driver = Toy("m", base_url="http://user:pw-5c2e8b17d3@proxy.invalid/v1")
    assert repr(driver) == "<Toy toy:m at http://[redacted]@proxy.invalid/v1>"
    # outside a URL too
    assert redact("the proxy said: bad password pw-5c2e8b17d3") == "the proxy said: bad password [redacted]"
    assert repr(Toy("m", base_url="http://h/v1")) == "<Toy toy:m at http://h/v1>"


# -- the HTTP client ------------------------------------------------------------------------------


def test_one_client_per_driver_with_its_timeouts_and_no_environment_proxy() -> None:
    async def main() -> None:
        driver = Toy("m", read_timeout=30)
        client = driver._client_for()
        assert driver._client_for() is client and driver in http._OPEN
        assert client.timeout == httpx2.Timeout(30, connect=10.0)  # connecting takes at most 10 s
        assert client.trust_env is False  # HTTP(S)_PROXY of the kernel's environment are not used
        quick = Toy("m", read_timeout=4)._client_for()
        # one TLS context for every driver (CA bundle read once)
        assert client._transport._pool._ssl_context is http._tls_context()
        assert quick.timeout == httpx2.Timeout(4, connect=4)
        await driver.close()
        assert driver._client is None and driver not in http._OPEN
        await driver.close()  # twice is fine
        await quick.aclose()

    asyncio.run(main())


def test_a_request_is_built_without_the_client_while_its_cookie_jar_is_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client's headers are merged with the driver's once, and each request is built directly:
    the same request `build_request` gives. Once the provider sets a cookie, the client builds
    each request again, so the cookie is sent as it always was."""
    body = ndjson({"text": "hi"}, {"stop": "end_turn"})
    transport = Scripted((200, NDJSON, body), (200, {**NDJSON, "set-cookie": "__cf_bm=c00k1e; Path=/"}, body))
    driver = Toy("m", api_key="sk-toy-0b6e44", transport=transport)
    built: list[httpx2.Request] = []

    async def main() -> None:
        client = driver._client_for()
        monkeypatch.setattr(client, "build_request", lambda *a, **k: built.append(
            httpx2.AsyncClient.build_request(client, *a, **k)) or built[-1])
        for _ in range(3):
            [event async for event in driver.stream(hi_stack())]
        await driver.close()

    asyncio.run(main())
    first, second, third = transport.requests
    assert built == [third]  # the first two were built directly: no cookie yet when each was sent
    assert "cookie" not in first.headers and "cookie" not in second.headers
    assert third.headers["cookie"] == "__cf_bm=c00k1e"  # the second reply's
    expected = httpx2.AsyncClient(timeout=httpx2.Timeout(60, connect=10.0)).build_request(
        "POST", first.url, json=json.loads(first.content), headers=driver.headers())
    assert first.headers.multi_items() == expected.headers.multi_items()
    assert (first.method, first.url, first.content, first.extensions) == (
        expected.method, expected.url, expected.content, expected.extensions)
    assert first.extensions["timeout"] is not driver._sent_headers[3]  # each request its own, as the client gives


def test_close_all_drivers_counts_what_it_closed_and_forgets_what_cannot_close() -> None:
    class Stuck:
        async def aclose(self) -> None:
            raise RuntimeError("made on another loop")

    async def main() -> None:
        for driver in list(http._OPEN):
            await driver.close()
        one, two, bad = Toy("a"), Toy("b"), Toy("c")
        one._client_for(), two._client_for()
        bad._client = Stuck()  # type: ignore[assignment]
        http._OPEN.add(bad)
        assert await http.close_all_drivers() == 2
        assert bad._client is None and not http._OPEN
        assert await http.close_all_drivers() == 0

    asyncio.run(main())


# -- error types and texts ------------------------------------------------------------------------


def test_error_excerpt_is_one_line_of_at_most_300_characters() -> None:
    assert error_excerpt("<html><b>Bad</b>gateway\n\n <script>var x = 1;</script>  nginx</html>") == "Bad gateway nginx"
    exact = "x" * 300
    assert error_excerpt(exact) == exact
    assert error_excerpt("y" * 301) == "y" * 299 + "…"


def test_transport_errors_are_typed_and_say_where() -> None:
    key = "sk-url-9d1f0e2a7b"
    driver = Toy("m", read_timeout=7.5, api_key=key)
    url = f"http://h/chat?key={key}"
    sse = driver._transport_error(httpx2.SSEError("event over 1 MB"), url)
    assert_error(sse, "invalid_response", "toy sent a stream ipyagent cannot read: event over 1 MB "
        "(not retried: the same request would get the same reply)", retryable=False)
    assert_error(driver._transport_error(httpx2.ReadTimeout("slow"), url), "timeout",
        f"toy did not answer within 7.5 s ({redact(url)})", retryable=True)
    assert_error(driver._as_provider_error(httpx2.ReadTimeout("idle"), url, answering=True), "timeout",
        f"toy began its answer, then sent nothing for 7.5 s (read_timeout); the text so far is kept ({redact(url)})",
        retryable=True)
    assert key not in redact(url)
    assert_error(driver._transport_error(httpx2.ConnectError(""), "http://h"), "connection",
        "could not connect to http://h: connection refused "
        "(check the base URL http://toy.invalid/v1: is a server listening there? --base-url sets it)", retryable=True)
    assert_error(driver._transport_error(httpx2.ConnectError("no route"), "http://h"), "connection",
        "could not connect to http://h: no route "
        "(check the base URL http://toy.invalid/v1: is a server listening there? --base-url sets it)", retryable=True)
    assert_error(driver._transport_error(httpx2.RemoteProtocolError("eof"), "http://h"), "connection",
        "connection to http://h failed: RemoteProtocolError: eof", retryable=True)


def test_any_failure_reads_as_the_provider_error_it_means() -> None:
    driver = Toy("m", response_timeout=2.5)
    same = ProviderError("server", "x")
    assert driver._as_provider_error(same, "http://h") is same
    assert_error(driver._as_provider_error(TimeoutError(), "http://h"), "timeout",
        "toy did not finish its response within 2.5 s (response_timeout); the text so far is kept", retryable=False)
    assert_error(driver._as_provider_error(httpx2.ConnectError("down"), "http://h"), "connection",
        "could not connect to http://h: down "
        "(check the base URL http://toy.invalid/v1: is a server listening there? --base-url sets it)", retryable=True)
    assert_error(driver._as_provider_error(KeyError("choices"), "http://h"), "invalid_response",
        "toy sent a reply ipyagent could not read (KeyError: 'choices')", retryable=False)
    long = driver._as_provider_error(ValueError("v" * 400), "http://h")
    # the detail: 300 characters
    assert long.message == f"toy sent a reply ipyagent could not read (ValueError: {'v' * 288})"


def test_a_whole_json_reply_is_not_readable_by_default() -> None:
    body = json.dumps({"answer": "a" * 300}).encode()
    failed = run_turn(Toy("m", transport=Scripted((200, JSON, body))))[-1]
    shown = json.dumps({"answer": "a" * 300})[:299] + "…"  # 300 characters
    assert_error(failed.error, "invalid_response", "toy answered HTTP 200 (content type 'application/json') "
                 f"with a body that is not its stream: {shown!r}", retryable=False)


def test_a_stream_line_that_is_not_json_is_quoted_up_to_200_characters() -> None:
    line = "<" + "z" * 300
    with pytest.raises(ProviderError) as raised:
        Toy("m").stream_json(line)
    assert_error(
        raised.value, "invalid_response", f"toy sent a stream line that is not JSON: {line[:200]!r}", retryable=False
    )
    assert Toy("m").stream_json('{"a": [1]}') == {"a": [1]}


def test_an_error_body_s_text_is_its_message_by_default() -> None:
    driver = Toy("m")
    assert driver.parse_error_body(502, "Bad gateway") == (None, "Bad gateway", None)
    assert driver.parse_error_body(502, "") == (None, None, None)
    assert driver.parse_error_body(500, {"error": "x"}) == (None, None, None)


# -- retry rules ----------------------------------------------------------------------------------


def _state(attempt: int, error: BaseException | None = None) -> RetryCallState:
    state = RetryCallState(None, None, (), {})
    state.attempt_number = attempt
    if error is not None:
        state.set_exception((type(error), error, None))
    return state


@pytest.mark.parametrize(
    "jitter, waits", [("none", [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]), ("full", [1.0, 1.5, 2.5, 4.5, 8.0, 8.0])]
)
def test_backoff_doubles_from_half_a_second_with_half_a_second_of_jitter_up_to_8(
    monkeypatch: pytest.MonkeyPatch, jitter: str, waits: list[float]
) -> None:
    import tenacity.wait

    monkeypatch.setattr(tenacity.wait.random, "uniform", (lambda a, b: a) if jitter == "none" else (lambda a, b: b))
    driver = Toy("m")
    assert [driver._wait(_state(n)) for n in range(1, 7)] == waits
    assert Toy("m", max_retry_wait=3)._wait(_state(4)) == 3  # never over max_retry_wait
    server = ProviderError("server", "x")
    assert driver._wait(_state(1, server)) == waits[0]  # an error without Retry-After: the backoff


def test_retry_after_replaces_the_backoff_within_max_retry_wait() -> None:
    driver = Toy("m", max_retry_wait=30)
    assert driver._wait(_state(1, ProviderError("rate_limit", "x", retry_after=4.0))) == 4.0
    assert driver._wait(_state(3, ProviderError("rate_limit", "x", retry_after=0.0))) == 0.0
    assert driver._wait(_state(1, ProviderError("rate_limit", "x", retry_after=45.0))) == 30


def test_what_is_retried() -> None:
    driver = Toy("m", max_retry_wait=30)
    assert driver._retryable(ProviderError("server", "x"))
    assert driver._retryable(ProviderError("rate_limit", "x", retry_after=30.0))  # at the limit: waited
    assert not driver._retryable(ProviderError("rate_limit", "x", retry_after=30.5))  # beyond: reported at once
    assert not driver._retryable(ProviderError("invalid_request", "x"))
    assert not driver._retryable(ProviderError("server", "x", retryable=False))
    assert not driver._retryable(ValueError("not a provider error"))


def test_retry_after_milliseconds_seconds_and_dates() -> None:
    def parsed(**headers: str) -> float | None:
        return parse_retry_after(httpx2.Headers({k.replace("_", "-"): v for k, v in headers.items()}))

    assert parsed(retry_after_ms="500") == 0.5  # under a second
    assert parsed(retry_after_ms="0", retry_after="3") == 3.0  # 0 ms is no answer: the seconds header counts
    assert parsed(retry_after_ms="soon", retry_after="3") == 3.0
    assert parsed(retry_after="-4") == 0.0 and parsed(retry_after="0") == 0.0 and parsed(retry_after="2.5") == 2.5
    assert parsed(retry_after="") is None and parsed() is None
    past = email.utils.formatdate(time.time() - 600, usegmt=True)
    assert parsed(retry_after=past) == 0.0


def test_the_wait_between_tries_is_slept_on_the_loop() -> None:
    loop = VirtualClockLoop()
    try:
        start = loop.time()
        loop.run_until_complete(turn.retry_sleep(7.5))
        assert loop.time() - start == 7.5
    finally:
        loop.close()


# -- settings, strategies, prices -----------------------------------------------------------------


class ByModel(Toy):
    """Capabilities by model name: ``native-*`` has a JSON-schema mode, ``plain-*`` no tools."""

    def capabilities_for(self, model: str) -> Capabilities:
        if model.startswith("native"):
            return Capabilities(tools=True, structured_output_native=True)
        if model.startswith("plain"):
            return Capabilities(tools=False)
        return Capabilities(tools=True)


def test_the_default_output_strategy_follows_the_model_s_capabilities() -> None:
    assert [ByModel(m).default_output_strategy() for m in ("native-1", "tools-1", "plain-1")] == [
        "native",
        "tool",
        "rule",
    ]


def test_the_output_strategy_of_a_request() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    stack = hi_stack()
    assert ByModel("native-1").output_strategy(stack) is None  # no schema, no strategy
    stack.output_schema = Answer
    assert ByModel("native-1").output_strategy(stack) == "native"
    stack.output_strategy = "rule"
    assert ByModel("native-1").output_strategy(stack) == "rule"
    stack.output_strategy = "json"
    with pytest.raises(ProviderError) as raised:
        ByModel("native-1").output_strategy(stack)
    assert_error(
        raised.value, "invalid_request", "output strategy 'json' is not one of native, tool, rule", retryable=False
    )


def test_a_setting_given_also_as_a_provider_option_must_agree() -> None:
    driver = Toy("m", provider_options={"temperature_name": 0.5})
    body: dict[str, Any] = {}
    driver.put_settings(body, {"temperature_name": 0.5, "top_p": 1})
    assert body == {"temperature_name": 0.5, "top_p": 1}
    with pytest.raises(ProviderError) as raised:
        driver.put_settings(body, {"temperature_name": 0.7})
    assert_error(
        raised.value,
        "invalid_request",
        "temperature_name is set both by a setting (0.7) and by provider_options (0.5); keep one",
        retryable=False,
    )
    nested: dict[str, Any] = {}
    driver.put_settings(nested, {"temperature_name": 0.7}, options={"seed": 1})  # other options: no conflict
    assert nested == {"temperature_name": 0.7}
    with pytest.raises(ProviderError):
        driver.put_settings(nested, {"seed": 2}, options={"seed": 1})


def test_an_unsupported_setting_names_provider_model_and_why() -> None:
    error = Toy("m", provider="groq").unsupported("seed", "the model ignores it")
    assert_error(
        error,
        "unsupported_capability",
        "groq model m does not support the setting seed: the model ignores it; remove it or choose another model",
        retryable=False,
    )
    assert error.code == "seed"
    assert_error(Toy("m").unsupported("stop"), "unsupported_capability",
        "toy model m does not support the setting stop; remove it or choose another model", retryable=False)


def test_prices_come_from_the_own_provider_price_as_or_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def price(provider: str, model: str, usage: Usage, price_provider: str | None = "unset",
              batch: bool = False) -> str:
        calls.append((provider, model, usage, price_provider) + (("batch",) if batch else ()))
        return "cost"

    monkeypatch.setattr(pricing, "price", price)
    usage = Usage(input_tokens=10, output_tokens=2)
    assert Toy("m", provider="groq").price(usage, "m-2024") == "cost"
    assert Toy("m", provider="groq").price(usage) == "cost"
    routed = Toy("m", provider="openrouter")
    routed.price_provider = "openrouter-prices"  # type: ignore[attr-defined]
    assert routed.price(usage) == "cost"
    assert Toy("m", price_as="openai:gpt-4.1:ft", price_known=False).price(usage) == "cost"
    assert Toy("m", price_known=False).price(usage) is None
    assert calls == [
        ("groq", "m-2024", usage, None),
        ("groq", "m", usage, None),
        ("openrouter", "m", usage, "openrouter-prices"),
        ("openai", "gpt-4.1:ft", usage, "unset"),
    ]
    calls.clear()  # a turn of a batch API: its batch price, whichever price applies
    assert Toy("m", provider="groq").price(usage, batch=True) == "cost"
    assert Toy("m", price_as="openai:gpt-4.1", price_known=False).price(usage, batch=True) == "cost"
    assert calls == [("groq", "m", usage, None, "batch"), ("openai", "gpt-4.1", usage, "unset", "batch")]


def test_the_stop_reason_is_the_provider_s_or_read_from_the_message() -> None:
    from ipyagent.core import ActionCallBlock, Message, TextBlock, ToolAction

    text = Message(role="assistant", content=[TextBlock(text="hi")])
    calls = Message(role="assistant", content=[ActionCallBlock(action=ToolAction(tag="c", name="f", input={}))])
    given = StreamMeta(stop_kind=StopKind.max_tokens, stop_raw="length")
    assert (turn.stop_reason(given, calls).kind, turn.stop_reason(given, calls).raw) == (StopKind.max_tokens, "length")
    assert turn.stop_reason(StreamMeta(stop_raw="weird"), calls).kind is StopKind.tool_use
    assert turn.stop_reason(StreamMeta(stop_raw="weird"), text).kind is StopKind.end_turn
    assert turn.stop_reason(StreamMeta(stop_raw="weird"), text).raw == "weird"


# -- model lists ----------------------------------------------------------------------------------


class Paged(Toy):
    """A model list of numbered pages: ``{"ids": [...], "next": N or null}``."""

    models_params = {"limit": 2}

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        from ipyagent.drivers.catalog.models import ModelListing

        return [ModelListing(id=i) for i in data["ids"]], ({"page": data["next"]} if data["next"] is not None else None)


def _models(driver: BasePromptDriver, **kw: Any) -> list[Any]:
    async def main() -> list[Any]:
        try:
            return await driver.list_models(**kw)
        finally:
            await driver.close()

    return asyncio.run(main())



def test_model_lists_are_asked_as_json_and_followed_page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(models, "with_known_facts", lambda rows, provider: seen.append(provider) or rows)
    pages = Scripted((200, JSON, b'{"ids": ["a", "b"], "next": 2}'), (200, JSON, b'{"ids": ["c"], "next": null}'))
    driver = Paged("m", provider="groq", transport=pages, api_key="sk-k")
    assert [row.id for row in _models(driver)] == ["a", "b", "c"]
    first, second = pages.requests
    assert str(first.url) == "http://toy.invalid/v1/models?limit=2" and str(second.url) == "http://toy.invalid/v1/models?limit=2&page=2"
    assert first.headers.get_list("accept") == ["application/json"] and first.headers["authorization"] == "Bearer sk-k"
    assert seen == ["groq"]  # genai-prices' provider for this provider id


def test_a_model_list_stops_after_max_pages() -> None:
    endless = Scripted((200, JSON, b'{"ids": ["x"], "next": 1}'))
    assert len(_models(Paged("m", transport=endless))) == 20 and len(endless.requests) == 20
    assert len(_models(Paged("m", transport=endless), max_pages=3)) == 3


def test_model_list_prices_come_from_the_driver_s_price_provider_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(models, "with_known_facts", lambda rows, provider: seen.append(provider) or rows)
    page = (200, JSON, b'{"ids": ["a"], "next": null}')
    plugin = Paged("m", provider="toy", transport=Scripted(page))
    plugin.price_provider = "toy-prices"  # type: ignore[attr-defined]
    _models(plugin)
    _models(Paged("m", provider="groq", transport=Scripted(page), price_known=False))  # another host: no prices
    _models(Paged("m", provider="toy", transport=Scripted(page)))
    assert seen == ["toy-prices", None, None]


@pytest.mark.parametrize("status", [404, 405])
def test_a_server_without_a_model_list_says_to_name_the_model(status: int) -> None:
    with pytest.raises(ProviderError) as raised:
        _models(Paged("m", base_url="http://u:pw-list-0a9e@h/v1", transport=Scripted((status, JSON, b"{}"))))
    assert_error(
        raised.value,
        "not_found",
        f"toy at http://[redacted]@h/v1 has no model list (GET /models answered HTTP {status}); "
        "name the model yourself",
        retryable=False,
    )
    assert raised.value.status == status


@pytest.mark.parametrize("status, etype", [(400, "invalid_request"), (401, "authentication"), (406, "invalid_request"),
                                           (500, "server")])
def test_other_model_list_errors_are_read_as_any_error_reply(status: int, etype: str) -> None:
    with pytest.raises(ProviderError) as raised:
        _models(Paged("m", api_key="k-1", transport=Scripted((status, JSON, b'{"ids": [], "next": null}'))))
    assert (raised.value.type, raised.value.status) == (etype, status)


@pytest.mark.parametrize("body", [b'["a"]', b"not json"])
def test_a_model_list_that_is_not_a_json_object(body: bytes) -> None:
    with pytest.raises(ProviderError) as raised:
        _models(Paged("m", base_url="http://u:list-pw-1@h/v1", transport=Scripted((200, JSON, body))))
    assert_error(
        raised.value,
        "invalid_response",
        "toy's model list at http://[redacted]@h/v1/models is not a JSON object",
        retryable=False,
    )


def test_a_model_list_that_cannot_connect() -> None:
    class Down(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            raise httpx2.ConnectError("down")

    with pytest.raises(ProviderError) as raised:
        _models(Paged("m", transport=Down()))
    assert_error(raised.value, "connection", "could not connect to http://toy.invalid/v1/models: down "
        "(check the base URL http://toy.invalid/v1: is a server listening there? --base-url sets it)", retryable=True)


# -- error replies --------------------------------------------------------------------------------



def test_an_error_reply_keeps_code_body_status_and_retry_after() -> None:
    body = {"code": "quota", "message": "m" * 400, "type": "rate_limit"}
    error = Coded("m", api_key="k-1").error_from_response(
        429, httpx2.Headers({"retry-after": "12"}), json.dumps(body).encode()
    )
    # a JSON message is not cut
    assert_error(error, "rate_limit", f"toy returned HTTP 429: {'m' * 400}", retryable=True)
    assert (error.code, error.raw, error.status, error.retry_after) == ("quota", body, 429, 12.0)
    typed = Coded("m", api_key="k-1").error_from_response(
        400, httpx2.Headers(), b'{"message": "busy", "type": "overloaded"}'
    )
    assert typed.type == "overloaded"  # the body's type before the status's


def test_a_text_error_reply_is_one_line_and_bytes_that_are_not_utf8_do_not_stop_it() -> None:
    error = Toy("m", api_key="k-1").error_from_response(
        502, httpx2.Headers(), b"<html><h1>502 Bad \xffGateway</h1>\n</html>\n"
    )
    assert_error(error, "server", "toy returned HTTP 502: 502 Bad \ufffdGateway", retryable=True)
    assert error.raw == "<html><h1>502 Bad \ufffdGateway</h1>\n</html>" and error.retry_after is None


def test_the_protocol_reads_an_error_body_knowing_its_status() -> None:
    class ByStatus(Toy):
        def parse_error_body(self, status: int, data: Any) -> tuple[Any, Any, Any]:
            return None, f"{data} (read as a {status})", None

    assert ByStatus("m", api_key="k-1").error_from_response(418, httpx2.Headers(), b"teapot").message == \
        "toy returned HTTP 418: teapot (read as a 418)"


def test_an_empty_error_reply_names_status_and_host() -> None:
    error = Toy("m", api_key="k-1", base_url="http://u:pw-empty-77@h/v1").error_from_response(
        500, httpx2.Headers(), b""
    )
    assert_error(error, "server", "toy returned HTTP 500: HTTP 500 from http://[redacted]@h/v1", retryable=True)


@pytest.mark.parametrize(
    "status, etype",
    [
        (400, "invalid_request"),
        (401, "authentication"),
        (403, "permission"),
        (404, "not_found"),
        (408, "timeout"),
        (409, "invalid_request"),
        (413, "invalid_request"),
        (418, "invalid_request"),
        (422, "invalid_request"),
        (429, "rate_limit"),
        (499, "invalid_request"),
        (500, "server"),
        (501, "server"),
        (503, "server"),
        (529, "overloaded"),
    ],
)
def test_the_status_gives_the_type_when_the_body_does_not(status: int, etype: str) -> None:
    assert Toy("m", api_key="k-1").error_from_response(status, httpx2.Headers(), b"no").type == etype


@pytest.mark.parametrize("status, hint", [(401, True), (403, True), (402, False), (404, False), (500, False)])
def test_a_refusal_without_a_key_says_how_to_give_one(status: int, hint: bool) -> None:
    without = Toy("m", base_url="http://h/v1").error_from_response(status, httpx2.Headers(), b"denied")
    tail = (" (no API key was sent to http://h/v1; name the variable holding one: --api-key-env VAR, "
            "or api_key_env= in Python)")
    model = " (check the model name 'm': %provider --models lists the models toy offers)"
    assert without.message == f"toy returned HTTP {status}: denied" + (tail if hint else model if status == 404 else "")
    with_key = Toy("m", api_key="k-1", base_url="http://h/v1").error_from_response(status, httpx2.Headers(), b"denied")
    given = " (check the API key given as api_key=)"
    expected = given if hint else model if status == 404 else ""
    assert with_key.message == f"toy returned HTTP {status}: denied" + expected


def test_a_refused_key_names_the_variable_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipyagent.drivers import create_driver

    monkeypatch.setenv("OPENAI_API_KEY", "sk-refused-0123456789")
    driver = create_driver("openai:gpt-4.1-mini")
    error = driver.error_from_response(401, httpx2.Headers(), b'{"error": {"message": "Incorrect API key provided"}}')
    assert error.message == "openai returned HTTP 401: Incorrect API key provided (check the API key in OPENAI_API_KEY)"
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-refused-0123456789")
    assert create_driver("gemini:gemini-2.5-flash").key_env == "GOOGLE_API_KEY"  # the fallback that held it


def test_a_404_names_the_model_and_where_its_list_is() -> None:
    own = Toy("gpt-4.1-mni", api_key="k-1", price_known=True).error_from_response(
        404, httpx2.Headers(), b"The model `gpt-4.1-mni` does not exist")
    assert own.message == ("toy returned HTTP 404: The model `gpt-4.1-mni` does not exist "
                           "(check the model name 'gpt-4.1-mni': %provider --models lists the models toy offers)")
    other = Toy("m", base_url="http://h/v1", price_known=False).error_from_response(404, httpx2.Headers(), b"Not Found")
    assert other.message == ("toy returned HTTP 404: Not Found (check the model name 'm': %provider --models lists "
                             "the models toy offers; and the base URL http://h/v1)")  # a path the server does not have


# -- capability and settings checks, before anything is sent --------------------------------------


def _refused(driver: BasePromptDriver, stack: PromptStack) -> ProviderError:
    with pytest.raises(ProviderError) as raised:
        driver.check_capabilities(stack)
    return raised.value


def test_a_request_needing_what_the_model_lacks_fails_naming_it() -> None:
    from ipyagent.core import DocumentBlock, ImageBlock, ToolDefinition

    tools = hi_stack()
    tools.tools = [ToolDefinition(name="f")]
    error = _refused(ByModel("plain-1"), tools)
    assert_error(
        error,
        "unsupported_capability",
        "toy model plain-1 does not support tools; remove it from the request or choose a model that has it",
        retryable=False,
    )
    assert error.code == "tools"
    ByModel("tools-1").check_capabilities(tools)
    image = hi_stack()
    image.add_user_message(ImageBlock(url="http://h/cat.png"))
    assert _refused(ByModel("tools-1"), image).code == "vision"
    image.tools = tools.tools
    assert _refused(ByModel("plain-1"), image).code == "tools"  # the first thing missing
    pdf, text = hi_stack(), hi_stack()
    pdf.add_user_message(DocumentBlock(data="JVBERi0=", name="a.pdf"))
    text.add_user_message(DocumentBlock(mime_type="text/plain", text="notes", name="a.txt"))
    assert _refused(ByModel("tools-1"), pdf).code == "pdf"
    ByModel("tools-1").check_capabilities(text)  # text documents go to every model as text


class Seeing(Toy):
    capabilities = Capabilities(tools=True, vision=True, documents=True, reasoning=True)


def test_a_model_with_vision_and_documents_takes_them() -> None:
    from ipyagent.core import DocumentBlock, ImageBlock

    stack = hi_stack()
    stack.add_user_message(ImageBlock(url="http://h/cat.png"))
    stack.add_user_message(DocumentBlock(data="JVBERi0=", name="a.pdf"))
    Seeing("m").check_capabilities(stack)


@pytest.mark.parametrize("model, strategy, use", [("tools-1", "native", "tool"), ("plain-1", "native", "rule"),
                                                  ("plain-1", "tool", "rule")])
def test_a_structured_output_strategy_the_model_cannot_take_names_one_it_can(
    model: str, strategy: str, use: str
) -> None:
    from ipyagent.core import ToolDefinition

    stack = hi_stack()
    stack.output_schema, stack.output_strategy = {"type": "object"}, strategy
    stack.tools = [ToolDefinition(name="f")]  # reported after the strategy
    error = _refused(ByModel(model), stack)
    assert_error(
        error,
        "unsupported_capability",
        f"toy model {model} does not support structured output with the {strategy} "
        f"strategy; use output_strategy={use!r} or another model",
        retryable=False,
    )
    assert error.code == "structured_output"


def test_strategies_the_model_can_take_pass() -> None:
    stack = hi_stack()
    stack.output_schema = {"type": "object"}
    for model, strategy in [("native-1", "native"), ("native-1", "tool"), ("tools-1", "tool"), ("plain-1", "rule")]:
        stack.output_strategy = strategy
        ByModel(model).check_capabilities(stack)


def _settings_error(
    driver: BasePromptDriver, tools: list[str], output: str | None = None, **settings: Any
) -> ProviderError | None:
    from ipyagent.core import ModelSettings, ToolDefinition

    stack = hi_stack()
    stack.tools = [ToolDefinition(name=name) for name in tools]
    stack.settings = ModelSettings(**settings)
    if output:
        stack.output_schema, stack.output_strategy = {"type": "object"}, output
    try:
        driver.check_capabilities(stack)
    except ProviderError as exc:
        return exc
    return None


def test_reasoning_needs_a_reasoning_model() -> None:
    error = _settings_error(Toy("m"), [], reasoning="high")
    assert_error(
        error,
        "unsupported_capability",
        "toy model m does not support the setting reasoning: it is not a reasoning model; "
        "remove it or choose another model",
        retryable=False,
    )
    assert _settings_error(Toy("m"), [], reasoning=0) is None and _settings_error(Toy("m"), []) is None
    assert _settings_error(Toy("m"), [], reasoning=1024) is not None
    assert _settings_error(Seeing("m"), [], reasoning="high") is None


def test_a_tool_choice_needs_the_tools_it_names() -> None:
    none = _settings_error(Toy("m"), [], tool_choice="required")
    assert_error(
        none,
        "invalid_request",
        "tool_choice='required' needs tools, and this request offers none (--tools NAME, or tools= in Python)",
        retryable=False,
    )
    assert _settings_error(Toy("m"), [], tool_choice="lookup").message.startswith("tool_choice='lookup' needs tools")
    missing = _settings_error(Toy("m"), ["b_tool", "a_tool"], tool_choice="lookup")
    assert_error(
        missing,
        "invalid_request",
        "tool_choice='lookup' is not one of the request's tools: a_tool, b_tool",
        retryable=False,
    )
    assert _settings_error(Toy("m"), ["lookup"], tool_choice="lookup") is None
    assert _settings_error(Toy("m"), ["f"], tool_choice="required") is None
    assert (
        _settings_error(Toy("m"), [], tool_choice="auto") is None
        and _settings_error(Toy("m"), [], tool_choice="none") is None
    )


def test_a_tool_choice_contradicts_the_tool_output_strategy() -> None:
    error = _settings_error(Toy("m"), ["f"], output="tool", tool_choice="auto")
    assert_error(
        error,
        "invalid_request",
        "tool_choice='auto' contradicts the tool output strategy, which forces a call to its "
        "output tool; drop one of them",
        retryable=False,
    )
    assert _settings_error(Toy("m"), ["f"], output="rule", tool_choice="auto") is None
    assert _settings_error(Toy("m"), ["f"], output="tool") is None
