"""Anthropic's server tools and citations, to and from the neutral blocks.

Follows the Anthropic API reference, "Messages" and the tool guides "Web search tool"
(``web_search_20250305``: a ``server_tool_use`` block named ``web_search`` with input
``{"query"}``, then a ``web_search_tool_result`` block whose ``content`` is a list of
``web_search_result`` (``url``, ``title``, ``encrypted_content``, ``page_age``) or a
``web_search_tool_result_error``), "Web fetch tool" (``web_fetch_20250910``: input ``{"url"}``,
a ``web_fetch_tool_result`` holding a ``web_fetch_result`` with the fetched ``url`` and a
``document``) and "Code execution tool" (``code_execution_20250825``: ``server_tool_use``
blocks named ``bash_code_execution`` (input ``{"command"}``) or ``text_editor_code_execution``,
answered by ``bash_code_execution_tool_result`` / ``text_editor_code_execution_tool_result``;
the older ``code_execution`` with ``{"code"}`` by ``code_execution_tool_result``; results
carry ``stdout``, ``stderr``, ``return_code`` and the ``file_id`` of files made); and
"Citations": a text block's ``citations`` (streamed as ``citations_delta``), typed
``web_search_result_location``, ``char_location``, ``page_location``,
``content_block_location`` and ``search_result_location``. Usage counts the searches and
fetches in ``usage.server_tool_use``. A reply whose code ran in a container names it in
``container`` (``message_delta.delta``): a later request passes its id to keep working there.

The tool definitions and each block's shape are checked against the anthropic SDK's own
types in the tests.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ....core import (
    BuiltinTool,
    Citation,
    GenericBlock,
    Message,
    ProviderError,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSource,
)
from ...decode import lenient

#: The tool definition of each built-in tool (a ``type`` and ``name``), before its options.
TOOL_TYPES: dict[str, dict[str, str]] = {
    "web_search": {"type": "web_search_20250305", "name": "web_search"},
    "web_fetch": {"type": "web_fetch_20250910", "name": "web_fetch"},
    "code_execution": {"type": "code_execution_20250825", "name": "code_execution"},
}
#: Options each tool takes ("Web search tool", "Web fetch tool"); ``container`` is the request's.
TOOL_OPTIONS: dict[str, frozenset[str]] = {
    "web_search": frozenset({"allowed_domains", "blocked_domains", "max_uses", "user_location", "type"}),
    "web_fetch": frozenset({"allowed_domains", "blocked_domains", "max_uses", "max_content_tokens", "citations",
                            "type"}),
    "code_execution": frozenset({"container", "type"}),
}
#: A ``server_tool_use`` block's name -> the neutral tool it is (`core.BUILTIN_TOOLS`).
TOOL_KINDS = {"web_search": "web_search", "web_fetch": "web_fetch", "code_execution": "code_execution",
              "bash_code_execution": "code_execution", "text_editor_code_execution": "code_execution"}
#: Result block types -> the neutral tool they answer.
RESULT_KINDS = {"web_search_tool_result": "web_search", "web_fetch_tool_result": "web_fetch",
                "code_execution_tool_result": "code_execution", "bash_code_execution_tool_result": "code_execution",
                "text_editor_code_execution_tool_result": "code_execution"}


def tool_definitions(tools: list[BuiltinTool]) -> tuple[list[dict[str, Any]], str | None]:
    """(the ``tools`` entries of `tools`, the ``container`` id an option names or None).

    Raises:
        ProviderError: ``invalid_request`` for an option the tool does not take.
    """
    found, container = [], None
    for tool in tools:
        unknown = set(tool.options) - TOOL_OPTIONS[tool.name]
        if unknown:
            raise ProviderError("invalid_request", f"anthropic's {tool.name} tool takes no option "
                                f"{', '.join(sorted(unknown))}; it takes {', '.join(sorted(TOOL_OPTIONS[tool.name]))}",
                                retryable=False)
        options = dict(tool.options)
        container = options.pop("container", None) or container
        definition = {**TOOL_TYPES[tool.name], **options}
        if tool.name == "web_fetch":
            definition.setdefault("citations", {"enabled": True})  # "Citations are disabled by default"
        found.append(definition)
    return found, container


def container_to_reuse(messages: list[Message], now: datetime | None = None) -> str | None:
    """The id of the code execution container the conversation's last reply used, when it has not
    expired (``container.expires_at``), so the next request works in the same files; else None."""
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        container = message.metadata.get("container")
        if not isinstance(container, dict) or not container.get("id"):
            return None
        expires = container.get("expires_at")
        try:
            if expires and datetime.fromisoformat(str(expires).replace("Z", "+00:00")) <= (now or _now()):
                return None
        except ValueError:
            pass
        return str(container["id"])
    return None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def server_block(block: dict[str, Any], provider: str) -> Any:
    """A whole server tool block as the neutral block it is (a call or a result); any other
    block type as a `GenericBlock`. The wire block is kept (`raw`) to go back unchanged."""
    kind = block.get("type")
    if kind == "server_tool_use":
        name = str(block.get("name") or "")
        tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
        return ServerToolCallBlock(id=str(block.get("id") or ""), tool=TOOL_KINDS.get(name, name), name=name,
                                   input=tool_input, provider=provider, raw=block)
    if kind in RESULT_KINDS:
        return _result(block, RESULT_KINDS[kind], provider)  # type: ignore[index]
    return GenericBlock(value=block)


def _result(block: dict[str, Any], tool: str, provider: str) -> ServerToolResultBlock:
    content = block.get("content")
    result = ServerToolResultBlock(call_id=str(block.get("tool_use_id") or ""), tool=tool, provider=provider, raw=block)
    if isinstance(content, list):  # web search results
        result.sources = [lenient(WebSource, url=r.get("url"), title=r.get("title"))
                          for r in content if isinstance(r, dict)]
        return result
    if not isinstance(content, dict):
        return result
    if "error_code" in content:
        result.error = str(content.get("error_code"))
        return result
    if content.get("type") == "web_fetch_result":
        document = content.get("content") if isinstance(content.get("content"), dict) else {}
        result.sources = [lenient(WebSource, url=content.get("url"), title=document.get("title"))]
        return result
    _program_output(result, content)
    return result


def _program_output(result: ServerToolResultBlock, content: dict[str, Any]) -> None:
    """A code execution result's stdout and stderr, exit code and the files it made."""
    stdout = content.get("stdout") if "stdout" in content else None
    if stdout is None and "encrypted_stdout" in content:
        stdout = "(encrypted output)"
    stderr = content.get("stderr") or ""
    if stdout is not None or stderr:
        result.output = (stdout or "") + (f"\n[stderr]\n{stderr}" if stderr else "")
    elif isinstance(content.get("content"), str):  # a text editor view
        result.output = content["content"]
    code = content.get("return_code")
    if isinstance(code, int) and code != 0:
        result.error = f"exit code {code}"
    files = content.get("content") if isinstance(content.get("content"), list) else []
    result.files = [{"id": str(f["file_id"])} for f in files if isinstance(f, dict) and f.get("file_id")]


def citation(raw: Any) -> Citation | None:
    """An Anthropic citation (`Citations`: its location types) as a `Citation` of the whole text
    block it sits on; None for something that is not one."""
    if not isinstance(raw, dict):
        return None
    kind = str(raw.get("type") or "")
    quote = raw.get("cited_text") if isinstance(raw.get("cited_text"), str) else None
    if kind in ("web_search_result_location", "search_result_location"):
        return lenient(Citation, url=raw.get("url") or raw.get("source"), title=raw.get("title"), quote=quote,
                       kind=kind)
    document = raw.get("document_title") or (f"document {raw['document_index'] + 1}"
                                             if isinstance(raw.get("document_index"), int) else None)
    where = {"char_location": ("characters", "start_char_index", "end_char_index"),
             "page_location": ("pages", "start_page_number", "end_page_number"),
             "content_block_location": ("blocks", "start_block_index", "end_block_index")}.get(kind)
    location = None
    if where and isinstance(raw.get(where[1]), int) and isinstance(raw.get(where[2]), int):
        first, last = raw[where[1]], raw[where[2]] - 1  # the end is exclusive ("Citations")
        location = f"{where[0][:-1] if first >= last else where[0]} {first}" + (f"–{last}" if last > first else "")
    return lenient(Citation, document=document, location=location, quote=quote, kind=kind or "document")


def sent_back(block: Any, provider: str) -> list[dict[str, Any]]:
    """A server tool block of ours as the assistant content the API takes back: its wire block
    unchanged; nothing for another provider's (it cannot read them)."""
    if block.provider == provider and isinstance(block.raw, dict) and block.raw.get("type"):
        return [block.raw]
    return []


def tool_input_text(raw: str) -> dict[str, Any]:
    """A server tool call's streamed input, parsed (``{}`` when there was none).

    Raises:
        ValueError: input that is not a JSON object."""
    if not raw.strip():
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
