"""The Responses API's built-in tools and annotations, to and from the neutral blocks.

Follows the OpenAI API reference, "Responses" (``tools``: ``{"type": "web_search",
"filters": {"allowed_domains"}, "user_location", "search_context_size"}``, ``{"type":
"code_interpreter", "container": ID | {"type": "auto", "file_ids"}}``, ``{"type":
"file_search", "vector_store_ids", "max_num_results"}``; ``include``:
``web_search_call.action.sources``, ``code_interpreter_call.outputs``,
``file_search_call.results``), its output items (``web_search_call`` with an ``action`` of type
``search`` (``query``, ``queries``, ``sources``), ``open_page`` or ``find_in_page``;
``code_interpreter_call`` with ``code``, ``container_id`` and ``outputs`` of type ``logs`` /
``image``; ``file_search_call`` with ``queries`` and ``results``) and the ``annotations`` of
``output_text`` (``url_citation`` with ``start_index`` / ``end_index`` / ``url`` / ``title``,
``file_citation`` with ``index`` / ``filename``, ``container_file_citation``), streamed as
``response.output_text.annotation.added``. The streaming events
``response.web_search_call.in_progress`` / ``.searching`` / ``.completed``,
``response.code_interpreter_call.*`` and ``response.code_interpreter_call_code.delta``, and
``response.file_search_call.*`` say how a call is going. The tests check every shape against
the openai SDK's own models.
"""

from __future__ import annotations

from typing import Any

from ...core import (
    BuiltinTool,
    Citation,
    ImageBlock,
    ProviderError,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSource,
)
from ..decode import lenient

#: Output item types of built-in tools -> (the neutral tool, the tool's name in the request).
ITEM_TOOLS = {"web_search_call": ("web_search", "web_search"),
              "code_interpreter_call": ("code_execution", "code_interpreter"),
              "file_search_call": ("file_search", "file_search")}
#: Streaming events of a call's progress -> the status shown.
PROGRESS = {f"response.{call}.{status}": status for call, statuses in (
    ("web_search_call", ("in_progress", "searching", "completed")),
    ("code_interpreter_call", ("in_progress", "interpreting", "completed")),
    ("file_search_call", ("in_progress", "searching", "completed"))) for status in statuses}
#: What each built-in tool adds to ``include``, so its results come back.
INCLUDES = {"web_search": "web_search_call.action.sources", "code_execution": "code_interpreter_call.outputs",
            "file_search": "file_search_call.results"}
#: Options each tool takes.
OPTIONS = {
    "web_search": frozenset({"allowed_domains", "user_location", "search_context_size"}),
    "code_execution": frozenset({"container", "file_ids", "memory_limit"}),
    "file_search": frozenset({"vector_store_ids", "max_results", "filters", "ranking_options"}),
}


def tool_definitions(tools: list[BuiltinTool]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the ``tools`` entries for `tools`, what ``include`` needs for their results).

    Raises:
        ProviderError: ``invalid_request`` for an option a tool does not take, or a file search
            without ``vector_store_ids``.
    """
    found, include = [], []
    for tool in tools:
        unknown = set(tool.options) - OPTIONS[tool.name]
        if unknown:
            raise ProviderError("invalid_request", f"the Responses API's {tool.name} tool takes no option "
                                f"{', '.join(sorted(unknown))}; it takes {', '.join(sorted(OPTIONS[tool.name]))}",
                                retryable=False)
        found.append(_definition(tool))
        include.append(INCLUDES[tool.name])
    return found, include


def _definition(tool: BuiltinTool) -> dict[str, Any]:
    options = dict(tool.options)
    if tool.name == "web_search":
        definition: dict[str, Any] = {"type": "web_search"}
        if options.get("allowed_domains"):
            definition["filters"] = {"allowed_domains": list(options.pop("allowed_domains"))}
        return {**definition, **{k: v for k, v in options.items() if v is not None and k != "allowed_domains"}}
    if tool.name == "code_execution":
        container = options.get("container") or {"type": "auto", **({"file_ids": list(options["file_ids"])}
                                                                     if options.get("file_ids") else {}),
                                                  **({"memory_limit": options["memory_limit"]}
                                                     if options.get("memory_limit") else {})}
        return {"type": "code_interpreter", "container": container}
    if not options.get("vector_store_ids"):
        raise ProviderError("invalid_request", "the Responses API's file_search tool needs vector_store_ids "
                            "(BuiltinTool('file_search', vector_store_ids=['vs_...']))", retryable=False)
    definition = {"type": "file_search", "vector_store_ids": list(options["vector_store_ids"])}
    if options.get("max_results") is not None:
        definition["max_num_results"] = options["max_results"]
    return {**definition, **{k: options[k] for k in ("filters", "ranking_options") if options.get(k) is not None}}


def item_blocks(item: dict[str, Any], provider: str) -> tuple[ServerToolCallBlock, ServerToolResultBlock]:
    """A finished built-in tool item as a call (the item kept whole, to go back) and its result."""
    tool, name = ITEM_TOOLS[item["type"]]
    call_id = str(item.get("id") or "")
    call = ServerToolCallBlock(id=call_id, tool=tool, name=name, provider=provider, raw=item)
    result = ServerToolResultBlock(call_id=call_id, tool=tool, provider=provider)
    if item.get("status") in ("failed", "incomplete"):
        result.error = f"the call {item['status']}"
    if tool == "web_search":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        call.input = {k: action[k] for k in ("query", "queries", "url", "pattern") if action.get(k)}
        result.sources = [lenient(WebSource, url=s.get("url")) for s in action.get("sources") or ()
                          if isinstance(s, dict)]
        if action.get("type") in ("open_page", "find_in_page") and action.get("url"):
            result.sources = [lenient(WebSource, url=action["url"])]
    elif tool == "code_execution":
        call.input = {"code": item.get("code") or ""}
        _interpreter_outputs(result, item)
    else:
        call.input = {"queries": list(item.get("queries") or ())}
        result.sources = [lenient(WebSource, title=r.get("filename") or r.get("file_id"))
                          for r in item.get("results") or () if isinstance(r, dict)]
    return call, result


def _interpreter_outputs(result: ServerToolResultBlock, item: dict[str, Any]) -> None:
    """Logs as the output; an image output drawn when it is inline data, else named as a file
    (its URL is the container's, never fetched here)."""
    logs = []
    for output in item.get("outputs") or ():
        if not isinstance(output, dict):
            continue
        if output.get("type") == "logs":
            logs.append(str(output.get("logs") or ""))
        elif output.get("type") == "image" and output.get("url"):
            url = str(output["url"])
            if url.startswith("data:image/") and ";base64," in url:
                mime, data = url[5:].split(";base64,", 1)
                result.images.append(ImageBlock(mime_type=mime, data=data))
            else:
                result.files.append({"url": url, "name": "image"})
    if logs:
        result.output = "".join(logs)
    if item.get("container_id"):
        result.files = [{**f, "container": str(item["container_id"])} for f in result.files]


def annotation(raw: Any) -> Citation | None:
    """A text annotation as a `Citation` (offsets into its ``output_text``); None for a
    ``file_path`` (a link to a file, no source) or something else."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("type")
    if kind == "url_citation":
        return lenient(Citation, start=raw.get("start_index"), end=raw.get("end_index"), url=raw.get("url"),
                        title=raw.get("title"), kind=kind)
    if kind == "file_citation":
        index = raw.get("index")
        return lenient(Citation, start=index, end=index, document=raw.get("filename") or raw.get("file_id"), kind=kind)
    if kind == "container_file_citation":
        return lenient(Citation, start=raw.get("start_index"), end=raw.get("end_index"),
                        document=raw.get("filename") or raw.get("file_id"), kind=kind)
    return None
