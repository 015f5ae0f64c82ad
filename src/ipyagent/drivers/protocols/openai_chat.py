"""OpenAI Chat Completions over SSE, for OpenAI and every OpenAI-compatible server: the prompt
driver, joining its request building (`openai_chat_request`) and its stream reading
(`openai_chat_stream`).

Follows the OpenAI API reference, "Chat Completions" (`POST /chat/completions`,
`stream: true`, chunk object `chat.completion.chunk`) and the streaming guide.
Compatible servers (Ollama `/v1`, vLLM, llama.cpp, Groq, Mistral, OpenRouter,
DeepSeek, Azure AI) differ in details handled here: `reasoning_content` or
`reasoning` deltas, usage on the finish chunk or in `x_groq`, a wrong
`Content-Type` on the stream, `: comment` keep-alives, an `error` object inside
a chunk or as an `event: error`.
"""

from __future__ import annotations

from typing import Any

from ..base import BasePromptDriver, Capabilities
from ..catalog.model_rules import openai_non_reasoning_model
from .openai_chat_request import MAX_STOP, WIRE_NAMES, ChatRequest, openai_tool_choice, system_message
from .openai_chat_stream import FINISH_REASONS, ChatDecoder, content_parts, usage_from_openai


class OpenAIChatPromptDriver(ChatRequest, BasePromptDriver):
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


#: The module's public names before the split: the stream's and the request's are defined in
#: `openai_chat_stream` and `openai_chat_request`.
__all__ = [
    "FINISH_REASONS",
    "MAX_STOP",
    "WIRE_NAMES",
    "ChatDecoder",
    "ChatRequest",
    "OpenAIChatPromptDriver",
    "content_parts",
    "openai_tool_choice",
    "system_message",
    "usage_from_openai",
]
