"""Google Gemini `streamGenerateContent` over SSE.

Follows the Gemini API reference, "Generating content" (`POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`, request `Content` /
`Part` / `Tool` / `GenerationConfig`, response `GenerateContentResponse`), the
"Function calling", "Thought signatures", "Thinking" and "Structured output"
guides, and the `google.rpc.Status` error model. The API key travels in the
``x-goog-api-key`` header, never in the URL.

Translation notes:

* Roles are ``user`` / ``model``; system messages are joined into
  ``systemInstruction``; tool results are ``functionResponse`` parts in a
  ``user`` content (all results of one step in one content).
* Gemini sends each ``functionCall`` whole (``{name, args}``) and gives no call
  id: a call gets ``call_<content index>_<responseId>`` (``call_<index>`` when
  the response has no id) unless its part has an ``id``; made-up ids are not
  sent back. The Vertex AI form with streamed arguments (``willContinue`` /
  ``partialArgs`` with a ``jsonPath``, closed by an empty ``functionCall``) is
  assembled here.
* A ``thoughtSignature`` must go back unchanged on the same part. On a
  function call it rides on the `ActionCallBlock`; on a thought part on its
  `ReasoningBlock`; on a plain text part (often an empty text part at the end
  of a Gemini 3 stream) it becomes a signature-only `ReasoningBlock` (empty
  text, sent whole as a `BlockDelta`) placed just before the text it came
  with, and is put back on that text part (or on an empty text part) next turn.
* Tool parameter schemas are rewritten to Gemini's OpenAPI-3.0 `Schema`
  subset (see `to_gemini_schema`); the output schema goes as
  ``responseJsonSchema``, which takes JSON Schema as it is.
* An error object inside the stream (a ``data:`` payload, or a bare JSON
  object written without ``data:`` as the API and its SDKs do) raises
  `ProviderError`.
"""

from __future__ import annotations

from typing import Any

import httpx2

from ...core import (
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
from ..catalog.models import parse_gemini
from ..base import BasePromptDriver, Capabilities
from .gemini_schema import to_gemini_schema
from .gemini_tools import tool_entries
from ..catalog.model_rules import EFFORT_BUDGETS
from .gemini_stream import (
    GeminiDecoder,
    GeminiResponseParser,
    error_type,
    error_reason,
    is_sent_id,
    parse_response,
    retry_delay,
    usage_from_gemini,
)
from ..structured import OUTPUT_TOOL, output_tool
from ..tool_media import caption, result_text, tool_media

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


class GeminiPromptDriver(BasePromptDriver):
    """Prompt driver for `POST {base_url}/models/{model}:streamGenerateContent?alt=sse`.

    Args: see `BasePromptDriver`. `provider_options`: the `generationConfig`
    fields (``temperature``, ``topP``, ``topK``, ``maxOutputTokens``,
    ``stopSequences``, ``candidateCount``, ``thinkingConfig``,
    ``responseMimeType``, ``seed``, ``presencePenalty``, ``frequencyPenalty``)
    and the top-level ``safetySettings`` and ``toolConfig``, in the API's own
    camelCase form.

    `ModelSettings` (Gemini API reference, "GenerationConfig", "ThinkingConfig",
    "ToolConfig"): ``generationConfig.temperature`` / ``topP`` /
    ``maxOutputTokens`` / ``stopSequences`` / ``seed``; ``reasoning`` as
    ``thinkingConfig.thinkingLevel`` on Gemini 3 models (an effort) or
    ``thinkingBudget`` (a budget in tokens; on Gemini 2.5 an effort becomes
    `EFFORT_BUDGETS`); ``tool_choice`` as ``toolConfig.functionCallingConfig``
    (``mode`` AUTO / ANY / NONE, ``allowedFunctionNames`` for one tool).
    Implicit prompt caching is automatic; Gemini has no switch for parallel
    function calls, so ``parallel_tool_calls=False`` and ``cache=False`` fail.
    """

    protocol = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    # SSE, or a JSON array / one JSON object (a non-streamed reply): the parser reads all of them.
    stream_types = ("text/event-stream", "application/json")
    framing = "lines"  # SSE, and JSON over lines: `GeminiDecoder`
    capabilities = Capabilities(vision=True, structured_output_native=True, reasoning=True, documents=True)
    #: "Image understanding" / "Audio understanding": the types Gemini reads (tool results: `tool_media`).
    tool_image_types = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
    tool_audio_types = frozenset({"audio/wav", "audio/x-wav", "audio/mp3", "audio/mpeg", "audio/aiff", "audio/aac",
                                  "audio/ogg", "audio/flac"})
    builtin_tools = frozenset({"web_search", "code_execution", "url_context"})
    known_options = _GENERATION_OPTIONS | {"safetySettings", "toolConfig"}

    def capabilities_for(self, model: str) -> Capabilities:
        """Gemma models served by the Gemini API take no tools, JSON mode or thinking
        (``gemma-3-1b`` no images either); TTS and image-generation models take no tools."""
        name = model.rsplit("/", 1)[-1].lower()
        if name.startswith("gemma"):
            return Capabilities(
                tools=False, vision="-1b" not in name, structured_output_native=False, reasoning=False
            )
        if "-tts" in name or "image-generation" in name or "-image" in name:
            return Capabilities(tools=False, vision=True, structured_output_native=False, reasoning=False)
        if name.startswith(("gemini-1", "gemini-2.0")):  # thinking came with Gemini 2.5
            return Capabilities(vision=True, structured_output_native=True, reasoning=False, documents=True)
        return self.capabilities

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

    models_params = {"pageSize": 1000}

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        """Gemini's ``models.list``, paged by ``pageToken``; content-generating models only."""
        return parse_gemini(data)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

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

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> GeminiDecoder:
        return GeminiDecoder(self.provider)

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, list) and data and isinstance(data[0], dict):
            data = data[0]  # errors of a JSON-array framed stream come as a one-element list
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            error = data["error"]
            code = error_reason(error) or error.get("status") or error.get("code")
            return code, error.get("message"), error_type(error)
        return super().parse_error_body(status, data)

    def error_from_response(self, status: int, headers: httpx2.Headers, body: bytes) -> ProviderError:
        """As the base, plus `RetryInfo.retryDelay` from the body when no header gave a wait."""
        error = super().error_from_response(status, headers, body)
        if error.retry_after is None:
            error.retry_after = retry_delay(error.raw)
        return error


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


__all__ = [
    "GeminiPromptDriver",
    "GeminiResponseParser",
    "parse_response",
    "to_gemini_schema",
    "usage_from_gemini",
    "retry_delay",
]
