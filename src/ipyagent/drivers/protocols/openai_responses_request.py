"""OpenAI Responses API: the request body for a PromptStack (`POST /responses`).

Follows the OpenAI API reference, "Responses" (create a model response: `input` items,
`instructions`, flat function `tools`, `text.format`), "Function calling" (function outputs)
and "File inputs". An assistant turn goes back as output items; a reasoning item only where
the API can pair it with the call after it (`ResponsesRequest._assistant_items`).
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
    ReasoningBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
)
from ..capabilities import CapabilityChecks
from ..catalog.model_rules import openai_reasoning_model
from ..structured import OUTPUT_TOOL, output_tool, schema_name, strict_or_none
from ..tool_media import result_text, tool_media
from .openai_chat_request import openai_tool_choice
from .openai_server import tool_definitions


class ResponsesRequest(CapabilityChecks):
    """Request building for `OpenAIResponsesPromptDriver` (mixed into it): `build_request` and
    its items, `settings_fields`."""

    def settings_fields(self, prompt_stack: PromptStack) -> dict[str, Any]:
        """The request fields for `prompt_stack.settings` (``reasoning`` merged with the option).

        Raises:
            ProviderError: ``unsupported_capability`` for a setting this API or model cannot take.
        """
        settings = prompt_stack.settings
        for name, why in (
            ("stop", "the Responses API has no stop sequences"),
            ("seed", "the Responses API has no seed"),
        ):
            if getattr(settings, name) is not None:
                raise self.unsupported(name, why)
        if openai_reasoning_model(self.model):
            for name in ("temperature", "top_p"):
                if getattr(settings, name) is not None:
                    raise self.unsupported(name, "OpenAI reasoning models take no sampling settings")
        fields = {
            name: getattr(settings, name)
            for name in ("temperature", "top_p", "max_output_tokens")
            if getattr(settings, name) is not None
        }
        if settings.budget is not None and not (
            settings.budget == 0 and not self.capabilities_for(self.model).reasoning
        ):
            raise self.unsupported(
                "reasoning", "the Responses API takes an effort (low, medium, high), not a budget in tokens"
            )
        if settings.effort:
            reasoning = dict(self.provider_options.get("reasoning") or {})
            if reasoning.get("effort") not in (None, settings.effort):
                raise ProviderError(
                    "invalid_request",
                    f"reasoning effort is set both by a setting ({settings.effort!r}) and by "
                    f"provider_options ({reasoning['effort']!r}); keep one",
                    retryable=False,
                )
            fields["reasoning"] = {**reasoning, "effort": settings.effort}
        if settings.cache is False:
            raise self.unsupported("cache", "prompt caching is automatic and cannot be turned off")
        if prompt_stack.tools:
            if settings.tool_choice is not None:
                fields["tool_choice"] = openai_tool_choice(settings.tool_choice, settings.tool_name, flat=True)
            if settings.parallel_tool_calls is not None:
                fields["parallel_tool_calls"] = settings.parallel_tool_calls
        return fields

    # -- request ------------------------------------------------------------------------

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        options = dict(self.provider_options)
        body: dict[str, Any] = {"model": self.model}
        instructions = prompt_stack.system_texts()  # system blocks, then system messages
        if instructions:
            body["instructions"] = "\n\n".join(instructions)
        body["input"] = [item for m in prompt_stack.messages if m.role != "system" for item in self._items(m)]
        # `strict` must be sent: the API takes a missing value as true, and strict mode
        # rejects ordinary schemas (optional properties, no additionalProperties: false).
        tools = [{"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters,
                  "strict": False} for t in prompt_stack.tools]
        text = dict(options.pop("text", None) or {})
        schema = prompt_stack.to_output_json_schema()
        strategy = self.output_strategy(prompt_stack)
        if strategy == "native":
            strict = strict_or_none(schema)  # type: ignore[arg-type]
            text.setdefault("format", {"type": "json_schema", "name": schema_name(schema),  # type: ignore[arg-type]
                                       "schema": strict or schema, "strict": strict is not None})
        elif strategy == "tool":
            if "tool_choice" in options:
                raise ProviderError("invalid_request", "provider option tool_choice contradicts the tool output "
                                    "strategy, which forces a call to its output tool; drop one of them",
                                    retryable=False)
            strict = strict_or_none(schema)  # type: ignore[arg-type]
            tool = output_tool(schema, strict)  # type: ignore[arg-type]
            tools.append({"type": "function", "name": tool.name, "description": tool.description,
                          "parameters": tool.parameters, "strict": strict is not None})
            body["tool_choice"] = "required" if prompt_stack.tools else {"type": "function", "name": OUTPUT_TOOL}
        if prompt_stack.builtin_tools:
            builtin, include = tool_definitions(prompt_stack.builtin_tools)
            tools += builtin
            given = list(options.pop("include", None) or [])
            body["include"] = given + [i for i in include if i not in given]
        if tools:
            body["tools"] = tools
        if text:
            body["text"] = text
        body["stream"] = True
        fields = self.settings_fields(prompt_stack)
        if "reasoning" in fields:
            options.pop("reasoning", None)  # merged into the setting's object
        self.put_settings(body, fields, options)
        body.update(options)
        return "/responses", body

    def _items(self, message: Message) -> list[dict[str, Any]]:
        items = [self._call_output(b) for b in message.content if isinstance(b, ActionResultBlock)]
        if message.role == "assistant":
            return items + self._assistant_items(message)
        if message.role == "tool":
            return items
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append({"type": "input_text", "text": block.text})
            elif isinstance(block, ImageBlock) and (block.url or block.data):
                url = block.url or f"data:{block.mime_type};base64,{block.data}"
                parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
            elif isinstance(block, DocumentBlock):  # "File inputs": input_file for a PDF; text as input_text
                parts.append(
                    {"type": "input_file", "filename": block.name or "document.pdf", "file_data": block.data_url}
                    if block.is_pdf
                    else {"type": "input_text", "text": block.as_text()}
                )
        if parts or not items:
            items.append({"role": message.role, "content": parts})
        return items

    def _call_output(self, block: ActionResultBlock) -> dict[str, Any]:
        """A ``function_call_output`` item: its output is text, or, with images the tool returned,
        a list of ``input_text`` and ``input_image`` items ("Function calling", function outputs)."""
        media, notes = tool_media(self, block)
        text = result_text(block, notes, len(media))
        text = f"Error: {text}" if block.is_error else text
        output: str | list[dict[str, Any]] = text
        if media:
            images = [{"type": "input_image", "image_url": f"data:{m.mime_type};base64,{m.data}", "detail": "auto"}
                      for m in media]
            output = [{"type": "input_text", "text": text}, *images]
        return {"type": "function_call_output", "call_id": block.action.tag, "output": output}

    def _assistant_items(self, message: Message) -> list[dict[str, Any]]:
        """An assistant turn as output items, in block order.

        The API pairs a reasoning item with the item that followed it, by that
        item's id; a call sent with its id needs its reasoning item before it.
        Only call ids are kept (not message ids), so a reasoning block goes back
        only when a call with its id follows it directly, and a call carries its
        id only after such a reasoning item. With ``store: false`` the API cannot
        look items up, so reasoning without ``encrypted_content`` stays out.
        Reasoning the API cannot take is dropped: the model does not need it.
        """
        blocks = [b for b in message.content if not isinstance(b, (ActionResultBlock, ServerToolResultBlock))]
        items: list[dict[str, Any]] = []
        texts: list[dict[str, Any]] = []
        paired = False  # the calls now being sent follow a reasoning item that went back
        reasoned = False  # a reasoning item of ours came before: a built-in tool item needs it back

        def flush() -> None:
            if texts:
                items.append({"role": "assistant", "content": list(texts)})
                texts.clear()

        for n, block in enumerate(blocks):
            if isinstance(block, TextBlock):
                if block.text:
                    texts.append({"type": "output_text", "text": block.text})
                    paired = False
            elif isinstance(block, ReasoningBlock):
                item = self._reasoning_item(block)
                reasoned = reasoned or _loads_object(block.signature) is not None
                following = blocks[n + 1] if n + 1 < len(blocks) else None
                paired = bool(item) and _item_id(following) is not None
                if paired:
                    flush()
                    items.append(item)  # type: ignore[arg-type]
            elif isinstance(block, ServerToolCallBlock):
                # A built-in tool's item goes back whole, after its reasoning item when the model reasoned.
                if _item_id(block) is not None and (paired or not reasoned):
                    flush()
                    items.append(block.raw)
            elif isinstance(block, ActionCallBlock):
                flush()
                call: dict[str, Any] = {
                    "type": "function_call",
                    "call_id": block.action.tag,
                    "name": block.action.native_name,
                    "arguments": json.dumps(block.action.input),
                }
                item_id = _call_item_id(block)
                if paired and item_id:
                    call["id"] = item_id
                else:
                    paired = False
                items.append(call)
        flush()
        return items

    def _reasoning_item(self, block: ReasoningBlock) -> dict[str, Any] | None:
        kept = _loads_object(block.signature)
        if kept is None or kept.get("type") != "reasoning" or not kept.get("id"):
            return None  # no signature of ours (another provider's reasoning, or none)
        if self.provider_options.get("store") is False and not kept.get("encrypted_content"):
            return None
        return kept


def _item_id(block: Any) -> str | None:
    """The output item id a block goes back with: a function call's (`_call_item_id`), a built-in
    tool call of ours' (its item); None for anything else."""
    if isinstance(block, ActionCallBlock):
        return _call_item_id(block)
    if isinstance(block, ServerToolCallBlock) and block.provider == "openai-responses" and isinstance(block.raw, dict):
        return block.raw.get("id") or None
    return None


def _call_item_id(block: ActionCallBlock) -> str | None:
    kept = _loads_object(block.signature)
    item_id = kept.get("id") if kept else None
    return item_id if isinstance(item_id, str) and item_id else None


def _loads_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
