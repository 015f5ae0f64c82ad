"""Terminal IPython: ``%agent history`` and ``%%compare`` drawn with rich on a colour terminal
(a TTY without NO_COLOR), read back from an emulated VT100 screen (pyte); plain text elsewhere."""

from __future__ import annotations

import re
import sys
from typing import Any

import pyte
import pytest

from ipyagent.core import ComparisonTable, Transcript, TranscriptError
from ipyagent.core.transcript import ReasoningPart, TextPart, ToolCallPart, TranscriptMessage
from ipyagent.notebook.render.text.records import figures_table, print_rendered, transcript_renderables

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.views import Tty

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)
ANSWER = "# Plan\n\nFirst **bold** step.\n\n```python\ndef add(a, b):\n    return a + b\n```\n"
SGR = re.compile(r"\x1b\[[0-9;]*m")


COLUMNS = 200  # wide enough for the whole figures table and a tool line on one row


@pytest.fixture(autouse=True)
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))  # shutil.get_terminal_size reads these first
    monkeypatch.setenv("LINES", "60")
    monkeypatch.delenv("NO_COLOR", raising=False)


def visible(raw: str) -> list[str]:
    """The non-blank rows of `raw` as a terminal shows them (pyte, an emulated VT100 screen)."""
    screen = pyte.HistoryScreen(COLUMNS, 400)
    pyte.Stream(screen).feed(raw.replace("\n", "\r\n"))  # a terminal's line discipline maps \n to \r\n
    return [line.rstrip() for line in screen.display if line.strip()]


def drawn(*renderables: Any) -> str:
    out = Tty()
    print_rendered(out, renderables)
    return out.getvalue()


def sample() -> Transcript:
    parts = [
        ReasoningPart(text="Think it through."),
        TextPart(text=ANSWER),
        ToolCallPart(
            id="call_1",
            name="lookup",
            arguments={"q": "x"},
            status="error",
            result="denied by the user",
            approval="denied",
        ),
        ToolCallPart(id="call_2", name="lookup", arguments={"q": "y"}, status="ok", result="found", duration_s=0.25),
    ]
    return Transcript(provider="openai:m", title="turn 1 · run r1", show_prompts=True, status="failed",
                      error=TranscriptError(type="server", message="the server went away"),
                      messages=[TranscriptMessage(role="user", parts=[TextPart(text="Plan it?\x1b[2J")]),
                                TranscriptMessage(role="assistant", parts=parts)])


def test_a_transcript_is_drawn_as_a_person_reads_it() -> None:
    raw = drawn(*transcript_renderables(sample()))
    lines = [line.strip() for line in visible(raw)]
    at = {name: next(i for i, line in enumerate(lines) if line.startswith(name)) for name in
          ("turn 1 · run r1", "you Plan it?", "Think it through.", "Plan", "First bold step.", "def add(a, b):",
           "[tool lookup({\"q\": \"x\"})", "[tool lookup({\"q\": \"y\"})", "[error] the server went away", "[openai:m")}
    assert list(at.values()) == sorted(
        at.values()
    )  # the transcript's order: title, prompt, reasoning, answer, tools, error, footer
    assert not any(
        s in "\n".join(lines) for s in ("# Plan", "**bold**", "```")
    )  # Markdown rendered, not shown as source
    assert lines[at["[tool lookup({\"q\": \"x\"})"]].endswith("· denied]")
    assert "approved" not in raw and "· done in 0.25 s]" in raw
    assert "\x1b[2J" not in raw  # a control sequence in the prompt never reaches the terminal
    styled = {m.group(2): m.group(1) for m in re.finditer(r"\x1b\[([0-9;]*)m([^\x1b]+)", raw)}
    assert "2" in styled["Think it through."].split(";")  # reasoning dimmed
    assert styled['[tool lookup({"q": "x"}) -> denied by the user · denied]'] == "33"  # denied: yellow
    assert styled['[tool lookup({"q": "y"}) -> found · done in 0.25 s]'] == "32"  # done: green
    assert styled["[error] the server went away"] == "1;31"
    assert re.search(r"\x1b\[[0-9;]*m(def)\x1b\[0m", raw)  # code highlighted
    assert styled["openai:m"] == "1;36" and styled["failed"] == "1;31"  # the footer as %%agent's


def test_the_figures_table_is_one_table_with_each_run_under_its_provider() -> None:
    table = ComparisonTable(columns=["provider:model", "total (s)", "stop", "error"],
                            rows=[["openai:a · median (min–max) of 2 runs", "0.50 (0.40–0.60)", "end_turn", ""],
                                  ["run 1", "0.40", "end_turn", ""], ["run 2", "0.60", "end_turn", ""],
                                  ["openai:b", "—", "", "1 of 1 failed: rate_limit: slow down"]],
                            row_runs=[[0, None], [0, 0], [0, 1], [1, None]])
    raw = drawn(figures_table(table))
    head, rule, *rows = visible(raw)
    assert re.fullmatch(r"\s*provider:model\s+total \(s\)\s+stop\s+error\s*", head) and set(rule.strip()) == {"─"}
    cells = [re.split(r"\s{2,}", row.strip()) for row in rows]
    assert cells == [["openai:a · median (min–max) of 2 runs", "0.50 (0.40–0.60)", "end_turn"],
                     ["run 1", "0.40", "end_turn"], ["run 2", "0.60", "end_turn"],
                     ["openai:b", "—", "1 of 1 failed: rate_limit: slow down"]]
    assert rows[1].index("0.40") + 4 == rows[0].index("0.50 (0.40–0.60)") + len(
        "0.50 (0.40–0.60)"
    )  # figures right-aligned
    assert rows[1].index("run 1") == rows[0].index("openai:a") + 2  # a run indented under its provider
    assert "\x1b[1mopenai:a" in raw and "\x1b[2m  run 1" in raw and "\x1b[31m1 of 1 failed" in raw
    quiet = ComparisonTable(
        columns=table.columns, rows=[r[:3] + [""] for r in table.rows[:3]], row_runs=table.row_runs[:3]
    )
    assert "error" not in visible(drawn(figures_table(quiet)))[0]  # nothing failed: no error column


def test_the_figures_table_leaves_out_a_cost_no_run_knows() -> None:
    unknown = ComparisonTable(columns=["provider:model", "total (s)", "cost", "error"],
                              rows=[["openai:a", "0.50", "—", ""], ["openai:b", "0.60", "—", ""]])
    assert "cost" not in visible(drawn(figures_table(unknown)))[0]
    unknown.rows[1][2] = "$0.0012"
    assert "cost" in visible(drawn(figures_table(unknown)))[0]


@pytest.fixture
def ip(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shared shell, with an OpenAI key whose value no output may show."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-records-0a1b2c3d4e5f")
    return ip


def on_a_terminal(run: Any) -> str:
    """What `run()` writes to a stdout that is a terminal."""
    saved, sys.stdout = sys.stdout, Tty()
    try:
        run()
        return sys.stdout.getvalue()
    finally:
        sys.stdout = saved


def test_agent_history_on_a_colour_terminal(ip, monkeypatch, capsys) -> None:
    text = expected_from(TEXT).text
    ip.run_cell('def get_weather(city: str, state: str) -> str:\n    """Weather now."""\n    return "61 F and foggy"')
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        ip.run_line_magic("provider", f"openai:gpt-4.1-mini --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "--thread w --tools get_weather", "Weather in SF?")
    capsys.readouterr()
    raw = on_a_terminal(lambda: ip.run_line_magic("agent", "history w"))
    lines = [line.strip() for line in visible(raw)]
    assert lines[0] == "thread 'w': 1 turn" and "\x1b[1mthread 'w': 1 turn" in raw
    assert re.match(r"turn 1 · run \w+ ─+$", lines[1])
    assert lines[2] == "you Weather in SF?"
    (tool,) = [n for n, line in enumerate(lines) if line.startswith("[tool get_weather(")]
    assert lines[tool].endswith("-> 61 F and foggy · done]") and "\x1b[32m[tool get_weather(" in raw
    assert " ".join(lines[tool + 1:-1]).split() == text.split()  # the answer, rendered (wrapped to the screen)
    assert re.match(r"\[openai:gpt-4\.1-mini · \d+ in / \d+ out tokens · 2 model turns\]$", lines[-1])
    assert "\x1b[1;36mopenai:gpt-4.1-mini" in raw

    monkeypatch.setenv("NO_COLOR", "1")
    plain = on_a_terminal(lambda: ip.run_line_magic("agent", "history w"))
    assert "\x1b" not in plain and re.search(r"── turn 1 · run \w+\nuser: Weather in SF\?\n", plain)


def test_compare_on_a_colour_terminal_draws_each_answer_then_one_table(ip, monkeypatch) -> None:
    text = expected_from(TEXT).text
    with StubServer(Reply.sse_file(TEXT)) as a, StubServer(Reply.sse_file(TEXT)) as b:
        ip.run_line_magic("provider", f"openai:a --base-url {a.url}/v1")
        ip.run_line_magic("provider", f"--alias b openai:b --base-url {b.url}/v1")
        raw = on_a_terminal(lambda: ip.run_cell_magic("compare", "openai:a b --runs 2", "Say something."))
    lines = [line.strip() for line in visible(raw)]
    headers = [n for n, line in enumerate(lines) if line.endswith("───") and not line.startswith("─")]
    heads = [lines[n].split(" ─")[0] for n in headers]
    # the alias first, then the id
    assert sorted(heads) == ["b · openai:b · run 1 of 2", "b · openai:b · run 2 of 2",
                             "openai:a · run 1 of 2", "openai:a · run 2 of 2"]
    starts = [lines[n + 1] for n in headers]
    first = " ".join(text.split()[:4])
    assert len(starts) == 4 and all(s.startswith(first) for s in starts)  # each answer under its header
    footers = [line for line in lines if line.startswith("[openai:")]
    assert len(footers) == 4 and all(" in / " in f and "total" in f for f in footers)
    head = next(n for n, line in enumerate(lines) if line.startswith("provider:model"))
    assert re.match(r"provider:model\s+first token \(s\)\s+total \(s\)", lines[head]) and "error" not in lines[head]
    firsts = [re.split(r"\s{2,}", line)[0] for line in lines[head + 2:head + 8]]
    # why the price is unknown, under the table
    assert re.match(r"price unknown: http://127\.0\.0\.1:\d+/v1 is not openai's own API", lines[head + 8])
    assert firsts == ["openai:a · median (min–max) of 2 runs", "run 1", "run 2",
                      "b · openai:b · median (min–max) of 2 runs", "run 1", "run 2"]
    assert "\x1b[1;36mopenai:a" in raw  # the panes' headers coloured

    monkeypatch.setenv("NO_COLOR", "1")
    with StubServer(Reply.sse_file(TEXT)) as a:
        ip.run_line_magic("provider", f"openai:a --base-url {a.url}/v1")
        plain = on_a_terminal(lambda: ip.run_cell_magic("compare", "openai:a", "Say something."))
    assert "\x1b" not in plain and f"── openai:a ──\n{text}\n" in plain and "provider:model" in plain


def test_the_plain_transcript_a_terminal_prints_has_no_control_characters() -> None:
    from ipyagent.notebook.render.transcript import to_text

    t = sample()
    t.messages[1].parts[1] = TextPart(text="Done\x1b]0;pwned\x07\r\n\tnext\x9b2J")
    plain = to_text(t)
    assert "Plan it?␛[2J" in plain and "Done␛]0;pwned␇\n\tnext␛[2J" in plain
    assert not any(c in plain for c in "\x1b\x07\r\x9b")
