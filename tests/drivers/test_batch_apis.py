"""The batch APIs' own reading of what a provider hands back (`drivers.batch_apis`): errors through
the one redactor, the key kept to the provider's own origin, a malformed answer one run's error."""

from __future__ import annotations

import asyncio

import pytest

from ipyagent.drivers import BatchAnswer, BatchState
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

