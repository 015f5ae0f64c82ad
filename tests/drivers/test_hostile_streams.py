"""A hostile server, one model turn at a time: recorded streams (../shared/fixtures/providers)
mutated the way real servers and proxies break them. Each case must end as one `ModelCompleted`
or one `ModelFailed` with a one-line message, the text so far kept, never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipyagent.core import ModelCompleted, ModelFailed, RetryScheduled
from ipyagent.drivers import StreamMeta
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.recordings import check_shape, collect
from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.toy_driver import NDJSON, Scripted, Toy, ndjson, run_turn
from ..support.toy_driver import TEXT as TOY_TEXT

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
RECORDED_TEXT = "".join(
    (c["choices"][0]["delta"].get("content") or "") for c in
    (json.loads(line[6:]) for line in TEXT.read_text().splitlines() if line.startswith("data: {")) if c["choices"])


def mutated(change: Any) -> Reply:
    """The recorded text stream with `change(chunk)` applied to each JSON chunk."""
    lines = [line for line in TEXT.read_text().splitlines() if line.startswith("data: ")]
    out = [
        f"data: {json.dumps(change(json.loads(line[6:])))}" if line.startswith("data: {") else line for line in lines
    ]
    return Reply(pieces=[f"{line}\n\n".encode() for line in out])


def turn(*replies: Reply, **kw: Any) -> Any:
    with StubServer(*replies) as server:
        events = collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key="sk-test", **kw))
    return check_shape(events)


def test_a_model_name_that_is_not_text_is_ignored():
    """A chunk whose ``model`` is an object (a broken proxy) made pricing raise TypeError out of
    `stream()` (and out of the failed turn's own pricing): a traceback in the cell. The name
    is not one; the turn completes under the model asked for."""
    end = turn(mutated(lambda c: {**c, "model": {"name": "m2"}}))
    assert isinstance(end, ModelCompleted), end
    assert end.message.text == RECORDED_TEXT and end.metadata["model"] == "m"


def test_a_translation_that_trips_in_the_last_step_is_a_failed_turn():
    """Whatever raises while the turn completes (here a driver's stop kind that is no `StopKind`) is a
    `ModelFailed` (``invalid_response``, one line, the text kept), never an exception."""

    class BadStop(Toy):
        @staticmethod
        def _item(item):
            read = Toy._item(item)
            if isinstance(read, StreamMeta) and read.stop_kind:
                return StreamMeta(stop_kind="finished")  # type: ignore[arg-type]
            return read

    end = check_shape(run_turn(BadStop("m", transport=Scripted((200, NDJSON, ndjson(*TOY_TEXT))))))
    assert isinstance(end, ModelFailed) and end.error.type == "invalid_response", end
    assert end.error.message.startswith("toy sent a reply ipyagent could not read (ValidationError")
    assert end.partial.text == "Hello" and "\n" not in end.error.message


def test_a_finish_reason_that_is_not_text_still_ends_the_turn():
    """``finish_reason: 5`` made `StopReason` raise a ValidationError out of `stream()`; an
    unknown stop reason is the end of the turn, its raw value kept as text."""
    end = turn(
        mutated(
            lambda c: {
                **c,
                "choices": [{**ch, "finish_reason": 5} for ch in c["choices"] if ch.get("finish_reason")]
                or c["choices"],
            }
        )
    )
    assert isinstance(end, ModelCompleted), end
    assert end.message.text == RECORDED_TEXT and end.stop_reason.raw == "5"


#: Per driver: a recorded text stream, and the key of the input token count in its usage.
USAGE_STREAMS = {
    "openai-chat": (OpenAIChatPromptDriver, TEXT, "prompt_tokens"),
    "openai-responses": (
        OpenAIResponsesPromptDriver,
        FIXTURES / "openai-responses" / "stream-text.sse",
        "input_tokens",
    ),
    "anthropic": (AnthropicPromptDriver, FIXTURES / "anthropic" / "stream-text.sse", "input_tokens"),
    "gemini": (GeminiPromptDriver, FIXTURES / "gemini" / "stream-text.sse", "promptTokenCount"),
    "ollama": (OllamaPromptDriver, FIXTURES / "ollama" / "chat-stream-text.ndjson", "prompt_eval_count"),
}
USAGE_BLOCKS = ("usage", "usageMetadata")


def _changed(value: Any, change: Any) -> Any:
    if isinstance(value, dict):
        return {k: change(k, _changed(v, change)) for k, v in value.items()}
    if isinstance(value, list):
        return [_changed(v, change) for v in value]
    return value


def _body(path: Path, change: Any) -> bytes:
    """The recording's body with `change(key, value)` applied to every key of every JSON object in it."""
    lines = []
    for line in path.read_text().splitlines():
        prefix = "data: " if line.startswith("data: {") else "" if line.startswith("{") else None
        lines.append(line if prefix is None else prefix + json.dumps(_changed(json.loads(line[len(prefix):]), change)))
    return ("\n".join(lines) + "\n").encode()


def _usage_turn(name: str, change: Any) -> Any:
    cls, path, _ = USAGE_STREAMS[name]
    driver = cls(
        "m", api_key="k-usage", transport=Scripted((200, {"content-type": cls.stream_types[0]}, _body(path, change)))
    )
    return check_shape(run_turn(driver))


@pytest.mark.parametrize("bad", [1.5, "12", -3, True, None], ids=["fraction", "text", "negative", "bool", "block"])
@pytest.mark.parametrize("name", list(USAGE_STREAMS))
def test_a_usage_block_of_the_wrong_shape_leaves_usage_unknown_and_the_reply_whole(name: str, bad: Any) -> None:
    """Usage is not the answer: a count that is not a whole number >= 0, or a usage block that is no
    object (``None`` here: the block is the text "n/a"), failed the turn with a ValidationError; the
    turn completes with its text, usage unknown (zero counts, no price, not billed in the ledger)
    and one line saying so in its metadata. Every driver reads usage through `read_usage`."""
    from ipyagent.core import Usage
    from ipyagent.drivers import Ledger

    _, _, count = USAGE_STREAMS[name]
    good = _usage_turn(name, lambda k, v: v)
    assert isinstance(good, ModelCompleted) and good.usage.input_tokens > 0 and "usage_error" not in good.metadata
    if bad is None:
        if name == "ollama":  # its counts sit in the final object, no block of their own
            return
        change = lambda k, v: "n/a" if k in USAGE_BLOCKS else v  # noqa: E731
    else:
        change = lambda k, v: bad if k == count else v  # noqa: E731
    end = _usage_turn(name, change)
    assert isinstance(end, ModelCompleted), end
    assert end.message.text == good.message.text and end.usage == Usage() and end.message.usage == Usage()
    provider = end.metadata["provider"]
    note = end.metadata["usage_error"]
    assert note.startswith(f"{provider} sent a usage block ipyagent could not read (")
    assert note.endswith("); this turn's usage and price are unknown") and "\n" not in note
    if bad is not None:
        assert f"input_tokens is {bad!r}, not a whole number of tokens" in note
    ledger = Ledger()
    ledger.record_turn(end.metadata, end.usage)  # as a run records it
    assert end.metadata["cost"] is None and [t[2] for t in ledger.turns] == [None]  # unknown, not $0


def test_a_usage_read_later_replaces_an_unreadable_one_and_the_other_way_round() -> None:
    """Anthropic sends usage twice (message_start, then message_delta's cumulative counts): the last
    word counts, so a bad block after a good one leaves no stale usage behind."""
    from ipyagent.drivers.aggregate import merge_meta
    from ipyagent.core import Usage

    meta = StreamMeta(usage=Usage(input_tokens=3))
    merge_meta(meta, StreamMeta(usage_error="input_tokens is 1.5, not a whole number of tokens"))
    assert meta.usage is None and meta.usage_error is not None
    merge_meta(meta, StreamMeta(usage=Usage(input_tokens=4)))
    assert meta.usage == Usage(input_tokens=4) and meta.usage_error is None
    merge_meta(meta, StreamMeta(model="m"))
    assert meta.usage == Usage(input_tokens=4) and meta.usage_error is None


BIG = "x" * (5 * 1024 * 1024)


def _big_openai(chunk: dict[str, Any]) -> dict[str, Any]:
    for choice in chunk["choices"]:
        if choice["delta"].get("content"):
            choice["delta"]["content"] = BIG + choice["delta"]["content"]
            break
    return chunk


def _big_anthropic(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") == "content_block_delta" and event["delta"].get("type") == "text_delta":
        event["delta"]["text"] = BIG + event["delta"]["text"]
    return event


@pytest.mark.parametrize("driver, path, change", [
    (OpenAIChatPromptDriver, TEXT, _big_openai),
    (AnthropicPromptDriver, FIXTURES / "anthropic" / "stream-text.sse", _big_anthropic),
], ids=["openai-chat", "anthropic"])
def test_one_event_of_several_megabytes_is_read(driver, path, change):
    """httpx2's default limit (1 MiB an event) failed real replies: a base64 image in one chunk
    (OpenRouter's image models), a web-fetch result carrying a PDF. 5 MB of text in one event is read."""
    events, enlarged = path.read_text().split("\n\n"), False
    for n, event in enumerate(events):
        lines = event.split("\n")
        for m, line in enumerate(lines):
            if line.startswith("data: {") and not enlarged:
                data = json.loads(line[6:])
                lines[m] = "data: " + json.dumps(change(data))
                enlarged = BIG in lines[m]
        events[n] = "\n".join(lines)
    reply = Reply(pieces=[f"{e}\n\n".encode() for e in events if e.strip()])
    with StubServer(reply) as server:
        end = check_shape(collect(driver("m", base_url=server.url, api_key="sk-test")))
    assert enlarged and isinstance(end, ModelCompleted), end
    assert end.message.text.startswith(BIG) and len(end.message.text) > len(BIG)


def test_a_key_echoed_in_a_retried_error_body_reaches_no_event():
    """A 429 body that echoes the key: the retry notice's error carried the body unredacted
    (`RetryScheduled.error.raw`, seen by every `on_event` consumer); only the final failure's was."""
    key = "sk-proj-echoed0123456789abcdef"
    body = json.dumps({"error": {"message": f"rate limited for {key}", "param": key}}).encode()
    limited = Reply(status=429, headers={"Content-Type": "application/json", "Retry-After": "0"}, pieces=[body])
    with StubServer(limited, Reply.sse_file(TEXT)) as server:
        events = collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key=key))
    retry = next(e for e in events if isinstance(e, RetryScheduled))
    assert retry.error.raw == {"error": {"message": "rate limited for [redacted]", "param": "[redacted]"}}
    assert isinstance(events[-1], ModelCompleted) and key not in repr(events)


@pytest.mark.parametrize("retry_after, said", [
    ("Fri, 01 Jan 2100 00:00:00 GMT", " days, more than max_retry_wait=30 s"),
    ("999999999", "asked to wait 11574 days, more than"),
    ("7200", "asked to wait 2 h, more than"),
    ("31", "asked to wait 31 s, more than"),
], ids=["http-date-decades-ahead", "huge-seconds", "two-hours", "seconds"])
def test_a_retry_after_too_long_is_said_in_units_people_read(retry_after, said):
    """It read "asked to wait 2.30632e+09 s"."""
    limited = Reply(status=429, headers={"Content-Type": "application/json", "Retry-After": retry_after},
                    pieces=[b'{"error": {"message": "slow down"}}'])
    end = turn(limited)
    assert isinstance(end, ModelFailed) and end.error.type == "rate_limit"
    assert said in end.error.message and "e+" not in end.error.message, end.error.message


def test_a_page_sent_as_a_stream_is_quoted_not_called_a_cut_stream():
    """A proxy's HTML page labelled ``text/event-stream`` read as "the stream ended before the model
    finished": nothing said it never was a stream. The error now quotes the page, as one line."""
    page = b"<html><head><title>504</title></head><body><h1>Gateway Timeout</h1>\n<p>nginx</p></body></html>"
    end = turn(Reply(pieces=[page]))
    assert isinstance(end, ModelFailed) and end.error.type == "invalid_response"
    assert end.error.message == (
        "openai answered HTTP 200 (content type 'text/event-stream') with a body that is not its stream: "
        "'<html><head><title>504</title></head><body><h1>Gateway Timeout</h1> <p>nginx</p></body></html>'")


def test_keep_alives_alone_are_a_cut_stream_with_nothing_quoted():
    end = turn(Reply(pieces=[b": keep-alive\n\n"] * 3))
    assert isinstance(end, ModelFailed)
    assert end.error.message == ("the openai stream ended before the model finished (no stop reason arrived); "
                                 "the text so far is kept")


def test_a_bad_line_after_the_first_event_is_quoted_itself():
    """A role-only first chunk (no delta yet) then one line of garbage: the error quoted the body's
    start ('data: {"id": ...'), as if the reply had never been a stream. It quotes the bad line."""
    first = b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n'
    end = turn(Reply(pieces=[first, b"data: {not json\n\n"]))
    assert isinstance(end, ModelFailed) and end.error.type == "invalid_response"
    assert end.error.message == "openai sent a stream line that is not JSON: '{not json'"


def test_a_redirect_names_where_it_points_and_is_not_followed():
    """A 307 read as 'a body that is not its stream: an empty body'. Not following it is right
    (the key would go to the other host): the error now says where it points and what to do."""
    location = "http://other.example/v1/chat/completions?key=sk-live-0123456789abcdef"
    moved = Reply(status=307, headers={"Location": location, "Content-Type": "text/plain"}, pieces=[b""])
    with StubServer(moved, Reply.sse_file(TEXT)) as server:
        end = check_shape(collect(OpenAIChatPromptDriver("m", base_url=server.url, api_key="sk-test")))
        asked = len(server.requests)
    assert asked == 1 and isinstance(end, ModelFailed) and end.error.type == "invalid_request"
    assert end.error.message.startswith("openai answered HTTP 307, redirecting to http://other.example/v1/chat")
    assert "sk-live-0123456789abcdef" not in end.error.message and "--base-url" in end.error.message


def test_a_finish_reason_that_is_not_text_still_ends_the_reply():
    """``"finish_reason": {"x": 1}`` failed the turn with "TypeError: unhashable type: 'dict'"."""
    end = turn(mutated(lambda c: {**c, "choices": [{**ch, "finish_reason": {"x": 1}} for ch in c["choices"]]}
                       if any(ch.get("finish_reason") for ch in c.get("choices") or ()) else c))
    assert isinstance(end, ModelCompleted) and end.message.text == RECORDED_TEXT
    assert end.stop_reason.raw == '{"x": 1}'


def test_a_chunk_of_another_shape_is_quoted_not_pythons_words():
    """``"choices": [null]`` read "AttributeError: 'NoneType' object has no attribute 'get'"."""
    first = b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    end = turn(Reply(pieces=[first, b'data: {"id": "c1", "choices": [null]}\n\n']))
    assert isinstance(end, ModelFailed) and end.error.type == "invalid_response" and end.partial.text == "Hel"
    assert end.error.message == ("openai sent a chunk of a shape Chat Completions does not have (AttributeError): "
                                 "'{\"id\": \"c1\", \"choices\": [null]}'")


#: aimock's malformed-JSON fault: an HTTP 200 ``application/json`` body that is no JSON at all.
CHAOS = b"{malformed json: <<<chaos>>>"


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "azure-openai", "anthropic", "gemini", "ollama"])
@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_a_malformed_200_says_what_the_server_sent_and_is_not_retried(provider: str, content_type: str,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """It read "stream ended before the model finished" (openai, openai-responses, anthropic),
    hiding what the server sent: now the status, the content type and the body's start, one try."""
    from ipyagent.drivers import create_driver

    monkeypatch.setenv("IPYAGENT_TEST_KEY", "sk-test-malformed-0123")
    with StubServer(Reply(headers={"Content-Type": content_type}, pieces=[CHAOS])) as server:
        driver = create_driver(f"{provider}:m", base_url=server.url, api_key_env="IPYAGENT_TEST_KEY")
        end = check_shape(collect(driver))
        assert len(server.requests) == 1  # not retried: asking again gets the same
    assert isinstance(end, ModelFailed) and end.error.type == "invalid_response" and not end.error.retryable
    assert end.error.message == (f"{driver.provider} answered HTTP 200 (content type {content_type!r}) with a body "
                                 "that is not its stream: '{malformed json: <<<chaos>>>'")
