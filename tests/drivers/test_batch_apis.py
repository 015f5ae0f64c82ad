"""The batch APIs' own reading of what a provider hands back (`drivers.batch_apis`): errors through
the one redactor, the key kept to the provider's own origin, a malformed answer one run's error."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from ipyagent.core import ProviderError
from ipyagent.drivers import BatchAnswer, BatchState, create_driver
from ipyagent.drivers.batch import origin
from ipyagent.drivers import batch_apis
from ipyagent.drivers.batch_apis import AnthropicBatch, GeminiBatch, OpenAIBatch

KEY = "zzBATCHsecretKEY4242"
SHAPED = "sk-proj-BATCHLEAKabcdefghijklmnop"


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_TEST_KEY", KEY)


def _clean(text: str | None) -> str:
    assert text is not None and KEY not in text and SHAPED not in text and "[redacted]" in text
    return text


def test_a_batch_answers_error_passes_the_redactor_when_the_answer_is_built() -> None:
    echoed = {"error": {"message": f"bad key {KEY} {SHAPED}"}}
    assert _clean(BatchAnswer("c", error=f"bad key {KEY}").error) == "bad key [redacted]"
    _clean(OpenAIBatch._answer({"custom_id": "c", "response": {"status_code": 401, "body": echoed}}).error)
    _clean(OpenAIBatch._answer({"custom_id": "c", "error": {"code": "x", "message": f"{KEY}"}}).error)
    _clean(AnthropicBatch._answer({"custom_id": "c", "result": {"type": "errored", "error": echoed}}).error)
    assert BatchAnswer("c", body={"text": KEY}).error is None  # an answer is the decoder's to read


def test_gemini_inline_errors_pass_the_redactor() -> None:
    inline = [{"metadata": {"key": "c"}, "error": {"message": f"no {KEY}"}}]
    state = BatchState("b", "JOB_STATE_SUCCEEDED", True, handle=inline)
    (answer,) = asyncio.run(GeminiBatch(None).answers(state, ["c"]))
    assert _clean(answer.error) == "no [redacted]"


Reply = tuple[int, dict[str, str], str]


class Recorder:
    """A server on 127.0.0.1 answering each request with the next of `replies` (a text: 200 with it;
    or (status, headers, text)), the last one again once they run out; `seen`: each request's path and key."""

    def __init__(self, *replies: str | Reply) -> None:
        seen = self.seen = []  # type: list[tuple[str, str | None]]
        script = [r if isinstance(r, tuple) else (200, {}, r) for r in replies or ("",)]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("x-api-key")))
                status, headers, text = script[min(len(seen), len(script)) - 1]
                data = text.encode()
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "Recorder":
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _results(base: str, results_url: str) -> list[BatchAnswer]:
    async def go() -> list[BatchAnswer]:
        driver = create_driver("anthropic:claude-sonnet-4-5", base_url=base, api_key_env="IPYAGENT_TEST_KEY")
        try:
            return await AnthropicBatch(driver).answers(BatchState("b", "ended", True, handle=results_url), ["c"])
        finally:
            await driver.close()

    return asyncio.run(go())


def test_the_key_goes_to_a_results_url_only_at_the_base_urls_origin() -> None:
    line = '{"custom_id": "c", "result": {"type": "expired"}}\n'
    with Recorder(line) as api, Recorder(line) as other:
        (answer,) = _results(f"{api.url}/v1", f"{api.url}/v1/messages/batches/b/results")
        assert answer.error_type == "timeout" and api.seen == [("/v1/messages/batches/b/results", KEY)]
        with pytest.raises(ProviderError) as refused:
            _results(f"{api.url}/v1", f"{other.url}/v1/messages/batches/b/results")
        assert other.seen == []  # another port is another origin: nothing sent there, key or not
    message = refused.value.message
    assert f"named {other.url}/v1/messages/batches/b/results, another address than {api.url}/v1" in message
    assert "not fetched, so the API key stays with" in message and "the batch is kept" in message


@pytest.mark.parametrize("url, same", [
    ("https://api.anthropic.com:443/v1/x", True), ("HTTPS://API.anthropic.com/x", True),
    ("http://api.anthropic.com/v1/x", False), ("https://api.anthropic.com:8443/v1/x", False),
    ("https://api.anthropic.com.evil.test/v1", False), ("https://api.anthropic.com@evil.test/v1", False),
    ("https://evil.test/https://api.anthropic.com/v1", False), ("not a url://", False),
])
def test_an_origin_is_the_scheme_host_and_port_as_the_client_reads_them(url: str, same: bool) -> None:
    assert (origin(url) == origin("https://api.anthropic.com/v1") and origin(url) is not None) is same


def _ok(custom_id: str) -> str:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    return json.dumps({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})


def test_a_line_that_cannot_be_read_is_its_runs_error_and_the_others_are_kept() -> None:
    text = "\n".join([_ok("a"), '{"custom_id": "b", oops', "{not json", "[1]",
                      json.dumps({"custom_id": "c", "response": "a string"}),
                      json.dumps({"custom_id": "d", "response": {"status_code": 200, "body": "just text"}}),
                      json.dumps({"custom_id": "e", "response": {"status_code": 200, "body": None}}),
                      json.dumps({"custom_id": "f", "error": "a plain string error"}), "", _ok("g")]) + "\n"
    answers = batch_apis._answers(text, OpenAIBatch._answer)
    assert [a.custom_id for a in answers] == ["a", "b", "", "", "c", "d", "e", "f", "g"]
    assert answers[0].body is not None and answers[-1].body is not None and answers[0].error is None
    unread = {a.custom_id or str(n): a for n, a in enumerate(answers) if a.error_type == "invalid_response"}
    assert sorted(unread) == ["2", "3", "b", "c", "d", "e"]
    assert unread["b"].error.startswith("batch answer 2 could not be read: JSONDecodeError: ")  # type: ignore
    assert unread["3"].error == "batch answer 4 could not be read: TypeError: it is an array, not an object"
    assert unread["d"].error.endswith("its body is a string, not an object")  # type: ignore[union-attr]
    assert unread["e"].error.endswith("its body is null, not an object")  # type: ignore[union-attr]
    assert (answers[7].error, answers[7].error_type) == ("a plain string error", "provider_error")


def test_an_anthropic_or_gemini_answer_of_another_shape_is_its_runs_error() -> None:
    text = "\n".join([json.dumps({"custom_id": "a", "result": "x"}),
                      json.dumps({"custom_id": "b", "result": {"type": "succeeded", "message": [1]}})])
    assert [a.error for a in batch_apis._answers(text, AnthropicBatch._answer)] == [
        "batch answer 1 could not be read: AttributeError: 'str' object has no attribute 'get'",
        "batch answer 2 could not be read: TypeError: its body is an array, not an object"]
    state = BatchState("b", "JOB_STATE_SUCCEEDED", True, handle=["x", {"response": 3}, {"response": {}}])
    answers = asyncio.run(GeminiBatch(None).answers(state, ["k1", "k2", "k3"]))
    assert [(a.custom_id, a.error_type) for a in answers] == [
        ("k1", "invalid_response"), ("k2", "invalid_response"), ("k3", "provider_error")]
    assert answers[1].error == "batch answer 2 could not be read: TypeError: its body is a number, not an object"


def _polled(api_class: type, reply: object) -> BatchState:
    api = api_class(SimpleNamespace(_model_path=lambda: "/models/m"))

    async def call(*args: object, **options: object) -> object:
        return reply

    api.call = call
    return asyncio.run(api.poll("b1"))


@pytest.mark.parametrize("api_class, reply, total", [
    (OpenAIBatch, {"status": "completed", "request_counts": {"total": "abc", "completed": 2.5}}, 0),
    (OpenAIBatch, {"status": "completed", "request_counts": {"total": "7", "failed": True}}, 7),
    (AnthropicBatch, {"processing_status": "ended", "request_counts": {"succeeded": "x", "errored": 3}}, 3),
    (GeminiBatch, {"done": True, "metadata": {"batchStats": {"requestCount": [2]}}}, 0),
])
def test_a_count_that_is_not_a_whole_number_reads_as_zero_and_the_batch_is_read(api_class: type, reply: object,
                                                                                 total: int) -> None:
    state = _polled(api_class, reply)
    assert state.ended and state.total == total and state.succeeded == 0


@pytest.mark.parametrize("api_class, reply", [
    (OpenAIBatch, ["completed"]), (OpenAIBatch, {"status": "completed", "request_counts": "x"}),
    (OpenAIBatch, {"id": "b1", "request_counts": {}}), (AnthropicBatch, {"processing_status": 3}),
    (OpenAIBatch, {"status": "completed", "output_file_id": {"id": "f"}}),
    (AnthropicBatch, {"processing_status": "ended", "results_url": 5}), (AnthropicBatch, "ended"),
    (GeminiBatch, {"done": True, "response": {"inlinedResponses": "x"}}), (GeminiBatch, {"metadata": 3}),
])
def test_a_poll_reply_of_another_shape_is_one_line_saying_so(api_class: type, reply: object) -> None:
    with pytest.raises(ProviderError) as raised:
        _polled(api_class, reply)
    assert raised.value.type == "invalid_response" and "\n" not in raised.value.message
    assert raised.value.message.startswith(f"{api_class.name} described batch b1 in a shape ipyagent cannot read (")


@pytest.mark.parametrize("body", [
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}]},
    {"choices": [{"message": "x"}]}, "just text", None,
])
def test_an_answer_the_decoder_cannot_read_raises_the_live_turns_error(body: object) -> None:
    api = OpenAIBatch(create_driver("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ProviderError) as raised:
        api.decode(body)  # type: ignore[arg-type]
    assert raised.value.type == "invalid_response"
    assert raised.value.message.startswith("openai sent a reply ipyagent could not read (")


@pytest.mark.parametrize("api_class, replies", [
    (OpenAIBatch, [["file-1"]]), (OpenAIBatch, [{"id": "file-1"}, {"status": "validating"}]),
    (AnthropicBatch, ["msgbatch_1"]), (GeminiBatch, [{"done": False}]),
])
def test_a_submit_reply_of_another_shape_is_one_line_saying_so(api_class: type, replies: list[object]) -> None:
    api = api_class(SimpleNamespace(_model_path=lambda: "/models/m"))
    answers = iter(replies)

    async def call(*args: object, **options: object) -> object:
        return next(answers)

    api.call = call
    with pytest.raises(ProviderError) as raised:
        asyncio.run(api.submit([api.line("c", {})]))
    assert raised.value.type == "invalid_response"
    assert raised.value.message.startswith(f"{api_class.name} described the ")


def _called(server: Recorder, method: str) -> object:
    async def go() -> object:
        driver = create_driver("openai:gpt-4o-mini", base_url=f"{server.url}/v1", api_key_env="IPYAGENT_TEST_KEY")
        try:
            return await OpenAIBatch(driver).call(method, "/batches/b1")
        finally:
            await driver.close()

    return asyncio.run(go())


GATEWAY: Reply = (502, {}, '{"error": {"message": "bad gateway"}}')


@pytest.mark.parametrize("first, wait", [(GATEWAY, OpenAIBatch.RETRY_WAIT_S), ((429, {"Retry-After": "2"}, ""), 2.0)])
def test_a_look_at_a_batch_answered_with_a_transient_error_is_sent_once_more(
        first: Reply, wait: float, no_sleep: list[float]) -> None:
    with Recorder(first, '{"status": "completed"}') as server:
        assert _called(server, "GET") == {"status": "completed"}
    assert len(server.seen) == 2 and no_sleep == [wait]


@pytest.mark.parametrize("method, replies", [
    ("GET", [GATEWAY, GATEWAY]),  # once more only
    ("POST", [GATEWAY, "{}"]),  # a batch created twice would run (and cost) twice
    ("GET", [(404, {}, "{}"), "{}"]),  # not transient
    ("GET", [(503, {"Retry-After": "3600"}, ""), "{}"]),  # a wait over max_retry_wait
])
def test_other_errors_and_a_second_one_are_not_tried_again(method: str, replies: list[str | Reply],
                                                          no_sleep: list[float]) -> None:
    with Recorder(*replies) as server, pytest.raises(ProviderError):
        _called(server, method)
    assert len(server.seen) == (2 if replies[1] == GATEWAY else 1) and len(no_sleep) == len(server.seen) - 1


def test_a_connection_refused_is_not_tried_again(no_sleep: list[float]) -> None:
    server = Recorder()  # its port, free again once closed: nothing listens there
    server._httpd.server_close()
    with pytest.raises(ProviderError) as raised:
        _called(server, "GET")
    assert raised.value.type == "connection" and no_sleep == []


def test_a_request_answered_twice_keeps_the_first_answer() -> None:
    second = json.dumps({"custom_id": "a", "response": {"status_code": 500, "body": {"message": "again"}}})
    both = "\n".join([_ok("a"), _ok("b"), second]) + "\n"
    answers = asyncio.run(_openai_answers(both, json.dumps({"custom_id": "b", "error": {"code": "x"}})))
    assert [(a.custom_id, a.error) for a in answers] == [("a", None), ("b", None)]
    twice = "\n".join([json.dumps({"custom_id": "a", "result": {"type": "expired"}}),
                       json.dumps({"custom_id": "a", "result": {"type": "errored", "error": {"message": "x"}}})])
    with Recorder(twice) as server:
        (answer,) = _results(server.url, f"{server.url}/results")
    assert answer.error_type == "timeout"
    inline = [{"metadata": {"key": "k"}, "error": {"message": "first"}}, {"metadata": {"key": "k"}, "response": {}}]
    state = BatchState("b", "JOB_STATE_SUCCEEDED", True, handle=inline)
    assert [a.error for a in asyncio.run(GeminiBatch(None).answers(state, ["k", "j"]))] == ["first"]


async def _openai_answers(output: str, errors: str) -> list[BatchAnswer]:
    api = OpenAIBatch(None)
    files = {"out": output, "err": errors}

    async def call(method: str, path: str, **options: object) -> str:
        return files[path.split("/")[2]]

    api.call = call  # type: ignore[method-assign]
    return await api.answers(BatchState("b", "completed", True, handle=("out", "err", None)), ["a", "b"])


def test_an_answer_nested_past_the_parser_is_read_cut_deep_not_a_recursion_error() -> None:
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000  # past json.loads on 3.11-3.13
    line = '{"custom_id": "x", "response": {"status_code": 200, "body": {"deep": ' + deep + "}}}"
    answers = batch_apis._answers(line + "\n" + _ok("y") + "\n", OpenAIBatch._answer)
    assert [a.custom_id for a in answers] == ["x", "y"] and all(a.error is None for a in answers)
    assert isinstance(answers[0].body, dict) and "deep" in answers[0].body
