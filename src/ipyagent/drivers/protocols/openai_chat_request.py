"""OpenAI Chat Completions: the request body for a PromptStack (`POST /chat/completions`).

Follows the OpenAI API reference, "Chat Completions" (messages, `tools`, `response_format`,
`stream_options`), "Function calling" and "File inputs"; compatible providers that name a
setting differently (`WIRE_NAMES`) get their own names.
"""

from __future__ import annotations

import json
from typing import Any

from ...core import (
    ActionCallBlock,
    ActionResultBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    TextBlock,
)
from ..capabilities import CapabilityChecks
from ..catalog.model_rules import openai_reasoning_model
from ..structured import OUTPUT_TOOL, output_tool, schema_name, strict_or_none
from ..tool_media import caption, result_text, tool_media

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


class ChatRequest(CapabilityChecks):
    """Request building for `OpenAIChatPromptDriver` (mixed into it): `build_request`, its
    messages and `settings_fields`."""

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
