"""``%agent trace`` and a ``%%agent`` cell traced: the spans of OpenTelemetry's GenAI semantic
conventions (invoke_agent, chat, execute_tool) from a run with a tool call against a local server,
message contents only with ``--content`` (and redacted), nothing of OpenTelemetry imported while
tracing is off, and the magic's OTLP/HTTP export to a local receiver."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from IPython.core.error import UsageError
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import ipyagent
from ipyagent.agent.telemetry import tracing

from ..support.otlp_receiver import OTLPReceiver
from ..support.shell import SECRET
from ..support.stub_server import Reply, StubServer, openai_text_reply, openai_tool_call_reply

PROMPT = "Count the words of: the quick brown fox"


def word_count(text: str) -> int:
    """Number of words in text."""
    return len(text.split())


@pytest.fixture
def tool_server() -> Iterator[StubServer]:
    """A model that calls word_count once, then answers."""
    with StubServer(openai_tool_call_reply("word_count", {"text": "the quick brown fox"}, call_id="call_7"),
                    openai_text_reply("It has 4 words.", usage=(31, 6))) as s:
        yield s


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    ipyagent.trace(False)


def _run(ip, server: StubServer, monkeypatch: pytest.MonkeyPatch, prompt: str = PROMPT) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1 --temperature 0.2 --max-tokens 300")
    ip.user_ns["word_count"] = word_count
    ip.run_cell_magic("agent", "--tools word_count", prompt)


def _spans(exporter: InMemorySpanExporter) -> list:
    tracing.current().flush()
    return list(exporter.get_finished_spans())


def _named(spans: list) -> dict:
    return {span.name: span for span in spans}


def test_a_run_with_a_tool_call_gives_invoke_agent_with_chat_and_execute_tool_children(
        ip, tool_server, exporter, monkeypatch) -> None:
    ipyagent.trace(exporter=exporter)
    _run(ip, tool_server, monkeypatch)
    spans = _spans(exporter)
    assert sorted(s.name for s in spans) == ["chat m", "chat m", "execute_tool word_count", "invoke_agent default"]
    root = next(s for s in spans if s.name == "invoke_agent default")
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time)
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    assert all(s.context.trace_id == root.context.trace_id and s.parent.span_id == root.context.span_id
               for s in [*chats, tool]) and root.parent is None
    assert root.kind is SpanKind.INTERNAL and chats[0].kind is SpanKind.CLIENT and tool.kind is SpanKind.INTERNAL
    port = int(tool_server.url.rsplit(":", 1)[1])
    assert dict(root.attributes) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
        "gen_ai.request.temperature": 0.2, "gen_ai.request.max_tokens": 300, "server.address": "127.0.0.1",
        "server.port": port, "gen_ai.agent.name": "default", "gen_ai.conversation.id": "default",
        "gen_ai.usage.input_tokens": 51, "gen_ai.usage.output_tokens": 16,
        "gen_ai.response.finish_reasons": ("stop",)}
    first, second = (dict(c.attributes) for c in chats)
    recorded_model = first["gen_ai.response.model"]  # the recorded stream's own model name
    assert first == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
        "gen_ai.request.temperature": 0.2, "gen_ai.request.max_tokens": 300, "server.address": "127.0.0.1",
        "server.port": port, "gen_ai.response.model": recorded_model, "gen_ai.response.id": first["gen_ai.response.id"],
        "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.finish_reasons": ("tool_calls",)}
    assert recorded_model.startswith("gpt-") and first["gen_ai.response.id"].startswith("chatcmpl-")
    assert second["gen_ai.usage.input_tokens"] == 31 and second["gen_ai.response.finish_reasons"] == ("stop",)
    assert dict(tool.attributes) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "word_count",
                                     "gen_ai.tool.call.id": "call_7", "gen_ai.tool.type": "function"}
    # the tool ran between the two model turns
    assert chats[0].end_time <= tool.start_time <= tool.end_time <= chats[1].start_time
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)


def test_no_message_text_without_content_and_a_secret_masked_with_it(ip, tool_server, exporter, monkeypatch) -> None:
    prompt = f"{PROMPT} (my key is {SECRET})"
    ipyagent.trace(exporter=exporter)
    _run(ip, tool_server, monkeypatch, prompt)
    shown = json.dumps([dict(s.attributes) for s in _spans(exporter)], default=list)
    for text in ("quick brown", "4 words", SECRET, "Count the words"):
        assert text not in shown
    assert "gen_ai.input.messages" not in shown and "gen_ai.tool.call.arguments" not in shown

    ip.run_line_magic("agent", "reset")
    contents = InMemorySpanExporter()  # the first one was shut down with the tracing it served
    ipyagent.trace(exporter=contents, content=True)
    tool_server.script(*tool_server.replies)
    _run(ip, tool_server, monkeypatch, prompt)
    spans = _spans(contents)
    shown = json.dumps([dict(s.attributes) for s in spans], default=list)
    assert SECRET not in shown and "[redacted]" in shown
    root, tool = _named(spans)["invoke_agent default"], _named(spans)["execute_tool word_count"]
    asked = json.loads(root.attributes["gen_ai.input.messages"])
    assert asked == [{"role": "user", "parts": [{"type": "text", "content": f"{PROMPT} (my key is [redacted])"}]}]
    assert json.loads(root.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "It has 4 words."}], "finish_reason": "stop"}]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"text": "the quick brown fox"}
    assert tool.attributes["gen_ai.tool.call.result"] == "4"
    second = max((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time)
    conversation = json.loads(second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool"]
    assert conversation[1]["parts"] == [{"type": "tool_call", "id": "call_7", "name": "word_count",
                                         "arguments": {"text": "the quick brown fox"}}]
    assert conversation[2]["parts"] == [{"type": "tool_call_response", "id": "call_7", "response": "4"}]


def test_a_provider_error_gives_error_type_and_status_error(ip, exporter, monkeypatch) -> None:
    refused = Reply(status=400, headers={"Content-Type": "application/json"},
                    pieces=[b'{"error": {"message": "bad temperature", "type": "invalid_request_error"}}'])
    ipyagent.trace(exporter=exporter)
    with StubServer(refused) as server:
        _run(ip, server, monkeypatch)
    spans = _spans(exporter)
    assert sorted(s.name for s in spans) == ["chat m", "invoke_agent default"]
    for span in spans:
        assert span.attributes["error.type"] == "invalid_request"
        assert span.status.status_code is StatusCode.ERROR and "bad temperature" in span.status.description


def test_the_magic_exports_over_otlp_http_and_off_flushes(ip, tool_server, monkeypatch, capsys) -> None:
    with OTLPReceiver() as receiver:
        ip.run_line_magic("agent", f"trace otlp {receiver.url}")
        assert capsys.readouterr().out.strip() == f"tracing: OTLP to {receiver.url}/v1/traces, message contents off"
        _run(ip, tool_server, monkeypatch)
        ip.run_line_magic("agent", "trace off")  # flushes what is left
        assert capsys.readouterr().out.strip().endswith("tracing: off")
    assert {r["path"] for r in receiver.requests} == {"/v1/traces"}
    names = sorted(s["name"] for s in receiver.spans)
    assert names == ["chat m", "chat m", "execute_tool word_count", "invoke_agent default"]
    tool = next(s for s in receiver.spans if s["name"] == "execute_tool word_count")
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_7" and tool["resource"]["service.name"] == "ipyagent"
    assert tracing.current() is None


def test_the_magic_says_what_it_takes(ip, monkeypatch, capsys) -> None:
    with pytest.raises(UsageError, match=r"use %agent trace \[otlp \[URL\] \[--content\] \| off\], not 'jaeger'"):
        ip.run_line_magic("agent", "trace jaeger")
    with pytest.raises(UsageError, match="'ftp://x' is not an OTLP/HTTP URL"):
        ip.run_line_magic("agent", "trace otlp ftp://x")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318/")
    try:
        ip.run_line_magic("agent", "trace otlp --content")
        assert capsys.readouterr().out.strip() == \
            "tracing: OTLP to http://collector.example:4318/v1/traces, message contents on (redacted)"
    finally:
        ipyagent.trace(False)


def test_no_opentelemetry_module_is_imported_by_a_run_while_tracing_is_off(server) -> None:
    script = textwrap.dedent(f"""
        import sys
        from IPython.testing.globalipapp import start_ipython
        shell = start_ipython()
        shell.run_line_magic("load_ext", "ipyagent")
        shell.run_line_magic("provider", "openai:m --base-url {server.url}/v1")
        shell.run_cell_magic("agent", "-o res", "Say hi")
        assert shell.user_ns["res"].ok, shell.user_ns["res"].error
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test-key-000000"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
