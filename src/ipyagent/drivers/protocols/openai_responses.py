"""OpenAI Responses API over SSE (`POST /responses` with `stream: true`): the prompt driver,
joining its request building (`openai_responses_request`), its stream reading
(`openai_responses_stream`) and its built-in tools and citations (`openai_server`).

Follows the OpenAI API reference, "Responses" and "Error codes". A 200 answer with a JSON body
(a gateway that ignored ``stream``) is read as one whole Response object through the same item
handling (`ResponsesDecoder.whole`).
"""

from __future__ import annotations

from typing import Any

import httpx2

from ...core import ProviderError
from ..base import BasePromptDriver, Capabilities
from ..catalog.model_rules import openai_non_reasoning_model
from .openai_responses_request import ResponsesRequest
from .openai_responses_stream import (
    NOT_RETRYABLE_CODES,
    ResponsesDecoder,
    error_from_object,
    reasoning_signature,
    response_object_events,
    usage_from_responses,
)

#: Models whose Responses capabilities are narrower than the protocol's.
_MODEL_LIMITS: dict[str, Capabilities] = {
    "o1-mini": Capabilities(tools=False, vision=False, reasoning=True),
    "o1-preview": Capabilities(tools=False, vision=False, reasoning=True),
    "o3-mini": Capabilities(vision=False, structured_output_native=True, reasoning=True),
}


class OpenAIResponsesPromptDriver(ResponsesRequest, BasePromptDriver):
    """Prompt driver for `POST {base_url}/responses` with `stream: true`.

    Args: see `BasePromptDriver`. `provider_options` keys go into the request
    body as they are (``reasoning={"effort": "low", "summary": "auto"}``,
    ``store=False``, ``include=["reasoning.encrypted_content"]``, ...);
    ``text`` is merged with the ``text.format`` an output schema sets.

    `ModelSettings` (OpenAI API reference, "Create a model response"):
    ``temperature``, ``top_p``, ``max_output_tokens``, ``reasoning.effort``
    (merged with a ``reasoning`` provider option such as ``summary``),
    ``tool_choice`` (a string, or ``{"type": "function", "name": ...}``) and
    ``parallel_tool_calls`` (both only with tools). The Responses API has no
    ``stop`` and no ``seed``, and no thinking budget in tokens: those fail as
    ``unsupported_capability``. Prompt caching is automatic.
    """

    protocol = "openai-responses"
    default_base_url = "https://api.openai.com/v1"
    stream_types = ("text/event-stream",)  # a whole Response object (JSON) is read by `ResponsesDecoder.whole`
    capabilities = Capabilities(vision=True, structured_output_native=True, reasoning=True, documents=True)
    builtin_tools = frozenset({"web_search", "code_execution", "file_search"})
    known_options = frozenset(
        {
            "temperature",
            "top_p",
            "max_output_tokens",
            "reasoning",
            "parallel_tool_calls",
            "tool_choice",
            "store",
            "previous_response_id",
            "truncation",
            "metadata",
            "user",
            "service_tier",
            "include",
            "text",
        }
    )

    def capabilities_for(self, model: str) -> Capabilities:
        for name, caps in _MODEL_LIMITS.items():
            if model == name or model.startswith(name + "-"):
                return caps
        if openai_non_reasoning_model(model):
            return Capabilities(vision=True, structured_output_native=True, reasoning=False, documents=True)
        return self.capabilities

    def headers(self) -> dict[str, str]:
        return self.bearer_headers("text/event-stream")

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> ResponsesDecoder:
        return ResponsesDecoder(self.provider)

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                code = error.get("code") or error.get("type")
                etype = "overloaded" if "overload" in str(error.get("type", "")).lower() else None
                return code, error.get("message"), etype
            if isinstance(error, str):
                return None, error, None
            detail = data.get("detail") or data.get("message")
            if detail:
                return None, str(detail), None
        return super().parse_error_body(status, data)

    def error_from_response(self, status: int, headers: httpx2.Headers, body: bytes) -> ProviderError:
        # Workaround: `parse_error_body` cannot mark an error as final, and a 429
        # for an exhausted quota would otherwise be retried to no use.
        error = super().error_from_response(status, headers, body)
        if error.code in NOT_RETRYABLE_CODES:
            error.retryable = False
        return error


#: The module's public names before the split: the stream's are defined in `openai_responses_stream`.
__all__ = [
    "OpenAIResponsesPromptDriver",
    "ResponsesDecoder",
    "error_from_object",
    "reasoning_signature",
    "response_object_events",
    "usage_from_responses",
]
