"""OpenAI Responses API: the stream (and a whole Response object) read into deltas.

Follows the OpenAI API reference, "Responses" (create a model response: `input`
items, `instructions`, flat function `tools`, `text.format`) and "Streaming
events" (typed `event:` names, no ``[DONE]``):

* ``response.created`` names the response id and model;
* ``response.output_item.added`` opens each output item in order; a
  ``function_call`` item gives its ``call_id`` and ``name`` there, at its
  ``output_index``;
* ``response.output_text.delta`` / ``response.refusal.delta`` carry text of
  content part ``content_index`` of a message item;
  ``response.function_call_arguments.delta`` the arguments of a call;
  ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta``
  the reasoning of a reasoning item;
* ``response.output_item.done`` repeats the finished item: it fills in what no
  delta carried (a call's arguments, a message's text) and gives a reasoning
  item's ``encrypted_content``;
* ``response.completed`` / ``response.incomplete`` (with
  ``incomplete_details.reason``) carry the status and usage;
  ``response.failed`` (``response.error``) and an ``error`` event are errors, and so is
  a ``response.completed`` whose response's ``status`` is ``failed`` or ``cancelled``
  (a non-conforming server's); a failed response's usage still counts.

Each output item becomes content blocks in arrival order (`BlockIndex` keyed by
output index and content index). A reasoning item is one `ReasoningBlock`:
its summary parts (and any ``reasoning_text`` parts) joined by a blank line,
and its `signature` a JSON object holding what the API needs to take the item
back (``{"type": "reasoning", "id", "summary", "encrypted_content"?, "content"?}``).
A call's `signature` is ``{"id": "fc_..."}``, its output item id. Reasoning goes
back in the next request only where the API can pair it (see
`openai_responses_request.ResponsesRequest._assistant_items`).

A 200 answer with a JSON body (a gateway that ignored ``stream``) is read as
one whole Response object through the same item handling.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ...core import (
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    ImageBlock,
    ProviderError,
    ReasoningDelta,
    ServerToolDelta,
    StopKind,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ..base import BlockIndex, StreamMeta, read_usage, wire_usage
from ..decode import StreamDecoder, frame_json, not_json, reason_text
from ..error_types import error_type_for
from .openai_server import ITEM_TOOLS, PROGRESS, annotation, item_blocks

#: incomplete_details.reason -> StopKind.
INCOMPLETE_REASONS: dict[str, StopKind] = {
    "max_output_tokens": StopKind.max_tokens,
    "content_filter": StopKind.content_filter,
}

#: Error codes of `response.failed`, `error` events and HTTP bodies -> ProviderError type.
#: Codes that no retry can fix, whatever their type says (a quota is a billing matter).
NOT_RETRYABLE_CODES: frozenset[str] = frozenset({"insufficient_quota"})


def usage_from_responses(raw: dict[str, Any]) -> Usage:
    """Map a Responses usage object (tokens) to `Usage`.

    Raises:
        ValueError, AttributeError: a block of the wrong shape (`read_usage` drops it)."""
    input_details = raw.get("input_tokens_details") or {}
    output_details = raw.get("output_tokens_details") or {}
    return wire_usage(
        raw,
        input_tokens=raw.get("input_tokens") or 0,
        output_tokens=raw.get("output_tokens") or 0,
        total_tokens=raw.get("total_tokens") or 0,
        cache_read_tokens=input_details.get("cached_tokens") or 0,
        cache_write_tokens=input_details.get("cache_write_tokens") or 0,
        reasoning_tokens=output_details.get("reasoning_tokens") or 0,
    )


def error_from_object(error: Any) -> ProviderError:
    """A `ProviderError` from an error object found in the stream (`error` event, `response.error`)."""
    if not isinstance(error, dict):
        return ProviderError("server", f"stream error: {error}", raw=error)
    code = error.get("code")
    etype = error_type_for(code, error.get("type")) or "server"
    retryable = False if code in NOT_RETRYABLE_CODES else None
    message = str(error.get("message") or code or error)
    return ProviderError(etype, message, code=code, raw=error, retryable=retryable)  # type: ignore[arg-type]


def reasoning_signature(item: dict[str, Any]) -> str | None:
    """What a finished reasoning item needs to be sent back, as JSON (None without an id)."""
    if not item.get("id"):
        return None
    kept: dict[str, Any] = {"type": "reasoning", "id": item["id"], "summary": item.get("summary") or []}
    if item.get("encrypted_content"):
        kept["encrypted_content"] = item["encrypted_content"]
    if item.get("content"):
        kept["content"] = item["content"]
    return json.dumps(kept, separators=(",", ":"))


class ResponsesDecoder(StreamDecoder):
    """One Responses stream: each SSE event one typed event (its ``type`` field, else the SSE
    event name), turned into deltas (`handle`); ids, usage and the stop reason noted. A whole
    Response object (a server that ignored ``stream: true``) reads as the events it stands for.
    ``response.failed`` and ``error`` events (and a response whose status is failed or cancelled)
    raise `ProviderError`.
    """

    def __init__(self, provider: str) -> None:
        super().__init__()
        self.provider = provider
        self.index = BlockIndex()
        self._text_seen: set[tuple[int, int]] = set()
        self._reasoning_part: dict[int, Any] = {}  # output index -> last part key
        self._calls: dict[int, dict[str, Any]] = {}  # output index -> the item as added
        self._args_seen: set[int] = set()
        self.has_calls = False
        self._cited: set[tuple[int, int]] = set()  # text parts whose annotations streamed
        self._tool_calls: dict[str, int] = {}  # built-in tool calls made, by tool (priced per call)

    def feed(self, sse: Any) -> Sequence[DeltaMessage]:
        data = sse.data
        if not data:
            return ()
        if data == "[DONE]":  # OpenAI sends none; some compatible servers do
            self.done = True
            return ()
        try:
            event = frame_json(data)
        except ValueError:
            raise not_json(self.provider, data) from None
        if not isinstance(event, dict):
            return ()
        if "type" not in event and sse.event:
            event["type"] = sse.event
        return self.handle(event)

    def whole(self, data: dict[str, Any]) -> list[DeltaMessage]:
        """A whole Response object: the deltas of the events it stands for (`response_object_events`)."""
        if isinstance(data.get("error"), dict) and data.get("object") != "response":
            raise error_from_object(data["error"])
        return [d for event in response_object_events(data) for d in self.handle(event)]

    def handle(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """The deltas of one stream event (parsed JSON)."""
        etype = event.get("type")
        if etype == "response.output_text.delta" or etype == "response.refusal.delta":
            delta = event.get("delta")
            if not delta:
                return ()
            key = (event.get("output_index", 0), event.get("content_index", 0))
            self._text_seen.add(key)
            return (TextDelta(self.index(key), delta),)
        if etype == "response.function_call_arguments.delta":
            delta = event.get("delta")
            if not delta:
                return ()
            oi = event.get("output_index", 0)
            self._args_seen.add(oi)
            self.has_calls = True
            return (ToolCallDelta(self.index((oi, "call")), None, None, delta),)
        if etype == "response.reasoning_summary_text.delta":
            return self._reasoning(event, ("summary", event.get("summary_index", 0)))
        if etype == "response.reasoning_text.delta":
            return self._reasoning(event, ("content", event.get("content_index", 0)))
        if etype == "response.output_item.added":
            return self._item_added(event.get("output_index", 0), event.get("item") or {})
        if etype == "response.content_part.added":
            self.index((event.get("output_index", 0), event.get("content_index", 0)))  # keep arrival order
            return ()
        if etype == "response.function_call_arguments.done":
            oi = event.get("output_index", 0)
            arguments = event.get("arguments")
            if oi in self._args_seen or not arguments:
                return ()
            self._args_seen.add(oi)
            self.has_calls = True
            return [ToolCallDelta(self.index((oi, "call")), None, None, arguments)]
        if etype == "response.output_item.done":
            return self.item_done(event.get("output_index", 0), event.get("item") or {})
        if etype == "response.created" or etype == "response.in_progress":
            response = event.get("response") or {}
            self.note(StreamMeta(request_id=response.get("id") or None, model=response.get("model") or None))
            return ()
        if etype == "response.completed":  # some servers end an incomplete or failed reply with this event too
            response = event.get("response") or {}
            status = response.get("status")
            if status in ("failed", "cancelled"):
                raise self._failed(response, status)
            self.note(self._finished(response, "incomplete" if status == "incomplete" else "completed"))
            self.done = True  # the reply's last event: nothing after it is read
            return ()
        if etype == "response.incomplete":
            self.note(self._finished(event.get("response") or {}, "incomplete"))
            self.done = True
            return ()
        if etype == "response.failed":
            raise self._failed(event.get("response") or {}, "failed")
        if etype == "error":
            error = event.get("error")
            raise error_from_object(error if isinstance(error, dict) else event)
        return self._builtin_event(etype, event)

    def _builtin_event(self, etype: Any, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """A built-in tool's progress (its status, code as it is written) or a text annotation."""
        oi = event.get("output_index", 0)
        if etype == "response.output_text.annotation.added":
            cited = annotation(event.get("annotation"))
            key = (oi, event.get("content_index", 0))
            self._cited.add(key)
            return (CitationDelta(self.index(key), cited),) if cited is not None else ()
        if etype in PROGRESS:
            return (ServerToolDelta(self.index((oi, "server")), status=PROGRESS[etype]),)
        if etype == "response.code_interpreter_call_code.delta" and event.get("delta"):
            return (ServerToolDelta(self.index((oi, "server")), arguments=event["delta"]),)
        return ()

    # -- items --------------------------------------------------------------------------

    def _reasoning(self, event: dict[str, Any], part: Any) -> Sequence[DeltaMessage]:
        delta = event.get("delta")
        if not delta:
            return ()
        oi = event.get("output_index", 0)
        last = self._reasoning_part.get(oi)
        self._reasoning_part[oi] = part
        if last is not None and last != part:
            delta = "\n\n" + delta  # a new summary part: keep the parts apart
        return (ReasoningDelta(self.index((oi, "reasoning")), delta),)

    def _item_added(self, oi: int, item: dict[str, Any]) -> Sequence[DeltaMessage]:
        kind = item.get("type")
        if kind == "function_call":
            self._calls[oi] = item
            self.has_calls = True
            arguments = item.get("arguments") or ""
            if arguments:
                self._args_seen.add(oi)
            signature = json.dumps({"id": item["id"]}, separators=(",", ":")) if item.get("id") else None
            index = self.index((oi, "call"))
            return [ToolCallDelta(index, item.get("call_id") or None, item.get("name") or None, arguments, signature)]
        if kind == "reasoning":
            self.index((oi, "reasoning"))  # keep arrival order even if no summary streams
        if kind in ITEM_TOOLS:
            tool, name = ITEM_TOOLS[kind]
            return [ServerToolDelta(self.index((oi, "server")), item.get("id") or None, tool, name,
                                    status=item.get("status") or None)]
        return ()

    def item_done(self, oi: int, item: dict[str, Any]) -> Sequence[DeltaMessage]:
        """A finished output item: fill in what no delta carried; a reasoning item's signature."""
        kind = item.get("type")
        if kind == "message":
            out: list[DeltaMessage] = []
            for ci, part in enumerate(item.get("content") or ()):
                if (oi, ci) in self._text_seen:
                    continue
                text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                if text:
                    self._text_seen.add((oi, ci))
                    out.append(TextDelta(self.index((oi, ci)), text))
            return out + self._annotations(oi, item)
        if kind == "function_call":
            self.has_calls = True
            added = self._calls.get(oi)
            arguments = "" if oi in self._args_seen else (item.get("arguments") or "")
            self._args_seen.add(oi)
            if added is not None and added.get("call_id") and added.get("name") and not arguments:
                return ()
            signature = json.dumps({"id": item["id"]}, separators=(",", ":")) if item.get("id") else None
            return [
                ToolCallDelta(
                    self.index((oi, "call")),
                    item.get("call_id") or None,
                    item.get("name") or None,
                    arguments,
                    signature,
                )
            ]
        if kind == "reasoning":
            text = ""
            if oi not in self._reasoning_part:
                parts = [p.get("text") or "" for p in item.get("content") or () if p.get("type") == "reasoning_text"]
                parts += [p.get("text") or "" for p in item.get("summary") or ()]
                text = "\n\n".join(p for p in parts if p)
                self._reasoning_part[oi] = "done"
            signature = reasoning_signature(item)
            if not text and signature is None:
                return ()
            return [ReasoningDelta(self.index((oi, "reasoning")), text, signature)]
        if kind == "image_generation_call" and item.get("result"):  # "Image generation" tool: base64 image
            mime = f"image/{item.get('output_format') or 'png'}".replace("image/jpg", "image/jpeg")
            return [BlockDelta(self.index((oi, "image")), ImageBlock(mime_type=mime, data=item["result"]))]
        if kind in ITEM_TOOLS:
            call, result = item_blocks(item, "openai-responses")
            self._tool_calls[call.tool] = self._tool_calls.get(call.tool, 0) + 1
            self.note(StreamMeta(server_tool_calls=dict(self._tool_calls)))
            return [BlockDelta(self.index((oi, "server")), call), BlockDelta(self.index((oi, "result")), result)]
        return ()  # other items (computer use, MCP, ...) are not part of our content model

    def _annotations(self, oi: int, item: dict[str, Any]) -> list[DeltaMessage]:
        """The citations of a finished message's text parts whose annotations did not stream."""
        out: list[DeltaMessage] = []
        for ci, part in enumerate(item.get("content") or ()):
            if (oi, ci) in self._cited or not isinstance(part, dict):
                continue
            self._cited.add((oi, ci))
            out += [CitationDelta(self.index((oi, ci)), c) for c in map(annotation, part.get("annotations") or ()) if c]
        return out

    def _failed(self, response: dict[str, Any], status: str) -> ProviderError:
        """The error a response that ended `status` (``"failed"``, ``"cancelled"``) stands for: its
        ``error`` object, else one line saying so; its usage and ids noted first (billed, they count)."""
        usage = response.get("usage")
        ids = {"request_id": response.get("id") or None, "model": response.get("model") or None}
        self.note(read_usage(usage_from_responses, usage, **ids) if usage else StreamMeta(**ids))
        error = response.get("error")
        if error:
            return error_from_object(error)
        if status == "cancelled":
            return ProviderError("cancelled", f"{self.provider} cancelled the response before it ended")
        return ProviderError("server", f"{self.provider} says the response failed, without saying why")

    def _finished(self, response: dict[str, Any], status: str) -> StreamMeta:
        usage = response.get("usage")
        ids = {"request_id": response.get("id") or None, "model": response.get("model") or None}
        meta = read_usage(usage_from_responses, usage, **ids) if usage else StreamMeta(**ids)
        if status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            reason = reason_text(reason) if reason else None
            meta.stop_raw = reason or "incomplete"
            meta.stop_kind = INCOMPLETE_REASONS.get(reason or "", StopKind.end_turn)
        else:
            meta.stop_raw = response.get("status") or status
            meta.stop_kind = StopKind.tool_use if self.has_calls else StopKind.end_turn
        return meta


def response_object_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream events equivalent to one whole (non-streamed) Response object."""
    yield {"type": "response.created", "response": response}
    for oi, item in enumerate(response.get("output") or ()):
        yield {"type": "response.output_item.done", "output_index": oi, "item": item}
    status = response.get("status") or "completed"
    if status == "failed":
        yield {"type": "response.failed", "response": response}
    elif status == "incomplete":
        yield {"type": "response.incomplete", "response": response}
    elif status in ("completed", "cancelled"):  # the completed event reads a cancelled response's status
        yield {"type": "response.completed", "response": response}
    else:
        raise ProviderError(
            "invalid_response",
            f"the response is still {status!r}; a streamed request should not get an unfinished response",
            raw=response,
        )
