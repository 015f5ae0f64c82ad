"""Azure OpenAI Chat Completions: the OpenAI Chat driver with Azure's addressing.

``azure-openai:DEPLOYMENT`` posts to
``{AZURE_OPENAI_ENDPOINT}/openai/deployments/DEPLOYMENT/chat/completions?api-version=V``
with the key in an ``api-key`` header (Azure OpenAI reference, "Chat completions").
The body and the stream are OpenAI's.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from ...core import ConfigurationError, PromptStack
from .openai_chat import OpenAIChatPromptDriver

#: The GA data-plane version used when AZURE_OPENAI_API_VERSION is not set.
DEFAULT_API_VERSION = "2024-10-21"


class AzureOpenAIChatPromptDriver(OpenAIChatPromptDriver):
    """Prompt driver for an Azure OpenAI deployment (`model` is the deployment name).

    Args:
        api_version: the ``api-version`` query parameter (default: the
            AZURE_OPENAI_API_VERSION variable, else `DEFAULT_API_VERSION`).
        base_url: the resource endpoint, ``https://NAME.openai.azure.com``
            (the registry reads AZURE_OPENAI_ENDPOINT).
        Others: see `OpenAIChatPromptDriver`.

    Raises:
        ConfigurationError: no endpoint.
    """

    protocol = "azure-openai"
    default_base_url = ""
    api_key_env = "AZURE_OPENAI_API_KEY"

    def __init__(self, model: str, *, api_version: str | None = None, **kw: Any) -> None:
        if not kw.get("base_url"):
            raise ConfigurationError(
                "AZURE_OPENAI_ENDPOINT is not set: set it to your resource's endpoint "
                "(https://NAME.openai.azure.com), or pass --base-url"
            )
        super().__init__(model, **kw)
        self.api_version = api_version or os.environ.get("AZURE_OPENAI_API_VERSION") or DEFAULT_API_VERSION

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["api-key"] = self._api_key
        return headers

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        path, body = super().build_request(prompt_stack)
        body.pop("model", None)  # the deployment in the URL names the model
        deployment = quote(self.model, safe="")
        return f"/openai/deployments/{deployment}{path}?api-version={quote(self.api_version, safe='')}", body
