"""Provider-side tool calls as cards and citations as numbered footnotes: in the saved transcript
(its JSON, the HTML fallback, text/plain), the live widget's ops, the terminal, and `result.citations`;
links sanitized (``rel="noopener noreferrer nofollow"``, http and https only) and nothing loaded."""

from __future__ import annotations

import asyncio
import io
import json
import re

from ipyagent.agent import AgentResult, transcript_of
from ipyagent.core import (
    BlockDelta,
    Citation,
    CitationDelta,
    ImageBlock,
    Message,
    ModelCompleted,
    ModelStarted,
    ServerToolCallBlock,
    ServerToolDelta,
    ServerToolResultBlock,
    StopReason,
    TextBlock,
    TextDelta,
    Transcript,
    Usage,
    WebSource,
    transcript_messages,
)
from ipyagent.notebook.render.transcript import to_html, to_text
from ipyagent.notebook.views.run_view import RunState, TextView, WidgetView

from ..support.server_tool_streams import PNG

UEFA, BBC = "https://www.uefa.com/final", "https://www.bbc.co.uk/final"


def reply() -> Message:
    """A searched, cited answer: the search's call and result, two cited text blocks, a code run."""
    return Message(role="assistant", content=[
        ServerToolCallBlock(id="s1", tool="web_search", name="web_search", input={"query": "euro 2024 winner"}),
        ServerToolResultBlock(call_id="s1", tool="web_search",
                              sources=[WebSource(url=UEFA, title="UEFA"),
                                       WebSource(url="javascript:alert(1)", title="bad")]),
        TextBlock(text="Spain won Euro 2024.",
                  citations=[Citation(url=UEFA, title="UEFA", quote="Spain are champions")]),
        TextBlock(text=" They beat England 2–1.", citations=[Citation(start=11, end=18, url=BBC, title="BBC"),
                                                            Citation(start=11, end=18, url=UEFA, title="UEFA")]),
        ServerToolCallBlock(id="c1", tool="code_execution", name="code_interpreter", input={"code": "print(2 ** 10)"}),
        ServerToolResultBlock(call_id="c1", tool="code_execution", output="1024\n",
                              images=[ImageBlock(mime_type="image/png", data=PNG)],
                              files=[{"id": "file_1", "name": "chart.png"}]),
    ])


def transcript() -> Transcript:
    return Transcript(provider="anthropic:claude-sonnet-5-5", messages=transcript_messages([reply()]))


def test_the_transcript_keeps_cards_and_citations_with_offsets_into_the_joined_text():
    saved = Transcript.from_json(json.loads(json.dumps(transcript().to_json())))
    search, text, code = saved.messages[0].parts
    assert (search.type, search.tool, search.status, search.input) == ("server_tool", "web_search", "ok",
                                                                       {"query": "euro 2024 winner"})
    assert [s.url for s in search.sources] == [UEFA, "javascript:alert(1)"]
    assert text.text == "Spain won Euro 2024. They beat England 2–1."
    assert [(c.start, c.end, c.url) for c in text.citations] == [(0, 20, UEFA), (31, 38, BBC), (31, 38, UEFA)]
    assert text.text[31:38] == "England"
    assert code.output == "1024\n" and code.images == [{"mime_type": "image/png", "data": PNG}]
    assert code.files == [{"id": "file_1", "name": "chart.png"}]


def test_html_footnotes_and_cards_are_sanitized():
    html = to_html(transcript())
    # markers where the cited spans end, numbered by first citation, after the sanitizer
    assert "Spain won Euro 2024.<sup>[1]</sup> They beat England<sup>[1,2]</sup> 2–1." in html
    sources = html[html.index('<div class="ipyagent-sources">'):]
    assert re.findall(r"<li>(.*?)</li>", sources)[0].startswith(f'<a href="{UEFA}"')
    assert 'rel="noopener noreferrer nofollow"' in sources and "“Spain are champions”" in sources
    assert "javascript:" not in html.replace("javascript:alert(1)</li>", "")  # never a link
    assert '<a href="javascript' not in html
    assert f'src="data:image/png;base64,{PNG}"' in html  # the chart, inline data: nothing loads
    assert '<img src="http' not in html
    assert "<b>code execution</b>" in html and "print(2 ** 10)" in html and "chart.png" in html


def test_the_models_own_marker_characters_make_no_footnote():
    forged = Message(role="assistant",
                     content=[TextBlock(text="Fake\ue0009\ue001 mark.", citations=[Citation(url=UEFA)])])
    html = to_html(Transcript(provider="p:m", messages=transcript_messages([forged])))
    assert "<sup>[9]</sup>" not in html and "<sup>[1]</sup>" in html


def test_text_plain_has_markers_cards_and_the_source_list():
    text = to_text(transcript())
    assert "[web search: euro 2024 winner · 2 sources]" in text
    assert "Spain won Euro 2024.[1] They beat England[1,2] 2–1." in text
    assert text.splitlines()[-4:-1] == ["sources:", f"[1] UEFA <{UEFA}>", f"[2] BBC <{BBC}>"]


def test_result_citations_name_the_span_cited():
    message = reply()
    result = AgentResult(provider="anthropic:claude-sonnet-5-5", message=message, messages=[message])
    assert [(c.text, c.url, c.quote) for c in result.citations] == [
        ("Spain won Euro 2024.", UEFA, "Spain are champions"), ("England", BBC, None), ("England", UEFA, None)]
    assert [c.id for c in result.server_tool_calls] == ["s1", "c1"]


def events() -> list:
    """A streamed turn: a search's progress, its call and result, a cited text, the end."""
    message = reply()
    return [
        ModelStarted("anthropic", "claude-sonnet-5-5"),
        ServerToolDelta(0, "s1", "web_search", "web_search", '{"query": ', None),
        ServerToolDelta(0, None, None, None, '"euro 2024 winner"}', "searching"),
        BlockDelta(0, message.content[0]),
        BlockDelta(1, message.content[1]),
        CitationDelta(2, message.content[2].citations[0]),
        TextDelta(2, "Spain won Euro 2024."),
        ModelCompleted(message, Usage(input_tokens=10, output_tokens=5), StopReason(kind="end_turn")),
    ]


class _Live:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, content: dict) -> None:
        self.sent.append(content)


def test_the_live_widget_sends_a_card_and_sources_as_ops():
    live = _Live()
    view = WidgetView("anthropic:claude-sonnet-5-5", link=live)
    view._synced = True  # a front end said hello

    async def stream() -> None:  # the view's frames are timed on the loop it is fed on
        for event in events():
            view.feed(event)

    asyncio.run(stream())
    ops = [op for message in live.sent for op in message.get("ops", [])]
    segments = {op[1]: op[2] for op in ops if op[0] == "seg"}
    assert sorted(segments.values()) == ["server", "text"]
    server_sid = next(sid for sid, kind in segments.items() if kind == "server")
    cards = [op[2] for op in ops if op[0] == "server" and op[1] == server_sid]
    assert cards[0]["tool"] == "web_search" and cards[-1]["status"] == "ok"
    assert cards[-1]["sources"][0] == {"url": UEFA, "title": "UEFA"}
    assert "".join(op[2] for op in ops if op[0] == "text" and op[1] == server_sid) == '{"query": "euro 2024 winner"}'
    assert [op[2]["url"] for op in ops if op[0] == "cite"] == [UEFA]
    # a front end that says hello later gets the same from the snapshot
    snapshot = view._snapshot()
    assert [op[2]["status"] for op in snapshot if op[0] == "server"] == ["ok"]
    assert [op[2]["url"] for op in snapshot if op[0] == "cite"] == [UEFA]


def test_run_state_puts_a_result_on_its_calls_card():
    state = RunState("p:m")
    for event in events():
        state.add(event)
    cards = [s.card for s in state.segments.values() if s.kind == "server"]
    assert len(cards) == 1 and cards[0]["id"] == "s1" and cards[0]["status"] == "ok"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_the_terminal_shows_the_search_and_numbered_sources():
    out = _Tty()
    view = TextView("anthropic:claude-sonnet-5-5", stream=out)
    for event in events():
        view.feed(event)
    text = out.getvalue()
    assert '[web search] {"query": "euro 2024 winner"}' in text
    assert "[2 sources]" in text
    # Anthropic sends a text block's citations before its text: they support the whole block
    assert f"sources:\n[1] UEFA <{UEFA}>\n    “Spain won Euro 2024.”" in text


def test_the_terminal_shows_a_call_whose_input_came_whole_and_the_spans_each_source_supports():
    """The Responses API announces a search (``output_item.added``, no input) and gives its
    query only when it is done: the query goes on the title's line then, once."""
    message = reply()
    out = _Tty()
    view = TextView("openai-responses:gpt-6-luna", stream=out)
    for event in [ModelStarted("openai-responses", "gpt-6-luna"),
                  ServerToolDelta(0, "s1", "web_search", "web_search", "", "in_progress"),
                  *[BlockDelta(0, message.content[0])] * 2,
                  BlockDelta(1, message.content[1]),
                  TextDelta(2, "Spain won Euro 2024."), CitationDelta(2, message.content[2].citations[0]),
                  TextDelta(3, " They beat England 2–1."),
                  *(CitationDelta(3, c) for c in message.content[3].citations),
                  BlockDelta(4, message.content[4]), BlockDelta(5, message.content[5]),
                  ModelCompleted(message, Usage(input_tokens=10, output_tokens=5), StopReason(kind="end_turn"))]:
        view.feed(event)
    text = out.getvalue()
    assert text.count("euro 2024 winner") == 1 and "\n[web search] euro 2024 winner\n[2 sources]" in text
    assert "[code execution]\nprint(2 ** 10)\n[done · 1 image · chart.png]\n1024" in text
    assert text.split("sources:\n", 1)[1].splitlines()[:5] == [
        f"[1] UEFA <{UEFA}>", "    “Spain won Euro 2024.”", "    “England”",
        f"[2] BBC <{BBC}>", "    “England”"]


def test_transcript_of_a_run_keeps_the_cards():
    message = reply()
    result = AgentResult(provider="anthropic:claude-sonnet-5-5", message=message, messages=[message],
                         stop_reason=StopReason(kind="end_turn"))
    parts = transcript_of(result).messages[0].parts
    assert [p.type for p in parts] == ["server_tool", "text", "server_tool"]
