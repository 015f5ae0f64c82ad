"""OpenAI Responses: the reply's last event is read by its response's ``status`` (completed, failed,
incomplete, cancelled: "Streaming events", the Response object), not only by its event name: a
``response.completed`` whose response failed (a non-conforming server) ended as a success, its error dropped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent.core import ModelCompleted, ModelFailed, Usage
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.recordings import check_shape
from ..support.toy_driver import Scripted, run_turn

USAGE = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
OPENING = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "content": []}},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "partial "},
]


def _turn(last: dict[str, Any]) -> Any:
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in [*OPENING, last])
    cls = OpenAIResponsesPromptDriver
    driver = cls("m", api_key="k", transport=Scripted((200, {"content-type": cls.stream_types[0]}, body)),
                 max_attempts=1)
    return check_shape(run_turn(driver))


def _end(event: str, **response: Any) -> dict[str, Any]:
    return {"type": event, "response": {"id": "resp_1", "usage": USAGE, **response}}


@pytest.mark.parametrize("event", ["response.completed", "response.failed"])
def test_a_response_that_failed_is_the_error_it_says_whatever_event_ends_it(event: str) -> None:
    """Its error object is the turn's error; the usage it carried is the failed turn's (billed)."""
    end = _turn(_end(event, status="failed", error={"code": "server_error", "message": "actually failed"}))
    assert isinstance(end, ModelFailed), end
    assert end.error.type == "server" and end.error.message == "actually failed"
    assert end.partial.text == "partial " and end.partial.usage == Usage(input_tokens=5, output_tokens=3,
                                                                         total_tokens=8, raw=USAGE)


@pytest.mark.parametrize("status, etype, message", [
    ("failed", "server", "openai-responses says the response failed, without saying why"),
    ("cancelled", "cancelled", "openai-responses cancelled the response before it ended"),
])
def test_a_completed_event_of_a_response_that_did_not_complete_is_one_line_saying_so(
        status: str, etype: str, message: str) -> None:
    end = _turn(_end("response.completed", status=status))
    assert isinstance(end, ModelFailed), end
    assert (end.error.type, end.error.message) == (etype, message)


@pytest.mark.parametrize("status", ["completed", None])
def test_a_completed_response_still_completes(status: str | None) -> None:
    end = _turn(_end("response.completed", **({"status": status} if status else {})))
    assert isinstance(end, ModelCompleted), end
    assert end.message.text == "partial " and end.usage.input_tokens == 5


def test_a_whole_response_that_was_cancelled_says_so() -> None:
    """A server that ignored ``stream: true`` and answered a cancelled Response object: it read "the
    response is still 'cancelled'"."""
    body = json.dumps({"id": "resp_1", "object": "response", "status": "cancelled", "output": []}).encode()
    cls = OpenAIResponsesPromptDriver
    driver = cls("m", api_key="k", transport=Scripted((200, {"content-type": "application/json"}, body)),
                 max_attempts=1)
    end = check_shape(run_turn(driver))
    assert isinstance(end, ModelFailed), end
    said = (end.error.type, end.error.message)
    assert said == ("cancelled", "openai-responses cancelled the response before it ended")
