"""Errors, retries, cancellation and closing, over real HTTP against the stub server."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from ipyagent.core import ModelCompleted, ModelFailed, ModelStarted, ProviderError, TextDelta
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

from ..support.recordings import (
    FIXTURES,
    check_shape,
    collect,
    error_body_files,
    expected_from,
    recording_events,
    reply_for,
    sse_events,
    status_type,
    user_stack,
)
from ..support.stub_server import Reply, StubServer

MODEL = "test-model"
TEXT_STREAM = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
ERROR_FILES = error_body_files()


def _status_of(body_path):
    sidecar = body_path.with_name(body_path.name[: -len(".json")] + ".http.json")
    if sidecar.exists():
        return json.loads(sidecar.read_text())["status"], sidecar
    if body_path.name.startswith("error-400-"):
        return 400, None
    if body_path.name == "mistral-error-401.json":
        return 401, None
    raise AssertionError(f"no status known for {body_path.name}")


def _provider_message(body_path) -> str:
    data = json.loads(body_path.read_text())
    error = data.get("error")
    if isinstance(error, dict):
        return error["message"]
    return data["detail"]


def test_error_fixture_set_is_present():
    names = {p.name for p in ERROR_FILES}
    assert {"azure-ai-error-429-retry-after.json", "mistral-error-401.json", "error-404-model-not-found.json"} <= names
    assert not any(n.endswith(".http.json") for n in names)


@pytest.mark.parametrize("body_path", ERROR_FILES, ids=[p.name for p in ERROR_FILES])
def test_recorded_http_error(body_path):
    status, sidecar = _status_of(body_path)
    reply = Reply.error_file(body_path, sidecar, status=status)
    assert reply.status == status
    kw = {"max_attempts": 1} if status == 429 else {}
    with StubServer(reply) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", **kw))
    terminal = check_shape(events)
    assert len(events) == 2  # nothing streamed
    assert isinstance(terminal, ModelFailed)
    err = terminal.error
    assert err.type == status_type(status)
    assert err.status == status
    assert _provider_message(body_path) in err.message
    assert err.raw == json.loads(body_path.read_text())
    assert terminal.partial.content == []
    assert terminal.metadata["attempts"] == 1
    retryable = status == 429 or status >= 500
    assert err.retryable is retryable
    assert len(server.requests) == 1  # 4xx (and 429 with max_attempts=1): no retry


def test_429_retry_after_is_honoured_then_success(no_sleep: list[float]) -> None:
    body = FIXTURES / "openai-compatible" / "azure-ai-error-429-retry-after.json"
    sidecar = body.with_name("azure-ai-error-429-retry-after.http.json")
    headers = json.loads(sidecar.read_text())["headers"]
    assert headers["Retry-After"] == ["1"]
    exp = expected_from(TEXT_STREAM)
    with StubServer(Reply.error_file(body, sidecar), reply_for(TEXT_STREAM)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    assert len(server.requests) == 2
    assert no_sleep == [1.0]  # the wait before the second request
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == exp.text
    assert terminal.metadata["attempts"] == 2
    assert terminal.metadata["retry_waits"] == [1.0]
    assert "429" in terminal.metadata["last_error"]
    # a retry happens before anything is shown: one ModelStarted, then the deltas of the good stream only
    assert sum(isinstance(e, ModelStarted) for e in events) == 1
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == exp.text


def test_500_is_retried_then_completes():
    error = Reply(
        status=500,
        headers={"Content-Type": "application/json"},
        pieces=[b'{"error": {"message": "The server had an error"}}'],
    )
    exp = expected_from(TEXT_STREAM)
    with StubServer(error, reply_for(TEXT_STREAM)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.05))
    assert len(server.requests) == 2
    assert server.requests[0]["body"] == server.requests[1]["body"]
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted)
    assert terminal.message.text == exp.text
    assert terminal.metadata["attempts"] == 2
    assert "The server had an error" in terminal.metadata["last_error"]


def test_500_gives_up_after_max_attempts():
    error = Reply(status=503, headers={"Content-Type": "text/plain"}, pieces=[b"upstream unavailable"])
    with StubServer(error) as server:
        events = collect(
            OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_attempts=3, max_retry_wait=0.02)
        )
    assert len(server.requests) == 3
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "server"
    assert "upstream unavailable" in terminal.error.message
    assert terminal.metadata["attempts"] == 3
    assert len(terminal.metadata["retry_waits"]) == 2


def test_401_is_not_retried():
    body = FIXTURES / "openai-compatible" / "mistral-error-401.json"
    with StubServer(Reply.error_file(body, status=401), reply_for(TEXT_STREAM)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.01))
    assert len(server.requests) == 1
    assert isinstance(events[-1], ModelFailed)
    assert events[-1].error.type == "authentication"
    assert events[-1].error.retryable is False


def test_cut_after_first_delta_is_not_retried_and_keeps_partial_text():
    reply = reply_for(TEXT_STREAM, cut_after=2)
    # the text of the two pieces that are sent, read from those pieces
    sent = b"".join(reply.pieces[:2]).decode()
    sent_text = ""
    for _, data in sse_events(sent):
        for ch in json.loads(data).get("choices") or []:
            sent_text += (ch.get("delta") or {}).get("content") or ""
    assert sent_text  # the cut comes after a real text delta
    with StubServer(reply, reply_for(TEXT_STREAM)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.01))
    assert len(server.requests) == 1
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "connection"
    assert terminal.partial.text == sent_text
    assert terminal.partial_text == sent_text
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == sent_text
    assert terminal.partial.status == "failed"
    assert terminal.metadata["attempts"] == 1


def test_cut_before_any_delta_is_retried():
    """Nothing shown yet (only the role chunk arrived), so a retry is still allowed."""
    exp = expected_from(TEXT_STREAM)
    with StubServer(reply_for(TEXT_STREAM, cut_after=1), reply_for(TEXT_STREAM)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", max_retry_wait=0.01))
    assert len(server.requests) == 2
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == exp.text


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connection_refused():
    url = f"http://127.0.0.1:{_closed_port()}"
    events = collect(OpenAIChatPromptDriver(MODEL, base_url=url, api_key="sk-test", max_attempts=1))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "connection"
    assert terminal.error.retryable is True
    assert f"{url}/chat/completions" in terminal.error.message


def test_api_key_never_appears_in_error_messages():
    secret = "sk-secret123456"
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {secret}"}}).encode()
    reply = Reply(status=401, headers={"Content-Type": "application/json"}, pieces=[body])
    with StubServer(reply) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key=secret))
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"  # the key was really used
    terminal = events[-1]
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "authentication"
    assert "Incorrect API key provided" in terminal.error.message
    for text in (
        terminal.error.message,
        str(terminal.error),
        repr(terminal.error),
        json.dumps(terminal.error.to_dict()),
        json.dumps(terminal.partial.metadata, default=str),
        json.dumps(terminal.metadata, default=str),
    ):
        assert secret not in text


def test_key_not_in_transport_error_either():
    """A key that is not shaped like a known key is still removed (the driver knows its own key)."""
    secret = "mykey-0123456789"
    url = f"http://{secret}@127.0.0.1:{_closed_port()}"
    events = collect(OpenAIChatPromptDriver(MODEL, base_url=url, api_key=secret, max_attempts=1))
    assert isinstance(events[-1], ModelFailed)
    assert events[-1].error.type == "connection"
    assert secret not in events[-1].error.message
    assert "127.0.0.1" in events[-1].error.message  # the URL is still named, minus the key


def test_close_twice_and_async_with():
    async def main():
        with StubServer(reply_for(TEXT_STREAM)) as server:
            driver = OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test")
            await driver.close()  # before any client exists
            async with driver as d:
                assert d is driver
                result = await d.run(user_stack())
                client = driver._client
                assert client is not None and not client.is_closed
            assert client.is_closed
            assert driver._client is None
            await driver.close()
            await driver.close()
            # a closed driver can be used again: it opens a new client
            again = await driver.run(user_stack())
            await driver.close()
        return result, again

    result, again = asyncio.run(main())
    assert isinstance(result, ModelCompleted)
    assert result.message.text == again.message.text == expected_from(TEXT_STREAM).text


def test_run_raises_the_provider_error():
    body = FIXTURES / "openai-chat" / "error-404-model-not-found.json"

    async def main(url):
        async with OpenAIChatPromptDriver(MODEL, base_url=url, api_key="sk-test") as d:
            await d.run(user_stack())

    with StubServer(Reply.error_file(body, body.with_name("error-404-model-not-found.http.json"))) as server:
        with pytest.raises(ProviderError) as info:
            asyncio.run(main(server.url))
    assert info.value.type == "not_found"
    assert info.value.code == "model_not_found"


def test_an_html_error_page_is_one_short_line():
    page = ("<html><head><style>body{color:red}</style><title>502</title></head><body><h1>502 Bad Gateway</h1>"
            + "<p>" + "upstream unavailable " * 300 + "</p></body></html>")
    driver = OpenAIChatPromptDriver(MODEL, api_key="sk-test")
    import httpx2

    err = driver.error_from_response(502, httpx2.Headers({"content-type": "text/html"}), page.encode())
    assert err.type == "server" and err.status == 502
    assert "502 Bad Gateway" in err.message and "<" not in err.message and "color:red" not in err.message
    assert len(err.message) < 400 and err.message.endswith("…") and "\n" not in err.message
    short = driver.error_from_response(503, httpx2.Headers({}), b"service unavailable\n")
    assert short.message.endswith(": service unavailable")  # a short text body is kept whole


def test_cancelling_the_consumer_hangs_up():
    n_pieces = len(reply_for(TEXT_STREAM).pieces)
    assert n_pieces * 0.2 > 4  # the stream would take far longer than the test waits

    async def main(server):
        driver = OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test")
        agen = driver.stream(user_stack())
        seen = []
        async for event in agen:
            seen.append(event)
            if isinstance(event, TextDelta):
                break
        await agen.aclose()
        # the driver (and its connection pool) stays open: closing the stream alone must hang up
        await _hangup_or_end(server)
        await driver.close()
        return seen

    with StubServer(reply_for(TEXT_STREAM, delay=0.2)) as server:
        seen = asyncio.run(main(server))
        assert server.hangups and not server.completed, "the server wrote the whole body: the client never hung up"
    assert isinstance(seen[0], ModelStarted) and isinstance(seen[-1], TextDelta)
    assert len(server.requests) == 1


async def _hangup_or_end(server) -> None:
    """Wait until the server saw the client hang up, or wrote its whole body (the client read on or
    left the connection in its pool): whichever comes first, never a number of seconds."""
    seen = asyncio.get_running_loop().run_in_executor(None, server.wait_for, lambda: server.hangups or server.completed)
    assert await seen


def test_cancelled_task_closes_the_stream():
    """asyncio cancellation (what a kernel interrupt does) also closes the response."""

    async def main(server):
        driver = OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test")
        first = asyncio.Event()
        events = []

        async def consume():
            async for event in driver.stream(user_stack()):
                events.append(event)
                if isinstance(event, TextDelta):
                    first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _hangup_or_end(server)
        await driver.close()
        return events

    with StubServer(reply_for(TEXT_STREAM, delay=0.2)) as server:
        events = asyncio.run(main(server))
        assert server.hangups and not server.completed, "the server wrote the whole body: the client never hung up"
    assert not any(isinstance(e, (ModelCompleted, ModelFailed)) for e in events)


def test_unknown_provider_option_fails_before_any_request():
    with StubServer(reply_for(TEXT_STREAM)) as server:
        with pytest.raises(ProviderError) as info:
            OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test", provider_options={"temprature": 0.5})
        assert server.requests == []
    assert info.value.type == "invalid_request"
    assert info.value.retryable is False
    assert "temprature" in info.value.message
    assert "temperature" in info.value.message  # the known keys are listed


def test_tools_on_a_driver_without_tool_support_fail_before_sending():
    from ipyagent.core import ToolDefinition
    from ipyagent.drivers import Capabilities

    class NoTools(OpenAIChatPromptDriver):
        capabilities = Capabilities(tools=False)

    stack = user_stack()
    stack.tools.append(ToolDefinition(name="Calc_add"))
    with StubServer(reply_for(TEXT_STREAM)) as server:

        async def main():
            async with NoTools(MODEL, base_url=server.url, api_key="sk-test") as d:
                return [e async for e in d.stream(stack)]

        with pytest.raises(ProviderError) as info:
            asyncio.run(main())
        assert server.requests == []
    assert info.value.type == "unsupported_capability"


def test_invalid_tool_arguments_complete_the_turn_with_the_call_and_its_error():
    """A stream whose tool arguments do not parse completes (the model made the mistake, not the wire):
    the text kept, the call kept with input {} and an error for the model (the agent loop sends it back)."""
    path = FIXTURES / "openai-compatible" / "anthropic-openai-compat-tool-call.sse"
    exp = expected_from(path)
    pieces = []
    for _, data in recording_events(path):
        if data != "[DONE]":
            chunk = json.loads(data)
            for ch in chunk.get("choices") or []:
                for call in (ch.get("delta") or {}).get("tool_calls") or []:
                    fn = call.get("function") or {}
                    if fn.get("arguments"):
                        fn["arguments"] = fn["arguments"].replace("}", "")  # truncated JSON, altered in memory
            data = json.dumps(chunk)
        pieces.append(f"data: {data}\n\n".encode())
    with StubServer(Reply(pieces=pieces)) as server:
        events = collect(OpenAIChatPromptDriver(MODEL, base_url=server.url, api_key="sk-test"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), terminal
    assert terminal.message.text == exp.text
    calls = [b for b in terminal.message.content if b.type == "action_call"]
    assert calls and all(b.action.input == {} and "its arguments are not valid JSON" in b.error for b in calls)
