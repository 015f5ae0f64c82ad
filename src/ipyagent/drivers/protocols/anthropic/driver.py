"""Anthropic Messages over SSE: the prompt driver, joining its request building
(`request`), its stream reading (`stream`), its errors (`errors`) and its server tools and
citations (`server`).

Follows the Anthropic API reference, "Messages" (`POST /v1/messages`,
`anthropic-version: 2023-06-01`) and "Models: List Models".
"""

from __future__ import annotations

from typing import Any

from ....core import ProviderError, redact
from ...base import BasePromptDriver, Capabilities
from ...catalog.models import parse_anthropic
from .errors import ERROR_TYPES, error_from_object
from .request import AnthropicRequest
from .stream import MessagesDecoder

#: The `anthropic-version` header this driver speaks.
API_VERSION = "2023-06-01"


class AnthropicPromptDriver(AnthropicRequest, BasePromptDriver):
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

    models_params = {"limit": 1000}

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        """Anthropic's list, paged by ``after_id`` (API reference, "Models: List Models")."""
        return parse_anthropic(data)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> MessagesDecoder:
        return MessagesDecoder(self)

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
