"""The run transcript: built from real runs against recorded streams, its schema file,
its fallbacks (sanitized HTML, inert Markdown, plain text), and what a saved notebook holds."""

from __future__ import annotations

import asyncio
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace as Obj

import pytest

from ipyagent import Agent
from ipyagent.agent import RunOptions
from ipyagent.agent import comparison_record, transcript_of
from ipyagent.core import (
    ActionCallBlock,
    ActionResultBlock,
    ArtifactStored,
    AudioBlock,
    Event,
    Citation,
    GenericBlock,
    ImageBlock,
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextArtifact,
    TextBlock,
    ToolAction,
    Usage,
    WebSource,
)
from ipyagent.core.transcript_build import transcript_messages
from ipyagent.core.transcript_parts import MEDIA_CHARS, RESULT_CHARS, MediaPart, ServerToolPart
from ipyagent.core.transcript import (
    MIME_TYPE,
    VERSION,
    ComparisonRecord,
    TextPart,
    ToolCallPart,
    Transcript,
    TranscriptError,
    TranscriptMessage,
    json_schema,
)
from ipyagent.notebook.render.html import ALLOWED_TAGS, compact, markdown_to_html, one_line
from ipyagent.core.redact import redact_data as redact
from ipyagent.notebook.views.transcript_output import bundle
from ipyagent.notebook.render.transcript import (
    BUDGET_MIN_CHARS,
    HTML_BUDGET,
    PLAIN_CHARS,
    SOURCE_NOTE,
    answer_html,
    footer_figures,
    style_for,
    to_html,
    to_text,
)
from ipyagent.tools import activity

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer, openai_text_reply

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "src" / "ipyagent" / "core" / "transcript.schema.json"
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)

HOSTILE = ('Hi <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> '
           '[click](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">a</a> '
           '[ref][r]\n\n[r]: javascript:window.__pwned=5\n')


def _run(replies, tools=None, events=None):
    with StubServer(*replies) as server:
        agent = Agent("openai:gpt-4.1-mini", base_url=server.url, api_key_env="NO_SUCH_KEY_VAR", tools=tools or [])
        seen = [] if events is None else events
        result = agent.run("Weather in San Francisco?", on_event=seen.append)
    return result, seen


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.setenv("NO_SUCH_KEY_VAR", "sk-test-transcript-key")


def test_text_run_from_a_recorded_stream():
    expected = expected_from(TEXT)
    result, events = _run([Reply.sse_file(TEXT)])
    t = transcript_of(result, events=events)
    assert t.status == "completed" and t.error is None
    assert t.text == expected.text
    assert t.provider == "openai:gpt-4.1-mini"
    assert (
        t.usage.input_tokens == expected.usage["prompt_tokens"]
        and t.usage.output_tokens == expected.usage["completion_tokens"]
    )
    assert t.stop_reason == expected.stop_kind
    assert [m.role for m in t.messages] == ["user", "assistant"]
    assert t.messages[0].parts[0].text == "Weather in San Francisco?"
    assert t.timings.turns == 1 and t.timings.total_s == pytest.approx(result.metadata["latency_s"], abs=1e-3)
    assert t.timings.first_token_s == pytest.approx(result.metadata["ttft_s"], abs=1e-3)
    # The document survives JSON and validates against the published schema's model.
    again = Transcript.from_json(json.dumps(t.to_json()))
    assert again == t


def test_transcript_saved_with_the_old_usage_names_still_loads():
    """Notebooks saved before issue 12 carry usage as input / output / cache_read ..."""
    doc = {"format": "ipyagent.transcript", "version": 1, "provider": "openai:gpt-4.1-mini",
           "usage": {"input": 21, "output": 4, "total": 25, "cache_read": 16, "cache_write": 0, "reasoning": 2}}
    t = Transcript.from_json(json.dumps(doc))
    assert (t.usage.input_tokens, t.usage.output_tokens, t.usage.total_tokens) == (21, 4, 25)
    assert (t.usage.cache_read_tokens, t.usage.reasoning_tokens) == (16, 2)
    assert t.to_json()["usage"]["input_tokens"] == 21 and "input" not in t.to_json()["usage"]


def test_model_is_the_one_that_answered():
    recorded_model = next(
        json.loads(line[6:])["model"] for line in TEXT.read_text().splitlines() if line.startswith("data: {")
    )
    result, events = _run([Reply.sse_file(TEXT)])
    assert transcript_of(result, events=events).model == recorded_model


def test_tool_run_has_cards_with_arguments_results_and_durations():
    call = expected_from(TOOL_CALL).tool_calls[0]
    final = expected_from(TEXT)

    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return f"61 F in {city}"

    result, events = _run([Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)], tools=[get_weather])
    t = transcript_of(result, events=events)
    (card,) = t.tool_calls
    assert (card.id, card.name, card.arguments) == (call["id"], call["name"], call["input"])
    assert card.status == "ok" and card.result == f"61 F in {call['input']['city']}"
    ran = [e for e in events if e.type == "tool_call_completed"][0]
    assert card.duration_s == pytest.approx(ran.duration_s, abs=1e-3)
    assert t.text == final.text and t.timings.turns == 2
    assert [m.role for m in t.messages] == ["user", "assistant", "assistant"]  # the tool message sits in its call
    # Without events there is no duration, but the card and its result are still there.
    bare = transcript_of(result)
    assert bare.tool_calls[0].result == card.result and bare.tool_calls[0].duration_s is None


def test_interrupted_run_keeps_partial_text_and_earlier_cards():
    """An interrupt leaves no result messages: the transcript is rebuilt from the events."""
    text = expected_from(TEXT).text

    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return "61 F"

    events: list = []

    async def main():
        # The answer's stream holds after its second text delta: the interrupt surely comes mid-answer.
        with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT, hold_after=3)) as server:
            agent = Agent(
                "openai:gpt-4.1-mini", base_url=server.url, api_key_env="NO_SUCH_KEY_VAR", tools=[get_weather]
            )
            two_deltas = asyncio.Event()

            def on_event(event: Event) -> None:
                events.append(event)
                if sum(1 for e in events if e.type == "text_delta") >= 2:
                    two_deltas.set()

            task = asyncio.ensure_future(agent._arun("Weather?", RunOptions(), on_event))
            await asyncio.wait_for(two_deltas.wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return agent.results[-1]

    result = asyncio.run(main())
    assert result.interrupted
    t = transcript_of(result, events=events, prompt="Weather?", elapsed_s=1.5)
    assert t.status == "interrupted" and t.timings.total_s == 1.5
    assert [c.name for c in t.tool_calls] == ["get_weather"] and t.tool_calls[0].result == "61 F"
    streamed = "".join(e.text for e in events if e.type == "text_delta")
    assert t.text == streamed and text.startswith(streamed) and len(streamed) < len(text)
    assert t.messages[0].role == "user" and t.messages[0].parts[0].text == "Weather?"
    assert "interrupted" in footer_figures(t)
    # With no result at all (cancelled before the run made one), the events are enough.
    assert transcript_of(None, events=events, provider="openai:gpt-4.1-mini").text == streamed


def test_a_run_log_keeps_no_delta_and_reads_the_reply_s_record():
    """A live view keeps a `RunLog`, not the run's events: the reply of a turn that never ended
    comes from its driver's record (`ModelStarted.reply`), as it stands when it is asked."""
    from ipyagent.agent import RunLog
    from ipyagent.core import ModelStarted, TextDelta
    from ipyagent.drivers import Aggregator

    reply, log = Aggregator(), RunLog()
    log.feed(ModelStarted("openai", "m", reply=reply))
    for delta in (TextDelta(0, "Hel"), TextDelta(0, "lo")):
        reply.add(delta)
        log.feed(delta)
    assert log.streamed == log.completed == log.failed == [] and log.turns == 1
    reply.add(TextDelta(0, "!"))
    assert log.open_turn().text == "Hello!" and log.open_turn().status == "interrupted"
    assert transcript_of(None, log=log, provider="openai:m").text == "Hello!"


def test_failed_run_reports_the_error():
    body = FIXTURES / "openai-chat" / "error-404-model-not-found.json"
    result, events = _run([Reply.error_file(body, body.with_suffix(".http.json"))])
    t = transcript_of(result, events=events)
    assert t.status == "failed" and t.error.type == "not_found"
    assert t.error.message == result.error.message
    assert "failed" in footer_figures(t)


def test_a_turn_failing_mid_stream_keeps_its_partial_reply():
    # Text, then an in-stream error object (as OpenAI-compatible servers send on overload).
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "start "}, "finish_reason": None}]}
    error = {"error": {"message": "model overloaded mid stream", "type": "overloaded_error", "code": "overloaded"}}
    pieces = [f"data: {json.dumps(chunk)}\n\n".encode(), f"data: {json.dumps(error)}\n\n".encode()]
    result, events = _run([Reply(pieces=pieces)])
    assert result.error is not None and result.text == "start "
    t = transcript_of(result, events=events)
    assert t.status == "failed"
    assert [m.role for m in t.messages] == ["user", "assistant"]
    assert t.text == "start "
    assert "start" in to_html(t) and "start" in to_text(t)


def test_artifact_events_become_summaries():
    long = "row\n" * 500
    stored = ArtifactStored(
        "call_1", "WebSearch", "search", "TaskMemory", "search-1", TextArtifact(value=long), {"chars": len(long)}
    )
    result, events = _run([Reply.sse_file(TEXT)])
    t = transcript_of(result, events=[*events, stored])
    (a,) = t.artifacts
    assert (a.namespace, a.tool, a.kind, a.size) == ("search-1", "WebSearch", "text", {"chars": len(long)})
    assert a.preview.startswith("row\nrow") and len(a.preview) <= 401
    # An artifact of no known kind is listed too, previewed as its text.
    other = ArtifactStored("call_2", "Probe", None, "TaskMemory", "x-2", 12345, {"bytes": 5})
    (b,) = transcript_of(result, events=[other]).artifacts
    assert (b.namespace, b.kind, b.preview, b.size) == ("x-2", "unknown", "12345", {"bytes": 5})


def test_cost_in_any_shape():
    result, events = _run([Reply.sse_file(TEXT)])

    class Cost:
        def to_dict(self):
            return {"input_usd": 0.001, "output_usd": 0.002, "total_usd": 0.003}

    for value, total in ((0.5, 0.5), ({"total_usd": 0.25}, 0.25), (Cost(), 0.003)):
        result.cost = value
        assert transcript_of(result, events=events).cost.total_usd == total
    result.cost = "not a cost"
    assert transcript_of(result, events=[]).cost is None


def test_published_schema_file_is_current():
    assert json.loads(SCHEMA_FILE.read_text()) == json_schema(), (
        "regenerate it: python -m ipyagent.core.transcript > src/ipyagent/core/transcript.schema.json")
    assert json_schema()["$defs"]["Transcript"]["properties"]["version"]["const"] == VERSION


def test_reading_a_foreign_or_newer_document_fails_clearly():
    with pytest.raises(ValueError, match=r"^not an ipyagent transcript \(its 'format' is not 'ipyagent.transcript'\)$"):
        Transcript.from_json({"hello": 1})
    with pytest.raises(ValueError, match="version 99 is not supported"):
        Transcript.from_json({"format": "ipyagent.transcript", "version": 99, "provider": "x"})


class _Visible(HTMLParser):
    """Text and tags of an HTML document, outside script and style."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def _inert(fragment: str) -> list[str]:
    """What in `fragment` could run script: tags, handlers, URLs."""
    p = _Visible()
    p.feed(fragment)
    bad = [t for t, _ in p.tags if t in ("script", "iframe", "object", "embed", "svg")]
    for tag, attrs in p.tags:
        bad += [f"{tag} {k}" for k in attrs if k.lower().startswith("on")]
        bad += [f"{tag} {k}={v}" for k, v in attrs.items() if k in ("href", "src") and v and
                re.match(r"\s*(javascript|vbscript|data):", html.unescape(v), re.I)]
    return bad


def _hostile_transcript() -> Transcript:
    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return HOSTILE

    result, events = _run([Reply.sse_file(TOOL_CALL), openai_text_reply(HOSTILE)], tools=[get_weather])
    return transcript_of(result, events=events)


def test_fallbacks_of_hostile_output_run_nothing():
    t = _hostile_transcript()
    assert HOSTILE in t.text and t.tool_calls[0].result == HOSTILE
    page = to_html(t)
    body = page.split("</style>", 1)[1]
    assert _inert(body) == []
    assert "&lt;script&gt;" in body  # shown as text, not dropped silently
    assert HOSTILE in to_text(t)


def test_html_fallback_looks_like_the_live_view():
    expected = expected_from(TEXT)
    result, events = _run([Reply.sse_file(TEXT)])
    t = transcript_of(result, events=events)
    page = to_html(t)
    assert markdown_to_html(expected.text) in page
    assert f"{expected.usage['prompt_tokens']} in / {expected.usage['completion_tokens']} out tokens" in page
    assert "first token" in page and "total" in page


def test_bundle_redacts_secret_env_values(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "sk-live-abcdef123456")

    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return "your key is sk-live-abcdef123456"

    result, events = _run([Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)], tools=[get_weather])
    data, metadata = bundle(transcript_of(result, events=events))
    dumped = json.dumps([data, metadata])
    assert "sk-live-abcdef123456" not in dumped and "[redacted]" in dumped
    assert set(data) == {
        MIME_TYPE,
        "text/html",
        "text/plain",
    }  # no Markdown: every front end drawing it prefers the HTML
    assert metadata["ipyagent"] == {"record": "transcript"}  # one copy of the transcript: in data only
    assert redact({"a": ["x sk-live-abcdef123456"]}) == {"a": ["x [redacted]"]}


@pytest.mark.notebook
def test_executed_quickstart_saves_transcripts_and_exports_the_answers(monkeypatch):
    """nbclient runs the quickstart (as `make demo`, widget state stored); every %%agent output is
    the transcript with its fallbacks, and nbconvert's HTML export shows the answers as text."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    notebook = ROOT / "notebooks" / "quickstart.ipynb"
    cassette = ROOT / "notebooks" / "quickstart.cassette.jsonl"
    exchanges = [json.loads(line) for line in cassette.read_text().splitlines() if line.strip()]
    answers = []
    for e in exchanges:
        body = e["response"]["body"]
        answers.append("".join(c["delta"].get("content") or "" for line in body.splitlines()
                               if line.startswith("data: {") for c in json.loads(line[6:]).get("choices", [])))
    replies = [
        Reply(pieces=[p.encode() + b"\n\n" for p in e["response"]["body"].split("\n\n") if p]) for e in exchanges
    ]
    with StubServer(*replies) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-transcript")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        nb = nbformat.read(notebook, as_version=4)
        NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(notebook.parent)}}).execute()

    agent_cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%agent")]
    assert len(agent_cells) == len(answers)
    for cell, answer in zip(agent_cells, answers):
        (out,) = [o for o in cell.outputs if o.output_type == "display_data"]
        assert "application/vnd.jupyter.widget-view+json" not in out.data  # replaced when the run ended
        doc = out.data[MIME_TYPE]
        assert Transcript.from_json(doc).text == answer
        assert doc not in out.metadata.values() and out.metadata["ipyagent"]["record"] == "transcript"
        plain = out.data["text/plain"]  # the start of the answer and the footer; the HTML shows it all
        assert plain.startswith(answer[:PLAIN_CHARS // 2]) and len(plain) < len(answer) + 200 and "out tokens" in plain
        assert "sk-test-transcript" not in json.dumps(out)

    page, _ = HTMLExporter().from_notebook_node(nb)
    visible = _Visible()
    visible.feed(page)
    shown = "".join("".join(visible.text).split())  # white space aside: the fallback is on one line
    for answer in answers:
        rendered = _Visible()
        rendered.feed(markdown_to_html(answer))
        assert "".join("".join(rendered.text).split()) in shown


def test_comparison_record_from_a_real_comparison():
    """Two providers answer the same prompt (recorded streams); one cannot even be built."""
    from ipyagent import compare
    from ipyagent.core.transcript import COMPARISON_MIME_TYPE
    from ipyagent.notebook.views.transcript_output import comparison_bundle

    text = expected_from(TEXT).text
    with StubServer(Reply.sse_file(TEXT)) as a, StubServer(openai_text_reply(HOSTILE)) as b:
        agents = [Agent("openai:gpt-4.1-mini", base_url=s.url, api_key_env="NO_SUCH_KEY_VAR") for s in (a, b)]

        def factory(provider_id):
            raise ValueError("no such provider here")

        comparison = compare([*agents, "nowhere:model"], "Weather?", factory=factory)
    record = comparison_record(comparison, prompt="Weather?")
    assert [e.index for e in record.entries] == [0, 1, 2]
    assert record.entries[0].transcript.text == text and record.entries[1].transcript.text == HOSTILE
    failed = record.entries[2].transcript
    assert failed.status == "failed" and "no such provider here" in failed.error.message
    data, metadata = comparison_bundle(record)
    assert data[COMPARISON_MIME_TYPE] == record.to_json() and metadata["ipyagent"] == {"record": "comparison"}
    assert _inert(data["text/html"].split("</style>", 1)[1]) == []
    assert one_line(markdown_to_html(text)) in data["text/html"] and text[:PLAIN_CHARS // 2] in data["text/plain"]


def test_one_line_html_draws_the_same_on_one_line():
    """A saved notebook stores text outputs line by line (~12 characters a line): the HTML
    fallback is written on one line, with soft breaks as spaces and <pre> lines as &#10;."""
    html = markdown_to_html("A soft\nbreak.\n\n- one\n- two\n\n```python\nx = 1\ny = '<b>'\n```\n\n"
                            "| a |\n|---|\n| x |\n")
    flat = one_line(html)
    assert "\n" not in flat
    assert "<p>A soft break.</p><ul><li>one</li><li>two</li></ul>" in flat
    assert '<pre><code class="language-python">x = 1&#10;y = \'&lt;b&gt;\'&#10;</code></pre>' in flat
    assert "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>x</td></tr></tbody></table>" in flat
    # what a parser reads back: the same elements and text, the code block's line breaks included
    before, after = _Visible(), _Visible()
    before.feed(html)
    after.feed(flat)
    assert after.tags == before.tags
    assert [t for t in after.text if t.strip()] == [
        t.replace("soft\nbreak", "soft break") for t in before.text if t.strip()
    ]
    assert "x = 1\ny = '<b>'\n" in after.text


def test_the_html_fallback_carries_only_the_rules_its_parts_need():
    plain = Transcript(provider="openai:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text="Hi")])])
    html = to_html(plain)
    assert "ipyagent-footer{" in html and "details.ipyagent-tool" not in html and "ipyagent-error{" not in html
    with_tool = plain.model_copy(update={"messages": [TranscriptMessage(role="assistant", parts=[
        ToolCallPart(id="c1", name="f", status="error", result="boom")])], "status": "failed",
        "error": TranscriptError(type="server", message="x")})
    html = to_html(with_tool)
    assert all(rule in html for rule in ("details.ipyagent-tool", "ipyagent-tool-error{", "ipyagent-error{", "pre{"))
    assert style_for("") == "<style>" + ".ipyagent-transcript .ipyagent-meta,.ipyagent-transcript .ipyagent-footer{" \
        + "color:var(--jp-ui-font-color2,#777);font-size:var(--jp-ui-font-size0,11px)}</style>"


def test_the_plain_fallback_is_the_start_of_the_run_and_its_footer():
    text = "\n".join(f"line {i} of a long answer" for i in range(500))
    t = Transcript(provider="openai:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=text)])])
    plain = to_text(t, limit=PLAIN_CHARS)
    head, _, footer = plain.rpartition("\n")
    assert footer == "[" + " · ".join(footer_figures(t)) + "]"
    kept = head.rsplit(" … (", 1)[0]
    assert (
        text.startswith(kept) and PLAIN_CHARS // 2 <= len(kept) <= PLAIN_CHARS and kept.endswith("answer")
    )  # cut at a line end
    assert head.endswith(f"({len(text) - len(kept):,} more characters)")
    assert to_text(t) == text + "\n" + footer  # no limit: all of it
    short = t.model_copy(update={"messages": [TranscriptMessage(role="assistant", parts=[TextPart(text="Hi")])]})
    assert to_text(short, limit=PLAIN_CHARS) == "Hi\n" + footer


def _full_and_compact():
    """A run with every kind of part, most fields at their defaults; its JSON as older versions
    wrote it (every field) and as it is written now (defaults left out)."""
    from ipyagent.core.transcript import (
        ComparisonEntry,
        ComparisonRecord,
        OtherPart,
        ReasoningPart,
        Timings,
        TranscriptUsage,
    )

    t = Transcript(
        provider="openai:m",
        messages=[
            TranscriptMessage(role="user", parts=[TextPart(text="Q?")]),
            TranscriptMessage(
                role="assistant",
                parts=[
                    ReasoningPart(text="think"),
                    TextPart(text="A **b**"),
                    ToolCallPart(id="c1", name="f", arguments={"x": 1}, status="ok", result="1", duration_s=0.5),
                    ToolCallPart(id="c2", name="g"),
                    OtherPart(kind="audio", summary="<audio>"),
                ],
            ),
        ],
        usage=TranscriptUsage(input_tokens=3, output_tokens=4, total_tokens=7),
        timings=Timings(total_s=1.0, turns=1),
    )
    record = ComparisonRecord(providers=["openai:m"], entries=[ComparisonEntry(index=0, transcript=t)])
    return t, record


def test_a_saved_transcript_leaves_default_fields_out_and_reads_back_the_same():
    t, record = _full_and_compact()
    doc = t.to_json()
    assert set(doc) == {"format", "version", "provider", "status", "messages", "usage", "timings", "created_at",
                        "footer"}
    # The footer is computed once, here, from the fields: every renderer draws it as written.
    assert doc["footer"] == footer_figures(t) == ["openai:m", "3 in / 4 out tokens", "total 1.00 s"]
    assert record.to_json()["entries"][0]["transcript"]["footer"] == doc["footer"]
    assert doc["usage"] == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7} and doc["timings"] == {
        "total_s": 1.0,
        "turns": 1,
    }
    reasoning, text, done, pending, other = doc["messages"][1]["parts"]
    assert reasoning == {"type": "reasoning", "text": "think"} and text == {"type": "text", "text": "A **b**"}
    assert pending == {
        "type": "tool_call",
        "id": "c2",
        "name": "g",
        "status": "pending",
    }  # what tells parts and states apart stays
    assert "approval" not in done and other == {"type": "other", "kind": "audio", "summary": "<audio>"}
    entry = record.to_json()["entries"][0]
    assert entry["index"] == 0 and "run" not in entry  # a required field is written even when 0
    # Both ways: the compact document and one saved by an older version (every field) read as the same run.
    full = t.model_dump(mode="json")
    assert len(json.dumps(full)) > len(json.dumps(doc)) + 300
    assert Transcript.from_json(doc) == t == Transcript.from_json(full)
    assert to_html(Transcript.from_json(doc)) == to_html(Transcript.from_json(full))
    assert type(record).model_validate(record.to_json()) == record


def _dom(fragment: str) -> str:
    """`fragment` as an HTML5 parser builds it (html5ever, through nh3), written with every end tag."""
    import nh3

    return nh3.clean(
        fragment,
        tags=ALLOWED_TAGS | {"style"},
        clean_content_tags=set(),
        link_rel=None,
        attributes={"*": {"class", "href", "rel", "style", "src", "alt", "open", "start", "align"}},
        strip_comments=False,
    )


def test_compact_html_builds_the_same_elements_with_fewer_bytes():
    text = ("## T\n\nA soft\nbreak, **bold**, [a link](https://example.com/a) and `x`.\n\n- one\n- two\n  - nested\n\n"
            "1. first\n2. second\n\n```python\nx = 1\n```\n\n"
            "| a | b |\n|---|---:|\n| x | 2 |\n| y | 4 |\n\n| h |\n|---|\n\ndone")
    html = to_html(
        Transcript(provider="p:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=text)])])
    )
    small = compact(html)
    for tag in ("</td>", "</th>", "</tr>", "</li>", "</tbody>", "<strong>", "language-python", "referrerpolicy"):
        assert tag not in small, tag
    assert len(small) < len(one_line(html)) - 150
    # Drawn the same: the tree a browser builds from it is the one-line HTML's, with <b> for
    # <strong>, no language class, and a link's rel="noreferrer nofollow" (no Referer, no opener).
    same = (
        one_line(html)
        .replace("<strong>", "<b>")
        .replace("</strong>", "</b>")
        .replace(' class="language-python"', "")
        .replace(' referrerpolicy="no-referrer" rel="noopener noreferrer nofollow"', ' rel="noreferrer nofollow"')
    )
    assert _dom(small) == _dom(same)
    dom = _dom(small)
    assert "<td>x</td>" in dom and "<ul><li>nested</li></ul></li><li>" not in dom
    assert "<li>nested</li></ul></li></ul><ol>" in dom


def test_a_structure_dense_answer_is_drawn_as_its_source_past_the_budget():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from render_path import answer
    finally:
        sys.path.pop(0)
    dense = answer(6_000)  # a heading, a list, code and a table every ~260 characters
    assert len(compact(markdown_to_html(dense))) > HTML_BUDGET * len(dense)
    drawn = answer_html(dense)
    assert (
        drawn.startswith('<div class="ipyagent-source"><pre>')
        and html.escape(dense, quote=True) in drawn
        and SOURCE_NOTE in drawn
    )
    prose = "\n\n".join(f"Paragraph {i} says what a model says, with **one** word in bold." for i in range(100))
    assert answer_html(prose) == markdown_to_html(prose)  # within the budget: drawn
    short = answer(BUDGET_MIN_CHARS - 1)
    assert answer_html(short) == markdown_to_html(short)  # a short answer is always drawn
    body = to_html(
        Transcript(provider="p:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=dense)])])
    )
    assert ".ipyagent-source pre{word-break:normal}" in body and "ipyagent-source" in compact(body)


def test_a_tools_images_audio_and_files_are_saved_in_its_card_size_capped():
    """The card of a tool that returned an image, audio, a file and an image too large to keep: each is a
    media part (base64 data, size, name); the large one keeps no data ("too large to show"); an SVG is
    never drawn. The HTML fallback draws the image inline and names the others; the plain one names all."""
    import base64

    from ipyagent.core import AudioArtifact, BlobArtifact, ImageArtifact, ListArtifact
    from ipyagent.core.transcript import MEDIA_CHARS

    png = b"\x89PNG\r\n\x1a\n" + b"p" * 40
    huge = b"\x89PNG\r\n\x1a\n" + b"h" * (MEDIA_CHARS * 3 // 4 + 10)

    @activity
    def get_weather(city: str, state: str = "") -> ListArtifact:
        """Weather now, as pictures."""
        return ListArtifact(value=[TextArtifact(value="the map"), ImageArtifact(value=png), ImageArtifact(value=huge),
                                   ImageArtifact(value=b"<svg onload=x>", mime_type="image/svg+xml"),
                                   AudioArtifact(value=b"ID3", mime_type="audio/mpeg"),
                                   BlobArtifact(value=b"\x1f\x8b\x08", mime_type="application/gzip",
                                                name="file:///r/a.gz")])

    result, events = _run([Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)], tools=[get_weather])
    t = transcript_of(result, events=events)
    (card,) = t.tool_calls
    assert card.result == "the map"
    shown = [(m.kind, m.mime_type, m.size, m.data) for m in card.media]
    assert shown == [("image", "image/png", len(png), base64.b64encode(png).decode()),
                     ("image", "image/png", len(huge), None),
                     ("image", "image/svg+xml", 14, None),
                     ("audio", "audio/mpeg", 3, "SUQz"),
                     ("blob", "application/gzip", 3, "H4sI")]
    assert card.media[-1].name == "file:///r/a.gz"
    assert Transcript.from_json(json.loads(json.dumps(t.to_json()))).tool_calls[0].media == card.media
    body = to_html(t).split("</style>", 1)[1]
    assert body.count("<img ") == 1 and f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in body
    assert f"image image/png, {len(huge):,} bytes: too large to show" in body and "data:image/svg" not in body
    assert "audio audio/mpeg, 3 bytes" in body and "blob file:///r/a.gz application/gzip, 3 bytes" in body
    assert [b for b in _inert(body) if not b.startswith("img src=data:image/png;base64,")] == []
    assert "[audio audio/mpeg, 3 bytes]" in to_text(t)


def test_a_stored_turn_is_drawn_with_its_prompts_and_the_replies_usage_summed() -> None:
    turn = [Message(role="user", content=[TextBlock(text="hi")]),
            Message(role="assistant", content=[TextBlock(text="one")],
                    usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7, cache_read_tokens=1,
                                reasoning_tokens=2)),
            Message(role="assistant", content=[TextBlock(text="two")]),  # no usage: counts nothing
            Message(role="assistant", content=[TextBlock(text="three")],
                    usage=Usage(input_tokens=10, total_tokens=10))]
    shown = Transcript.from_messages(turn, provider="openai:gpt-x", title="A turn")
    assert (shown.provider, shown.status, shown.title, shown.show_prompts, shown.error) == (
        "openai:gpt-x", "completed", "A turn", True, None)
    assert [m.role for m in shown.messages] == ["user", "assistant", "assistant", "assistant"]
    assert shown.timings.turns == 3 and shown.timings.total_s is None
    assert shown.usage.model_dump() == {"input_tokens": 13, "output_tokens": 4, "total_tokens": 17,
                                        "cache_read_tokens": 1, "cache_write_tokens": 0, "reasoning_tokens": 2}


def test_a_stored_turn_that_failed_keeps_its_error_line_and_only_a_failed_one_does() -> None:
    turn = [Message(role="user", content=[TextBlock(text="hi")])]
    failed = Transcript.from_messages(turn, provider="p:m", status="failed", error="rate limited: wait a minute")
    assert failed.status == "failed" and failed.error == TranscriptError(type="failed",
                                                                         message="rate limited: wait a minute")
    assert failed.usage.input_tokens == 0 and failed.timings.turns == 0 and failed.title is None
    assert Transcript.from_messages(turn, provider="p:m", status="failed").error is None  # no line: nothing to show
    interrupted = Transcript.from_messages(turn, provider="p:m", status="interrupted", error="stopped")
    assert interrupted.status == "interrupted" and interrupted.error is None


def test_a_provider_side_tool_s_result_goes_onto_its_call_s_card_or_a_card_of_its_own() -> None:
    png, svg = ImageBlock(mime_type="image/png", data="iVBO"), ImageBlock(mime_type="image/svg+xml", data="PHN2")
    reply = Message(role="assistant", content=[
        ServerToolCallBlock(id="s1", tool="web_search", name="web_search", input={"query": "q"}),
        ServerToolCallBlock(id="s2", tool="code_execution"),  # no result: pending
        ServerToolResultBlock(call_id="s1", tool="web_search", output="found",
                              sources=[WebSource(url="https://a.example", title="A", status="success")],
                              images=[png, svg, ImageBlock(mime_type="image/png")], files=[{"id": "f1", "name": "x"}]),
        ServerToolResultBlock(call_id="s9", tool="web_fetch", error="unavailable")])
    [message] = transcript_messages([reply])
    found, pending, orphan = message.parts
    assert (found.id, found.tool, found.name, found.input, found.status) == ("s1", "web_search", "web_search",
                                                                           {"query": "q"}, "ok")
    assert [s.model_dump() for s in found.sources] == [{"url": "https://a.example", "title": "A",
                                                        "retrieval": "success"}]
    assert found.output == "found" and found.error is None and found.files == [{"id": "f1", "name": "x"}]
    assert found.images == [{"mime_type": "image/png", "data": "iVBO"}]  # raster with data only
    assert (pending.id, pending.tool, pending.status, pending.input) == ("s2", "code_execution", "pending", {})
    assert (orphan.id, orphan.tool, orphan.status, orphan.error, orphan.output) == (
        "s9", "web_fetch", "error", "unavailable", None)


def test_a_media_block_s_part_keeps_its_data_only_when_drawn_inline() -> None:
    image = MediaPart.of_block(ImageBlock(mime_type="image/png", data="iVBORw0K"))
    assert (image.kind, image.mime_type, image.size, image.data) == ("image", "image/png", 6, "iVBORw0K")
    assert MediaPart.of_block(ImageBlock(mime_type="image/png", data="iVBORw==")).size == 4  # padding is no byte
    assert MediaPart.of_block(ImageBlock(mime_type="image/svg+xml", data="PHN2")).data is None  # not raster
    assert MediaPart.of_block(AudioBlock(mime_type="audio/wav", data="UklG")).data == "UklG"
    assert MediaPart.of_block(AudioBlock(mime_type="image/png", data="UklG")).data is None  # audio needs audio
    assert MediaPart.of_block(ImageBlock(mime_type="audio/wav", data="UklG")).data is None
    url = MediaPart.of_block(ImageBlock(url="https://a.example/x.png"))
    assert (url.size, url.data) == (0, None)
    assert MediaPart.of_block(ImageBlock(data="A" * MEDIA_CHARS)).data is not None
    big = MediaPart.of_block(ImageBlock(data="A" * (MEDIA_CHARS + 4)))
    assert (big.size, big.data) == ((MEDIA_CHARS + 4) * 3 // 4, None)


def test_a_tool_result_goes_onto_its_call_once_or_on_a_card_of_its_own() -> None:
    call = ToolAction(tag="c1", name="lookup", input={"q": "x"})
    png = ImageBlock(mime_type="image/png", data="iVBORw0K")
    messages = [
        Message(role="assistant", content=[ActionCallBlock(action=call)]),
        Message(role="user", content=[ActionResultBlock(action=call, text="found", media=[png]),
                                      ActionResultBlock(action=call, text="again", is_error=True)])]
    first, second = transcript_messages(messages)
    [card] = first.parts
    assert (card.id, card.name, card.arguments, card.status, card.result) == ("c1", "lookup", {"q": "x"}, "ok",
                                                                              "found")
    assert [(m.kind, m.data) for m in card.media] == [("image", "iVBORw0K")]
    [again] = second.parts  # its call's card is taken: a card of its own, kept visible
    assert (again.id, again.name, again.arguments, again.status, again.result) == (
        "c1", "lookup", {"q": "x"}, "error", "again")
    assert transcript_messages([Message(role="user", content=[
        ActionResultBlock(action=call, text="ok", media=[png])])])[0].parts[0].status == "ok"


def test_a_call_run_in_this_turn_keeps_its_own_output_over_a_result_block() -> None:
    call = ToolAction(tag="c1", name="lookup", output=TextArtifact(value="from the run"))
    [card] = transcript_messages([Message(role="assistant", content=[
        ActionCallBlock(action=call), ActionResultBlock(action=call, text="stored", is_error=True)])])[0].parts
    assert (card.status, card.result) == ("ok", "from the run")


def test_a_result_marked_as_an_error_makes_its_call_s_card_an_error() -> None:
    call = ToolAction(tag="c1", name="lookup")
    [_, message] = [Message(role="assistant", content=[ActionCallBlock(action=call)]),
                    Message(role="user", content=[ActionResultBlock(action=call, text="no", is_error=True)])]
    [card] = transcript_messages([_, message])[0].parts
    assert (card.status, card.result, card.media) == ("error", "no", [])


def test_a_call_whose_name_does_not_map_back_keeps_its_name_as_given() -> None:
    odd = ToolAction(tag="c1", name="bad name!", path="a b")
    [card] = transcript_messages([Message(role="assistant", content=[ActionCallBlock(action=odd)])])[0].parts
    assert card.name == "bad name!" and card.status == "pending" and card.result is None


def test_images_audio_and_other_blocks_are_kept_as_other_parts() -> None:
    blocks = [ImageBlock(mime_type="image/png", data="iVBO"), ImageBlock(mime_type="image/svg+xml", data="PHN2"),
              ImageBlock(url="https://a.example/x.png"), AudioBlock(mime_type="audio/wav", data="UklG"),
              GenericBlock(value={"k": "v" * 500})]
    parts = transcript_messages([Message(role="user", content=blocks)])[0].parts
    assert [(p.kind, p.summary, p.mime_type, p.data) for p in parts[:4]] == [
        ("image", "<image image/png>", "image/png", "iVBO"), ("image", "<image image/svg+xml>", "image/svg+xml", None),
        ("image", "<image image/png>", "image/png", None), ("audio", "<audio audio/wav>", "audio/wav", None)]
    assert parts[4].kind == "generic" and parts[4].summary == json.dumps({"k": "v" * 500})[:400]


def test_text_blocks_join_into_one_part_with_their_citations_moved_along() -> None:
    blocks = [TextBlock(text="one ", citations=[Citation(url="https://a.example", start=0, end=3)]),
              TextBlock(text="two", citations=[Citation(url="https://b.example")])]
    [part] = transcript_messages([Message(role="assistant", content=blocks)])[0].parts
    assert part.text == "one two"
    assert [(c.start, c.end, c.url) for c in part.citations] == [(0, 3, "https://a.example"),
                                                                 (4, 7, "https://b.example")]


def test_a_huge_result_or_program_output_keeps_its_head_and_says_how_much_was_left() -> None:
    cut = f"{'r' * RESULT_CHARS}\n… (5 more characters not saved)"
    assert ToolCallPart(id="c", name="t", result="r" * (RESULT_CHARS + 5)).result == cut
    assert ToolCallPart(id="c", name="t", result="r" * RESULT_CHARS).result == "r" * RESULT_CHARS
    assert ToolCallPart(id="c", name="t").result is None
    assert ServerToolPart(id="s", tool="code_execution", output="r" * (RESULT_CHARS + 5)).output == cut
    assert ServerToolPart(id="s", tool="code_execution", output="r" * RESULT_CHARS).output == "r" * RESULT_CHARS


def test_a_transcript_of_message_like_objects_reads_what_each_has() -> None:
    """from_messages takes any objects: one without a role is no reply, a reply without usage adds
    none, a usage without a field adds 0 to it."""
    usage = Obj(input_tokens=3, output_tokens=2)  # no cache or reasoning counts
    t = Transcript.from_messages([Obj(role="assistant", content=[], usage=usage), Obj(role="assistant", content=[]),
                                  Obj(content=[])], provider="p")
    assert t.timings.turns == 2
    assert (t.usage.input_tokens, t.usage.output_tokens, t.usage.cache_read_tokens, t.usage.reasoning_tokens) == (
        3, 2, 0, 0)


def test_a_comparison_without_runs_saves_its_format_and_an_empty_footer() -> None:
    assert ComparisonRecord().to_json() == {"format": "ipyagent.comparison", "version": 1, "footer": []}


# -- transcript_messages over duck-typed messages (issue 27's mutation gaps) ----------------------


def test_reasoning_parts_keep_their_text_and_say_whether_the_provider_redacted_it() -> None:
    blocks = [Obj(type="reasoning", text="let me think"), Obj(type="reasoning", text="", redacted=True)]
    (message,) = transcript_messages([Obj(role="assistant", content=blocks)])
    assert [(type(p).__name__, p.text, p.redacted) for p in message.parts] == [
        ("ReasoningPart", "let me think", False), ("ReasoningPart", "", True)]


def test_a_call_s_card_reads_its_output_and_its_timing() -> None:
    """An error artifact's output is an error; a timing gives the duration (to 0.1 ms), a known approval
    and stop (others are dropped), its notes, and makes a result it calls an error one; a call
    without a result stays pending whatever its timing says."""
    from collections import deque

    from ipyagent.core import ErrorArtifact
    from ipyagent.core.transcript_build import ToolTiming

    def call(tag: str, output=None) -> Obj:
        return Obj(type="action_call", action=Obj(tag=tag, native_name=f"t_{tag}", input={"n": 1}, output=output))

    timings = {"a": deque([ToolTiming(1.234567, approval="approved", stopped="timeout", notes=("asked",))]),
               "b": deque([ToolTiming(0.5, is_error=True, approval="maybe", stopped="killed")]),
               "c": deque([ToolTiming(2.0, is_error=True, stopped="interrupted")])}
    (message,) = transcript_messages([Obj(role="assistant", content=[
        call("a", ErrorArtifact(value="boom")), call("b", TextArtifact(value="fine")), call("c"), call("d", "plain"),
    ])], timings)
    a, b, c, d = message.parts
    assert (a.status, a.result, a.duration_s, a.approval, a.stopped, a.notes) == (
        "error", "boom", 1.2346, "approved", "timeout", ["asked"])
    assert (b.status, b.result, b.approval, b.stopped) == ("error", "fine", None, None)
    assert (c.status, c.result, c.stopped) == ("pending", None, "interrupted")
    assert (d.status, d.result, d.duration_s) == ("ok", "plain", None)  # an output that is no artifact: its text
    assert timings["a"] == deque() and timings["c"] == deque()  # each timing read once


def test_a_result_without_its_call_keeps_its_media_and_an_unmappable_name_is_kept_as_given() -> None:
    png = ImageBlock(mime_type="image/png", data="iVBORw0K")
    orphan = Obj(type="action_result", action=Obj(tag="o1", name="made_up", input=None), text="r", is_error=True,
                 media=[png])
    nameless = Obj(type="action_call", action=Obj(tag="o2", input=None, output=None))
    (message,) = transcript_messages([Obj(role="assistant", content=[orphan, nameless])])
    first, second = message.parts
    assert (first.name, first.result, first.status, [m.data for m in first.media]) == (
        "made_up", "r", "error", ["iVBORw0K"])
    assert (second.name, second.arguments) == ("tool call", {})


def test_media_and_other_blocks_are_summarised_and_an_image_as_big_as_allowed_is_kept() -> None:
    from datetime import date

    from ipyagent.core.transcript_parts import MAX_IMAGE_CHARS

    big = "A" * MAX_IMAGE_CHARS
    blocks = [Obj(type="image", mime_type="image/png", data=big), Obj(type="audio"),
              Obj(type="table", value={"day": date(2020, 1, 2)}), Obj(type="custom"), Obj(text="no type")]
    (message,) = transcript_messages([Obj(content=blocks), Obj(role="user")])  # no role: the assistant's
    assert message.role == "assistant"
    image, audio, table, custom = message.parts
    assert (image.summary, image.data is big) == ("<image image/png>", True)
    assert (audio.summary, audio.mime_type, audio.data) == ("<audio >", None, None)
    assert (table.kind, table.summary, custom.summary) == ("table", '{"day": "2020-01-02"}', "null")


def test_joined_text_moves_its_citations_along_and_keeps_each_field() -> None:
    cite = Obj(start=2, end=None, url="https://u", title="T", document="D", location="p. 3", quote="Q")
    blocks = [Obj(type="text", text="Hello"), Obj(type="text", text=" world", citations=[cite])]
    (message,) = transcript_messages([Obj(role="assistant", content=blocks)])
    (part,) = message.parts
    assert part.text == "Hello world"
    assert [c.model_dump() for c in part.citations] == [
        {"start": 7, "end": 11, "url": "https://u", "title": "T", "document": "D", "location": "p. 3", "quote": "Q"}]


def test_a_server_tool_result_keeps_an_image_as_big_as_allowed() -> None:
    from ipyagent.core.transcript_parts import MAX_IMAGE_CHARS

    big = "A" * MAX_IMAGE_CHARS
    result = Obj(type="server_tool_result", call_id="s1", tool="web_search", error=None, sources=[], output=None,
                 files=[], images=[Obj(mime_type="image/png", data=big), Obj(mime_type="image/png", data=big + "A")])
    (message,) = transcript_messages([Obj(role="assistant", content=[result])])
    assert [i["data"] is big for i in message.parts[0].images] == [True]


def test_a_card_shows_what_only_a_card_shows_and_media_as_big_as_allowed() -> None:
    from ipyagent.core import BlobArtifact, ListArtifact
    from ipyagent.core.transcript_parts import card_result

    output = ListArtifact(value=[TextArtifact(value="for the model"), TextArtifact(value="for you", shown_only=True)])
    assert card_result(output) == ("for the model\n\nfor you", [])
    blob = Obj(type="blob", mime_type=None, value=b"\0" * 1_500_000, name="f.bin")  # base64: MEDIA_CHARS exactly
    assert (MediaPart.of(blob).mime_type, MediaPart.of(blob).data is not None) == ("", True)
    assert MediaPart.of(BlobArtifact(value=b"\0" * 1_500_003)).data is None


def test_compact_json_writes_what_json_holds() -> None:
    from datetime import date

    from ipyagent.core.transcript_parts import compact_json

    part = ServerToolPart(id="s", tool="web_search", input={"day": date(2020, 1, 2)})
    assert compact_json(part)["input"] == {"day": "2020-01-02"}


def test_an_image_block_without_data_is_a_part_of_no_size() -> None:
    part = MediaPart.of_block(Obj(type="image", mime_type="image/png"))  # a URL image: no `data` at all
    assert (part.size, part.data) == (0, None)
