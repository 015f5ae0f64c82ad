"""MCP tools as ipyagent sees them: native names, input schemas, and results as artifacts.

Follows the MCP specification, "Tools" (2025-06-18 and later): a tool has a
`name`, an `inputSchema` (a JSON Schema object) and a result with `content`
(text, image, audio, resource links, embedded resources), an optional
`structuredContent` and `isError`. Nothing here imports the SDK; it reads the
SDK's result objects by attribute (both spellings: ``mime_type`` / ``mimeType``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from ..core import (
    MAX_NATIVE_NAME,
    AudioArtifact,
    BaseArtifact,
    BlobArtifact,
    ErrorArtifact,
    ImageArtifact,
    InfoArtifact,
    JsonArtifact,
    ListArtifact,
    TextArtifact,
)

#: A server name: what `%mcp add NAME` accepts; it prefixes every tool name of that server.
SERVER_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
#: Characters providers accept in a function name (OpenAI, Anthropic, Gemini: ``[A-Za-z0-9_-]``, at most 64).
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def check_server_name(name: Any) -> str:
    """`name` if it can prefix tool names: a letter, then letters, digits, ``_`` or ``-`` (at most 32).

    Raises:
        ValueError: it cannot.
    """
    if not isinstance(name, str) or not SERVER_NAME_RE.match(name):
        raise ValueError(f"MCP server name {name!r} must start with a letter and use letters, digits, '_' or '-' "
                         "(at most 32 characters): it prefixes the names of the server's tools")
    return name


def native_names(server: str, tools: list[str]) -> dict[str, str]:
    """{MCP tool name: the name sent to the model}, ``server_tool``, unique and within providers' rules.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``; a name longer than 64
    characters, or one that two tools would share once cleaned, is cut and ends
    with 8 hex digits of a hash of the MCP name, so it stays stable across restarts.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for tool in tools:
        native = f"{server}_{_NOT_ALLOWED.sub('_', tool)}"
        if len(native) > MAX_NATIVE_NAME or native in taken:
            digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
            native = f"{native[:MAX_NATIVE_NAME - 9]}_{digest}"
        taken.add(native)
        out[tool] = native
    return out


def input_schema(tool: Any) -> dict[str, Any]:
    """The tool's `inputSchema` as a JSON Schema object every provider takes: ``type: object``
    with ``properties`` (MCP allows a bare ``{"type": "object"}``); ``$schema`` dropped."""
    schema = getattr(tool, "input_schema", None)
    if schema is None:
        schema = getattr(tool, "inputSchema", None)
    schema = dict(schema or {})
    schema.pop("$schema", None)
    schema["type"] = "object"
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    return schema


def description(tool: Any) -> str:
    """The tool's description, else its title, else its name."""
    return getattr(tool, "description", None) or getattr(tool, "title", None) or tool.name


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _resource_artifact(resource: Any) -> BaseArtifact:
    uri = str(_get(resource, "uri") or "")
    mime = _get(resource, "mime_type", "mimeType")
    text = _get(resource, "text")
    if text is not None:
        return TextArtifact(value=text, name=uri or None)
    data = base64.b64decode(_get(resource, "blob") or "")
    if mime and mime.startswith("image/"):
        return ImageArtifact(value=data, mime_type=mime, name=uri or None)
    if mime and mime.startswith("audio/"):
        return AudioArtifact(value=data, mime_type=mime, name=uri or None)
    return BlobArtifact(value=data, mime_type=mime or "application/octet-stream", name=uri or None)


def content_artifact(block: Any) -> BaseArtifact:
    """One MCP content block as an artifact: text, image, audio, an embedded resource (text or
    bytes, named by its URI), a resource link (a note naming it); an unknown type as JSON."""
    kind = _get(block, "type")
    if kind == "text":
        return TextArtifact(value=block.text)
    if kind in ("image", "audio"):
        data = base64.b64decode(block.data)
        mime = _get(block, "mime_type", "mimeType")
        return ImageArtifact(value=data, mime_type=mime or "image/png") if kind == "image" \
            else AudioArtifact(value=data, mime_type=mime or "audio/wav")
    if kind == "resource":
        return _resource_artifact(block.resource)
    if kind == "resource_link":
        mime = _get(block, "mime_type", "mimeType")
        about = f" ({mime})" if mime else ""
        what = _get(block, "description")
        return InfoArtifact(
            value=f"resource {_get(block, 'name') or ''} at {block.uri}{about}" + (f": {what}" if what else ""),
            name="resource_link",
        )
    dump = block.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(block, "model_dump") else block
    return JsonArtifact(value=dump)


def _same_json(text: str, value: Any) -> bool:
    try:
        return json.loads(text) == value
    except ValueError:
        return False


def _wraps(structured: Any, text: str) -> bool:
    """`structured` only repeats `text`: equal to it decoded as JSON (the spec asks servers to send
    the JSON as text too), or an object of one field that is the text, or its JSON (server-filesystem's
    ``{"content": text}``, FastMCP's ``{"result": value}``). An object with more fields says more
    than the text, so it is not a wrapper."""
    if _same_json(text, structured):
        return True
    if not isinstance(structured, dict) or len(structured) != 1:
        return False
    [value] = structured.values()
    return value == text or (not isinstance(value, str) and _same_json(text, value))


def _merge_structured(blocks: list[BaseArtifact], structured: Any) -> list[BaseArtifact]:
    """Content plus ``structuredContent``, each thing once for the model. When the JSON only wraps a
    text block (`_wraps`), the model reads the text and the JSON is kept `shown_only`: the card
    shows both views. Other JSON comes first, for the model too. The Python SDK's own wrapper of a
    plain return value, ``{"result": value}`` (structure no server author wrote), is left out."""
    wrapped = [a for a in blocks if isinstance(a, TextArtifact) and _wraps(structured, a.value)]
    if wrapped and isinstance(structured, dict) and set(structured) == {"result"}:
        return blocks
    if wrapped:
        return [*blocks, JsonArtifact(value=structured, name="structuredContent", shown_only=True)]
    return [JsonArtifact(value=structured, name="structuredContent"), *blocks]


def result_artifact(result: Any) -> BaseArtifact:
    """An MCP `CallToolResult` as one artifact.

    ``isError``: an `ErrorArtifact` with the content's text (the model sees it as a
    failed call). Otherwise each content block becomes an artifact (`content_artifact`),
    ``structuredContent`` a `JsonArtifact` (without repeats: `_merge_structured`);
    one artifact is returned as it is, several as a `ListArtifact`, none as a note.
    """
    blocks = [content_artifact(b) for b in (_get(result, "content") or [])]
    if _get(result, "is_error", "isError"):
        text = "\n\n".join(a.to_text() for a in blocks) or "the MCP tool reported an error without a message"
        return ErrorArtifact(value=text, exception_type="MCPToolError")
    structured = _get(result, "structured_content", "structuredContent")
    if structured is not None:
        blocks = _merge_structured(blocks, structured)
    if not blocks:
        return InfoArtifact(value="the tool ran and returned nothing")
    return blocks[0] if len(blocks) == 1 else ListArtifact(value=blocks)
