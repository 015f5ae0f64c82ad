"""The three batch APIs (`batch.BatchAPI`): OpenAI Batch, Anthropic Message Batches, Gemini Batch Mode.

Each follows its provider's reference (named on the class); `BATCH_APIS` maps a driver's protocol
to its API. The wire shapes are in `batch`'s docstring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

from .batch import BatchAnswer, BatchAPI, BatchState
from .decode import frame_json


#: A custom id written in a line that is not JSON (``"custom_id": "..."``).
_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _answers(text: str, read: Callable[[dict[str, Any]], BatchAnswer]) -> list[BatchAnswer]:
    """Each line of a JSONL `text` (blank lines skipped) read by `read`; a line that cannot be read
    (not JSON, not an object, a field of another type) is its run's error, ``batch answer N could
    not be read: ...``, under the custom id it names (the others are kept). Read as a stream's frame
    (`frame_json`): an answer whose tool-call arguments nest past the parser reads cut deep, not as a
    RecursionError out of the evaluation."""
    found = []
    for n, line in enumerate((line for line in text.splitlines() if line.strip()), 1):
        try:
            item = frame_json(line)
        except ValueError as exc:
            named = _CUSTOM_ID.search(line)
            found.append(_unreadable(n, named.group(1) if named else "", exc))
            continue
        found.append(_read(n, item, read))
    return found


def _read(n: int, item: Any, read: Callable[[dict[str, Any]], BatchAnswer]) -> BatchAnswer:
    """Answer `n` (`item`) read by `read`, or its run's error when it is of another shape."""
    custom_id = str(item.get("custom_id")) if isinstance(item, dict) else ""
    try:
        if not isinstance(item, dict):
            raise TypeError(f"it is {_json_type(item)}, not an object")
        return read(item)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        return _unreadable(n, custom_id, exc)


def _unreadable(n: int, custom_id: str, exc: Exception) -> BatchAnswer:
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return BatchAnswer(custom_id, error=f"batch answer {n} could not be read: {detail}", error_type="invalid_response")


def _first(answers: list[BatchAnswer]) -> list[BatchAnswer]:
    """`answers` with the first answer to each custom id only: a reply that answers a request twice
    (or the error file once more) does not replace the answer read first."""
    first: dict[str, BatchAnswer] = {}
    for answer in answers:
        first.setdefault(answer.custom_id, answer)
    return list(first.values())


def _json_type(value: Any) -> str:
    """The JSON name of `value`'s type (``a string``, ``null``...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _body(body: Any) -> dict[str, Any]:
    """An answer's body: an object (the decoder reads its fields).

    Raises:
        TypeError: it is not an object.
    """
    if not isinstance(body, dict):
        raise TypeError(f"its body is {_json_type(body)}, not an object")
    return body


def _count(value: Any) -> int:
    """A request count of a batch's description; 0 when it is not a whole number (the counts only say
    how far the batch is: the answers are read whatever they say)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else 0


def _status(value: Any) -> str:
    """A batch's status, which the API always sends: without one the batch would look not ended forever.

    Raises:
        TypeError: it is missing or not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"its status is {_json_type(value)}, not a string")
    return value


def _error_text(error: Any) -> str:
    """A provider error object's message (``{"message": ...}``, nested ``{"error": {...}}``), a string
    as it is, or its JSON."""
    while isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error[:500]
    return json.dumps(error)[:500]


class OpenAIBatch(BatchAPI):
    """OpenAI Batch API ("Batch API" guide; reference: Files ``POST /files``, ``GET /files/{id}/content``;
    Batch ``POST /batches``, ``GET /batches/{id}``, ``POST /batches/{id}/cancel``)."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    name = "the OpenAI Batch API"
    probe = "/batches?limit=1"
    providers = frozenset({"openai"})
    #: A batch's ``status`` once nothing in it changes any more.
    ENDED: ClassVar[frozenset[str]] = frozenset({"completed", "failed", "expired", "cancelled"})

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}

    async def submit(self, lines: list[dict[str, Any]]) -> str:
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
        upload = await self.call("POST", "/files", data={"purpose": "batch"},
                                 files={"file": ("ipyagent-batch.jsonl", data, "application/jsonl")})
        with self.reading("the file sent"):
            file_id = upload["id"]
        batch = await self.call("POST", "/batches", json={"input_file_id": file_id,
                                                          "endpoint": "/v1/chat/completions",
                                                          "completion_window": "24h"})
        with self.reading("the batch sent"):
            return str(batch["id"])

    async def poll(self, batch_id: str) -> BatchState:
        batch = await self.call("GET", f"/batches/{batch_id}")
        with self.reading(f"batch {batch_id}"):
            counts = batch.get("request_counts") or {}
            status = _status(batch.get("status"))
            files = (batch.get("output_file_id"), batch.get("error_file_id"))
            if not all(f is None or isinstance(f, str) for f in files):
                raise TypeError(f"a file id is not a string: {files!r}"[:200])
            return BatchState(batch_id, status, status in self.ENDED, _count(counts.get("total")),
                              _count(counts.get("completed")), _count(counts.get("failed")),
                              (*files, batch.get("errors")))

    async def answers(self, state: BatchState, ids: list[str]) -> list[BatchAnswer]:
        output, errors, _ = state.handle
        found: list[BatchAnswer] = []
        for file_id in (output, errors):
            if file_id:
                text = await self.call("GET", f"/files/{file_id}/content", text=True)
                found.extend(_answers(text, self._answer))
        return _first(found)

    @staticmethod
    def _answer(line: dict[str, Any]) -> BatchAnswer:
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or {}
        if line.get("error"):  # not sent: the batch expired or was cancelled first (``batch_expired``...)
            error = line["error"]
            code = str(error.get("code")) if isinstance(error, dict) else ""
            kind = "timeout" if "expired" in code else "cancelled" if "cancel" in code else "provider_error"
            return BatchAnswer(custom_id, error=_error_text(error), error_type=kind)
        if response.get("status_code") != 200:
            return BatchAnswer(custom_id, error=f"HTTP {response.get('status_code')}: "
                               f"{_error_text(response.get('body'))}")
        return BatchAnswer(custom_id, body=_body(response.get("body")))

    async def cancel(self, batch_id: str) -> None:
        await self.call("POST", f"/batches/{batch_id}/cancel")


class AnthropicBatch(BatchAPI):
    """Anthropic Message Batches ("Batch processing"; reference: ``POST /messages/batches``,
    ``GET /messages/batches/{id}``, its ``results_url``, ``POST /messages/batches/{id}/cancel``)."""

    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024
    name = "Anthropic's Message Batches API"
    probe = "/messages/batches?limit=1"
    providers = frozenset({"anthropic"})

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": body}

    async def submit(self, lines: list[dict[str, Any]]) -> str:
        batch = await self.call("POST", "/messages/batches", json={"requests": lines})
        with self.reading("the batch sent"):
            return str(batch["id"])

    async def poll(self, batch_id: str) -> BatchState:
        batch = await self.call("GET", f"/messages/batches/{batch_id}")
        with self.reading(f"batch {batch_id}"):
            counts = {k: _count(v) for k, v in (batch.get("request_counts") or {}).items()}
            failed = counts.get("errored", 0) + counts.get("canceled", 0) + counts.get("expired", 0)
            status = _status(batch.get("processing_status"))
            results = batch.get("results_url")
            if results is not None and not isinstance(results, str):
                raise TypeError(f"results_url is {_json_type(results)}, not a string")
            return BatchState(batch_id, status, status == "ended", sum(counts.values()), counts.get("succeeded", 0),
                              failed, results)

    async def answers(self, state: BatchState, ids: list[str]) -> list[BatchAnswer]:
        if not state.handle:
            return []
        text = await self.call("GET", state.handle, text=True)
        return _first(_answers(text, self._answer))

    @staticmethod
    def _answer(line: dict[str, Any]) -> BatchAnswer:
        custom_id, result = str(line.get("custom_id")), line.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            return BatchAnswer(custom_id, body=_body(result.get("message")))
        if kind == "errored":
            return BatchAnswer(custom_id, error=_error_text(result.get("error")))
        if kind == "expired":
            return BatchAnswer(custom_id, error="the batch expired before this request ran", error_type="timeout")
        return BatchAnswer(custom_id, error=f"the request was {kind or 'not answered'}", error_type="cancelled")

    async def cancel(self, batch_id: str) -> None:
        await self.call("POST", f"/messages/batches/{batch_id}/cancel")


class GeminiBatch(BatchAPI):
    """Gemini Batch Mode, inline requests ("Batch Mode"; reference: ``models.batchGenerateContent``,
    ``batches.get``, ``batches.cancel``)."""

    max_requests = 100_000
    max_bytes = 20 * 1024 * 1024  # inline requests: the whole batch request under 20 MB
    name = "Gemini Batch Mode"
    probe = "/batches?pageSize=1"
    providers = frozenset({"gemini"})
    #: A batch's ``state`` once it has ended (``JOB_STATE_*``: the same states as the guide's examples name them).
    ENDED: ClassVar[frozenset[str]] = frozenset(f"{kind}_STATE_{end}" for kind in ("BATCH", "JOB")
                                                for end in ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"))

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"request": body, "metadata": {"key": custom_id}}

    async def submit(self, lines: list[dict[str, Any]]) -> str:
        path = self.driver._model_path()
        operation = await self.call("POST", f"{path}:batchGenerateContent", json={
            "batch": {"displayName": "ipyagent evaluation", "inputConfig": {"requests": {"requests": lines}}}})
        with self.reading("the batch sent"):
            return str(operation["name"])

    async def poll(self, batch_id: str) -> BatchState:
        operation = await self.call("GET", f"/{batch_id}")
        with self.reading(f"batch {batch_id}"):
            meta = operation.get("metadata") or {}
            stats = meta.get("batchStats") or {}
            state = str(meta.get("state"))
            ended = bool(operation.get("done")) or state in self.ENDED
            inline = (operation.get("response") or meta.get("output") or {}).get("inlinedResponses") or []
            if isinstance(inline, dict):  # `InlinedResponses`: the list inside
                inline = inline.get("inlinedResponses") or []
            if not isinstance(inline, list):
                raise TypeError(f"inlinedResponses is {_json_type(inline)}, not an array")
            return BatchState(batch_id, state, ended, _count(stats.get("requestCount")),
                              _count(stats.get("successfulRequestCount")), _count(stats.get("failedRequestCount")),
                              inline)

    async def answers(self, state: BatchState, ids: list[str]) -> list[BatchAnswer]:
        found = []
        for n, item in enumerate(state.handle or ()):  # in the order of the requests; the key when echoed
            key = ids[n] if n < len(ids) else ""
            try:
                key = str((item.get("metadata") or {}).get("key") or key)
                if item.get("error"):
                    found.append(BatchAnswer(key, error=_error_text(item["error"])))
                else:
                    found.append(BatchAnswer(key, body=_body(item.get("response"))))
            except (AttributeError, TypeError) as exc:
                found.append(_unreadable(n + 1, key, exc))
        return _first(found)

    async def cancel(self, batch_id: str) -> None:
        await self.call("POST", f"/{batch_id}:cancel")


#: A driver's protocol -> its provider's batch API.
BATCH_APIS: dict[str, type[BatchAPI]] = {"openai": OpenAIBatch, "anthropic": AnthropicBatch, "gemini": GeminiBatch}


def batch_api(driver: Any) -> BatchAPI | None:
    """The batch API of `driver`'s protocol (`BATCH_APIS`), or None (Ollama, Responses, a plug-in):
    whether its host serves it is `BatchAPI.available`."""
    api = BATCH_APIS.get(getattr(driver, "protocol", ""))
    return api(driver) if api is not None else None
