"""Fake provider batch APIs on 127.0.0.1, built to each provider's reference (not to our client).

One `BatchServer` serves the three APIs under their own roots:

* OpenAI (``/v1``): ``POST /files`` (multipart, ``purpose=batch``, a JSONL of
  ``{custom_id, method, url, body}``), ``POST /batches`` (``input_file_id``, ``endpoint``,
  ``completion_window``), ``GET /batches`` and ``/batches/{id}``, ``POST /batches/{id}/cancel``,
  ``GET /files/{id}/content`` (output and error files: ``{id, custom_id, response: {status_code,
  body}, error}``).
* Anthropic (``/v1``): ``POST /messages/batches`` (``requests[]``: ``custom_id``, ``params``),
  ``GET /messages/batches`` and ``/messages/batches/{id}``, ``.../cancel``, ``.../results`` (JSONL of
  ``{custom_id, result: {type, message | error}}``).
* Gemini (``/v1beta``): ``POST /models/{model}:batchGenerateContent`` (inline requests), ``GET
  /batches`` and ``/batches/{id}`` (an operation: ``metadata.state``, ``metadata.batchStats``,
  ``done``, ``response.inlinedResponses.inlinedResponses[]``), ``POST /batches/{id}:cancel``.

A batch ends after `polls` looks at it (no clock): then each request is answered by `answer`
(the reply's text for the request's prompt; None: an error for that request) — or, with
`expire`, the batch expires with the requests not answered yet. Each request's
body is checked to be a non-streaming body of its API (no ``stream``). `created` counts batches.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE_IN, USAGE_OUT = 20, 10


def _prompt(body: dict[str, Any]) -> str:
    """The last user text of an OpenAI, Anthropic or Gemini request body."""
    if "contents" in body:
        return "".join(p.get("text", "") for p in body["contents"][-1]["parts"])
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


class BatchServer:
    """Run as a context manager; `url` is ``http://127.0.0.1:PORT``."""

    def __init__(self, *, polls: int = 2, answer: Callable[[str], str | None] = lambda q: f"answer to {q}",
                 expire: bool = False) -> None:
        self.polls, self.answer, self.expire = polls, answer, expire
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}  # id -> {api, requests, looks, state, ...}
        self.created = 0
        self.cancelled: list[str] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._reply(*server.get(self.path))

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                self._reply(*server.post(self.path, raw, self.headers.get("Content-Type") or ""))

            def _reply(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "BatchServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    # -- routing -------------------------------------------------------------------------

    def get(self, path: str) -> tuple[int, Any]:
        path = path.split("?")[0]
        with self.lock:
            if path in ("/v1/batches", "/v1/messages/batches", "/v1beta/batches"):
                return 200, {"data": [], "batches": []}
            if path.startswith("/v1/files/") and path.endswith("/content"):
                file_id = path.split("/")[3]
                return (200, self.files[file_id]) if file_id in self.files else (404, _error("no such file"))
            if path.startswith("/v1/messages/batches/") and path.endswith("/results"):
                return self._anthropic_results(path.split("/")[4])
            batch_id = path.split("/")[-1]
            if batch_id not in self.batches:
                return 404, _error(f"no batch {batch_id}")
            batch = self.batches[batch_id]
            batch["looks"] += 1
            if batch["state"] == "running" and batch["looks"] >= self.polls:
                self._end(batch, "expired" if self.expire else "completed")
            return 200, self._describe(batch)

    def post(self, path: str, raw: bytes, content_type: str) -> tuple[int, Any]:
        with self.lock:
            if path == "/v1/files":
                return self._upload(raw, content_type)
            if path == "/v1/batches":
                return self._openai_create(json.loads(raw))
            if path == "/v1/messages/batches":
                return self._anthropic_create(json.loads(raw))
            if path.startswith("/v1beta/models/") and path.endswith(":batchGenerateContent"):
                return self._gemini_create(json.loads(raw))
            batch_id = path.rstrip("/").removesuffix("/cancel").removesuffix(":cancel").split("/")[-1]
            if batch_id in self.batches:
                self.cancelled.append(batch_id)
                batch = self.batches[batch_id]
                if batch["state"] == "running":
                    self._end(batch, "cancelled")
                return 200, self._describe(batch)
            return 404, _error(f"no route {path}")

    # -- creating ------------------------------------------------------------------------

    def _add(self, api: str, batch_id: str, requests: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        for _, body in requests:
            assert "stream" not in body, "a batch request is the non-streaming body"
        self.created += 1
        batch = {"api": api, "id": batch_id, "requests": requests, "looks": 0, "state": "running",
                 "answers": {}}
        self.batches[batch_id.split("/")[-1]] = batch  # Gemini's "batches/ID": looked up by its ID
        return batch

    def _upload(self, raw: bytes, content_type: str) -> tuple[int, Any]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        parts = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                 for part in message.iter_parts()}
        if parts.get("purpose") != b"batch" or not parts.get("file"):
            return 400, _error("purpose must be batch, with a file")
        file_id = self._new_id("file-")
        self.files[file_id] = parts["file"]
        return 200, {"id": file_id, "object": "file", "purpose": "batch", "bytes": len(parts["file"])}

    def _openai_create(self, body: dict[str, Any]) -> tuple[int, Any]:
        if body.get("completion_window") != "24h" or body.get("input_file_id") not in self.files:
            return 400, _error("completion_window 24h and an uploaded input_file_id are required")
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].decode().splitlines() if line]
        if any(line.get("method") != "POST" or line.get("url") != body.get("endpoint") for line in lines):
            return 400, _error("each line's method is POST and its url the batch's endpoint")
        batch = self._add("openai", self._new_id("batch_"), [(line["custom_id"], line["body"]) for line in lines])
        batch["input_file_id"] = body["input_file_id"]
        return 200, self._describe(batch)

    def _anthropic_create(self, body: dict[str, Any]) -> tuple[int, Any]:
        requests = body.get("requests") or []
        if any(not r.get("custom_id") or len(r["custom_id"]) > 64 for r in requests):
            return 400, _error("each request has a custom_id of 1 to 64 characters")
        batch = self._add("anthropic", self._new_id("msgbatch_"), [(r["custom_id"], r["params"]) for r in requests])
        return 200, self._describe(batch)

    def _gemini_create(self, body: dict[str, Any]) -> tuple[int, Any]:
        requests = body["batch"]["inputConfig"]["requests"]["requests"]
        batch = self._add("gemini", self._new_id("batches/b"),
                          [(r["metadata"]["key"], r["request"]) for r in requests])
        return 200, self._describe(batch)

    # -- ending and describing ----------------------------------------------------------

    def _end(self, batch: dict[str, Any], how: str) -> None:
        """Answer every request (``completed``), or none of them (``expired``, ``cancelled``)."""
        batch["state"] = how
        if how != "completed":
            return
        for custom_id, body in batch["requests"]:
            batch["answers"][custom_id] = self.answer(_prompt(body))
        if batch["api"] == "openai":
            out, err = [], []
            for n, (custom_id, body) in enumerate(batch["requests"]):
                text = batch["answers"][custom_id]
                line = {"id": f"batch_req_{n}", "custom_id": custom_id, "error": None}
                if text is None:
                    line["response"] = {"status_code": 400, "request_id": f"req_{n}",
                                        "body": _error("the model refused this request")}
                    err.append(line)
                else:
                    line["response"] = {"status_code": 200, "request_id": f"req_{n}",
                                        "body": _openai_completion(body["model"], text)}
                    out.append(line)
            batch["output_file_id"] = self._file(out)
            batch["error_file_id"] = self._file(err) if err else None

    def _file(self, lines: list[dict[str, Any]]) -> str:
        file_id = self._new_id("file-")
        self.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return file_id

    def _counts(self, batch: dict[str, Any]) -> tuple[int, int, int]:
        """(total, succeeded, failed)."""
        total = len(batch["requests"])
        ok = sum(1 for v in batch["answers"].values() if v is not None)
        failed = 0 if batch["state"] == "running" else total - ok
        return total, ok, failed

    def _describe(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"openai": self._openai, "anthropic": self._anthropic, "gemini": self._gemini}[batch["api"]](batch)

    def _openai(self, batch: dict[str, Any]) -> dict[str, Any]:
        total, ok, failed = self._counts(batch)
        status = {"running": "in_progress", "completed": "completed", "expired": "expired",
                  "cancelled": "cancelled"}[batch["state"]]
        if batch["state"] in ("expired", "cancelled") and "error_file_id" not in batch:
            code = "batch_expired" if batch["state"] == "expired" else "batch_cancelled"
            batch["error_file_id"] = self._file([
                {"id": f"batch_req_{n}", "custom_id": cid, "response": None,
                 "error": {"code": code, "message": f"This request could not be executed: the batch was {status}."}}
                for n, (cid, _) in enumerate(batch["requests"])])
        return {"id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": batch.get("input_file_id"), "completion_window": "24h", "status": status,
                "output_file_id": batch.get("output_file_id"), "error_file_id": batch.get("error_file_id"),
                "request_counts": {"total": total, "completed": ok, "failed": failed}}

    def _anthropic(self, batch: dict[str, Any]) -> dict[str, Any]:
        total, ok, failed = self._counts(batch)
        ended = batch["state"] != "running"
        counts = {"processing": 0 if ended else total, "succeeded": ok,
                  "errored": failed if batch["state"] == "completed" else 0,
                  "canceled": failed if batch["state"] == "cancelled" else 0,
                  "expired": failed if batch["state"] == "expired" else 0}
        return {"id": batch["id"], "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "results_url": f"{self.url}/v1/messages/batches/{batch['id']}/results"
                if ended else None}

    def _anthropic_results(self, batch_id: str) -> tuple[int, Any]:
        batch = self.batches.get(batch_id)
        if batch is None or batch["state"] == "running":
            return 404, _error("no results yet")
        lines = []
        for custom_id, body in batch["requests"]:
            text = batch["answers"].get(custom_id)
            if batch["state"] in ("expired", "cancelled"):
                result = {"type": "expired" if batch["state"] == "expired" else "canceled"}
            elif text is None:
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": "the model refused this request"}}}
            else:
                result = {"type": "succeeded", "message": _anthropic_message(body["model"], text)}
            lines.append({"custom_id": custom_id, "result": result})
        return 200, "".join(json.dumps(line) + "\n" for line in lines).encode()

    def _gemini(self, batch: dict[str, Any]) -> dict[str, Any]:
        total, ok, failed = self._counts(batch)
        state = {"running": "BATCH_STATE_RUNNING", "completed": "BATCH_STATE_SUCCEEDED",
                 "expired": "BATCH_STATE_EXPIRED", "cancelled": "BATCH_STATE_CANCELLED"}[batch["state"]]
        meta = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                "name": batch["id"], "state": state,
                "batchStats": {"requestCount": str(total), "successfulRequestCount": str(ok),
                               "failedRequestCount": str(failed), "pendingRequestCount": str(total - ok - failed)}}
        operation: dict[str, Any] = {"name": batch["id"], "metadata": meta, "done": batch["state"] != "running"}
        if batch["state"] == "completed":
            items = []
            for custom_id, _ in batch["requests"]:
                text = batch["answers"][custom_id]
                items.append({"metadata": {"key": custom_id}, **(
                    {"error": {"code": 400, "message": "the model refused this request", "status": "INVALID_ARGUMENT"}}
                    if text is None else {"response": _gemini_response(text)})})
            operation["response"] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                                              "GenerateContentBatchOutput",
                                     "inlinedResponses": {"inlinedResponses": items}}
        return operation


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _openai_completion(model: str, text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}}


def _anthropic_message(model: str, text: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}


def _gemini_response(text: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
                              "totalTokenCount": USAGE_IN + USAGE_OUT},
            "modelVersion": "gemini-2.5-flash"}
