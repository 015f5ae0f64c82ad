"""Provider-side ("built-in") tools and citations, per provider: the request each driver sends for
``builtin_tools``, the streams of their calls and results decoded into call and result blocks and
citations, what goes back on the next turn, and their per-call prices.

The streams: Anthropic's code execution is a recording (``anthropic/stream-server-tool-code-
execution.sse``); the others are written to the providers' documented shapes
(`tests/support/server_tool_streams.py` says which documents), and each OpenAI and Anthropic
event is first checked against that provider's SDK event models, as are the tool definitions sent.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import TypeAdapter

from ipyagent.core import (
    ActionCallBlock,
    BuiltinTool,
    Citation,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelCompleted,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    TextBlock,
    ToolAction,
    ToolDefinition,
)
from ipyagent.drivers import create_driver
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.anthropic.server import container_to_reuse
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver
from ipyagent.drivers.catalog.pricing import price

from ..support.server_tool_streams import (
    PNG,
    anthropic_web_fetch,
    anthropic_web_search,
    gemini_code_execution,
    gemini_grounded,
    responses_code_interpreter,
    responses_web_search,
    sse,
    web_search_citation,
)
from ..support.stub_server import FIXTURES, Reply, StubServer

KEY = "test-key-server-tools"


def stack(*tools: BuiltinTool | str, history: list[Message] | None = None) -> PromptStack:
    prompt = PromptStack(builtin_tools=[BuiltinTool.of(t) for t in tools])
    prompt.messages.extend(history or [])
    prompt.add_user_message("Who won Euro 2024?")
    return prompt


def run(driver_class, model: str, body: bytes, prompt: PromptStack, *, lines: bool = False) -> tuple[list, dict]:
    """The events of one turn against a local server sending `body` (an event a piece), and the request."""
    sep = b"\n\n"
    pieces = [p + sep for p in body.split(sep) if p.strip()]
    with StubServer(Reply(pieces=pieces)) as server:
        driver = driver_class(model, api_key=KEY, base_url=server.url)

        async def main() -> list:
            try:
                return [e async for e in driver.stream(prompt)]
            finally:
                await driver.close()

        events = asyncio.run(main())
    return events, server.requests[0]["body"]


def done(events: list) -> ModelCompleted:
    assert isinstance(events[-1], ModelCompleted), getattr(events[-1], "error", None)
    return events[-1]


def openai_events_valid(events: list[dict]) -> None:
    from openai.types.responses import ResponseStreamEvent

    adapter = TypeAdapter(ResponseStreamEvent)
    for event in events:
        adapter.validate_python(event)


def anthropic_events_valid(events: list[dict]) -> None:
    from anthropic.types import RawMessageStreamEvent

    adapter = TypeAdapter(RawMessageStreamEvent)
    for event in events:
        adapter.validate_python(event)


# -- OpenAI Responses ----------------------------------------------------------------------------

ANSWER = ["Spain won Euro 2024, ", "beating England 2–1 in Berlin."]
CITED = [(0, 19, "https://www.uefa.com/euro2024/news/final", "Spain crowned champions"),
         (21, 51, "https://www.bbc.co.uk/sport/football/euro-final", "Euro 2024 final")]


def test_responses_web_search_request_decode_and_price():
    wire = responses_web_search("gpt-6-luna", "Euro 2024 winner", [c[2] for c in CITED], ANSWER, CITED)
    openai_events_valid(wire)
    events, body = run(OpenAIResponsesPromptDriver, "gpt-6-luna", sse(wire),
                       stack(BuiltinTool("web_search", allowed_domains=["uefa.com", "bbc.co.uk"],
                                         search_context_size="low")))
    # asked for as the reference says, with its sources included
    assert body["tools"] == [{"type": "web_search", "filters": {"allowed_domains": ["uefa.com", "bbc.co.uk"]},
                              "search_context_size": "low"}]
    assert body["include"] == ["web_search_call.action.sources"]
    from openai.types.responses import ToolParam

    TypeAdapter(ToolParam).validate_python(body["tools"][0])
    # the card's progress as it went
    progress = [e for e in events if isinstance(e, ServerToolDelta)]
    assert [p.status for p in progress] == ["in_progress", "in_progress", "searching", "completed"]
    assert progress[0].call_id == "ws_1" and progress[0].tool == "web_search"
    turn = done(events)
    call, result, text = turn.message.content
    assert isinstance(call, ServerToolCallBlock) and call.input == {"query": "Euro 2024 winner"}
    assert call.raw["type"] == "web_search_call" and call.provider == "openai-responses"
    assert isinstance(result, ServerToolResultBlock) and result.call_id == "ws_1"
    assert [s.url for s in result.sources] == [c[2] for c in CITED]
    assert text.text == "".join(ANSWER)
    assert [(c.start, c.end, c.url, c.title) for c in text.citations] == CITED
    assert text.text[text.citations[1].start:text.citations[1].end] == "beating England 2–1 in Berlin."
    # one web search, priced per call ($10 a thousand) over the tokens
    assert turn.usage.server_tool_calls == {"web_search": 1}
    tokens_only = price("openai", "gpt-6-luna", turn.usage.model_copy(update={"server_tool_calls": {}}))
    assert turn.metadata["cost"]["total_usd"] == pytest.approx(float(tokens_only) + 0.01)


def test_responses_citations_of_a_whole_response_object():
    """A server that ignored ``stream`` sends the Response; its annotations are the citations."""
    wire = responses_web_search("gpt-6-luna", "q", [], ANSWER, CITED)
    whole = wire[-1]["response"]
    with StubServer(Reply(headers={"Content-Type": "application/json"}, pieces=[json.dumps(whole).encode()])) as server:
        driver = OpenAIResponsesPromptDriver("gpt-6-luna", api_key=KEY, base_url=server.url)

        async def main() -> Any:
            try:
                return await driver.run(stack("web_search"))
            finally:
                await driver.close()  # its connection closed here, not by the collector in a later test

        turn = asyncio.run(main())
    assert [(c.start, c.end, c.url) for c in turn.message.content[-1].citations] == [c[:3] for c in CITED]


def test_responses_code_interpreter():
    wire = responses_code_interpreter("gpt-6-luna", ["import math\n", "print(math.sqrt(2))"], "1.4142135623730951\n",
                                      ["√2 ≈ 1.41421."])
    openai_events_valid(wire)
    events, body = run(OpenAIResponsesPromptDriver, "gpt-6-luna", sse(wire), stack(BuiltinTool("code_execution")))
    assert body["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]
    assert body["include"] == ["code_interpreter_call.outputs"]
    code = "".join(e.arguments for e in events if isinstance(e, ServerToolDelta))
    assert code == "import math\nprint(math.sqrt(2))"  # the code as it was written
    call, result, _ = done(events).message.content
    assert call.tool == "code_execution" and call.name == "code_interpreter" and call.input == {"code": code}
    assert result.output == "1.4142135623730951\n" and result.images == [ImageBlock(mime_type="image/png", data=PNG)]
    assert done(events).usage.server_tool_calls == {"code_execution": 1}


def test_responses_include_given_as_an_option_is_kept():
    options = {"include": ["reasoning.encrypted_content"]}
    driver = OpenAIResponsesPromptDriver("gpt-6-luna", api_key=KEY, provider_options=options)
    _, body = driver.build_request(stack("web_search"))
    assert body["include"] == ["reasoning.encrypted_content", "web_search_call.action.sources"]


def test_responses_file_search_needs_vector_stores_and_maps_its_options():
    driver = OpenAIResponsesPromptDriver("gpt-6-luna", api_key=KEY)
    with pytest.raises(ProviderError, match="needs vector_store_ids"):
        driver.build_request(stack("file_search"))
    _, body = driver.build_request(stack(BuiltinTool("file_search", vector_store_ids=["vs_1"], max_results=4)))
    assert body["tools"] == [{"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 4}]
    with pytest.raises(ProviderError, match="takes no option blocked_domains"):
        driver.build_request(stack(BuiltinTool("web_search", blocked_domains=["x.com"])))


def _turn_with(*blocks) -> list[Message]:
    return [Message(role="user", content=[TextBlock(text="before")]), Message(role="assistant", content=list(blocks))]


def _reasoning(item_id: str = "rs_1", encrypted: bool = False) -> ReasoningBlock:
    kept = {"type": "reasoning", "id": item_id, "summary": [], **({"encrypted_content": "gAAA"} if encrypted else {})}
    return ReasoningBlock(text="", signature=json.dumps(kept))


def test_responses_sends_its_search_back_after_its_reasoning():
    wire = responses_web_search("gpt-6-luna", "q", [], ANSWER, CITED)
    call, result = (ServerToolCallBlock(id="ws_1", tool="web_search", provider="openai-responses", raw=wire[6]["item"]),
                    ServerToolResultBlock(call_id="ws_1", tool="web_search", provider="openai-responses"))
    text = TextBlock(text="Spain.")
    driver = OpenAIResponsesPromptDriver("gpt-6-luna", api_key=KEY)
    items = driver.build_request(stack(history=_turn_with(_reasoning(), call, result, text)))[1]["input"]
    assert [i.get("type") or i["role"] for i in items] == ["user", "reasoning", "web_search_call", "assistant", "user"]
    assert items[2] == wire[6]["item"]
    # without its reasoning (store: false and no encrypted content) the API would refuse the item: left out
    cut = OpenAIResponsesPromptDriver("gpt-6-luna", api_key=KEY, provider_options={"store": False})
    items = cut.build_request(stack(history=_turn_with(_reasoning(), call, result, text)))[1]["input"]
    assert [i.get("type") or i["role"] for i in items] == ["user", "assistant", "user"]
    # a model that did not reason: the item goes back alone
    items = driver.build_request(stack(history=_turn_with(call, result, text)))[1]["input"]
    assert [i.get("type") or i["role"] for i in items] == ["user", "web_search_call", "assistant", "user"]
    # another provider's search: nothing to send
    other = call.model_copy(update={"provider": "anthropic"})
    items = driver.build_request(stack(history=_turn_with(other, result, text)))[1]["input"]
    assert [i.get("type") or i["role"] for i in items] == ["user", "assistant", "user"]


# -- Anthropic -----------------------------------------------------------------------------------

RESULTS = [("https://www.uefa.com/euro2024/news/final", "Spain crowned champions"),
           ("https://www.bbc.co.uk/sport/football/euro-final", "Euro 2024 final")]
BLOCKS = [("Spain won Euro 2024", [web_search_citation(*RESULTS[0], "Spain are European champions again")]),
          (", beating England 2–1 in Berlin.", [web_search_citation(*RESULTS[1], "won 2-1 in Berlin"),
                                                web_search_citation(*RESULTS[0], "Oyarzabal scored the winner")])]


def test_anthropic_web_search_request_decode_and_price():
    wire = anthropic_web_search("claude-sonnet-5-5", "Euro 2024 winner", RESULTS, BLOCKS)
    anthropic_events_valid(wire)
    tool = BuiltinTool("web_search", allowed_domains=["uefa.com"], max_uses=3,
                       user_location={"type": "approximate", "country": "ES"})
    events, body = run(AnthropicPromptDriver, "claude-sonnet-5-5", sse(wire), stack(tool))
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search", "allowed_domains": ["uefa.com"],
                              "max_uses": 3, "user_location": {"type": "approximate", "country": "ES"}}]
    from anthropic.types import ToolUnionParam

    TypeAdapter(ToolUnionParam).validate_python(body["tools"][0])
    assert "anthropic-beta" not in {k.lower() for k in body}  # the tool is generally available: no beta header
    shown = [e for e in events if isinstance(e, ServerToolDelta)]
    assert shown[0].call_id == "srvtoolu_1" and shown[0].tool == "web_search"
    assert "".join(e.arguments for e in shown) == '{"query": "Euro 2024 winner"}'  # the query as it is written
    turn = done(events)
    call, result, first, second = turn.message.content
    assert call.input == {"query": "Euro 2024 winner"} and call.raw["type"] == "server_tool_use"
    assert [(s.url, s.title) for s in result.sources] == RESULTS
    assert (first.text, second.text) == (BLOCKS[0][0], BLOCKS[1][0])
    assert [(c.url, c.quote, c.start, c.end) for c in second.citations] == [
        (RESULTS[1][0], "won 2-1 in Berlin", None, None), (RESULTS[0][0], "Oyarzabal scored the winner", None, None)]
    assert turn.usage.server_tool_calls == {"web_search": 1}
    tokens_only = price("anthropic", "claude-sonnet-5-5", turn.usage.model_copy(update={"server_tool_calls": {}}))
    assert turn.metadata["cost"]["total_usd"] == pytest.approx(float(tokens_only) + 0.01)
    # the next turn sends the call and its result back as they came
    again = AnthropicPromptDriver("claude-sonnet-5-5", api_key=KEY).build_request(stack("web_search", history=[
        Message(role="user", content=[TextBlock(text="Who won?")]), turn.message]))[1]
    sent = again["messages"][1]["content"]
    assert [p["type"] for p in sent] == ["server_tool_use", "web_search_tool_result", "text", "text"]
    assert sent[0] == {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                       "input": {"query": "Euro 2024 winner"}}
    assert sent[1] == wire[5]["content_block"]


def test_anthropic_web_fetch():
    page = "https://docs.python.org/3/whatsnew/3.14.html"
    wire = anthropic_web_fetch("claude-sonnet-5-5", page, "What's New In Python 3.14",
                               "Free-threaded Python is now supported.", "Python 3.14 supports free threading.")
    anthropic_events_valid(wire)
    fetch = BuiltinTool("web_fetch", max_uses=2)
    events, body = run(AnthropicPromptDriver, "claude-sonnet-5-5", sse(wire), stack(fetch))
    assert body["tools"] == [{"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2,
                              "citations": {"enabled": True}}]
    call, result, _ = done(events).message.content
    assert call.tool == "web_fetch" and call.input == {"url": "https://docs.python.org/3/whatsnew/3.14.html"}
    assert [(s.url, s.title) for s in result.sources] == [("https://docs.python.org/3/whatsnew/3.14.html",
                                                          "What's New In Python 3.14")]
    assert done(events).usage.server_tool_calls == {"web_fetch": 1}


def test_anthropic_code_execution_recording_and_its_container():
    body = (FIXTURES / "anthropic" / "stream-server-tool-code-execution.sse").read_bytes()
    events, request = run(AnthropicPromptDriver, "claude-sonnet-4-6", body, stack("code_execution"))
    assert request["tools"] == [{"type": "code_execution_20250825", "name": "code_execution"}]
    assert "container" not in request  # a first turn: no container to reuse
    turn = done(events)
    call = next(b for b in turn.message.content if isinstance(b, ServerToolCallBlock))
    result = next(b for b in turn.message.content if isinstance(b, ServerToolResultBlock))
    assert call.name == "bash_code_execution" and call.input["command"].endswith("| bc -l")
    assert result.call_id == call.id and result.output == "-428330955.97745\n" and result.error is None
    container = turn.message.metadata["container"]
    assert container["id"] == "container_011CaNRFAbjdPf4rmBarZzqQ"
    history = [Message(role="user", content=[TextBlock(text="calc")]), turn.message]
    assert container_to_reuse(history, now=datetime(2026, 4, 24, 11, 0, tzinfo=timezone.utc)) == container["id"]
    assert container_to_reuse(history, now=datetime(2026, 4, 24, 12, 0, tzinfo=timezone.utc)) is None  # expired
    driver = AnthropicPromptDriver("claude-sonnet-4-6", api_key=KEY)
    again = driver.build_request(stack(BuiltinTool("code_execution", container="container_given"), history=history))[1]
    assert again["container"] == "container_given"  # an option names it
    sent = again["messages"][1]["content"]
    assert [p["type"] for p in sent] == ["thinking", "text", "server_tool_use", "bash_code_execution_tool_result",
                                         "text"]


def test_anthropic_options_and_documents():
    driver = AnthropicPromptDriver("claude-sonnet-5-5", api_key=KEY)
    with pytest.raises(ProviderError, match="takes no option vector_store_ids"):
        driver.build_request(stack(BuiltinTool("web_search", vector_store_ids=["x"])))
    document = DocumentBlock(mime_type="text/plain", text="Spain won.", name="notes.txt")
    prompt = PromptStack()
    prompt.add_user_message([document, TextBlock(text="Who won?")])
    sent = driver.build_request(prompt)[1]["messages"][0]["content"][0]
    assert sent["citations"] == {"enabled": True} and sent["title"] == "notes.txt"  # --file documents cite
    prompt.output_schema = {"type": "object", "properties": {"winner": {"type": "string"}}}
    sent = driver.build_request(prompt)[1]["messages"][0]["content"][0]
    assert "citations" not in sent  # the API takes no citations with structured output


def test_anthropic_document_citation_locations():
    from ipyagent.drivers.protocols.anthropic.server import citation

    char = citation({"type": "char_location", "cited_text": "Spain won.", "document_index": 0,
                     "document_title": "notes.txt", "start_char_index": 0, "end_char_index": 10, "file_id": None})
    assert (char.document, char.location, char.quote, char.url) == ("notes.txt", "characters 0–9", "Spain won.", None)
    page = citation({"type": "page_location", "cited_text": "x", "document_index": 1, "document_title": None,
                     "start_page_number": 3, "end_page_number": 4})
    assert (page.document, page.location) == ("document 2", "page 3")


# -- Gemini --------------------------------------------------------------------------------------


def run_gemini(chunks: list[dict], prompt: PromptStack) -> tuple[list, dict]:
    pieces = [b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks]
    with StubServer(Reply(pieces=pieces)) as server:
        driver = GeminiPromptDriver("gemini-3.8-flash", api_key=KEY, base_url=server.url)
        events = asyncio.run(_collect(driver, prompt))
    return events, server.requests[0]["body"]


async def _collect(driver, prompt) -> list:
    try:
        return [e async for e in driver.stream(prompt)]
    finally:
        await driver.close()


def test_gemini_code_execution_and_its_parts_back():
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint(sum([1, 2, 3]))"
    prompt = stack("code_execution")
    prompt.tools.append(ToolDefinition(name="lookup"))
    events, body = run_gemini(gemini_code_execution(code, "6\n", ["The sum is ", "6."]), prompt)
    assert body["tools"] == [{"functionDeclarations": [{"name": "lookup"}]}, {"code_execution": {}}]
    turn = done(events)
    kinds = [type(b).__name__ for b in turn.message.content]
    assert kinds == ["TextBlock", "ServerToolCallBlock", "ServerToolResultBlock", "ImageBlock", "TextBlock"]
    call, result = turn.message.content[1:3]
    assert call.input == {"code": code, "language": "PYTHON"} and call.id == "code_1"
    assert result.call_id == "code_1" and result.output == "6\n" and result.error is None
    again = GeminiPromptDriver("gemini-3.8-flash", api_key=KEY).build_request(stack("code_execution", history=[
        Message(role="user", content=[TextBlock(text="sum?")]), turn.message]))[1]
    parts = again["contents"][1]["parts"]
    assert [next(iter(p)) for p in parts] == ["text", "executableCode", "codeExecutionResult", "inlineData", "text"]
    assert parts[1] == {"executableCode": {"language": "PYTHON", "code": code}}


def test_gemini_grounding_becomes_a_search_card_and_citations_in_characters():
    pieces = ["L'Espagne a gagné l'Euro 2024 🏆. ", "Elle a battu l'Angleterre 2–1 à Berlin."]
    supports = [("L'Espagne a gagné l'Euro 2024 🏆.", [0]), ("Elle a battu l'Angleterre 2–1 à Berlin.", [1, 0])]
    chunks = gemini_grounded(pieces, ["vainqueur euro 2024", "finale euro 2024"],
                             [("https://vertexaisearch.cloud.google.com/grounding-api-redirect/a", "uefa.com"),
                              ("https://vertexaisearch.cloud.google.com/grounding-api-redirect/b", "lequipe.fr")],
                             supports, urls=[("https://www.uefa.com/euro2024/", "URL_RETRIEVAL_STATUS_SUCCESS"),
                                             ("https://example.com/gone", "URL_RETRIEVAL_STATUS_ERROR")])
    events, body = run_gemini(chunks, stack("web_search", "url_context"))
    assert body["tools"] == [{"google_search": {}}, {"url_context": {}}]
    turn = done(events)
    url_call, url_result, search, found, text = turn.message.content  # the tools ran first: before the text
    assert url_call.tool == "url_context" and url_call.input["urls"][1] == "https://example.com/gone"
    assert url_result.error == "could not read https://example.com/gone"
    assert [s.status for s in url_result.sources] == ["success", "error"]
    assert search.tool == "web_search" and search.input == {"queries": ["vainqueur euro 2024", "finale euro 2024"]}
    assert [s.title for s in found.sources] == ["uefa.com", "lequipe.fr"]
    assert search.raw is None and found.raw is None  # nothing of a search goes back to Gemini
    # Google's search suggestions are kept for an app that must show them, never drawn
    assert turn.message.metadata["search_entry_point"].startswith("<style>")
    # segment offsets are UTF-8 bytes; the citations are characters of the text (é, – and 🏆 are several bytes)
    spans = [(text.text[c.start:c.end], c.title) for c in text.citations]
    assert spans == [(supports[0][0], "uefa.com"), (supports[1][0], "lequipe.fr"), (supports[1][0], "uefa.com")]
    assert turn.usage.server_tool_calls == {"web_search": 2}  # Gemini 3 bills each query
    assert turn.metadata["cost"]["total_usd"] == pytest.approx(
        float(price("gemini", "gemini-3.8-flash", turn.usage.model_copy(update={"server_tool_calls": {}}))) + 2 * 0.014)


def test_gemini_tools_take_no_options():
    with pytest.raises(ProviderError, match="google_search tool takes no options"):
        GeminiPromptDriver("gemini-3.8-flash", api_key=KEY).build_request(stack(BuiltinTool("web_search", max_uses=1)))


# -- who has which tool ------------------------------------------------------------------------


@pytest.mark.parametrize("provider_id, tool, others", [
    ("openai:gpt-6-luna", "web_search", "anthropic, gemini, openai-responses have it"),
    ("ollama:llama3.2", "code_execution", "anthropic, gemini, openai-responses have it"),
    ("gemini:gemini-3.8-flash", "file_search", "openai-responses has it"),
    ("anthropic:claude-sonnet-5-5", "url_context", "gemini has it"),
    ("openai-responses:gpt-6-luna", "web_fetch", "anthropic has it"),
])
def test_a_tool_the_provider_lacks_names_those_that_have_it(monkeypatch, provider_id, tool, others):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, KEY)
    driver = create_driver(provider_id)
    with pytest.raises(ProviderError) as raised:
        driver.check_capabilities(stack(tool))
    assert raised.value.type == "unsupported_capability"
    assert raised.value.message.endswith(f"has no built-in {tool} tool; {others}")


def test_builtin_tool_names_and_options():
    assert BuiltinTool.of({"name": "web_search", "max_uses": 2}) == BuiltinTool("web_search", max_uses=2)
    with pytest.raises(ValueError, match="unknown built-in tool 'search'"):
        BuiltinTool("search")
    with pytest.raises(TypeError):
        BuiltinTool.of(3)


def test_a_partial_server_call_is_kept_from_its_progress():
    from ipyagent.drivers.aggregate import Aggregator

    agg = Aggregator()
    agg.add(ServerToolDelta(0, "srv_1", "code_execution", "bash_code_execution", '{"command": "ls'))
    (call,) = agg.partial().content
    assert (call.id, call.tool, call.input) == ("srv_1", "code_execution", {"partial": '{"command": "ls'})


def test_citations_attach_to_their_text_block_and_never_split_it():
    from ipyagent.core import CitationDelta, TextDelta
    from ipyagent.drivers.aggregate import Aggregator

    agg = Aggregator()
    agg.add(CitationDelta(0, Citation(url="https://a.example")))
    agg.add(TextDelta(0, "Cited."))
    agg.add(TextDelta(1, "Not."))
    first, second = agg.message().content
    assert [c.url for c in first.citations] == ["https://a.example"] and second.citations == []


def test_usage_counts_of_server_tools_add_up():
    from ipyagent.core import Usage

    total = Usage(server_tool_calls={"web_search": 1}) + Usage(server_tool_calls={"web_search": 2, "web_fetch": 1})
    assert total.server_tool_calls == {"web_search": 3, "web_fetch": 1}


def test_a_tool_call_block_is_not_a_function_call():
    message = Message(role="assistant", content=[ServerToolCallBlock(id="s", tool="web_search"),
                                                 ActionCallBlock(action=ToolAction(tag="c", name="f"))])
    assert [a.tag for a in message.tool_calls] == ["c"]  # the loop runs only our own tools


def test_a_citation_or_source_field_of_the_wrong_type_is_left_out_not_the_turn():
    """A provider's malformed citation or source (a URL that is a number, an offset that is a string,
    a title that is an object) once failed the whole turn as ``invalid_response``; it only describes
    the answer, so the field is left out and the answer, its calls and other fields stay."""
    wire = responses_web_search("gpt-6-luna", "q", ["https://a.example/1"], ANSWER, CITED)
    for event in wire:
        if event["type"] == "response.output_text.annotation.added" and event["annotation"]["end_index"] == 19:
            event["annotation"].update(start_index="0", end_index=1.5, url=123)
        if event["type"] == "response.output_item.done" and event["item"]["type"] == "web_search_call":
            event["item"]["action"]["sources"] = [{"type": "url", "url": 7}]
    turn = done(run(OpenAIResponsesPromptDriver, "gpt-6-luna", sse(wire), stack("web_search"))[0])
    call, result, text = turn.message.content
    assert text.text == "".join(ANSWER) and [s.url for s in result.sources] == [None]
    assert [(c.start, c.end, c.url, c.title) for c in text.citations] == [(0, None, None, CITED[0][3]), CITED[1]]

    bad = dict(web_search_citation(RESULTS[0][0], "title", "quote"), url=5, title=["a list"])
    wire = anthropic_web_search("claude-sonnet-5-5", "q", [(RESULTS[0][0], 404)], [("Spain won.", [bad])])
    turn = done(run(AnthropicPromptDriver, "claude-sonnet-5-5", sse(wire), stack("web_search"))[0])
    call, result, text = turn.message.content
    assert [(s.url, s.title) for s in result.sources] == [(RESULTS[0][0], None)]
    assert text.text == "Spain won." and [(c.url, c.title, c.quote) for c in text.citations] == [(None, None, "quote")]

    chunks = gemini_grounded(["Spain won."], ["q"], [("https://a.example/1", "A")], [("Spain won.", [0])])
    chunks[-1]["candidates"][0]["groundingMetadata"]["groundingChunks"][0]["web"]["uri"] = 5
    turn = done(run_gemini(chunks, stack("web_search"))[0])
    call, found, text = turn.message.content
    assert text.text == "Spain won." and [(s.url, s.title) for s in found.sources] == [(None, "A")]
    assert [(c.start, c.end, c.url, c.title) for c in text.citations] == [(0, 10, None, "A")]
    chunks = gemini_code_execution("print(1)", "1", ["done"])
    chunks[2]["candidates"][0]["content"]["parts"][0]["codeExecutionResult"]["output"] = {"not": "text"}
    turn = done(run_gemini(chunks, stack("code_execution"))[0])
    ran = next(b for b in turn.message.content if isinstance(b, ServerToolResultBlock))
    assert ran.output is None and turn.message.content[-1].text == "done"
