"""Gemini: the `generateContent` request body for a PromptStack.

Follows the Gemini API reference, "Generating content" (request `Content` / `Part` / `Tool` /
`GenerationConfig`), "GenerationConfig", "ThinkingConfig", "ToolConfig", and the "Function
calling" (multimodal function responses), "Thought signatures", "Document understanding" and
"Structured output" guides. Roles are ``user`` / ``model``; system messages are joined into
``systemInstruction``; tool results are ``functionResponse`` parts in a ``user`` content (all
results of one step in one content); a ``thoughtSignature`` goes back on the part it came on.
"""

from __future__ import annotations

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
    ToolDefinition,
)
from ...capabilities import CapabilityChecks
from ...catalog.model_rules import EFFORT_BUDGETS
from ...structured import OUTPUT_TOOL, output_tool
from ...tool_media import caption, result_text, tool_media
from .response import is_sent_id
from .schema import to_gemini_schema
from .tools import tool_entries

#: `provider_options` keys that go into `generationConfig`; the others are top-level fields.
_GENERATION_OPTIONS = frozenset(
    {
        "temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "candidateCount",
        "thinkingConfig", "responseMimeType", "seed", "presencePenalty", "frequencyPenalty",
    }
)

#: `ModelSettings.tool_choice` -> `functionCallingConfig.mode` ("Function calling": AUTO, ANY, NONE).
TOOL_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}

#: Fields of Gemini's `Part`: a `GenericBlock` holding only these is sent back as a part.
PART_KEYS = frozenset(
    {
        "text", "thought", "thoughtSignature", "inlineData", "fileData", "functionCall", "functionResponse",
        "executableCode", "codeExecutionResult", "videoMetadata", "partMetadata",
    }
)


class GeminiRequest(CapabilityChecks):
    """Request building for `GeminiPromptDriver` (mixed into it): `build_request` and its parts,
    `settings_fields`."""

    def settings_fields(self, prompt_stack: PromptStack) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(`generationConfig` fields, `functionCallingConfig` or None) for `prompt_stack.settings`.

        Raises:
            ProviderError: ``unsupported_capability`` for a setting the API or model cannot take.
        """
        settings = prompt_stack.settings
        if settings.parallel_tool_calls is False:
            raise self.unsupported("parallel_tool_calls", "Gemini has no switch for parallel function calls")
        if settings.cache is False:
            raise self.unsupported("cache", "implicit prompt caching is automatic and cannot be turned off")
        generation: dict[str, Any] = {}
        names = (("temperature", "temperature"), ("top_p", "topP"), ("max_output_tokens", "maxOutputTokens"),
                 ("seed", "seed"))
        for name, wire in names:
            if getattr(settings, name) is not None:
                generation[wire] = getattr(settings, name)
        if settings.stop is not None:
            generation["stopSequences"] = list(settings.stop)
        if settings.reasoning is not None:
            thinking = dict(self.provider_options.get("thinkingConfig") or {})
            if settings.effort and "gemini-3" in self.model.lower():
                thinking["thinkingLevel"] = settings.effort
            else:
                thinking["thinkingBudget"] = EFFORT_BUDGETS[settings.effort] if settings.effort else settings.budget
            generation["thinkingConfig"] = thinking
        calling = None
        if prompt_stack.tools and settings.tool_choice is not None:
            calling = {"mode": TOOL_MODES.get(settings.tool_choice, "ANY")}
            if settings.tool_name:
                calling["allowedFunctionNames"] = [settings.tool_name]
        return generation, calling

    # -- request ------------------------------------------------------------------------

    def _model_path(self) -> str:
        model = self.model.strip("/")
        # "models/x", "tunedModels/x" are resource names already; a bare id is a model.
        return f"/{model}" if "/" in model else f"/models/{model}"

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        contents, system = self._contents(prompt_stack)
        body: dict[str, Any] = {"contents": contents}
        blocks = [b.text for b in prompt_stack.system_blocks if b.text]
        if blocks:  # one part per block ("Content": systemInstruction parts), then the system messages
            body["systemInstruction"] = {
                "parts": [{"text": text} for text in blocks] + ([{"text": "\n\n".join(system)}] if system else [])
            }
        elif system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        strategy = self.output_strategy(prompt_stack)
        schema = prompt_stack.to_output_json_schema()
        tools = list(prompt_stack.tools)
        tools += [output_tool(schema)] if strategy == "tool" else []  # type: ignore[arg-type]
        if tools:
            body["tools"] = [{"functionDeclarations": [_declaration(tool) for tool in tools]}]
        if prompt_stack.builtin_tools:  # "Tool": google_search, code_execution, url_context, each its own
            body.setdefault("tools", []).extend(tool_entries(prompt_stack.builtin_tools))
        generation, calling = self._generation_config(prompt_stack, strategy, schema)
        if generation:
            body["generationConfig"] = generation
        for key in ("safetySettings", "toolConfig"):
            if key in self.provider_options:
                body[key] = self.provider_options[key]
        config = self._calling_config(prompt_stack, strategy, calling)
        if config is not None:
            body["toolConfig"] = {"functionCallingConfig": config}
        return f"{self._model_path()}:streamGenerateContent?alt=sse", body

    def _contents(self, prompt_stack: PromptStack) -> tuple[list[dict[str, Any]], list[str]]:
        """(``contents``, the system messages' texts): roles ``user`` / ``model``; a
        message's tool results go first, as a user turn; adjacent turns of a role merge."""
        system: list[str] = []
        contents: list[dict[str, Any]] = []
        for message in prompt_stack.messages:
            if message.role == "system":
                system.extend(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
                continue
            results = self._result_parts([b for b in message.content if isinstance(b, ActionResultBlock)])
            if results:
                _append(contents, "user", results)
            role = "model" if message.role == "assistant" else "user"
            parts = self._parts(message, role)
            if parts:
                _append(contents, role, parts)
        return contents, system

    def _generation_config(
        self, prompt_stack: PromptStack, strategy: str | None, schema: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(``generationConfig``, the settings' ``functionCallingConfig`` or None): provider
        options, then settings, then the native JSON schema.

        Raises:
            ProviderError: ``unsupported_capability`` for a native schema the model cannot take.
        """
        generation = {k: v for k, v in self.provider_options.items() if k in _GENERATION_OPTIONS}
        from_settings, calling = self.settings_fields(prompt_stack)
        self.put_settings(generation, from_settings, {k: v for k, v in generation.items() if k != "thinkingConfig"})
        if strategy == "native":
            if not self.capabilities_for(self.model).structured_output_native:
                raise ProviderError(
                    "unsupported_capability",
                    f"{self.provider} model {self.model} does not support structured output (JSON schema); "
                    "remove the output schema or choose a model that has it",
                    code="structured_output",
                    retryable=False,
                )
            generation["responseMimeType"] = "application/json"
            generation["responseJsonSchema"] = schema
        return generation, calling

    def _calling_config(
        self, prompt_stack: PromptStack, strategy: str | None, calling: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The ``functionCallingConfig`` a setting or the tool output strategy asks for (None:
        the provider option ``toolConfig``, if any, stands).

        Raises:
            ProviderError: ``invalid_request`` when the ``toolConfig`` option contradicts either.
        """
        config = calling
        if calling is not None and "toolConfig" in self.provider_options:
            raise ProviderError(
                "invalid_request",
                "tool_choice is set both by a setting and by the provider option toolConfig; keep one",
                retryable=False,
            )
        if strategy == "tool":
            if "toolConfig" in self.provider_options:
                raise ProviderError(
                    "invalid_request",
                    "provider option toolConfig contradicts the tool output strategy, "
                    "which forces a call to its output tool; drop one of them",
                    retryable=False,
                )
            # Mode ANY: some function must be called; with only the output tool, that one.
            config = {"mode": "ANY"}
            if not prompt_stack.tools:
                config["allowedFunctionNames"] = [OUTPUT_TOOL]
        return config

    def _result_parts(self, blocks: list[ActionResultBlock]) -> list[dict[str, Any]]:
        """One ``functionResponse`` part per result, then the media none of them could carry.

        Gemini 3 models take a tool's images inside its ``functionResponse.parts`` ("Multimodal
        function responses"); other models, and audio, get them as inline data after the
        responses, each call's introduced by a text part naming it (`tool_media.caption`).
        """
        responses: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        inside = self.model.rsplit("/", 1)[-1].lower().startswith("gemini-3")
        for block in blocks:
            media, notes = tool_media(self, block)
            text = result_text(block, notes, len(media))
            response = {"error": text} if block.is_error else {"result": text}
            part: dict[str, Any] = {"name": block.action.native_name, "response": response}
            if is_sent_id(block.action.tag):
                part["id"] = block.action.tag
            inline = [(m, {"inlineData": {"mimeType": m.mime_type, "data": m.data}}) for m in media]
            if inside and any(isinstance(m, ImageBlock) for m, _ in inline):
                part["parts"] = [p for m, p in inline if isinstance(m, ImageBlock)]
                inline = [(m, p) for m, p in inline if not isinstance(m, ImageBlock)]
            responses.append({"functionResponse": part})
            if inline:
                after += [{"text": caption(block)}, *(p for _, p in inline)]
        return responses + after

    def _parts(self, message: Message, role: str) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        blocks = message.content
        skip_next = False
        for n, block in enumerate(blocks):
            if skip_next:
                skip_next = False
                continue
            if isinstance(block, TextBlock):
                if block.text:
                    parts.append({"text": block.text})
            elif isinstance(block, ImageBlock):
                if block.data:
                    parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
                elif block.url:
                    parts.append({"fileData": {"fileUri": block.url, "mimeType": block.mime_type}})
            elif isinstance(block, AudioBlock):
                parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
            elif isinstance(block, DocumentBlock):  # "Document understanding": a PDF as inline data; text as text
                parts.append(
                    {"inlineData": {"mimeType": "application/pdf", "data": block.data}}
                    if block.is_pdf
                    else {"text": block.as_text()}
                )
            elif isinstance(block, ActionCallBlock):
                call: dict[str, Any] = {"name": block.action.native_name, "args": block.action.input}
                if is_sent_id(block.action.tag):
                    call["id"] = block.action.tag
                part: dict[str, Any] = {"functionCall": call}
                if block.signature:
                    part["thoughtSignature"] = block.signature
                parts.append(part)
            elif isinstance(block, ReasoningBlock):
                if role != "model" or block.redacted:
                    continue
                if block.text:
                    part = {"text": block.text, "thought": True}
                    if block.signature:
                        part["thoughtSignature"] = block.signature
                    parts.append(part)
                elif block.signature:
                    # A signature that came on a text part goes back on that same part.
                    following = blocks[n + 1] if n + 1 < len(blocks) else None
                    if isinstance(following, TextBlock) and following.text:
                        parts.append({"text": following.text, "thoughtSignature": block.signature})
                        skip_next = True
                    else:
                        parts.append({"text": "", "thoughtSignature": block.signature})
            elif isinstance(block, (ServerToolCallBlock, ServerToolResultBlock)):
                # A code execution's parts go back as they came; a search (no part) has nothing to send.
                if role == "model" and block.provider == "gemini" and isinstance(block.raw, dict):
                    parts.append(block.raw)
            elif isinstance(block, GenericBlock):
                # Only a value shaped like a Gemini `Part` (one this driver received) can go back.
                if isinstance(block.value, dict) and block.value and set(block.value) <= PART_KEYS:
                    parts.append(block.value)
        return parts


def _declaration(tool: ToolDefinition) -> dict[str, Any]:
    """A tool as a ``functionDeclarations`` entry; its parameters rewritten by `to_gemini_schema`."""
    declaration: dict[str, Any] = {"name": tool.name}
    if tool.description:
        declaration["description"] = tool.description
    parameters = to_gemini_schema(tool.parameters) if tool.parameters else {}
    if parameters.get("properties") or parameters.get("type") not in (None, "object"):
        declaration["parameters"] = parameters  # an argument-less function sends none
    return declaration


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add parts to `contents`, merged into the last content when the role is the same."""
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": list(parts)})
