"""Streams of the providers' built-in tools, written to their documented shapes.

The shared recordings hold one such stream (Anthropic code execution, ``anthropic/
stream-server-tool-code-execution.sse``); these are the others, built event by event from:

* OpenAI API reference, "Responses" and "Streaming events": ``web_search_call`` output items
  (``action`` ``{"type": "search", "query", "sources": [{"type": "url", "url"}]}``),
  ``response.web_search_call.in_progress`` / ``.searching`` / ``.completed``,
  ``response.output_text.annotation.added`` with a ``url_citation``; ``code_interpreter_call``
  items (``code``, ``container_id``, ``outputs`` of type ``logs`` / ``image``),
  ``response.code_interpreter_call_code.delta`` / ``.done`` and ``.in_progress`` /
  ``.interpreting`` / ``.completed``. Every event validates against the openai SDK's
  ``ResponseStreamEvent`` (the tests check).
* Anthropic API reference, "Streaming Messages" and the "Web search tool", "Web fetch tool"
  and "Citations" guides: a ``server_tool_use`` block whose input streams as
  ``input_json_delta``, a ``web_search_tool_result`` / ``web_fetch_tool_result`` block whole in
  ``content_block_start``, text blocks each cited by ``citations_delta`` events, usage with
  ``server_tool_use.web_search_requests``. Every event validates against the anthropic SDK's
  ``RawMessageStreamEvent``.
* Gemini API reference, "Generating content": ``executableCode`` and ``codeExecutionResult``
  parts, an ``inlineData`` PNG (a chart), ``groundingMetadata`` (``webSearchQueries``,
  ``groundingChunks[].web``, ``groundingSupports[].segment`` in UTF-8 bytes) and
  ``urlContextMetadata`` on the last chunk (no SDK among the test extras: the shapes are the
  reference's field by field).
"""

from __future__ import annotations

import json
from typing import Any

#: A 1x1 PNG, base64 (a chart stands for any image a tool draws).
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def sse(events: list[dict[str, Any]], *, named: bool = True) -> bytes:
    """SSE bytes, one ``event:`` (the payload's type, when `named`) and ``data:`` per event."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named and "type" in event else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


# -- OpenAI Responses --------------------------------------------------------------------------


def _response(model: str, status: str, output: list[dict[str, Any]], tools: list[dict[str, Any]],
              usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "resp_ws1", "object": "response", "created_at": 1765000000, "status": status, "error": None,
            "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": model,
            "output": output, "parallel_tool_calls": True, "previous_response_id": None, "reasoning": {"effort": None},
            "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
            "tools": tools, "top_p": 1.0, "truncation": "disabled", "usage": usage, "metadata": {}}


def _usage(inputs: int, outputs: int) -> dict[str, Any]:
    return {"input_tokens": inputs, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": outputs,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inputs + outputs}


def _message_events(oi: int, item_id: str, pieces: list[str], annotations: list[dict[str, Any]]) -> list[dict]:
    """A message output item streamed: text pieces, then each annotation, then the item done."""
    text = "".join(pieces)
    where = {"item_id": item_id, "output_index": oi, "content_index": 0}
    part = {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}
    item = {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [part]}
    return [
        {"type": "response.output_item.added", "output_index": oi,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **where, "part": {**part, "text": "", "annotations": []}},
        *({"type": "response.output_text.delta", **where, "delta": p, "logprobs": []} for p in pieces),
        *({"type": "response.output_text.annotation.added", **where, "annotation_index": n, "annotation": a}
          for n, a in enumerate(annotations)),
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": oi, "item": item},
    ]


def _numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def responses_web_search(model: str, query: str, sources: list[str], pieces: list[str],
                         cited: list[tuple[int, int, str, str]]) -> list[dict[str, Any]]:
    """A Responses stream that searched the web for `query`, found `sources` (URLs) and answered
    `pieces`, citing (start, end, url, title) spans (``url_citation``)."""
    tools = [{"type": "web_search", "search_context_size": "medium", "user_location": None, "filters": None}]
    call = {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": query, "sources": [{"type": "url", "url": u} for u in sources]}}
    annotations = [{"type": "url_citation", "start_index": s, "end_index": e, "url": u, "title": t}
                   for s, e, u, t in cited]
    at = {"item_id": "ws_1", "output_index": 0}
    message = _message_events(1, "msg_ws1", pieces, annotations)
    done_item = message[-1]["item"]
    response = _response(model, "in_progress", [], tools, None)
    return _numbered([
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress", "action": {"type": "search"}}},
        {"type": "response.web_search_call.in_progress", **at},
        {"type": "response.web_search_call.searching", **at},
        {"type": "response.web_search_call.completed", **at},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        *message,
        {"type": "response.completed",
         "response": _response(model, "completed", [call, done_item], tools, _usage(320, 41))},
    ])


def responses_code_interpreter(model: str, code_pieces: list[str], logs: str, pieces: list[str],
                               image: bool = True) -> list[dict[str, Any]]:
    """A Responses stream that wrote and ran code (streamed in `code_pieces`), printed `logs`,
    drew an image (a data: URL here), and answered `pieces`."""
    code = "".join(code_pieces)
    tools = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    outputs: list[dict[str, Any]] = [{"type": "logs", "logs": logs}]
    if image:
        outputs.append({"type": "image", "url": f"data:image/png;base64,{PNG}"})
    call = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": code,
            "container_id": "cntr_1", "outputs": outputs}
    at = {"item_id": "ci_1", "output_index": 0}
    message = _message_events(1, "msg_ci1", pieces, [])
    response = _response(model, "in_progress", [], tools, None)
    return _numbered([
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**call, "status": "in_progress", "code": "", "outputs": None}},
        {"type": "response.code_interpreter_call.in_progress", **at},
        *({"type": "response.code_interpreter_call_code.delta", **at, "delta": p} for p in code_pieces),
        {"type": "response.code_interpreter_call_code.done", **at, "code": code},
        {"type": "response.code_interpreter_call.interpreting", **at},
        {"type": "response.code_interpreter_call.completed", **at},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        *message,
        {"type": "response.completed",
         "response": _response(model, "completed", [call, message[-1]["item"]], tools, _usage(410, 96))},
    ])


# -- Anthropic ---------------------------------------------------------------------------------


def _anthropic_start(model: str) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": "msg_srv1", "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 2100, "cache_creation_input_tokens": 0,
                                          "cache_read_input_tokens": 0, "output_tokens": 3}}}


def anthropic_web_search(model: str, query: str, results: list[tuple[str, str]],
                         answer: list[tuple[str, list[dict[str, Any]]]], *, stop: str = "end_turn",
                         call_id: str = "srvtoolu_1") -> list[dict[str, Any]]:
    """A Messages stream: a ``web_search`` call for `query` (its input streamed in two pieces),
    its results (url, title), then the answer, each text block with its citations
    (``web_search_result_location``) streamed before its text; `stop`: its ``stop_reason``
    (``pause_turn``: "Server tools", the API paused its loop after the search)."""
    search = {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {}}
    found = {"type": "web_search_tool_result", "tool_use_id": call_id,
             "content": [{"type": "web_search_result", "url": u, "title": t, "encrypted_content": "EqgfCioIARgBIiQ3",
                          "page_age": "June 4, 2026"} for u, t in results]}
    given = json.dumps({"query": query})
    events: list[dict[str, Any]] = [
        _anthropic_start(model),
        {"type": "content_block_start", "index": 0, "content_block": search},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": given[:9]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": given[9:]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": found},
        {"type": "content_block_stop", "index": 1},
    ]
    for n, (text, citations) in enumerate(answer, start=2):
        events.append({"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": n, "delta": {"type": "citations_delta", "citation": c}}
                   for c in citations]
        events.append({"type": "content_block_delta", "index": n, "delta": {"type": "text_delta", "text": text}})
        events.append({"type": "content_block_stop", "index": n})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
         "usage": {"input_tokens": 2100, "output_tokens": 118, "server_tool_use": {"web_search_requests": 1,
                                                                                  "web_fetch_requests": 0}}},
        {"type": "message_stop"},
    ]
    return events


def web_search_citation(url: str, title: str, quote: str) -> dict[str, Any]:
    """A ``web_search_result_location`` citation ("Web search tool": cited_text up to 150 characters)."""
    return {"type": "web_search_result_location", "url": url, "title": title, "encrypted_index": "Eo8BCioIAhgBIiQy",
            "cited_text": quote}


def anthropic_web_fetch(model: str, url: str, title: str, page: str, answer: str) -> list[dict[str, Any]]:
    """A Messages stream: a ``web_fetch`` of `url` whose ``web_fetch_result`` holds the page as a
    plain-text document, then the answer."""
    call = {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_fetch", "input": {}}
    fetched = {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {
        "type": "web_fetch_result", "url": url, "retrieved_at": "2026-12-06T08:00:00Z",
        "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": page},
                    "title": title, "citations": {"enabled": True}}}}
    return [
        _anthropic_start(model),
        {"type": "content_block_start", "index": 0, "content_block": call},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": json.dumps({"url": url})}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": fetched},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": answer}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 40, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 1}}},
        {"type": "message_stop"},
    ]


# -- Gemini ------------------------------------------------------------------------------------


def gemini_code_execution(code: str, output: str, answer: list[str], model: str = "gemini-3.8-flash",
                          chart: str = PNG) -> list[dict]:
    """streamGenerateContent chunks: text, an ``executableCode`` part, its ``codeExecutionResult``,
    the `chart` it drew (``inlineData``, a base64 PNG), then the answer; usage and ``finishReason`` last."""
    def chunk(parts: list[dict[str, Any]], last: bool = False) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        usage = {"promptTokenCount": 30, "totalTokenCount": 30}
        if last:
            candidate["finishReason"] = "STOP"
            usage = {"promptTokenCount": 30, "candidatesTokenCount": 80, "toolUsePromptTokenCount": 12,
                     "totalTokenCount": 122}
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": "g-code-1"}

    return [
        chunk([{"text": "I'll compute that with Python.\n"}]),
        chunk([{"executableCode": {"language": "PYTHON", "code": code}}]),
        chunk([{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": output}}]),
        chunk([{"inlineData": {"mimeType": "image/png", "data": chart}}]),
        *(chunk([{"text": piece}], last=n == len(answer) - 1) for n, piece in enumerate(answer)),
    ]


def gemini_grounded(pieces: list[str], queries: list[str], chunks: list[tuple[str, str]],
                    supports: list[tuple[str, list[int]]], urls: list[tuple[str, str]] = (),
                    model: str = "gemini-3.8-flash") -> list[dict[str, Any]]:
    """streamGenerateContent chunks of an answer grounded with Google Search: the text in
    `pieces`, then on the last chunk ``groundingMetadata`` (the `queries`, `chunks` as (uri,
    title), and a support per (segment text, chunk indices), its offsets counted in UTF-8 bytes
    of the whole answer as the reference says) and, with `urls`, ``urlContextMetadata``."""
    text = "".join(pieces)
    encoded = text.encode()
    grounding_supports = []
    for segment, indices in supports:
        start = encoded.index(segment.encode())
        grounding_supports.append({"segment": {"startIndex": start, "endIndex": start + len(segment.encode()),
                                               "text": segment}, "groundingChunkIndices": indices})
    out = []
    for n, piece in enumerate(pieces):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
        if n == len(pieces) - 1:
            candidate["finishReason"] = "STOP"
            candidate["groundingMetadata"] = {
                "webSearchQueries": queries,
                "searchEntryPoint": {"renderedContent": "<style>.container{}</style><div class=\"container\"></div>"},
                "groundingChunks": [{"web": {"uri": u, "title": t}} for u, t in chunks],
                "groundingSupports": grounding_supports,
            }
            if urls:
                candidate["urlContextMetadata"] = {"urlMetadata": [{"retrievedUrl": u, "urlRetrievalStatus": s}
                                                                   for u, s in urls]}
        out.append({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
                    "modelVersion": model, "responseId": "g-search-1"})
    out[-1]["usageMetadata"] = {"promptTokenCount": 12, "candidatesTokenCount": 40, "totalTokenCount": 52}
    return out
