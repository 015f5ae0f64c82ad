"""The batch APIs' own reading of what a provider hands back (`drivers.batch_apis`): errors through
the one redactor, the key kept to the provider's own origin, a malformed answer one run's error."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ipyagent.core import ProviderError
from ipyagent.drivers import BatchAnswer, BatchState, create_driver
from ipyagent.drivers.batch import origin
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


class Recorder:
    """A server on 127.0.0.1 answering every GET with `text`, recording each request's path and key."""

    def __init__(self, text: str = "") -> None:
        seen = self.seen = []  # type: list[tuple[str, str | None]]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("x-api-key")))
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
