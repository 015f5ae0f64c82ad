"""An MCP server's resources and prompts (MCP specification 2025-11-25, "Server features":
``resources/list``, ``resources/templates/list``, ``resources/read``, ``resources/subscribe``,
``prompts/list``, ``prompts/get``), read for the user rather than the model: ``%mcp resources``,
``%mcp prompts``, a resource as a context block (``%%agent --with mcp:NAME/URI``), a prompt as a
new cell (``%mcp prompt``).

Each function starts the server if need be and runs on the server's loop (`MCPServer.use`).
What a server sends is untrusted: callers redact it and show its control characters.
"""

from __future__ import annotations

import base64
import warnings
from dataclasses import dataclass, field
from typing import Any

from .mcp_content import content_artifact

#: Pages of a list read at most (a paginator that never ends cannot hang a magic).
MAX_PAGES = 100


@dataclass(slots=True)
class ResourceText:
    """A resource as text: `text` (a binary part is a line naming its type and size), the MIME
    type of its first part (None: not given), and `uri`."""

    uri: str
    text: str
    mime_type: str | None = None


@dataclass(slots=True)
class PromptText:
    """A server prompt filled in: `messages` as (role, text) pairs in order (images, audio and
    resources as the text a tool result would give), and its `description`."""

    name: str
    messages: list[tuple[str, str]] = field(default_factory=list)
    description: str = ""


async def _pages(fetch: Any, attribute: str) -> list[Any]:
    items, cursor = [], None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        items += getattr(page, attribute)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return items


async def list_resources(server: Any) -> tuple[list[Any], list[Any]]:
    """(the server's resources, its resource templates): the SDK's `Resource` (uri, name,
    mime_type, description) and `ResourceTemplate` (uri_template, ...). A server without
    resources has none of either.

    Raises:
        MCPServerError: it cannot start, or refused (one line).
    """

    async def work(client: Any) -> tuple[list[Any], list[Any]]:
        if getattr(client.server_capabilities, "resources", None) is None:
            return [], []
        resources = await _pages(lambda c: client.list_resources(cursor=c, cache_mode="refresh"), "resources")
        templates = await _pages(lambda c: client.list_resource_templates(cursor=c, cache_mode="refresh"),
                                 "resource_templates")
        return resources, templates

    return await server.use(work, "list its resources")


async def read_resource(server: Any, uri: str) -> ResourceText:
    """Resource `uri` of the server as text (`ResourceText`): its text parts joined, a binary part
    decoded when its type is text, else described (``<image/png, 4,033 bytes>``).

    Raises:
        MCPServerError: it cannot start, has no such resource, or refused (one line).
    """

    async def work(client: Any) -> ResourceText:
        result = await client.read_resource(uri, cache_mode="bypass")
        parts, mime = [], None
        for content in result.contents:
            mime = mime or getattr(content, "mime_type", None)
            text = getattr(content, "text", None)
            if text is None:
                text = _blob_text(getattr(content, "blob", "") or "", getattr(content, "mime_type", None))
            parts.append(text)
        return ResourceText(uri=uri, text="\n".join(parts), mime_type=mime)

    return await server.use(work, f"read {uri}")


def _blob_text(blob: str, mime: str | None) -> str:
    """A binary part as text: decoded when its type is text (``text/*``, JSON, XML), else a line
    naming its type and size."""
    data = base64.b64decode(blob, validate=False)
    if mime and (mime.startswith("text/") or mime.endswith(("json", "xml"))):
        return data.decode("utf-8", errors="replace")
    return f"<{mime or 'binary'}, {len(data):,} bytes>"


async def subscribe_resource(server: Any, uri: str) -> None:
    """Subscribe to resource `uri` (``resources/subscribe``): the server's updates of it
    (``notifications/resources/updated``) are counted in `ClientRequests.updates`.

    Raises:
        MCPServerError: it cannot start, does not offer subscriptions, or refused (one line).
    """

    async def work(client: Any) -> None:
        offered = getattr(client.server_capabilities, "resources", None)
        if not getattr(offered, "subscribe", False):
            raise ValueError("it does not offer resource subscriptions")
        with warnings.catch_warnings():  # deprecated in the 2026-07-28 protocol; servers here speak 2025-11-25
            warnings.simplefilter("ignore")
            await client.subscribe_resource(uri)
        server.requests.updates.setdefault(uri, 0)

    await server.use(work, f"subscribe to {uri}")


async def list_prompts(server: Any) -> list[Any]:
    """The server's prompts: the SDK's `Prompt` (name, description, arguments with name,
    description, required). A server without prompts has none.

    Raises:
        MCPServerError: it cannot start, or refused (one line).
    """

    async def work(client: Any) -> list[Any]:
        if getattr(client.server_capabilities, "prompts", None) is None:
            return []
        return await _pages(lambda c: client.list_prompts(cursor=c, cache_mode="refresh"), "prompts")

    return await server.use(work, "list its prompts")


async def get_prompt(server: Any, name: str, arguments: dict[str, str]) -> PromptText:
    """Prompt `name` filled with `arguments` (``prompts/get``), as text (`PromptText`).

    Raises:
        MCPServerError: it cannot start, has no such prompt, an argument is missing, or it
            refused (one line).
    """

    async def work(client: Any) -> PromptText:
        result = await client.get_prompt(name, arguments)
        messages = [(str(m.role), content_artifact(m.content).to_text()) for m in result.messages]
        return PromptText(name=name, messages=messages, description=str(result.description or ""))

    return await server.use(work, f"get prompt {name!r}")


def prompt_cell(prompt: PromptText) -> str:
    """The body of an ``%%agent`` cell that sends `prompt`: its user messages' text, in order; an
    assistant message is kept as a quoted line saying so (a cell holds one user turn)."""
    parts = []
    for role, text in prompt.messages:
        if role == "user":
            parts.append(text)
        else:
            quoted = "\n".join(f"> {line}" for line in text.splitlines() or [""])
            parts.append(f"(the prompt's {role} message:)\n{quoted}")
    return "\n\n".join(parts)
