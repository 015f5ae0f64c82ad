"""OpenAI Chat Completions: the stream (and a whole ``chat.completion``) read into deltas.

Follows the OpenAI API reference, "Chat Completions" (chunk object `chat.completion.chunk`,
``data: [DONE]``) and the streaming guide. Compatible servers (Ollama `/v1`, vLLM, llama.cpp,
Groq, Mistral, OpenRouter, DeepSeek, Azure AI) differ in details handled here:
`reasoning_content` or `reasoning` deltas, thinking parts in `content`, usage on the finish chunk
or in `x_groq`, an `error` object inside a chunk or as an `event: error`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...core import DeltaMessage, ProviderError, ReasoningDelta, StopKind, TextDelta, ToolCallDelta, Usage, redact_head
from ..base import STATUS_TYPES, BlockIndex, StreamMeta, read_usage, wire_usage
from ..decode import StreamDecoder, frame_json, not_json
from ..error_types import error_type_for


FINISH_REASONS: dict[str, StopKind] = {
    "stop": StopKind.end_turn,
    "length": StopKind.max_tokens,
    "tool_calls": StopKind.tool_use,
    "function_call": StopKind.tool_use,
    "content_filter": StopKind.content_filter,
}


def content_parts(content: Any) -> list[tuple[str, str]]:
    """(``text`` or ``reasoning``, text) pieces of a message's or delta's ``content``: a string,
    or a list of typed parts (``{"type": "text", "text": ...}``, and thinking parts as Mistral's
    reasoning models send them: ``{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}``).

    Raises:
        TypeError: content of another kind (the reply is then ``invalid_response``).
    """
    if isinstance(content, str) or content is None:
        return [("text", content)] if content else []
    if not isinstance(content, list):
        raise TypeError(f"content is a {type(content).__name__}, not text or a list of parts")
    parts: list[tuple[str, str]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            parts.append(("text", str(part["text"])))
        elif kind in ("thinking", "reasoning"):
            inner = part.get(kind) if part.get(kind) is not None else part.get("text")
            text = inner if isinstance(inner, str) else "".join(
                str(p.get("text") or "") for p in inner or () if isinstance(p, dict))
            if text:
                parts.append(("reasoning", text))
    return parts


def usage_from_openai(raw: dict[str, Any]) -> Usage:
    """Map an OpenAI-style usage object (tokens) to `Usage`.

    Raises:
        ValueError, AttributeError: a block of the wrong shape (`read_usage` drops it)."""
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return wire_usage(
        raw,
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        total_tokens=raw.get("total_tokens") or 0,
        cache_read_tokens=prompt_details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


_NONE: dict[str, Any] = {}  # read only: what a chunk without ``x_groq`` has there


class ChatDecoder(StreamDecoder):
    """One Chat Completions stream: each SSE event a ``chat.completion.chunk``, ``[DONE]``
    (the stop signal), or an error (``event: error``, or an ``error`` field). Choice 0 makes
    the reply (we never ask for ``n`` > 1): its text, reasoning, refusal and tool calls, and
    its ``finish_reason``; usage comes on a last chunk of its own, or in ``x_groq``."""

    def __init__(self, provider: str) -> None:
        super().__init__()
        self.provider = provider
        self.index = BlockIndex()
        self.finished = False
        self.call_ids: dict[int, str] = {}  # tool_calls[].index -> the id of the call there
        self.generation: dict[int, int] = {}  # how many calls have used that index
        self.call_at: dict[int, int] = {}  # tool_calls[].index -> the block index of its current call

    def feed(self, sse: Any) -> Sequence[DeltaMessage]:
        """The deltas of one SSE event.

        Raises:
            ProviderError: the stream's error, or ``invalid_response`` for data that is not JSON or
                a chunk of another shape (``"choices": [null]``, a ``delta`` that is a list),
                quoting the chunk (redacted), not Python's words about it.
        """
        try:
            chunk = frame_json(sse.data)
        except ValueError:
            return self._not_json(sse.data)
        try:
            return self._chunk(sse, chunk)
        except (AttributeError, TypeError, KeyError) as exc:
            raise ProviderError("invalid_response", f"{self.provider} sent a chunk of a shape Chat Completions "
                                f"does not have ({type(exc).__name__}): {redact_head(sse.data)!r}") from None

    def _chunk(self, sse: Any, chunk: Any) -> Sequence[DeltaMessage]:
        if sse.event == "error":
            raise _error_from_object(chunk.get("error", chunk) if isinstance(chunk, dict) else chunk)
        if type(chunk) is not dict:
            return ()
        usage = chunk.get("usage")
        if usage or "x_groq" in chunk:  # before an error in the same chunk (OpenRouter): what was billed counts
            self._usage(chunk, usage)
        if "error" in chunk and chunk["error"]:
            raise _error_from_object(chunk["error"])
        choices = chunk.get("choices")
        if not choices:
            return ()
        if len(choices) != 1:
            return [d for item in choices if item.get("index", 0) == 0 for d in self.read(item)]
        choice = choices[0]  # the usual chunk: one choice, its delta one piece of text
        delta = choice.get("delta")
        if (delta and len(delta) == 1 and "content" in delta and not choice.get("finish_reason")
                and choice.get("index", 0) == 0):
            content = delta["content"]
            if type(content) is str:
                return (TextDelta(self.index["text"], content),) if content else ()
        return self.read(choice) if choice.get("index", 0) == 0 else ()

    def _not_json(self, data: str) -> Sequence[DeltaMessage]:
        """An event whose data is not JSON: ``[DONE]`` (the stop signal), an empty one (nothing),
        else `ProviderError` quoting it."""
        if data == "[DONE]":
            self.done = True
            if not self.finished:  # a server that never sends finish_reason still ends with [DONE]
                self.note(StreamMeta(stop_raw="[DONE]"))
            return ()
        if not data:
            return ()
        raise not_json(self.provider, data)

    def _usage(self, chunk: dict[str, Any], usage: Any) -> None:
        if not usage:
            usage = (chunk["x_groq"] or _NONE).get("usage")  # Groq
        if usage:
            self.note(
                read_usage(
                    usage_from_openai, usage, request_id=chunk.get("id") or None, model=chunk.get("model") or None
                )
            )

    def read(self, choice: dict[str, Any]) -> Sequence[DeltaMessage]:
        """The deltas of one chunk's choice 0; its ``finish_reason`` noted."""
        return self._read_all(choice, choice.get("delta") or _NONE)

    def _read_all(self, choice: dict[str, Any], delta: dict[str, Any]) -> list[DeltaMessage]:
        index = self.index
        items: list[DeltaMessage] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            items.append(ReasoningDelta(index("reasoning"), reasoning))
        content = delta.get("content")
        if content is not None:
            for kind, text in content_parts(content):
                items.append(
                    TextDelta(index("text"), text) if kind == "text" else ReasoningDelta(index("reasoning"), text)
                )
        refusal = delta.get("refusal")
        if refusal:
            items.append(TextDelta(index("text"), refusal))
        for call in delta.get("tool_calls") or ():
            items.append(self._call(call))
        finish = choice.get("finish_reason")
        if finish:  # one that is not text (a broken proxy's object) still ends the reply: its JSON is kept
            finish = finish if isinstance(finish, str) else json.dumps(finish)[:100]
            self.finished = True
            self.note(StreamMeta(stop_raw=finish, stop_kind=FINISH_REASONS.get(finish, StopKind.end_turn)))
        return items

    def _call(self, call: dict[str, Any]) -> ToolCallDelta:
        function = call.get("function") or _NONE
        slot = call.get("index", 0)
        call_id = call.get("id")
        if call_id and self.call_ids.setdefault(slot, call_id) != call_id:
            # A new id at the same index is a new call (servers that send parallel
            # calls without distinct indexes, e.g. Gemini's OpenAI-compatible API).
            self.call_ids[slot] = call_id
            self.generation[slot] = self.generation.get(slot, 0) + 1
            del self.call_at[slot]  # set by the call that had the old id
        at = self.call_at.get(slot)
        if at is None:
            at = self.call_at[slot] = self.index(("tool", slot, self.generation.get(slot, 0)))
        return ToolCallDelta(at, call_id or None, function.get("name") or None, function.get("arguments") or "")

    def whole(self, data: dict[str, Any]) -> list[DeltaMessage]:
        """A whole ``chat.completion`` object (a server that ignored ``stream: true``)."""
        if data.get("error"):
            raise _error_from_object(data["error"])
        choice = next((c for c in data.get("choices") or () if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            raise ProviderError(
                "invalid_response",
                f"{self.provider} sent a JSON reply without choices: {redact_head(json.dumps(data))!r}",
                retryable=False,
            )
        if data.get("usage"):
            self.note(
                read_usage(
                    usage_from_openai, data["usage"], request_id=data.get("id") or None, model=data.get("model") or None
                )
            )
        message, index, deltas = choice.get("message") or {}, self.index, []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            deltas.append(ReasoningDelta(index("reasoning"), reasoning))
        for kind, text in content_parts(message.get("content")):
            deltas.append(
                TextDelta(index("text"), text) if kind == "text" else ReasoningDelta(index("reasoning"), text)
            )
        if message.get("refusal"):
            deltas.append(TextDelta(index("text"), message["refusal"]))
        for slot, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            arguments = function.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments) if arguments else ""
            deltas.append(
                ToolCallDelta(index(("tool", slot)), call.get("id") or None, function.get("name") or None, arguments)
            )
        finish = choice.get("finish_reason") or ("tool_calls" if message.get("tool_calls") else "stop")
        self.note(StreamMeta(stop_raw=finish, stop_kind=FINISH_REASONS.get(finish, StopKind.end_turn)))
        return deltas


def _error_from_object(error: Any) -> ProviderError:
    """An `error` object found inside a stream (chunk field or `event: error`)."""
    if not isinstance(error, dict):
        return ProviderError("server", f"stream error: {error}", raw=error)
    code = error.get("code")
    status = error.get("status_code") or (code if isinstance(code, int) else None)
    etype = STATUS_TYPES.get(status) if isinstance(status, int) else None
    if etype is None:
        etype = (
            "server"
            if isinstance(status, int) and status >= 500
            else error_type_for(code, error.get("type")) or "server"
        )
    message = str(error.get("message") or error)
    return ProviderError(etype, message, code=code, raw=error, status=status)  # type: ignore[arg-type]
