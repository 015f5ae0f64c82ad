"""Anthropic Messages: the request body for a PromptStack (`POST /v1/messages`).

Follows the Anthropic API reference, "Messages", "Tool use" (`tool_use` / `tool_result`
blocks), "Extended thinking" (`thinking` blocks with a `signature`, `redacted_thinking`
blocks, sent back unchanged), "Prompt caching", "Citations" and "PDF support". What differs
from the Chat Completions shape: the system prompt is the top-level `system` field, not a
message; roles must alternate (tool results travel as `tool_result` blocks in a user message,
and adjacent messages of the same role are merged); `max_tokens` is required; structured output
has no native mode here: the ``tool`` strategy is used, a synthetic tool named
`STRUCTURED_OUTPUT_TOOL` that the model is made to call.
"""

from __future__ import annotations

import json
from typing import Any

from ....core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    DocumentBlock,
    GenericBlock,
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
)
from ...capabilities import CapabilityChecks
from ...catalog.model_rules import EFFORT_BUDGETS
from ...structured import OUTPUT_TOOL
from ...tool_media import result_text, tool_media
from .server import container_to_reuse, sent_back, tool_definitions

#: `max_tokens` is required by the API; used unless `provider_options` sets it.
DEFAULT_MAX_TOKENS = 4096
#: Name of the synthetic tool that carries structured output (the "tool" strategy).
STRUCTURED_OUTPUT_TOOL = OUTPUT_TOOL
#: The smallest thinking budget the API takes ("Extended thinking": budget_tokens >= 1024).
MIN_THINKING_BUDGET = 1024
#: `ModelSettings.tool_choice` -> the API's tool_choice type ("Tool use": auto, any, tool, none).
TOOL_CHOICE_TYPES = {"auto": "auto", "required": "any", "none": "none"}
#: Prompt-caching breakpoint ("Prompt caching": cache_control on a block caches the prefix up to it).
CACHE_CONTROL = {"type": "ephemeral"}


class AnthropicRequest(CapabilityChecks):
    """Request building for `AnthropicPromptDriver` (mixed into it): `build_request` and its
    parts, `settings_fields` and `add_cache_breakpoints`."""

    protocol: str

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
        """The server tools asked for (`server.tool_definitions`) after the functions, and
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


def _cite_documents(turns: list[dict[str, Any]]) -> None:
    """Ask for citations on every document of the user's turns ("Citations": ``citations.enabled``)."""
    for turn in turns:
        for part in turn["content"]:
            if part.get("type") == "document":
                part.setdefault("citations", {"enabled": True})
