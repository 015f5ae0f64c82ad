"""Google Gemini `streamGenerateContent` over SSE: the prompt driver, joining its request
building (`request`), its stream reading (`stream`, `response`), its errors (`errors`) and its
provider-side tools and grounding (`tools`).

Follows the Gemini API reference, "Generating content" and "models.list". The API key travels
in the ``x-goog-api-key`` header, never in the URL.
"""

from __future__ import annotations

from typing import Any

import httpx2

from ....core import ProviderError
from ...base import BasePromptDriver, Capabilities
from ...catalog.models import parse_gemini
from .errors import error_reason, error_type, retry_delay
from .request import _GENERATION_OPTIONS, GeminiRequest
from .stream import GeminiDecoder


class GeminiPromptDriver(GeminiRequest, BasePromptDriver):
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

    models_params = {"pageSize": 1000}

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        """Gemini's ``models.list``, paged by ``pageToken``; content-generating models only."""
        return parse_gemini(data)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

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
