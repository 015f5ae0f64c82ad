"""`ipyagent.trace` from Python: an evaluation's spans (one per row × column, the checks' results
on it, the run its child), the OTLP endpoint rules, the flush at exit, and a failing tool call."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import StatusCode

from ipyagent import Agent, RunOptions, evaluate, trace
from ipyagent.agent.telemetry import tracing
from ipyagent.core import ConfigurationError, TextDelta
from ipyagent.drivers import otel_provider_name

from ..support.evaluation import CAPITALS, answering, capital_of
from ..support.otlp_receiver import OTLPReceiver
from ..support.scripted_driver import Script, ScriptedDriver
from ..support.stub_server import StubServer, openai_text_reply, openai_tool_call_reply


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    trace(False)


def test_an_evaluation_gives_one_span_per_cell_with_its_checks_and_the_run_inside(exporter) -> None:
    trace(exporter=exporter)
    with StubServer(responder=answering(capital_of)) as a, StubServer(responder=answering(lambda q: "No idea")) as b:
        ev = evaluate([Agent("openai:m1", base_url=a.url), Agent("openai:m2", base_url=b.url)],
                      "Capital of {{ row.country }}?", CAPITALS[:2],
                      assertions=["contains:{{ row.capital }}", "regex:^The"], store=False)
    tracing.current().flush()
    spans = exporter.get_finished_spans()
    cells = [s for s in spans if s.name.startswith("evaluate ")]
    assert sorted(s.name for s in cells) == ["evaluate openai:m1"] * 2 + ["evaluate openai:m2"] * 2
    (root,) = [s for s in spans if s.name == "evaluation"]
    assert root.attributes["ipyagent.evaluation.id"] == ev.id and root.attributes["ipyagent.evaluation.rows"] == 2
    assert all(c.parent.span_id == root.context.span_id for c in cells)
    for cell in cells:
        column, row = cell.attributes["ipyagent.evaluation.column"], cell.attributes["ipyagent.evaluation.row"]
        result = ev.cell(row, column)
        (run,) = [s for s in spans if s.parent is not None and s.parent.span_id == cell.context.span_id]
        assert run.name == "invoke_agent default" and run.attributes["gen_ai.request.model"] == column[len("openai:"):]
        passed = [o.passed for o in result.outcomes]
        assert cell.attributes["ipyagent.evaluation.checks"] == ("contains:{{ row.capital }}", "regex:^The")
        assert list(cell.attributes["ipyagent.evaluation.check_passed"]) == passed
        assert cell.attributes["ipyagent.evaluation.passed"] is result.passed
        assert cell.attributes["ipyagent.evaluation.checks_failed"] == passed.count(False)
        events = [dict(e.attributes) for e in cell.events]
        assert [e["gen_ai.evaluation.name"] for e in events] == ["contains:{{ row.capital }}", "regex:^The"]
        assert [e["gen_ai.evaluation.score.label"] for e in events] == ["pass" if p else "fail" for p in passed]
        assert all("gen_ai.evaluation.explanation" not in e for e in events)  # reasons quote rows: content only
    assert [c.attributes["ipyagent.evaluation.passed"] for c in sorted(cells, key=lambda c: c.name)] == \
        [True, True, False, False]


def test_a_failing_tool_call_is_an_error_span_its_message_only_with_content(exporter) -> None:
    def explode(text: str) -> str:
        """Fails."""
        raise RuntimeError("the disk is on fire")

    trace(exporter=exporter, content=True)
    with StubServer(openai_tool_call_reply("explode", {"text": "x"}), openai_text_reply("It failed.")) as server:
        result = Agent("openai:m", base_url=server.url, tools=[explode]).run("Go")
    assert result.ok
    tracing.current().flush()
    (tool,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool explode"]
    assert tool.attributes["error.type"] == "tool_error" and tool.status.status_code is StatusCode.ERROR
    assert "the disk is on fire" in tool.status.description


def test_the_otlp_endpoint_follows_the_exporter_specification(monkeypatch) -> None:
    assert tracing.otlp_endpoint() == "http://localhost:4318/v1/traces"
    assert tracing.otlp_endpoint("http://127.0.0.1:6006/") == "http://127.0.0.1:6006/v1/traces"
    assert tracing.otlp_endpoint("https://x.example/v1/traces") == "https://x.example/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert tracing.otlp_endpoint() == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/custom")
    assert tracing.otlp_endpoint() == "http://traces:9999/custom"  # a signal's own endpoint is taken as it is
    with pytest.raises(ConfigurationError, match="'collector:4318' is not an OTLP/HTTP URL"):
        tracing.otlp_endpoint("collector:4318")


def test_the_last_spans_go_out_at_exit(exporter, monkeypatch) -> None:
    registered = []
    monkeypatch.setattr(tracing, "_exit_registered", False)
    monkeypatch.setattr(tracing.atexit, "register", registered.append)
    monkeypatch.setattr(tracing, "SCHEDULE_S", 3600.0)  # nothing leaves on the schedule during this test
    trace(exporter=exporter)
    assert registered == [tracing.flush_at_exit]
    with StubServer(openai_text_reply("Hi.")) as server:
        assert Agent("openai:m", base_url=server.url).run("Hello").ok
    assert exporter.get_finished_spans() == ()
    tracing.flush_at_exit()
    assert sorted(s.name for s in exporter.get_finished_spans()) == ["chat m", "invoke_agent default"]


def test_provider_names_are_the_conventions_own() -> None:
    assert [otel_provider_name(p) for p in ("openai", "openai-responses", "anthropic", "gemini", "azure-openai",
                                            "mistral", "ollama")] == \
        ["openai", "openai", "anthropic", "gcp.gemini", "azure.ai.openai", "mistral_ai", "ollama"]


def test_without_the_sdk_tracing_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # an import of it raises ImportError
    with pytest.raises(ConfigurationError, match=r"the OpenTelemetry SDK is not installed; "
                                                 r"pip install 'ipyagent\[otel\]' and try again"):
        trace("http://127.0.0.1:4318")
    assert tracing.current() is None


class _Flaky:
    """A span exporter whose exports fail while `down` is set, keeping what it was given otherwise."""

    def __init__(self) -> None:
        self.down, self.spans = True, []

    def export(self, spans):
        if self.down:
            return SpanExportResult.FAILURE
        self.spans += spans
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def test_a_receiver_that_fails_is_said_once_and_again_when_it_is_back(capsys) -> None:
    flaky = _Flaky()
    trace(exporter=flaky)
    try:
        with StubServer(openai_text_reply("Hi.")) as server:
            agent = Agent("openai:m", base_url=server.url)
            for _ in range(2):
                assert agent.run("Hello").ok
                tracing.current().flush()
            assert capsys.readouterr().err == ("ipyagent: spans could not be sent to the exporter; "
                                               "later ones are still tried (%agent trace off stops)\n")
            flaky.down = False
            assert agent.run("Hello").ok
            tracing.current().flush()
        assert capsys.readouterr().err == "ipyagent: spans reach the exporter again\n"
        assert sorted(s.name for s in flaky.spans) == ["chat m", "invoke_agent default"]
    finally:
        trace(False)


def test_an_interrupted_run_closes_its_spans_as_interrupted(exporter) -> None:
    driver = ScriptedDriver(Script([TextDelta(0, "Hel"), TextDelta(0, "lo")], hold_after=1))
    agent = Agent(driver)
    trace(exporter=exporter)

    async def main() -> None:
        task = asyncio.create_task(agent._arun("hi", RunOptions(), None))
        await driver.held.wait()  # the reply is half streamed
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    tracing.current().flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert sorted(spans) == ["chat m", "invoke_agent default"]
    for span in spans.values():
        assert span.attributes["error.type"] == "interrupted" and span.status.status_code is StatusCode.ERROR
    assert spans["chat m"].attributes["gen_ai.provider.name"] == "scripted"


def test_a_process_that_ends_sends_its_last_spans() -> None:
    """The exit hook for real: a process traces with a schedule that never comes, runs, and ends."""
    with StubServer(openai_text_reply("Hi.")) as server, OTLPReceiver() as receiver:
        script = textwrap.dedent(f"""
            import ipyagent
            from ipyagent.agent.telemetry import tracing
            tracing.SCHEDULE_S = 3600.0  # only the exit hook can send them
            ipyagent.trace({receiver.url!r})
            assert ipyagent.Agent("openai:m", base_url={server.url!r}).run("Hello").ok
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert sorted(s["name"] for s in receiver.spans) == ["chat m", "invoke_agent default"]


def test_without_tracing_a_cell_makes_nothing_for_a_span(monkeypatch) -> None:
    """Tracing off: a cell builds no span attributes nor end callback (a cached re-run serves thousands)."""
    from ipyagent.agent.evaluation import matrix

    def refuse(*args: object) -> None:
        raise AssertionError("made for a span while tracing is off")

    monkeypatch.setattr(matrix, "cell_attributes", refuse)
    monkeypatch.setattr(matrix, "cell_checks", refuse)
    with StubServer(responder=answering(capital_of)) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", CAPITALS[:2],
                      store=False)
    assert [r.ok for r in ev.results] == [True, True]
