"""OpenAI Chat Completions over SSE, for OpenAI and every OpenAI-compatible server.

Follows the OpenAI API reference, "Chat Completions" (`POST /chat/completions`,
`stream: true`, chunk object `chat.completion.chunk`) and the streaming guide.
Compatible servers (Ollama `/v1`, vLLM, llama.cpp, Groq, Mistral, OpenRouter,
DeepSeek, Azure AI) differ in details handled here: `reasoning_content` or
`reasoning` deltas, usage on the finish chunk or in `x_groq`, a wrong
`Content-Type` on the stream, `: comment` keep-alives, an `error` object inside
a chunk or as an `event: error`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


from ...core import (
    ActionCallBlock,
    ActionResultBlock,
    DeltaMessage,
    DocumentBlock,
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    ReasoningDelta,
    StopKind,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
    redact_head,
)
from ..base import STATUS_TYPES, BasePromptDriver, BlockIndex, Capabilities, StreamMeta, read_usage, wire_usage
from ..decode import StreamDecoder, not_json
from ..catalog.model_rules import openai_non_reasoning_model, openai_reasoning_model
from ..error_types import error_type_for
from ..structured import OUTPUT_TOOL, output_tool, schema_name, strict_or_none
from ..tool_media import caption, result_text, tool_media

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
            chunk = json.loads(sse.data)
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


#: Compatible providers whose API names a setting differently from OpenAI's (their API
#: references: Mistral "Chat Completion" takes ``max_tokens`` and ``random_seed``;
#: DeepSeek and OpenRouter document ``max_tokens``).
WIRE_NAMES: dict[str, dict[str, str]] = {
    "mistral": {"max_output_tokens": "max_tokens", "seed": "random_seed"},
    "deepseek": {"max_output_tokens": "max_tokens"},
    "openrouter": {"max_output_tokens": "max_tokens"},
}
#: OpenAI's limit on stop sequences (API reference, Chat Completions: "Up to 4 sequences").
MAX_STOP = 4


def system_message(prompt_stack: PromptStack) -> list[dict[str, Any]]:
    """The system blocks as one ``system`` message (Chat Completions, Ollama), or none."""
    texts = [b.text for b in prompt_stack.system_blocks if b.text]
    return [{"role": "system", "content": "\n\n".join(texts)}] if texts else []


def openai_tool_choice(choice: str, name: str | None, *, flat: bool = False) -> Any:
    """`ModelSettings.tool_choice` in OpenAI's form; `flat` for the Responses API's
    ``{"type": "function", "name": ...}`` instead of Chat's nested ``function`` object."""
    if name is None:
        return choice
    return {"type": "function", "name": name} if flat else {"type": "function", "function": {"name": name}}


class OpenAIChatPromptDriver(BasePromptDriver):
    """Prompt driver for `POST {base_url}/chat/completions` with `stream: true`.

    Args: see `BasePromptDriver`. `provider_options` keys go into the request
    body as they are (``temperature``, ``max_completion_tokens``, ...).

    `ModelSettings` (OpenAI API reference, "Create chat completion"):
    ``temperature``, ``top_p``, ``max_completion_tokens``, ``stop`` (at most 4),
    ``seed``, ``reasoning_effort``, ``tool_choice`` (a string, or
    ``{"type": "function", "function": {"name": ...}}``), ``parallel_tool_calls``
    (both only with tools). Prompt caching is automatic (``cache=False`` cannot be
    honoured); a thinking budget in tokens has no Chat Completions field.
    OpenAI's reasoning models take no ``temperature``, ``top_p`` or ``stop``.
    """

    protocol = "openai"
    default_base_url = "https://api.openai.com/v1"
    stream_types = ("text/event-stream",)
    capabilities = Capabilities(vision=True, structured_output_native=True, reasoning=True, documents=True)
    known_options = frozenset(
        {
            "temperature",
            "top_p",
            "max_tokens",
            "max_completion_tokens",
            "seed",
            "stop",
            "n",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
            "logprobs",
            "top_logprobs",
            "user",
            "reasoning_effort",
            "response_format",
            "parallel_tool_calls",
            "tool_choice",
            "service_tier",
            "metadata",
            "store",
            "verbosity",
            "extra_body",
        }
    )

    def capabilities_for(self, model: str) -> Capabilities:
        if openai_non_reasoning_model(model):
            return Capabilities(vision=True, structured_output_native=True, reasoning=False, documents=True)
        return self.capabilities

    def headers(self) -> dict[str, str]:
        return self.bearer_headers("text/event-stream")

    # -- request ------------------------------------------------------------------------

    def settings_fields(self, prompt_stack: PromptStack) -> dict[str, Any]:
        """The request fields for `prompt_stack.settings`.

        Raises:
            ProviderError: ``unsupported_capability`` for a setting this provider or model cannot take.
        """
        settings = prompt_stack.settings
        names = WIRE_NAMES.get(self.provider, {})
        fields: dict[str, Any] = {}
        if openai_reasoning_model(self.model):
            for name in ("temperature", "top_p", "stop"):
                if getattr(settings, name) is not None:
                    raise self.unsupported(name, "OpenAI reasoning models take no sampling settings")
        for name, wire in (
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("max_output_tokens", "max_completion_tokens"),
            ("seed", "seed"),
        ):
            value = getattr(settings, name)
            if value is not None:
                fields[names.get(name, wire)] = value
        if settings.stop is not None:
            if len(settings.stop) > MAX_STOP and self.provider in ("openai", "azure-openai"):
                raise self.unsupported("stop", f"at most {MAX_STOP} stop sequences")
            fields["stop"] = list(settings.stop)
        if settings.budget is not None and not (
            settings.budget == 0 and not self.capabilities_for(self.model).reasoning
        ):
            raise self.unsupported(
                "reasoning", "Chat Completions takes an effort (low, medium, high), not a budget in tokens"
            )
        if settings.effort:
            fields["reasoning_effort"] = settings.effort
        if settings.cache is False:
            raise self.unsupported("cache", "prompt caching is automatic and cannot be turned off")
        if prompt_stack.tools:
            if settings.tool_choice is not None:
                fields["tool_choice"] = openai_tool_choice(settings.tool_choice, settings.tool_name)
            if settings.parallel_tool_calls is not None:
                fields["parallel_tool_calls"] = settings.parallel_tool_calls
        return fields

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        options = dict(self.provider_options)
        extra = options.pop("extra_body", None) or {}
        body: dict[str, Any] = {
            "model": self.model,
            "messages": system_message(prompt_stack)
            + [m for message in prompt_stack.messages for m in self._messages(message)],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in prompt_stack.tools
        ]
        schema = prompt_stack.to_output_json_schema()
        strategy = self.output_strategy(prompt_stack)
        if strategy == "native":
            # Strict mode when the schema allows it (all properties required, no extra ones).
            strict = strict_or_none(schema)  # type: ignore[arg-type]
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name(schema), "schema": strict or schema,  # type: ignore[arg-type]
                                "strict": strict is not None},
            }
        elif strategy == "tool":
            if "tool_choice" in options:
                raise ProviderError(
                    "invalid_request",
                    "provider option tool_choice contradicts the tool output strategy, "
                    "which forces a call to its output tool; drop one of them",
                    retryable=False,
                )
            strict = strict_or_none(schema)  # type: ignore[arg-type]
            tool = output_tool(schema, strict)  # type: ignore[arg-type]
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                        "strict": strict is not None,
                    },
                }
            )
            # Only the output tool: call it. Other tools too: call some tool, the output one in the end.
            body["tool_choice"] = (
                "required" if prompt_stack.tools else {"type": "function", "function": {"name": OUTPUT_TOOL}}
            )
        if tools:
            body["tools"] = tools
        self.put_settings(body, self.settings_fields(prompt_stack), {**options, **extra})
        body.update(options)
        body.update(extra)
        return "/chat/completions", body

    def _results(self, message: Message) -> list[dict[str, Any]]:
        """The ``tool`` messages of `message`'s results, then, when the tools returned images, one
        user message with them, each call's introduced by a text part naming it: a ``tool``
        message's content is text only ("Chat Completions", messages)."""
        results: list[dict[str, Any]] = []
        media: list[dict[str, Any]] = []
        for block in message.content:
            if not isinstance(block, ActionResultBlock):
                continue
            sent, notes = tool_media(self, block)
            text = result_text(block, notes, len(sent))
            results.append({"role": "tool", "tool_call_id": block.action.tag, "content": text})
            if sent:
                media += [{"type": "text", "text": caption(block)}]
                media += [{"type": "image_url", "image_url": {"url": f"data:{m.mime_type};base64,{m.data}"}}
                          for m in sent]
        return results + ([{"role": "user", "content": media}] if media else [])

    def _messages(self, message: Message) -> list[dict[str, Any]]:
        results = self._results(message)
        if message.role == "tool":
            return results
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append({"type": "text", "text": block.text})
            elif isinstance(block, ImageBlock):
                url = block.url or f"data:{block.mime_type};base64,{block.data}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif isinstance(block, DocumentBlock):  # "File inputs": a PDF as a file part; text as text
                parts.append(
                    {"type": "file", "file": {"filename": block.name or "document.pdf", "file_data": block.data_url}}
                    if block.is_pdf
                    else {"type": "text", "text": "\n\n" + block.as_text()}
                )
        out: dict[str, Any] = {"role": message.role}
        if all(p["type"] == "text" for p in parts):
            out["content"] = "".join(p["text"] for p in parts) if parts else None
        else:
            out["content"] = parts
        calls = [b for b in message.content if isinstance(b, ActionCallBlock)]
        if calls:
            out["tool_calls"] = [
                {
                    "id": c.action.tag,
                    "type": "function",
                    "function": {"name": c.action.native_name, "arguments": json.dumps(c.action.input)},
                }
                for c in calls
            ]
        elif out["content"] is None:
            out["content"] = ""
        return results + [out] if (parts or calls or not results) else results

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> ChatDecoder:
        return ChatDecoder(self.provider)

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                etype = "overloaded" if "overload" in str(error.get("type", "")).lower() else None
                message = error.get("message")
                upstream = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), dict) else None
                if upstream and isinstance(upstream, str) and upstream not in str(message):
                    message = f"{message}: {upstream[:300]}"  # OpenRouter: the routed provider's own words
                return error.get("code") or error.get("type"), message, etype
            if isinstance(error, str):
                return None, error, None
            detail = data.get("detail") or data.get("message")
            if detail:
                return None, str(detail), None
        return super().parse_error_body(status, data)
