"""Anthropic Messages over SSE.

Follows the Anthropic API reference, "Messages" (`POST /v1/messages`,
`anthropic-version: 2023-06-01`), its "Streaming Messages" guide (the
`message_start` / `content_block_start` / `content_block_delta` /
`content_block_stop` / `message_delta` / `message_stop` event flow, `ping`,
`event: error`), "Errors" (the `{"type": "error", "error": {...}}` envelope and
its error types), "Tool use" (`tool_use` / `tool_result` blocks), "Extended
thinking" (`thinking` blocks with a `signature`, `redacted_thinking` blocks,
sent back unchanged) and "Handling stop reasons".

What differs from the Chat Completions shape, and is handled here:

* the system prompt is the top-level `system` field, not a message;
* roles must alternate: tool results travel as `tool_result` blocks in a user
  message, and adjacent messages of the same role are merged;
* `max_tokens` is required (4096 unless `provider_options` gives it);
* every content block has its own wire `index`; tool input arrives as
  `input_json_delta` fragments (the first one often ``""``), thinking as
  `thinking_delta` then one `signature_delta`; `redacted_thinking` and server
  tool results arrive whole in `content_block_start`;
* usage comes in two parts: input (and cache) counts in `message_start`,
  cumulative counts in `message_delta`, which overwrite what they repeat;
* structured output has no native mode here: the ``tool`` strategy is used, a
  synthetic tool named `STRUCTURED_OUTPUT_TOOL` that the model is made to call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar


from ...core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    DocumentBlock,
    GenericBlock,
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    StopKind,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
    redact,
    redact_head,
)
from ..catalog.models import parse_anthropic
from ..base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta, check_counts, read_usage, wire_usage
from ..decode import StreamDecoder, not_json
from .anthropic_server import TOOL_KINDS, citation, container_to_reuse, sent_back, server_block, tool_definitions
from ..catalog.model_rules import EFFORT_BUDGETS
from ..structured import OUTPUT_TOOL
from ..tool_media import result_text, tool_media

#: The `anthropic-version` header this driver speaks.
API_VERSION = "2023-06-01"
#: `max_tokens` is required by the API; used unless `provider_options` sets it.
DEFAULT_MAX_TOKENS = 4096
#: Name of the synthetic tool that carries structured output (the "tool" strategy).
STRUCTURED_OUTPUT_TOOL = OUTPUT_TOOL

#: stop_reason -> StopKind ("Handling stop reasons"). `pause_turn` (the API paused a long turn of
#: server tools) ends this turn, marked ``paused`` in its metadata: the loop sends it back as it is,
#: which continues it ("Server tools": "The server-side loop and pause_turn").
STOP_REASONS: dict[str, StopKind] = {
    "end_turn": StopKind.end_turn,
    "tool_use": StopKind.tool_use,
    "max_tokens": StopKind.max_tokens,
    "model_context_window_exceeded": StopKind.max_tokens,
    "stop_sequence": StopKind.stop_sequence,
    "refusal": StopKind.content_filter,
    "pause_turn": StopKind.end_turn,
}

#: error.type of the error envelope -> ProviderError.type ("Errors").
ERROR_TYPES: dict[str, str] = {
    "invalid_request_error": "invalid_request",
    "request_too_large": "invalid_request",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "billing_error": "permission",
    "not_found_error": "not_found",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "overloaded_error": "overloaded",
    "timeout_error": "timeout",
}

#: The smallest thinking budget the API takes ("Extended thinking": budget_tokens >= 1024).
MIN_THINKING_BUDGET = 1024
#: `ModelSettings.tool_choice` -> the API's tool_choice type ("Tool use": auto, any, tool, none).
TOOL_CHOICE_TYPES = {"auto": "auto", "required": "any", "none": "none"}
#: Prompt-caching breakpoint ("Prompt caching": cache_control on a block caches the prefix up to it).
CACHE_CONTROL = {"type": "ephemeral"}

#: Content block types this driver maps to core blocks; any other type passes through as `GenericBlock`.
_KNOWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def usage_from_anthropic(raw: dict[str, Any]) -> Usage:
    """Map an Anthropic usage object to `Usage`.

    Anthropic's `input_tokens` counts only the uncached part of the prompt;
    `input_tokens` here is the whole prompt (input + cache read + cache write), so
    that, as for every other driver, the cache counts are parts of `input_tokens`.

    Raises:
        ValueError, AttributeError: a block of the wrong shape (`read_usage` drops it).
    """
    uncached = raw.get("input_tokens") or 0
    cache_read = raw.get("cache_read_input_tokens") or 0
    cache_write = raw.get("cache_creation_input_tokens") or 0
    check_counts(input_tokens=uncached, cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_write)
    details = raw.get("output_tokens_details") or {}
    usage = wire_usage(
        raw,
        input_tokens=uncached + cache_read + cache_write,
        output_tokens=raw.get("output_tokens") or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=details.get("thinking_tokens") or 0,
    )
    server = raw.get("server_tool_use") or {}
    calls = {"web_search": server.get("web_search_requests") or 0, "web_fetch": server.get("web_fetch_requests") or 0}
    check_counts(**calls)
    usage.server_tool_calls = {kind: count for kind, count in calls.items() if count}
    return usage


def stop_kind(stop_reason: str) -> StopKind:
    """The normalized kind of an Anthropic `stop_reason` (unknown values end the turn)."""
    return STOP_REASONS.get(stop_reason, StopKind.end_turn)


def block_deltas(index: int, block: dict[str, Any], provider: str = "anthropic") -> list[DeltaMessage]:
    """The deltas that stand for one whole content block, as it appears in
    `content_block_start` or in a non-streaming message's `content`.

    Text and thinking give their text (nothing when empty, as at the start of a
    stream); `tool_use` gives its id and name and its input as JSON text (none
    for ``{}``, the streaming start); `redacted_thinking` becomes a redacted
    `ReasoningBlock` whose signature is the opaque `data`; a server tool's call or result
    becomes its neutral block (`anthropic_server.server_block`); any other block passes through
    whole as a `GenericBlock`. A text block's citations (a whole message's) come after its text.
    """
    kind = block.get("type")
    if kind == "text":
        text = block.get("text") or ""
        cited = [CitationDelta(index, c) for c in map(citation, block.get("citations") or ()) if c is not None]
        return ([TextDelta(index, text)] if text else []) + cited
    if kind == "thinking":
        text, signature = block.get("thinking") or "", block.get("signature") or None
        return [ReasoningDelta(index, text, signature=signature)] if (text or signature) else []
    if kind == "redacted_thinking":
        return [BlockDelta(index, ReasoningBlock(text="", redacted=True, signature=block.get("data")))]
    if kind == "tool_use":
        arguments = block.get("input") or {}
        text = json.dumps(arguments) if arguments else ""
        return [ToolCallDelta(index, block.get("id") or None, block.get("name") or None, text)]
    return [BlockDelta(index, server_block(block, provider))]


def error_from_object(error: Any, provider: str = "anthropic") -> ProviderError:
    """A `ProviderError` for the `error` object of an `event: error` in the stream."""
    if not isinstance(error, dict):
        return ProviderError("server", f"{provider} stream error: {error}", raw=error)
    raw_type = str(error.get("type") or "")
    etype = ERROR_TYPES.get(raw_type, "server")
    message = error.get("message") or raw_type or "unknown error"
    return ProviderError(
        etype, f"{provider} stream error ({raw_type or 'error'}): {message}", code=raw_type or None, raw=error
    )  # type: ignore[arg-type]


class AnthropicPromptDriver(BasePromptDriver):
    """Prompt driver for `POST {base_url}/messages` with `stream: true`.

    Args: see `BasePromptDriver`. `provider_options` keys (`known_options`) go
    into the request body as they are; `max_tokens` defaults to 4096.

    `ModelSettings` (Anthropic API reference, "Messages"; "Extended thinking";
    "Tool use"; "Prompt caching"): ``max_tokens``, ``temperature``, ``top_p``,
    ``stop_sequences``; ``reasoning`` as ``thinking: {"type": "enabled",
    "budget_tokens": N}`` (an effort becomes `EFFORT_BUDGETS`; at least 1024;
    ``max_tokens`` then defaults to the budget + 4096); ``tool_choice`` as
    ``{"type": "auto" | "any" | "none" | "tool"}``, ``parallel_tool_calls=False``
    as its ``disable_parallel_tool_use``; ``cache=True`` as ``cache_control`` on
    the last tool, the system prompt and the last message block (the stable
    prefix, read back on the next turn). There is no ``seed``; thinking takes no
    ``temperature`` and ``top_p`` only from 0.95 to 1.
    """

    protocol = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    stream_types = ("text/event-stream",)
    api_key_env = "ANTHROPIC_API_KEY"
    capabilities = Capabilities(vision=True, structured_output_native=False, reasoning=True, documents=True)
    #: "Vision": at most 5 MB an image through the API (tool results included: `tool_media`).
    max_image_bytes = 5 * 1024 * 1024
    builtin_tools = frozenset({"web_search", "web_fetch", "code_execution"})
    known_options = frozenset(
        {
            "max_tokens",
            "temperature",
            "top_p",
            "top_k",
            "stop_sequences",
            "thinking",
            "tool_choice",
            "metadata",
            "service_tier",
        }
    )

    def capabilities_for(self, model: str) -> Capabilities:
        """Claude 3 models before 3.7 (and Claude 2) have no extended thinking."""
        name = model.lower()
        if name.startswith(("claude-2", "claude-instant")) or (
            name.startswith("claude-3-") and not name.startswith("claude-3-7")
        ):
            return Capabilities(
                vision=not name.startswith(("claude-2", "claude-instant")),
                structured_output_native=False,
                reasoning=False,
                documents=not name.startswith(("claude-2", "claude-instant")),
            )
        return self.capabilities

    def settings_fields(self, prompt_stack: PromptStack, options: dict[str, Any]) -> dict[str, Any]:
        """The request fields for `prompt_stack.settings` (``max_tokens`` always).

        Raises:
            ProviderError: ``unsupported_capability`` for a setting the API or model cannot take,
                or a combination extended thinking does not allow.
        """
        settings = prompt_stack.settings
        if settings.seed is not None:
            raise self.unsupported("seed", "the Messages API has no seed")
        fields: dict[str, Any] = {}
        budget = EFFORT_BUDGETS[settings.effort] if settings.effort else settings.budget
        if budget:
            if budget < MIN_THINKING_BUDGET:
                raise self.unsupported(
                    "reasoning", f"a thinking budget is at least {MIN_THINKING_BUDGET} tokens, not {budget}"
                )
            if settings.temperature is not None:
                raise self.unsupported("temperature", "extended thinking takes no temperature")
            if settings.top_p is not None and settings.top_p < 0.95:
                raise self.unsupported("top_p", "with extended thinking top_p must be 0.95 to 1")
            fields["thinking"] = {"type": "enabled", "budget_tokens": budget}
        max_tokens = (
            settings.max_output_tokens
            or options.get("max_tokens")
            or (budget + DEFAULT_MAX_TOKENS if budget else DEFAULT_MAX_TOKENS)
        )
        if budget and max_tokens <= budget:
            raise self.unsupported("max_output_tokens", f"it must exceed the thinking budget ({budget} tokens)")
        fields["max_tokens"] = max_tokens
        for name, wire in (("temperature", "temperature"), ("top_p", "top_p")):
            if getattr(settings, name) is not None:
                fields[wire] = getattr(settings, name)
        if settings.stop is not None:
            fields["stop_sequences"] = list(settings.stop)
        if prompt_stack.tools and (settings.tool_choice is not None or settings.parallel_tool_calls is False):
            kind = TOOL_CHOICE_TYPES.get(settings.tool_choice or "auto", "tool")
            choice: dict[str, Any] = {"type": kind, **({"name": settings.tool_name} if kind == "tool" else {})}
            if settings.parallel_tool_calls is False and kind != "none":
                choice["disable_parallel_tool_use"] = True
            fields["tool_choice"] = choice
        return fields

    @staticmethod
    def add_cache_breakpoints(body: dict[str, Any]) -> None:
        """``cache_control`` on the last tool, the last system block and the last message block."""
        if body.get("tools"):
            body["tools"][-1] = {**body["tools"][-1], "cache_control": CACHE_CONTROL}
        if isinstance(body.get("system"), str):
            body["system"] = [{"type": "text", "text": body["system"]}]
        if body.get("system"):
            body["system"][-1] = {**body["system"][-1], "cache_control": CACHE_CONTROL}
        for message in reversed(body["messages"]):
            cacheable = [
                n
                for n, part in enumerate(message["content"])
                if part.get("type") not in ("thinking", "redacted_thinking")
            ]
            if cacheable:
                n = cacheable[-1]
                message["content"][n] = {**message["content"][n], "cache_control": CACHE_CONTROL}
                break

    models_params = {"limit": 1000}

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        """Anthropic's list, paged by ``after_id`` (API reference, "Models: List Models")."""
        return parse_anthropic(data)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    # -- request ------------------------------------------------------------------------

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        """The Messages request body.

        Raises:
            ProviderError: ``unsupported_capability`` for content or a schema the
                API cannot take (audio, a non-object output schema, extended
                thinking together with a forced tool choice); ``invalid_request``
                for a `tool_choice` option that contradicts the output schema.
        """
        options = dict(self.provider_options)
        fields = self.settings_fields(prompt_stack, options)
        body: dict[str, Any] = {"model": self.model}
        self.put_settings(body, fields, options)
        system = prompt_stack.system_texts()
        if prompt_stack.system_blocks:  # blocks: a list of text blocks, one each ("Messages": system)
            body["system"] = [{"type": "text", "text": text} for text in system]
        elif system:
            body["system"] = "\n\n".join(system)
        body["messages"] = self._messages(prompt_stack.messages)
        tools = [
            {"name": t.name, **({"description": t.description} if t.description else {}), "input_schema": t.parameters}
            for t in prompt_stack.tools
        ]
        schema = prompt_stack.to_output_json_schema()
        self._add_builtin_tools(prompt_stack, body, tools)
        if schema is None:  # "Citations": documents cite; the API refuses citations with structured output
            _cite_documents(body["messages"])
        if self.output_strategy(prompt_stack) == "tool":
            self._add_output_tool(schema, tools, options)  # type: ignore[arg-type]
        if tools:
            body["tools"] = tools
        thinking = options.get("thinking", body.get("thinking"))
        choice = options.get("tool_choice", body.get("tool_choice"))
        forced = isinstance(choice, dict) and choice.get("type") in ("any", "tool")
        if forced and isinstance(thinking, dict) and thinking.get("type") == "enabled":
            what = "structured output (a forced tool call)" if schema is not None else "a forced tool_choice"
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} cannot use extended thinking with {what}: "
                "the API only allows tool_choice auto or none while thinking is enabled",
                code="thinking_with_forced_tool",
                retryable=False,
            )
        body.update(options)
        if prompt_stack.settings.cache:
            self.add_cache_breakpoints(body)
        body["stream"] = True
        return "/messages", body

    def _add_builtin_tools(self, prompt_stack: PromptStack, body: dict[str, Any], tools: list[dict[str, Any]]) -> None:
        """The server tools asked for (`anthropic_server.tool_definitions`) after the functions, and
        the code execution container to work in: the one an option names, else the one the
        conversation's last reply used (while it has not expired)."""
        if not prompt_stack.builtin_tools:
            return
        definitions, container = tool_definitions(prompt_stack.builtin_tools)
        tools.extend(definitions)
        if any(t.name == "code_execution" for t in prompt_stack.builtin_tools):
            container = container or container_to_reuse(prompt_stack.messages)
            if container:
                body["container"] = container

    def _add_output_tool(self, schema: dict[str, Any], tools: list[dict[str, Any]], options: dict[str, Any]) -> None:
        """The "tool" strategy: a synthetic tool whose input is the output, and a forced call to it."""
        if schema.get("type", "object") != "object":
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} takes structured output as a tool input, which must be a JSON object; "
                f"got a schema of type {schema.get('type')!r}: wrap it in an object",
                code="structured_output",
                retryable=False,
            )
        if any(t["name"] == STRUCTURED_OUTPUT_TOOL for t in tools):
            raise ProviderError(
                "invalid_request",
                f"a tool may not be named {STRUCTURED_OUTPUT_TOOL!r} when an output schema is set",
                retryable=False,
            )
        # Only the output tool: call it. Other tools too: call any tool, the output one in the end.
        choice = {"type": "any"} if tools else {"type": "tool", "name": STRUCTURED_OUTPUT_TOOL}
        if options.get("tool_choice") not in (None, choice):
            raise ProviderError(
                "invalid_request",
                f"provider option tool_choice={options['tool_choice']!r} contradicts the output schema, which "
                f"needs {choice}",
                retryable=False,
            )
        tools.append(
            {
                "name": STRUCTURED_OUTPUT_TOOL,
                "description": str(schema.get("description") or "Give the final result, in exactly this structure."),
                "input_schema": schema,
            }
        )
        options["tool_choice"] = choice

    def _messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []

        def add(role: str, content: list[dict[str, Any]]) -> None:
            if not content:
                return
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(content)  # roles must alternate: merge
            else:
                turns.append({"role": role, "content": list(content)})

        for message in messages:
            if message.role == "system":
                continue
            results = [self._tool_result(b) for b in message.content if isinstance(b, ActionResultBlock)]
            add("user", results)
            role = "assistant" if message.role == "assistant" else "user"
            add(role, [p for b in message.content if not isinstance(b, ActionResultBlock) for p in self._part(b, role)])
        for turn in turns:
            if turn["role"] == "user":
                # A user turn answering tool calls must start with its tool_result blocks.
                turn["content"].sort(key=lambda p: p["type"] != "tool_result")
        return turns

    def _tool_result(self, block: ActionResultBlock) -> dict[str, Any]:
        """A ``tool_result`` block; images the tool returned go inside it as image blocks ("Tool use":
        its content is a string or a list of text and image blocks)."""
        media, notes = tool_media(self, block)
        text = result_text(block, notes, len(media))
        content: str | list[dict[str, Any]] = text
        if media:
            content = [{"type": "text", "text": text}] + [p for m in media for p in self._part(m, "user")]
        return {"type": "tool_result", "tool_use_id": block.action.tag, "content": content, "is_error": block.is_error}

    def _part(self, block: Any, role: str) -> list[dict[str, Any]]:
        if isinstance(block, TextBlock):
            return [{"type": "text", "text": block.text}] if block.text else []  # the API rejects empty text blocks
        if isinstance(block, ImageBlock):
            if block.url and not block.data:
                source = {"type": "url", "url": block.url}
            else:
                source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            return [{"type": "image", "source": source}]
        if isinstance(block, DocumentBlock):  # "PDF support": a document block, base64 or plain text
            source = (
                {"type": "base64", "media_type": "application/pdf", "data": block.data}
                if block.is_pdf
                else {"type": "text", "media_type": "text/plain", "data": block.text or ""}
            )
            return [{"type": "document", "source": source, **({"title": block.name} if block.name else {})}]
        if isinstance(block, ActionCallBlock):
            action = block.action
            return [{"type": "tool_use", "id": action.tag, "name": action.native_name, "input": action.input}]
        if isinstance(block, ReasoningBlock):
            if role != "assistant" or not block.signature:
                return []  # thinking without a signature (another provider's) cannot be sent back
            if block.redacted:
                return [{"type": "redacted_thinking", "data": block.signature}]
            return [{"type": "thinking", "thinking": block.text, "signature": block.signature}]
        if isinstance(block, (ServerToolCallBlock, ServerToolResultBlock)):
            return sent_back(block, self.protocol) if role == "assistant" else []
        if isinstance(block, GenericBlock):
            value = block.value
            if isinstance(value, dict) and value.get("type"):
                return [value]  # a block we received (of a type we do not know): back unchanged
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            return [{"type": "text", "text": text}] if text else []
        if isinstance(block, AudioBlock):
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} does not support audio input; remove it from the request",
                code="audio",
                retryable=False,
            )
        return []

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> MessagesDecoder:
        return MessagesDecoder(self)

    def _finish_block(self, position: int, block: dict[str, Any], fragments: list[str]) -> BlockDelta:
        raw = "".join(fragments)
        if raw.strip():
            value = _json_or_none(raw)
            if value is None:
                raise ProviderError(
                    "invalid_response",
                    f"{self.provider} sent a {block.get('type')} block whose input is not JSON: {redact_head(raw)!r}",
                )
            block["input"] = value
        return BlockDelta(position, server_block(block, self.protocol))

    def _stream_error(self, error: Any) -> ProviderError:
        exc = error_from_object(error, self.provider)
        exc.message = redact(exc.message)
        exc.args = (exc.message,)
        return exc

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                raw_type = error.get("type")
                return raw_type, error.get("message"), ERROR_TYPES.get(str(raw_type))
            if isinstance(error, str):
                return None, error, None
        return super().parse_error_body(status, data)


class MessagesDecoder(StreamDecoder):
    """One Messages stream ("Streaming Messages"): one step per SSE event type, each taking the
    event and returning the deltas it stands for; ``message_start`` and ``message_delta`` note
    the usage (cumulative) and the stop reason; ``message_stop`` ends the reply (`done`). ``ping``
    and unknown event types carry nothing we keep; an ``error`` event raises."""

    def __init__(self, driver: AnthropicPromptDriver) -> None:
        super().__init__()
        self.driver = driver
        self.index = BlockIndex()
        self.usage: dict[str, Any] = {}
        self.pending: dict[
            int, tuple[dict[str, Any], list[str]]
        ] = {}  # passthrough blocks whose input is still streaming

    def feed(self, sse: Any) -> Sequence[DeltaMessage]:
        try:
            event = json.loads(sse.data)
        except ValueError:
            if sse.data:
                raise not_json(self.driver.provider, sse.data) from None
            return ()
        if type(event) is not dict:
            return ()
        kind = event.get("type") or sse.event
        if kind == "content_block_delta":  # the usual event: one piece of text
            delta = event.get("delta") or _NONE
            if delta.get("type") == "text_delta":
                text = delta.get("text")
                return (TextDelta(self.index[event.get("index", 0)], text),) if text else ()
        step = self.STEPS.get(kind)
        if step is not None:
            return step(self, event)
        if kind == "error" or sse.event == "error":
            raise self.driver._stream_error(event.get("error", event))
        return ()

    def block_delta(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """A delta other than text (`feed` reads a text delta itself)."""
        wire = event.get("index", 0)
        delta = event.get("delta") or _NONE
        kind = delta.get("type")
        if kind == "input_json_delta":
            fragment = delta.get("partial_json") or ""
            if wire in self.pending:
                self.pending[wire][1].append(fragment)
                if fragment and self.pending[wire][0].get("type") == "server_tool_use":  # shown as it is written
                    return (ServerToolDelta(self.index(wire), arguments=fragment),)
            elif fragment:
                return (ToolCallDelta(self.index(wire), None, None, fragment),)
        elif kind == "citations_delta":
            cited = citation(delta.get("citation"))
            return (CitationDelta(self.index(wire), cited),) if cited is not None else ()
        elif kind == "thinking_delta":
            if delta.get("thinking"):
                return (ReasoningDelta(self.index(wire), delta["thinking"]),)
        elif kind == "signature_delta":
            if delta.get("signature"):
                return (ReasoningDelta(self.index(wire), "", signature=delta["signature"]),)
        return ()  # unknown delta types carry nothing we keep

    def block_start(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        wire = event.get("index", 0)
        block = event.get("content_block") or {}
        position = self.index(wire)  # the arrival order fixes the position, even for a block emitted at its stop
        if block.get("type") in _KNOWN_BLOCKS:
            return block_deltas(position, block, self.driver.protocol)
        self.pending[wire] = (dict(block), [])
        if block.get("type") == "server_tool_use":  # its card opens now; the call is whole at its stop
            name = str(block.get("name") or "")
            return (ServerToolDelta(position, block.get("id") or None, TOOL_KINDS.get(name, name), name or None),)
        return ()

    def block_stop(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        wire = event.get("index", 0)
        if wire in self.pending:
            return (self.driver._finish_block(self.index(wire), *self.pending.pop(wire)),)
        return ()

    def message_start(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        message = event.get("message") or {}
        self.usage = message.get("usage") or {}
        self.note(
            read_usage(
                usage_from_anthropic,
                self.usage,
                request_id=message.get("id") or None,
                model=message.get("model") or None,
            )
        )
        return ()

    def message_delta(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        delta = event.get("delta") or {}
        reason = delta.get("stop_reason")
        if reason:
            self.note(StreamMeta(stop_raw=reason, stop_kind=stop_kind(reason),
                                 extra={"paused": True} if reason == "pause_turn" else None))
        if isinstance(delta.get("container"), dict):  # code ran in a container: the next request may reuse it
            self.note(StreamMeta(extra={"container": delta["container"]}))
        counts = event.get("usage")
        if counts:
            self.note(read_usage(self._cumulative, counts))
        return ()

    def _cumulative(self, counts: Any) -> Usage:
        """The usage with `counts` over message_start's: cumulative counts overwrite; fields not
        repeated keep their message_start value. Raises as `usage_from_anthropic`."""
        self.usage = {**self.usage, **{k: v for k, v in counts.items() if v is not None}}
        return usage_from_anthropic(self.usage)

    def finish(self) -> list[DeltaMessage]:
        """A passthrough block left open (the stream stopped inside it), kept only if its input is whole."""
        left = []
        for wire, (block, fragments) in self.pending.items():
            raw = "".join(fragments)
            if not raw.strip() or _json_or_none(raw) is not None:
                left.append(self.driver._finish_block(self.index(wire), block, fragments))
        return left

    def whole(self, data: dict[str, Any]) -> list[DeltaMessage]:
        """A whole Messages API reply (``type: message``; a proxy that ignored ``stream: true``)."""
        if data.get("type") == "error" or isinstance(data.get("error"), dict):
            raise self.driver._stream_error(data.get("error", data))
        if data.get("type") != "message" and not isinstance(data.get("content"), list):
            raise ProviderError(
                "invalid_response",
                f"{self.driver.provider} sent a JSON reply that is not a message: {redact_head(json.dumps(data))!r}",
                retryable=False,
            )
        self.note(
            read_usage(
                usage_from_anthropic,
                data.get("usage") or {},
                request_id=data.get("id") or None,
                model=data.get("model") or None,
            )
        )
        deltas = [
            d
            for index, block in enumerate(data.get("content") or ())
            if isinstance(block, dict)
            for d in block_deltas(index, block, self.driver.protocol)
        ]
        reason = data.get("stop_reason") or "end_turn"
        self.note(StreamMeta(stop_raw=reason, stop_kind=stop_kind(reason),
                             extra={"paused": True} if reason == "pause_turn" else None))
        if isinstance(data.get("container"), dict):
            self.note(StreamMeta(extra={"container": data["container"]}))
        return deltas

    def message_stop(self, event: dict[str, Any]) -> Sequence[DeltaMessage]:
        """The stream's last event: nothing after it is read (a proxy's extra bytes, an error)."""
        self.done = True
        return ()

    STEPS: ClassVar[dict[str, Callable[[MessagesDecoder, dict[str, Any]], Sequence[DeltaMessage]]]] = {
        "content_block_delta": block_delta,
        "content_block_start": block_start,
        "content_block_stop": block_stop,
        "message_start": message_start,
        "message_delta": message_delta,
        "message_stop": message_stop,
    }


_NONE: dict[str, Any] = {}  # read only: a delta without fields


def _cite_documents(turns: list[dict[str, Any]]) -> None:
    """Ask for citations on every document of the user's turns ("Citations": ``citations.enabled``)."""
    for turn in turns:
        for part in turn["content"]:
            if part.get("type") == "document":
                part.setdefault("citations", {"enabled": True})


def _json_or_none(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
