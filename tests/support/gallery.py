"""Saved outputs of every kind ipyagent draws, built in Python as a run would leave them: answers
in Markdown, tool calls in each state, reasoning, an image, off-prompt artifacts, a failed and an
interrupted run, a comparison with several runs, and an evaluation. The parity test draws them in
JupyterLab and holds the TypeScript renderer to Python's text renderer; `write_gallery` also makes
the notebook to look at (screenshots) before and after a change to the renderers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.agent.evaluation.results import EvalResult, Evaluation
from ipyagent.core.transcript import (
    ArtifactSummary,
    ComparisonEntry,
    ComparisonRecord,
    ComparisonTable,
    MediaPart,
    NextCell,
    OtherPart,
    ReasoningPart,
    ServerSource,
    ServerToolPart,
    TextPart,
    Timings,
    ToolCallPart,
    Transcript,
    TranscriptCitation,
    TranscriptCost,
    TranscriptError,
    TranscriptMessage,
    TranscriptUsage,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

ANSWER = (
    "## Totals by region\n\nThe **North** sold more than the *South*, and `total()` adds them up; see the\n"
    "[report](https://example.com/report) or ![the chart](https://example.com/chart.png).\n\n"
    "- North: 1,000\n- South: 925\n\n1. sum the rows\n2. print it\n\n> Figures are in units.\n\n"
    "```python\ndef total(rows):\n    return sum(r['sales'] for r in rows)\n```\n\n"
    "| region | sales |\n|:---|---:|\n| North | 1,000 |\n| South | 925 |\n\n~~draft~~ final.\n"
)


def _assistant(*parts: Any) -> TranscriptMessage:
    return TranscriptMessage(role="assistant", parts=list(parts))


def transcripts() -> dict[str, Transcript]:
    """Named transcripts, one of each shape a run can leave."""
    usage = TranscriptUsage(input_tokens=1234, output_tokens=56)
    timed = Timings(total_s=2.345, first_token_s=0.41, turns=1)
    text = Transcript(
        provider="openai:gpt-4.1-mini",
        messages=[_assistant(TextPart(text=ANSWER))],
        usage=usage,
        timings=timed,
        cost=TranscriptCost(total_usd=0.000123),
        stop_reason="end_turn",
        settings={"temperature": 0, "max_output_tokens": 64},
    )
    tools = Transcript(
        provider="anthropic:claude-sonnet-4-5",
        messages=[
            _assistant(
                ReasoningPart(text="The user wants the **weather**; call the tool."),
                TextPart(text="Let me look that up."),
                ToolCallPart(
                    id="call_1",
                    name="weather",
                    arguments={"city": "Paris", "days": 2},
                    status="ok",
                    result="sunny, 21 °C",
                    duration_s=0.0123,
                    media=[
                        MediaPart(kind="image", mime_type="image/png", size=68, data=PNG),
                        MediaPart(
                            kind="blob", mime_type="application/pdf", size=3_000_000, name="file:///r/report.pdf"
                        ),
                    ],
                ),
                ToolCallPart(
                    id="call_2",
                    name="lookup",
                    arguments={"query": "x"},
                    status="error",
                    result="KeyError: 'x'",
                    duration_s=0.5,
                ),
                ToolCallPart(
                    id="call_3", name="delete_all", status="error", result="denied by the user", approval="denied"
                ),
                ToolCallPart(
                    id="call_4",
                    name="slow",
                    arguments={"n": 3},
                    status="error",
                    result="interrupted while the tool ran",
                    duration_s=1.25,
                    stopped="timeout",
                ),
                ToolCallPart(id="call_5", name="later"),
            ),
            _assistant(
                TextPart(text="It is *sunny* in Paris."),
                OtherPart(kind="image", summary="<image image/png>", mime_type="image/png", data=PNG),
                OtherPart(kind="generic", summary='{"provider": "data"}'),
            ),
        ],
        usage=TranscriptUsage(input_tokens=900, output_tokens=80),
        timings=Timings(total_s=3.5, first_token_s=0.8, turns=2),
        stop_reason="max_tokens",
        attempts=3,
        replayed=True,
        price_unknown=True,
    )
    artifacts = Transcript(
        provider="openai:gpt-4.1-mini",
        messages=[
            _assistant(
                ToolCallPart(
                    id="call_9",
                    name="WebSearch_search",
                    arguments={"q": "jupyter"},
                    status="ok",
                    result="stored off-prompt as web_search-1",
                    duration_s=0.2,
                ),
                TextPart(text="I stored the page; it says Jupyter is a notebook."),
            )
        ],
        artifacts=[
            ArtifactSummary(
                call_id="call_9",
                tool="WebSearch",
                namespace="web_search-1",
                kind="text",
                size={"chars": 12000},
                preview="Jupyter is an open-source notebook…",
            ),
            ArtifactSummary(
                tool="Sales",
                namespace="sales-2",
                kind="table",
                size={"rows": 1500, "columns": 4},
                preview="region,sales\nNorth,1000",
            ),
        ],
        usage=TranscriptUsage(input_tokens=10, output_tokens=20),
        timings=Timings(total_s=0.9, first_token_s=0.3, turns=1),
    )
    failed = Transcript(
        provider="openai:gpt-4.1-mini",
        status="failed",
        messages=[_assistant(TextPart(text="Partial answer before the"))],
        error=TranscriptError(type="not_found", message="openai: 404 model 'gpt-9' not found (HTTP 404)"),
        timings=Timings(total_s=0.2),
    )
    interrupted = Transcript(
        provider="gemini:gemini-2.5-flash",
        status="interrupted",
        messages=[_assistant(TextPart(text="One, two, thr"))],
        usage=TranscriptUsage(input_tokens=5, output_tokens=3),
        timings=Timings(total_s=1.5, first_token_s=0.2),
    )
    history = Transcript(
        provider="openai:gpt-4.1-mini",
        title="turn 2 · run 1a2b3c",
        show_prompts=True,
        messages=[
            TranscriptMessage(role="user", parts=[TextPart(text="What is **2 + 2**?")]),
            _assistant(TextPart(text="It is 4.")),
        ],
        timings=Timings(turns=1),
        next_cell=NextCell(language="python", source="print(2 + 2)\n"),
    )
    return {
        "text": text,
        "tools": tools,
        "search": _search(),
        "artifacts": artifacts,
        "failed": failed,
        "interrupted": interrupted,
        "history": history,
    }


def _search() -> Transcript:
    """Provider-side tools (a web search with its sources, code run by the provider) and an answer
    citing a page twice and a document, with values masked in what the cell sent."""
    page = TranscriptCitation(url="https://example.com/paris", title="Paris weather", quote="Sunny, 24 °C.")
    answer = "Paris is **sunny** today, about 24 °C, and the forecast holds; the city guide agrees."
    search = ServerToolPart(
        id="ws1", tool="web_search", name="web_search", input={"query": "paris weather today"}, status="ok",
        sources=[ServerSource(url="https://example.com/paris", title="Paris weather"),
                 ServerSource(url="https://example.com/guide", title="City guide")])
    code = ServerToolPart(id="ce1", tool="code_execution", name="code_execution",
                          input={"code": "print(24 * 9 / 5 + 32)\n"}, status="ok", output="75.2")
    return Transcript(
        provider="anthropic:claude-sonnet-4-5",
        messages=[_assistant(search, code, TextPart(text=answer, citations=[
            page.model_copy(update={"start": 0, "end": 15}),
            page.model_copy(update={"start": 17, "end": 30}),
            TranscriptCitation(start=60, end=83, document="guide.pdf", location="page 3", quote="agrees"),
        ]))],
        usage=TranscriptUsage(input_tokens=900, output_tokens=80),
        timings=Timings(total_s=3.25, first_token_s=1.125, turns=1),
        masked={"cell template": 1, "error": 2},
    )


def comparison() -> ComparisonRecord:
    """Two providers, two runs each; the second provider's second run failed."""

    def run(provider: str, text: str, *, status: str = "completed") -> Transcript:
        error = TranscriptError(type="server", message="server error (HTTP 500)") if status == "failed" else None
        return Transcript(
            provider=provider,
            status=status,
            messages=[_assistant(TextPart(text=text))],
            error=error,
            usage=TranscriptUsage(input_tokens=12, output_tokens=7),
            timings=Timings(total_s=1.2, first_token_s=0.3, turns=1),
        )

    entries = [
        ComparisonEntry(index=0, run=0, transcript=run("openai:a", "Paris is the **capital**.")),
        ComparisonEntry(index=0, run=1, transcript=run("openai:a", "It is Paris.")),
        ComparisonEntry(index=1, run=0, transcript=run("openai:b", "The capital: *Paris*.")),
        ComparisonEntry(index=1, run=1, transcript=run("openai:b", "", status="failed")),
    ]
    columns = [
        "provider:model",
        "first token (s)",
        "total (s)",
        "in tokens",
        "out tokens",
        "out tokens/s",
        "cost",
        "stop",
        "error",
    ]
    rows = [
        ["openai:a · median (min–max) of 2 runs", "0.30", "1.20", "12", "7", "5.8", "—", "end_turn", ""],
        ["run 1", "0.30", "1.20", "12", "7", "5.8", "—", "end_turn", ""],
        ["run 2", "0.30", "1.20", "12", "7", "5.8", "—", "end_turn", ""],
        ["b · median (min–max) of 1/2 runs", "0.30", "1.20", "12", "7", "5.8", "—", "end_turn", "server"],
        ["run 1", "0.30", "1.20", "12", "7", "5.8", "—", "end_turn", ""],
        ["run 2", "—", "1.20", "", "", "—", "—", "", "server"],
    ]
    table = ComparisonTable(columns=columns, rows=rows, row_runs=[[0, None], [0, 0], [0, 1], [1, None], [1, 0], [1, 1]])
    return ComparisonRecord(
        providers=["openai:a", "openai:b"],
        titles=["openai:a", "b"],
        runs=2,
        wall_s=2.5,
        entries=entries,
        table=table,
        selected=[0, None],
    )


def evaluation() -> Evaluation:
    """Three rows on two providers: passes, a failed assertion, a failed run and a skipped cell."""
    rows = [{"country": "France"}, {"country": "Japan"}, {"country": "Peru"}]
    ok = [Outcome("contains:Paris", True)]
    results = [
        EvalResult(
            0,
            "openai:a",
            "Capital of France?",
            rows[0],
            text="The capital is Paris.",
            passed=True,
            outcomes=ok,
            input_tokens=10,
            output_tokens=6,
            cost=0.0012345,
            ttft_s=0.25,
            total_s=0.5,
            run_id="r1",
        ),
        EvalResult(
            0,
            "openai:b",
            "Capital of France?",
            rows[0],
            text="Paris.\nIt is in Europe.",
            passed=True,
            outcomes=ok,
            input_tokens=10,
            output_tokens=4,
            cost=0.0123,
            ttft_s=0.35,
            total_s=0.75,
            cached=True,
        ),
        EvalResult(
            1,
            "openai:a",
            "Capital of Japan?",
            rows[1],
            text="I think it is Kyoto.",
            passed=False,
            outcomes=[Outcome("contains:Tokyo", False, reason="the answer does not contain 'Tokyo'", score=0.125)],
            input_tokens=10,
            output_tokens=7,
            ttft_s=0.3,
            total_s=0.6,
        ),
        EvalResult(
            1,
            "openai:b",
            "Capital of Japan?",
            rows[1],
            status="failed",
            error_type="rate_limit",
            error="429 slow down",
            total_s=0.1,
        ),
        EvalResult(
            2,
            "openai:a",
            "Capital of Peru?",
            rows[2],
            text="Lima.",
            passed=True,
            outcomes=[Outcome("contains:Lima", True)],
            input_tokens=9,
            output_tokens=2,
            ttft_s=0.2,
            total_s=0.4,
        ),
        EvalResult(
            2, "openai:b", "Capital of Peru?", rows[2], status="skipped", error_type="budget", error="over budget"
        ),
    ]
    return Evaluation(
        providers=["openai:a", "openai:b"],
        rows=rows,
        assertions=["contains:{{ row.capital }}"],
        results=results,
        wall_s=1.25,
        budget=0.02,
        budget_stopped=True,
        notes=["a note about prices"],
    )


def outputs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """(data, metadata) of each saved output, by name, as the notebook layer publishes them."""
    from ipyagent.notebook.views.evaluation_view import bundle as evaluation_bundle
    from ipyagent.notebook.views.transcript_output import bundle, comparison_bundle

    made = {name: bundle(t) for name, t in transcripts().items()}
    made["comparison"] = comparison_bundle(comparison())
    made["evaluation"] = evaluation_bundle(evaluation())
    return made


def write_gallery(path: Path) -> list[str]:
    """A notebook at `path` with one cell per saved output (no kernel needed to draw it); the names, in order."""
    made = outputs()
    nb = nbformat.v4.new_notebook()
    for name, (data, metadata) in made.items():
        output = nbformat.v4.new_output("display_data", data=data, metadata=metadata)
        nb.cells.append(nbformat.v4.new_code_cell(f"# {name}", outputs=[output]))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return list(made)
