"""`ipyagent.compare` and `%%compare` without a kernel: concurrency, failures that stay
in their row, runs and their summary, the table, the magic in terminal IPython."""

from __future__ import annotations

import asyncio
import io
import json
import re
import statistics
import sys
import threading
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.terminal.interactiveshell import TerminalInteractiveShell
from IPython.testing.globalipapp import start_ipython

from ipyagent import Agent, Comparison, acompare, compare
from ipyagent.agent.compare import RunFigures, Stat
from ipyagent.core import ModelStarted, TextDelta
from ipyagent.drivers.registry import BUILTIN
from ipyagent.notebook.views.compare_view import CompareWidgetView, cells_to_html, table_columns, table_rows, table_text
from ipyagent.notebook.extension import await_agent_cells

from ..support.recordings import expected_from, status_type
from ..support.stub_server import FIXTURES, Reply, StubServer

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
ANTHROPIC_TEXT = FIXTURES / "anthropic" / "stream-text.sse"
AUTH_401 = FIXTURES / "anthropic" / "error-401-authentication.json"
RATE_429 = FIXTURES / "openai-compatible" / "openrouter-error-429.json"
KEY_VARS = sorted({spec.api_key_env for spec in BUILTIN.values() if spec.api_key_env})


def _anthropic_expected() -> tuple[str, int, int]:
    """(text, input tokens, output tokens) of the recorded Anthropic stream, read with json.loads."""
    text, usage = "", {}
    for line in ANTHROPIC_TEXT.read_text().splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event["type"] == "content_block_delta":
                text += event["delta"].get("text", "")
            usage = {**usage, **(event.get("usage") or event.get("message", {}).get("usage") or {})}
    return text, usage["input_tokens"], usage["output_tokens"]


def _error(path, status=None) -> Reply:
    return Reply.error_file(path, path.with_name(path.name.replace(".json", ".http.json")), status=status)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def test_providers_stream_at_once_and_figures_come_in_the_order_they_finish() -> None:
    # Each stream holds after its first event until all three are under way (one after the other,
    # they never would be), then they are let go from the last to the first, each once the one
    # before has finished: the figures must follow the order of finishing, not the entries'.
    replies = [Reply.sse_file(TEXT, hold_after=1) for _ in range(3)]
    all_under_way = threading.Event()

    def release_when_all_held() -> None:
        if all(reply.held.wait(60) for reply in replies):
            all_under_way.set()
        replies[2].release.set()

    def on_finish(figures: RunFigures) -> None:
        if figures.index > 0:
            replies[figures.index - 1].release.set()

    servers = [StubServer(reply) for reply in replies]
    with servers[0], servers[1], servers[2]:
        threading.Thread(target=release_when_all_held, daemon=True).start()
        result = compare([Agent("openai:m", base_url=s.url) for s in servers], "hi", on_finish=on_finish)
    exp = expected_from(TEXT)
    assert all_under_way.is_set()
    assert [f.index for f in result.figures] == [2, 1, 0]
    assert [f.output_tokens for f in result.figures] == [exp.usage["completion_tokens"]] * 3
    assert all(f.ok and f.stop_reason == "end_turn" for f in result.figures)


def test_a_failing_provider_never_stops_the_others(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-compare-secret-1234")
    text, tokens_in, tokens_out = _anthropic_expected()
    with (
        StubServer(Reply.sse_file(TEXT, delay=0.005)) as ok_openai,
        StubServer(Reply.sse_file(ANTHROPIC_TEXT)) as ok_anthropic,
        StubServer(_error(AUTH_401)) as unauthorized,
        StubServer(_error(RATE_429)) as limited,
    ):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-compare")
        entries = [
            Agent("openai:m", base_url=ok_openai.url),
            Agent("anthropic:claude-x", base_url=ok_anthropic.url),
            Agent("anthropic:claude-y", base_url=unauthorized.url),
            Agent("openai:limited", base_url=limited.url, max_attempts=1),
            "groq:llama",  # GROQ_API_KEY unset: the agent cannot even be built
        ]
        result = compare(entries, "hi")
    by = {f.provider: f for f in result.figures}
    assert by["openai:m"].ok and by["openai:m"].output_tokens == expected_from(TEXT).usage["completion_tokens"]
    assert by["anthropic:claude-x"].result.text == text
    assert (by["anthropic:claude-x"].input_tokens, by["anthropic:claude-x"].output_tokens) == (tokens_in, tokens_out)
    assert by["anthropic:claude-y"].error_type == status_type(401)
    assert by["openai:limited"].error_type == status_type(429)
    assert by["groq:llama"].error_type == "configuration" and "GROQ_API_KEY" in by["groq:llama"].error
    assert by["groq:llama"].result is None
    assert sum(f.ok for f in result.figures) == 2
    assert "sk-compare-secret-1234" not in repr(result.summary())
    # Results keyed by provider, in the order given.
    assert list(result.results) == [
        "openai:m",
        "anthropic:claude-x",
        "anthropic:claude-y",
        "openai:limited",
        "groq:llama",
    ]


def test_runs_start_from_the_same_conversation_and_are_summarized() -> None:
    with StubServer(Reply.sse_file(TEXT, delay=0.002)) as server:
        agent = Agent("openai:m", base_url=server.url, system="Be brief.")
        result = asyncio.run(acompare([agent], "hello", runs=3))
    assert [len(r["body"]["messages"]) for r in server.requests] == [2, 2, 2]
    assert agent.messages == []  # the conversation is left as it was
    runs = sorted(result.figures, key=lambda f: f.run)
    assert [f.run for f in runs] == [0, 1, 2]
    (row,) = result.summary()
    totals = [f.total_s for f in runs]
    assert row["total_s"] == Stat(statistics.median(totals), min(totals), max(totals))
    assert row["runs"] == row["ok"] == 3 and row["errors"] == []
    assert all(f.ttft_s is not None and 0 < f.ttft_s < f.total_s for f in runs)
    assert all(f.tokens_per_s == pytest.approx(f.output_tokens / (f.total_s - f.ttft_s)) for f in runs)
    assert len(result.results["openai:m"]) == 3


def test_cost_comes_from_the_result_when_it_has_one() -> None:
    class Costly:
        provider = "fake:m"
        messages: list = []

        async def arun(self, prompt, options=None, on_event=None):
            from ipyagent.agent import AgentResult
            from ipyagent.core import Message, StopReason, TextBlock, Usage

            on_event(ModelStarted(provider="fake", model="m"))
            on_event(TextDelta(0, "hi"))
            result = AgentResult(
                "fake:m",
                Message(role="assistant", content=[TextBlock(text="hi")]),
                Usage(input_tokens=3, output_tokens=4),
                StopReason(kind="end_turn"),
            )
            result.cost = 0.0125
            return result

    result = compare([Costly()], "x", runs=2)  # type: ignore[list-item]
    assert [f.cost for f in result.figures] == [0.0125, 0.0125]
    assert result.summary()[0]["cost"].median == 0.0125
    assert "$0.0125" in table_text(result.providers, result.figures, 2)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one provider"):
        compare([], "x")
    with pytest.raises(ValueError, match="runs must be at least 1"):
        compare(["openai:m"], "x", runs=0)


def test_to_dataframe_without_pandas_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        Comparison(["a:b"], 1).to_dataframe()


def test_to_dataframe_gives_one_row_per_run(monkeypatch) -> None:
    class FakePandas:
        @staticmethod
        def DataFrame(rows):  # noqa: N802 - pandas' name
            return rows

    monkeypatch.setitem(sys.modules, "pandas", FakePandas)
    cmp = Comparison(
        ["a:b", "c:d"],
        2,
        [
            RunFigures("c:d", 1, 0, error_type="timeout", error="slow"),
            RunFigures("a:b", 0, 1, 0.1, 0.5, 3, 4),
            RunFigures("a:b", 0, 0, 0.2, 0.6, 3, 5),
        ],
    )
    rows = cmp.to_dataframe()
    assert [(r["provider"], r["run"]) for r in rows] == [("a:b", 0), ("a:b", 1), ("c:d", 0)]
    assert rows[0]["output_tokens"] == 5 and rows[2]["error_type"] == "timeout"
    assert "result" not in rows[0]


def test_table_shows_median_and_range_and_escapes() -> None:
    figures = [RunFigures("a:b", 0, r, 0.1 * (r + 1), 1.0 + r, 10, 20 + r, stop_reason="end_turn") for r in range(3)]
    figures += [RunFigures("x:<script>", 1, 0, error_type="rate_limit", error="slow <b>down</b>")]
    html = cells_to_html(table_columns(3), table_rows(["a:b", "x:<script>"], figures, 3))
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;down" in html
    assert "2.00 (1.00–3.00)" in html  # total: median (min–max)
    assert "0.20 (0.10–0.30)" in html
    assert "1 of 1 failed: rate_limit: slow" in html  # only one of its three runs has finished
    assert "median (min–max) of 1/3 runs" in html and "median (min–max) of 3 runs" in html
    text = table_text(["a:b", "x:<script>"], figures, 3)
    assert text.splitlines()[0].startswith("provider:model") and "rate_limit" in text.splitlines()[5]


def test_with_several_runs_the_table_has_each_run_under_its_median() -> None:
    from ipyagent.notebook.views.compare_view import table_data

    figures = [RunFigures("a:b", 0, r, 0.1 * (r + 1), 1.0 + r, 10, 20 + r, stop_reason="end_turn") for r in (2, 0, 1)]
    figures += [RunFigures("c:d", 1, 0, error_type="rate_limit", error="slow down")]
    table = table_data(["a:b", "c:d"], figures, 3)
    assert table.row_runs == [[0, None], [0, 0], [0, 1], [0, 2], [1, None], [1, 0]]
    first, *runs, other, other_run = table.rows
    # the median (min–max)
    assert first[:3] == ["a:b · median (min–max) of 3 runs", "0.20 (0.10–0.30)", "2.00 (1.00–3.00)"]
    assert [r[:3] for r in runs] == [["run 1", "0.10", "1.00"], ["run 2", "0.20", "2.00"], ["run 3", "0.30", "3.00"]]
    assert [r[4] for r in runs] == ["20", "21", "22"]
    assert other_run[0] == "run 1" and other_run[-1] == "rate_limit: slow down"
    one = table_data(["a:b"], figures[:1], 1)  # one run: one row per provider, nothing more
    assert one.row_runs == [[0, None]] and len(one.rows) == 1


def test_widget_view_fills_the_table_and_marks_interrupted() -> None:
    # One server each: with one server for both, which agent got the slow reply was a race. The slow
    # one holds its stream after three events, so the interrupt surely comes mid-answer.
    held = Reply.sse_file(TEXT, hold_after=3)
    with StubServer(Reply.sse_file(TEXT)) as server, StubServer(held) as slow_server:
        quick = Agent("openai:quick", base_url=server.url, price_as="openai:gpt-4o-mini")
        slow = Agent("openai:slow", base_url=slow_server.url)

        async def main() -> CompareWidgetView:
            view = CompareWidgetView(["openai:quick", "openai:slow"], 1)
            quick_done, slow_text = asyncio.Event(), asyncio.Event()

            def on_event(index: int, run: int, event: Any) -> None:
                view.feed(index, run, event)
                if index == 1 and view.views[1].state.text:
                    slow_text.set()

            def on_finish(figures: Any) -> None:
                view.finish(figures)
                quick_done.set()

            task = asyncio.ensure_future(acompare([quick, slow], "hi", on_start=view.start, on_event=on_event,
                                                  on_finish=on_finish))
            await quick_done.wait()
            await slow_text.wait()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                view.mark_interrupted()
            return view

        view = asyncio.run(asyncio.wait_for(main(), 60))
    exp = expected_from(TEXT)
    assert view.views[0].state.text == exp.text and view.views[0].state.done is not None
    assert view.views[1].state.interrupted and 0 < len(view.views[1].state.text) < len(exp.text)
    assert [row[0] for row in view.table.rows] == ["openai:quick", "openai:slow"]
    assert view.table.rows[0][4] == str(exp.usage["completion_tokens"])
    assert view.table.rows[1][-1] == "cancelled: interrupted"  # the stopped run is in the table too


# -- the magic in terminal IPython ---------------------------------------------------------------


def test_compare_magic_prints_each_reply_then_the_table(ip, monkeypatch, capsys) -> None:
    text, tokens_in, tokens_out = _anthropic_expected()
    with (
        StubServer(Reply.sse_file(TEXT)) as openai_server,
        StubServer(Reply.sse_file(ANTHROPIC_TEXT)) as anthropic_server,
    ):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-compare")
        monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.url)
        ip.user_ns["topic"] = "kernels"
        returned = ip.run_cell_magic(
            "compare", "openai:m anthropic:claude-x -o cmp --system 'Be brief.'", "About {{ topic }}?"
        )
    assert returned is None and isinstance(ip.user_ns["cmp"], Comparison)  # no Out[n] echo
    assert openai_server.requests[0]["body"]["messages"] == [{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "About kernels?"}]
    assert anthropic_server.requests[0]["body"]["system"] in ("Be brief.", [{"type": "text", "text": "Be brief."}])
    out = capsys.readouterr().out
    assert f"── anthropic:claude-x ──\n{text}\n" in out
    table = out[out.index("provider:model"):].splitlines()
    anthropic_row = next(line for line in table if line.startswith("anthropic:claude-x"))
    assert re.search(rf"\s{tokens_in}\s+{tokens_out}\s", anthropic_row)


def test_agent_compare_is_an_alias(ip, monkeypatch, capsys) -> None:
    with StubServer(Reply.sse_file(TEXT)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        returned = ip.run_cell_magic("agent", "--compare openai:a,openai:b -o cmp", "hi")
    returned = ip.user_ns["cmp"]
    assert isinstance(returned, Comparison) and list(returned.results) == ["openai:a", "openai:b"]
    assert sorted(r["body"]["model"] for r in server.requests) == ["a", "b"]
    assert "provider:model" in capsys.readouterr().out


def test_compare_uses_the_session_provider_options(ip, monkeypatch) -> None:
    # Another model of the %provider's provider keeps its base URL (issue 13, item 9);
    # another provider does not get it (its own variable says where it is).
    with StubServer(Reply.sse_file(TEXT)) as session_server, StubServer(_error(AUTH_401)) as env_server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
        monkeypatch.setenv("OPENAI_BASE_URL", env_server.url)
        monkeypatch.setenv("GROQ_API_KEY", "gsk-compare")
        ip.run_line_magic("provider", f"openai:here --base-url {session_server.url}")
        ip.run_cell_magic("compare", "openai:here openai:elsewhere openai-responses:other -o cmp", "hi")
        cmp = ip.user_ns["cmp"]
    by = {f.provider: f for f in cmp.figures}
    assert by["openai:here"].ok and by["openai:elsewhere"].ok
    assert by["openai-responses:other"].error_type == status_type(401)
    assert sorted(r["body"]["model"] for r in session_server.requests) == ["elsewhere", "here"]
    assert [r["body"]["model"] for r in env_server.requests] == ["other"]


@pytest.mark.parametrize("line, body, message", [
    ("openai:m", "   \n", "empty"),
    ("openai:m --runs 0", "hi", "at least 1"),
    ("openai:m --schema Nope", "hi", "'Nope' is not defined"),
    ("openai:m --strategy tool", "hi", "--strategy goes with --schema"),
    ("openai:m --tools nope", "hi", "'nope' is not defined"),
    ("", "hi", "usage:"),
    ("openai:m", "{{ undefined_name }}", "undefined_name"),
])
def test_compare_magic_usage_errors(ip, line, body, message) -> None:
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("compare", line, body)


def test_compare_cells_await_in_kernels() -> None:
    cell = ["get_ipython().run_cell_magic('compare', 'openai:a openai:b', 'hi\\n')\n"]
    assert await_agent_cells(cell) == [
        "await get_ipython().run_cell_magic('compare', '--await-in-kernel ' + 'openai:a openai:b', 'hi\\n')\n"
    ]
    other = ["get_ipython().run_cell_magic('capture', '', 'x\\n')\n"]
    assert await_agent_cells(other) == other


def test_text_view_table_is_written_to_its_stream() -> None:
    from ipyagent.notebook.views.compare_view import CompareTextView

    stream = io.StringIO()
    view = CompareTextView(["a:b"], 1, stream)
    view.start(0, 0)
    view.feed(0, 0, TextDelta(0, "hello"))
    view.finish(RunFigures("a:b", 0, 0, 0.1, 0.2, 1, 2, stop_reason="end_turn"))
    view.show_table()
    assert stream.getvalue().startswith("── a:b ──\nhello\n") and "end_turn" in stream.getvalue()


def test_compare_in_a_terminal_shows_control_characters_instead_of_running_them(ip, monkeypatch, capsys) -> None:
    """Model text and error messages reach the terminal with their escape sequences visible (an OSC 52
    clipboard write, a screen clear), as `%%agent` prints them; the plain-text path once wrote them raw."""
    from ..support.stub_server import openai_text_reply

    hostile = "Lima \x1b]52;c;aGVsbG8=\x07 \x1b[2J end"
    bad_request = Reply(status=400, headers={"Content-Type": "application/json"},
                        pieces=[json.dumps({"error": {"message": "no \x1b]0;title\x07 here"}}).encode()])
    def respond(request: dict[str, Any]) -> Reply:
        return openai_text_reply(hostile) if request["body"]["model"] == "a" else bad_request

    with StubServer(respond=respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        ip.run_cell_magic("compare", "openai:a openai:b", "hi")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "Lima ␛]52;c;aGVsbG8=␇ ␛[2J end" in out  # the answer, its controls shown
    assert "␛]0;title␇" in out  # the failing provider's error, in its pane and in the table


def test_load_declares_every_magic() -> None:
    """`%load_ext` declares `MAGICS` without importing the package; every real magic is declared."""
    import subprocess

    code = (
        "import sys\nfrom IPython.terminal.interactiveshell import TerminalInteractiveShell\n"
        "shell = TerminalInteractiveShell.instance()\nshell.run_line_magic('load_ext', 'ipyagent')\n"
        "print(sorted(m for m in ('pydantic', 'httpx2', 'ipyagent.core', 'ipyagent.notebook.magics.agent')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

    from ipyagent.notebook import extension

    shell = start_ipython() or TerminalInteractiveShell.instance()
    shell.run_line_magic("load_ext", "ipyagent")
    try:
        extension._load_now(shell)
        for kind, name in extension.MAGICS:  # %%compare, the %agent line and %mcp load on their first use
            extension._load_extra(shell, kind, name)
        ours = {(kind, name) for kind, table in shell.magics_manager.magics.items() for name, fn in table.items()
                if type(getattr(fn, "__self__", None)).__module__.startswith("ipyagent.")}
        assert ours == set(extension.MAGICS)
    finally:
        shell.run_line_magic("unload_ext", "ipyagent")
    assert all(shell.magics_manager.magics[kind].get(name) is None for kind, name in extension.MAGICS)


def test_help_of_a_magic_not_yet_used_is_the_real_one() -> None:
    shell = start_ipython() or TerminalInteractiveShell.instance()
    shell.run_line_magic("load_ext", "ipyagent")
    try:
        placeholder = shell.magics_manager.magics["cell"]["compare"]
        assert "side by side" in placeholder.__doc__
    finally:
        shell.run_line_magic("unload_ext", "ipyagent")


def test_compare_schema_goes_to_every_provider(ip, monkeypatch) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    ip.user_ns["City"] = City
    try:
        with StubServer(Reply.sse_file(TEXT)) as server:  # a text reply: not a City
            monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
            monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            ip.run_cell_magic("compare", "openai:a openai:b --schema City -o cmp", "The capital of Peru?")
            cmp = ip.user_ns["cmp"]
    finally:
        ip.user_ns.pop("City")
    first = {r["body"]["model"]: r["body"] for r in reversed(server.requests)}
    assert set(first) == {"a", "b"}
    assert all(body["response_format"]["json_schema"]["name"] == "City" for body in first.values())
    assert {f.error_type for f in cmp.figures} == {"invalid_output"}


def test_provider_aliases_work_in_compare(ip, monkeypatch, capsys) -> None:
    with StubServer(Reply.sse_file(TEXT)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-compare")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        ip.run_line_magic("provider", "--alias fast openai:small")
        ip.run_cell_magic("compare", "fast openai:big -o cmp", "hi")
        cmp = ip.user_ns["cmp"]
    assert list(cmp.results) == ["openai:small", "openai:big"]
    assert sorted(r["body"]["model"] for r in server.requests) == ["big", "small"]


# -- one source of figures; a stopped comparison keeps what it had --------------------------------


class _DriverTimed:
    """An agent whose run arrives at once but whose driver measured ttft 0.5 s and 0.9 s in all
    (as a real driver does, from the request sent): the table must show those, not its own clock."""

    provider = "fake:timed"

    def __init__(self, *extra) -> None:
        self.messages: list = []
        self.results: list = []
        self.extra = extra  # more events, sent after the text

    async def arun(self, prompt, options, *, on_event):
        from ipyagent.agent.result import AgentResult
        from ipyagent.core import Message, ModelCompleted, StopReason, TextBlock, Usage

        meta = {"ttft_s": 0.5, "latency_s": 0.9}
        message = Message(role="assistant", content=[TextBlock(text="hi there")])
        usage, stop = Usage(input_tokens=3, output_tokens=2), StopReason(kind="end_turn")
        on_event(ModelStarted("fake", "timed"))
        on_event(TextDelta(0, "hi there"))
        for event in self.extra:
            on_event(event)
        on_event(ModelCompleted(message, usage, stop, metadata=meta))
        return AgentResult("fake:timed", message, usage=usage, stop_reason=stop, metadata=meta,
                           messages=[Message(role="user", content=[TextBlock(text=prompt)]), message])


def test_table_and_pane_footer_read_the_same_recorded_figures() -> None:
    from ipyagent.notebook.views.compare_view import table_rows
    from ipyagent.notebook.render.transcript import footer_figures

    cmp = compare([_DriverTimed()], "hi")
    (fig,) = cmp.figures
    assert (fig.ttft_s, fig.total_s) == (0.5, 0.9)  # the driver's figures, not the time the fake took
    assert fig.tokens_per_s == pytest.approx(2 / 0.4)
    footer = footer_figures(fig.transcript)
    (row,) = table_rows(cmp.providers, cmp.figures, 1)
    assert f"first token {row[1]} s" in footer and f"total {row[2]} s" in footer
    assert row[1:3] == ["0.50", "0.90"]


def test_a_stopped_comparison_keeps_finished_and_partial_runs() -> None:
    with StubServer(Reply.sse_file(TEXT)) as quick_server, StubServer(Reply.sse_file(TEXT, delay=0.3)) as slow_server:
        quick = Agent("openai:quick", base_url=quick_server.url)
        slow = Agent("openai:slow", base_url=slow_server.url)
        stopped: list[Comparison] = []
        seen: list[str] = []
        ready = threading.Event()  # the callbacks run on ipyagent's loop, in its thread

        def check() -> None:  # the quick run done, the slow one two text deltas in
            if len([s for s in seen if s]) >= 2 and quick.results:
                ready.set()

        def on_event(index: int, run: int, event: Any) -> None:
            if index:
                seen.append(getattr(event, "text", ""))
            check()

        async def main() -> None:
            task = asyncio.ensure_future(
                acompare([quick, slow], "hi", on_stop=stopped.append, on_event=on_event, on_finish=lambda f: check())
            )
            assert await asyncio.to_thread(ready.wait, 30), "the runs did not get there"
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
    (cmp,) = stopped
    exp = expected_from(TEXT)
    assert cmp.interrupted and "interrupted" in repr(cmp)
    done, cut = sorted(cmp.figures, key=lambda f: f.index)
    assert done.ok and done.transcript.status == "completed" and done.transcript.text == exp.text
    assert cut.error_type == "cancelled" and cut.transcript.status == "interrupted"
    assert 0 < len(cut.transcript.text) < len(exp.text) and exp.text.startswith(cut.transcript.text)
    assert cut.ttft_s is not None  # a stopped run keeps its first-token time


def test_a_pane_and_the_saved_record_draw_off_prompt_artifacts_as_agent_memory_does() -> None:
    from ipyagent.core import ArtifactStored, TextArtifact

    long = "# Results\n\n" + "a finding\n" * 50
    stored = ArtifactStored(
        "call_1", "WebSearch", "search", "TaskMemory", "search-1", TextArtifact(value=long), {"chars": len(long)}
    )

    async def main() -> CompareWidgetView:
        view = CompareWidgetView(["fake:timed"], 1)
        await acompare([_DriverTimed(stored)], "hi", on_start=view.start, on_event=view.feed, on_finish=view.finish)
        return view

    view = asyncio.run(main())
    (artifact,) = view.ended[(0, 0)]["artifacts"]
    assert "<h1>Results</h1>" in artifact["html"]  # Markdown rendered, as %agent memory shows it
    assert view.figures[0].transcript.artifacts[0].html == artifact["html"]  # the saved record's transcript


def test_a_page_reopened_mid_comparison_catches_up_from_the_kernel() -> None:
    """A front end that says hello mid-run (a reloaded page) gets the layout and table, the finished
    runs' transcripts and the running runs' snapshots, each tagged with its run's key."""
    import threading

    from ipyagent.agent.loop_thread import background_loop

    release, streaming = threading.Event(), threading.Event()  # the runs go on ipyagent's loop thread

    class Streaming(_DriverTimed):
        provider = "fake:streaming"

        async def arun(self, prompt, options, *, on_event):
            on_event(ModelStarted("fake", "streaming"))
            on_event(TextDelta(0, "half an ans"))
            streaming.set()
            await asyncio.to_thread(release.wait, 30)
            return await super().arun(prompt, options, on_event=lambda e: None)

    view = CompareWidgetView(["fake:timed", "fake:streaming"], 1)
    sent: list[dict] = []
    view.live.send = sent.append

    async def main() -> list[dict]:
        finished = threading.Event()  # set on ipyagent's loop, once the view has the timed run's end

        def on_finish(figures: RunFigures) -> None:
            view.finish(figures)
            finished.set()

        task = asyncio.ensure_future(acompare([_DriverTimed(), Streaming()], "hi", on_start=view.start,
                                              on_event=view.feed, on_finish=on_finish))
        assert await asyncio.to_thread(streaming.wait, 30) and await asyncio.to_thread(finished.wait, 30)
        sent.clear()  # a finished run's end goes out even before any hello

        async def hello_now() -> None:  # on ipyagent's loop, as a hello from the page is answered
            view._hello()

        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(hello_now(), background_loop()))
        hello = list(sent)
        release.set()
        await task
        return hello

    hello = asyncio.run(main())
    layout, *runs = hello
    assert layout["type"] == "compare" and layout["started"] == [[0, 0], [1, 0]]
    assert [row[0] for row in layout["table"]["rows"]] == ["fake:timed", "fake:streaming"]
    assert layout["table"]["rows"][0][1] == "0.50"  # the finished run's figures are in it already
    ended = {m["key"]: m for m in runs if m["type"] == "end"}
    assert list(ended) == ["0/0"] and ended["0/0"]["doc"]["status"] == "completed"
    (snapshot,) = [m for m in runs if m["type"] == "snapshot"]
    shown = "".join(op[2] for op in snapshot["doc"]["ops"] if op[0] == "text")
    assert snapshot["key"] == "1/0" and shown == "half an "  # the word still arriving is held back (redaction)


def test_the_run_picked_in_a_pane_while_it_streams_is_the_one_the_saved_record_shows(monkeypatch) -> None:
    """A "select" from the browser (a run tab or a table row clicked live) is kept by the kernel: the
    saved record carries it (its renderer and HTML fallback show that run), and a page reopened mid-run
    gets it with the layout. Anything but a run of the comparison is ignored."""
    import ipyagent.notebook.views.transcript_output as transcript_output
    from ipyagent.core import ComparisonRecord
    from ipyagent.notebook.render.transcript import comparison_to_html, shown_run

    view = CompareWidgetView(["fake:a", "fake:b"], 2)
    sent: list[dict] = []
    view.live.send = sent.append

    async def main() -> Comparison:
        return await acompare([_DriverTimed(), _DriverTimed()], "hi", runs=2, on_start=view.start,
                              on_event=view.feed, on_finish=view.finish)

    cmp = asyncio.run(main())
    for bad in ({"pane": 2, "run": 0}, {"pane": 0, "run": 2}, {"pane": -1, "run": 0}, {"pane": 0, "run": "1"},
                {"pane": True, "run": 0}, {"pane": 1}):
        view._on_msg(view.live, {"type": "select", **bad}, [])
    assert view.selected_runs() == [None, None]
    view._on_msg(view.live, {"type": "select", "pane": 0, "run": 1}, [])
    view._on_msg(view.live, {"type": "select", "pane": 0, "run": 0}, [])  # the last pick wins
    assert view.selected_runs() == [0, None]
    view._hello()
    assert sent[-1 - len(view.ended)]["selected"] == [0, None]  # the layout message, before the runs' ends

    updates: list[dict] = []
    monkeypatch.setattr(transcript_output, "update_display", lambda data, **kw: updates.append(data))
    record = transcript_output.finish_comparison("id", cmp, view=view)
    assert record.selected == [0, None]
    (saved,) = updates
    assert saved[transcript_output.COMPARISON_MIME_TYPE]["selected"] == [0, None]
    assert [shown_run(record, 0), shown_run(record, 1)] == [0, 1]  # pane b was not picked: its last run
    opened = re.findall(r'<details class="ipyagent-run"( open)?><summary>run (\d) of 2', comparison_to_html(record))
    assert opened == [(" open", "1"), ("", "2"), ("", "1"), (" open", "2")]

    plain = ComparisonRecord.model_validate({**record.to_json(), "selected": None})
    assert [shown_run(plain, 0), shown_run(plain, 1)] == [1, 1]  # none picked: each pane's last run
    gone = ComparisonRecord.model_validate({**record.to_json(), "selected": [5, None]})
    assert shown_run(gone, 0) == 1  # a picked run that is not saved: the last one
    untouched = CompareWidgetView(["fake:a"], 2)
    assert transcript_output.comparison_record(cmp, selected=untouched.selected_runs()).selected is None


def test_live_panes_and_table_name_each_provider_as_the_saved_record_does(monkeypatch) -> None:
    """Panes titled by alias ("quick") still name the provider (``fake:timed``) in their footers
    and table rows, live as in the saved record, so nothing changes when the record replaces them."""
    import ipyagent.notebook.views.transcript_output as transcript_output

    view = CompareWidgetView(["quick", "slow"], 1, ["fake:timed", "fake:timed"])
    view.live.send = lambda content, buffers=None: None
    cmp = asyncio.run(acompare([_DriverTimed(), _DriverTimed()], "hi", on_start=view.start, on_event=view.feed,
                               on_finish=view.finish))
    monkeypatch.setattr(transcript_output, "update_display", lambda data, **kw: None)
    record = transcript_output.finish_comparison("id", cmp, view=view, titles=["quick", "slow"])
    assert view.table.rows == record.table.rows and [r[0] for r in view.table.rows] == ["fake:timed"] * 2
    assert [view.run_views[(i, 0)].state.footer_figures()[0] for i in (0, 1)] == ["fake:timed"] * 2
    assert [e.transcript.provider for e in record.entries] == ["fake:timed"] * 2
    assert view.pane_titles()[0] == {"title": "quick", "resolved": "fake:timed"}  # the pane's title stays as typed
