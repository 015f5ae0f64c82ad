"""Gemini's built-in tools and grounding, to and from the neutral blocks.

Follows the Gemini API reference, "Caching / Tool" (``{"google_search": {}}``,
``{"code_execution": {}}``, ``{"url_context": {}}`` beside ``functionDeclarations``),
"Generating content" (``Part.executableCode`` ``{language, code}``, ``Part.codeExecutionResult``
``{outcome, output}``; ``Candidate.groundingMetadata`` with ``webSearchQueries``,
``groundingChunks`` (``web: {uri, title}``, ``retrievedContext: {uri, title}``) and
``groundingSupports`` (``segment: {startIndex, endIndex, text}``, ``groundingChunkIndices``),
whose segment offsets count UTF-8 bytes of the reply's text; ``Candidate.urlContextMetadata``
with ``urlMetadata: [{retrievedUrl, urlRetrievalStatus}]``) and the guides "Grounding with
Google Search", "Code execution" and "URL context". Gemini 3 models bill grounding per search
query the model ran (``webSearchQueries``).

Gemini sends no id for a code execution or a search: ids are made up here (``code_1``,
``search_<responseId>``); only the parts go back on the next turn, as they came.
"""

from __future__ import annotations

from typing import Any

from ....core import BuiltinTool, Citation, ProviderError, ServerToolCallBlock, ServerToolResultBlock, WebSource
from ...decode import lenient

#: Our built-in tools -> Gemini's `Tool` field.
TOOL_FIELDS = {"web_search": "google_search", "code_execution": "code_execution", "url_context": "url_context"}
#: ``codeExecutionResult.outcome`` values that are not a success.
FAILED_OUTCOMES = {"OUTCOME_FAILED": "the code failed", "OUTCOME_DEADLINE_EXCEEDED": "the code ran out of time"}


def tool_entries(tools: list[BuiltinTool]) -> list[dict[str, Any]]:
    """One `Tool` object per built-in tool (``{"google_search": {}}``...).

    Raises:
        ProviderError: ``invalid_request`` for an option (Gemini's tools here take none).
    """
    for tool in tools:
        if tool.options:
            raise ProviderError("invalid_request", f"gemini's {TOOL_FIELDS[tool.name]} tool takes no options "
                                f"(given: {', '.join(sorted(tool.options))})", retryable=False)
    return [{TOOL_FIELDS[tool.name]: {}} for tool in tools]


def code_call(part: dict[str, Any], number: int) -> ServerToolCallBlock:
    """An ``executableCode`` part as a call (the part kept whole, to go back)."""
    code = part.get("executableCode") if isinstance(part.get("executableCode"), dict) else {}
    call_id = str(code.get("id") or f"code_{number}")
    source = {"code": code.get("code") or "", "language": str(code.get("language") or "PYTHON")}
    return ServerToolCallBlock(id=call_id, tool="code_execution", name="code_execution", provider="gemini", raw=part,
                               input=source)


def code_result(part: dict[str, Any], call_id: str) -> ServerToolResultBlock:
    """A ``codeExecutionResult`` part as the result of call `call_id`."""
    result = part.get("codeExecutionResult") if isinstance(part.get("codeExecutionResult"), dict) else {}
    outcome = str(result.get("outcome") or "OUTCOME_OK")
    return lenient(ServerToolResultBlock, call_id=str(result.get("id") or call_id), tool="code_execution",
                   provider="gemini", raw=part, output=result.get("output"), error=FAILED_OUTCOMES.get(outcome))


def search_blocks(grounding: dict[str, Any], response_id: str | None) -> list[Any]:
    """The search Gemini ran (``webSearchQueries``) and the pages it grounded on (``groundingChunks``),
    as a call and its result; none when it ran no search."""
    queries = [q for q in grounding.get("webSearchQueries") or () if isinstance(q, str)]
    chunks = [c for c in grounding.get("groundingChunks") or () if isinstance(c, dict)]
    if not queries and not chunks:
        return []
    call_id = f"search_{response_id or 1}"
    sources = [lenient(WebSource, url=s.get("uri"), title=s.get("title")) for s in map(_chunk_source, chunks) if s]
    return [ServerToolCallBlock(id=call_id, tool="web_search", name="google_search", input={"queries": queries},
                                provider="gemini"),
            ServerToolResultBlock(call_id=call_id, tool="web_search", sources=sources, provider="gemini")]


def url_blocks(metadata: dict[str, Any], response_id: str | None) -> list[Any]:
    """The pages the URL context tool read (``urlMetadata``), as a call and its result."""
    pages = [m for m in metadata.get("urlMetadata") or metadata.get("url_metadata") or () if isinstance(m, dict)]
    if not pages:
        return []
    call_id = f"urls_{response_id or 1}"
    urls = [str(p.get("retrievedUrl") or p.get("retrieved_url") or "") for p in pages]
    statuses = [str(p.get("urlRetrievalStatus") or p.get("url_retrieval_status") or "") for p in pages]
    failed = [u for u, s in zip(urls, statuses) if s and s != "URL_RETRIEVAL_STATUS_SUCCESS"]
    sources = [lenient(WebSource, url=u, status=s.removeprefix("URL_RETRIEVAL_STATUS_").lower() or None)
               for u, s in zip(urls, statuses)]
    result = ServerToolResultBlock(call_id=call_id, tool="url_context", provider="gemini", sources=sources,
                                   error=f"could not read {', '.join(failed)}" if failed else None)
    call = ServerToolCallBlock(id=call_id, tool="url_context", name="url_context", input={"urls": urls},
                               provider="gemini")
    return [call, result]


def _chunk_source(chunk: dict[str, Any]) -> dict[str, Any] | None:
    source = chunk.get("web") or chunk.get("retrievedContext")
    return source if isinstance(source, dict) else None


def grounding_citations(grounding: dict[str, Any], texts: dict[int, str]) -> list[tuple[int, Citation]]:
    """(text block index, `Citation`) for each source of each grounding support, its offsets moved
    from UTF-8 bytes of the reply's whole text (the text blocks of `texts`, joined in index
    order) to characters of the block where the supported segment ends."""
    chunks = [c for c in grounding.get("groundingChunks") or () if isinstance(c, dict)]
    order = sorted(texts)
    joined = "".join(texts[i] for i in order)
    if not chunks or not joined:
        return []
    encoded = joined.encode("utf-8", "surrogatepass")
    starts, position = [], 0
    for index in order:
        starts.append((index, position))
        position += len(texts[index])
    found: list[tuple[int, Citation]] = []
    for support in grounding.get("groundingSupports") or ():
        if not isinstance(support, dict) or not isinstance(support.get("segment"), dict):
            continue
        span = _span(support["segment"], joined, encoded)
        if span is None:
            continue
        block, offset = next((i, p) for i, p in reversed(starts) if p < span[1] or p == 0)
        start, end = max(span[0], offset) - offset, span[1] - offset
        for n in support.get("groundingChunkIndices") or ():
            source = _chunk_source(chunks[n]) if isinstance(n, int) and 0 <= n < len(chunks) else None
            if source is not None:
                found.append((block, lenient(Citation, start=start, end=end, url=source.get("uri"),
                                             title=source.get("title"), kind="grounding")))
    return found


def _span(segment: dict[str, Any], joined: str, encoded: bytes) -> tuple[int, int] | None:
    """A segment's (start, end) in characters of `joined`: its byte offsets converted, checked
    against its ``text`` when given (else that text looked for); None when it is not there."""
    first, last = segment.get("startIndex") or 0, segment.get("endIndex")
    if not isinstance(first, int) or not isinstance(last, int) or not 0 <= first <= last <= len(encoded):
        last = None
    text = segment.get("text") if isinstance(segment.get("text"), str) else None
    if last is not None:
        start = len(encoded[:first].decode("utf-8", "ignore"))
        end = len(encoded[:last].decode("utf-8", "ignore"))
        if text is None or joined[start:end] == text:
            return start, end
    if text:
        at = joined.find(text)
        if at >= 0:
            return at, at + len(text)
    return None
