"""Nothing runs forever (issue 11): a run's deadline over every turn and tool, a total limit per
response, tools that raise KeyboardInterrupt / SystemExit / BaseException, nested runs, and an
interruptible cell template."""

from __future__ import annotations

import asyncio
import json

import pytest
from IPython.core.error import UsageError

import ipyagent.agent.compare as compare_module
import ipyagent.agent.loop as loop_module
import ipyagent.agent.tool_steps as tool_steps
import ipyagent.drivers.base as drivers_base
import ipyagent.drivers.turn as drivers_turn
from ipyagent import Agent
from ipyagent.agent import defaults, transcript_of
from ipyagent.agent.compare import acompare
from ipyagent.core import ModelFailed, TextDelta
from ipyagent.core.transcript import Transcript
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.tools import toolbox

from ..support.stub_server import FIXTURES, Reply, StubServer, openai_text_reply
from ..support.virtual_clock import LoopServer, run_virtual

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


#: Seconds a scripted provider takes to answer (its status line), on the loop's clock.
THINK = 0.25


def _forever() -> Reply:
    """A stream that does not end before any deadline here: a text piece every 50 ms, for 100 s."""
    return openai_text_reply("tick " * 2_000, piece=5, delay=0.05, wait=THINK)


def _trickle() -> Reply:
    """One byte at a time, 0.2 s apart (the between-bytes timeout never trips)."""
    body = b"".join(openai_text_reply("slow words " * 200, piece=11).pieces)
    return Reply(pieces=[body[i:i + 1] for i in range(len(body))], delay=0.2, wait=THINK)


def _hang() -> Reply:
    """The first text, then silence."""
    reply = openai_text_reply("first words then nothing", piece=12)
    return Reply(pieces=[b"".join(reply.pieces[:2]), b": keep-alive\n\n"], delay=120, wait=THINK)


def _on_virtual_clock(monkeypatch, main):
    """`main()` on a loop whose clock jumps to the next timer, standing for ipyagent's own loop;
    the run's and the driver's `time.monotonic()` read that clock. Returns (what `main` returned,
    loop seconds it took): the deadlines are met exactly, whatever the machine's load."""

    async def timed():
        loop = asyncio.get_running_loop()
        started = loop.time()
        return await main(), loop.time() - started

    return run_virtual(timed, monkeypatch, loop_module, tool_steps, toolbox, drivers_base, drivers_turn,
                       compare_module, own_loop=True)


def at(seconds: float):
    """`seconds` on the virtual clock, to a nanosecond: its times are sums of floats (a wait of 0.05 s
    from a start near the machine's uptime), exact to its last bits only by luck; a piece is 50 ms."""
    return pytest.approx(seconds, abs=1e-9)


def _agent(server: LoopServer, model: str = "m", **kw) -> Agent:
    """An agent whose OpenAI Chat driver (``openai:MODEL``) talks to `server` in the process."""
    return Agent(OpenAIChatPromptDriver(model, api_key="sk-test", transport=server), **kw)


@pytest.mark.parametrize("reply, partial, first_token", [
    (_forever, "tick", THINK + 0.05),  # the role piece, then text 50 ms later
    (_trickle, "", None),  # no whole event by the deadline: no text, no first token
    (_hang, "first words", THINK),
], ids=["forever", "trickle", "hang"])
def test_a_run_ends_at_its_deadline_keeping_its_text(reply, partial, first_token, monkeypatch):
    agent, events = _agent(LoopServer(reply()), timeout=2), []
    result, took = _on_virtual_clock(monkeypatch, lambda: agent.arun("hi", on_event=events.append))
    assert took == at(2)  # at the deadline, not a piece later
    assert result.error is not None and result.error.type == "timeout" and "within 2 s" in result.error.message
    assert result.text.startswith(partial) and result.text == "".join(
        e.text for e in events if isinstance(e, TextDelta)
    )
    assert isinstance(events[-1], ModelFailed) and events[-1].error is result.error  # the view and run store see it
    assert agent.messages == []  # a failed run does not join the conversation

    # the footer keeps "first token" when text arrived, as measured on the run's clock
    assert transcript_of(result, events=events).timings.first_token_s == pytest.approx(first_token)


def test_an_interrupted_run_keeps_its_first_token_time(monkeypatch):
    agent, events = _agent(LoopServer(_hang())), []

    async def stop_after_first_text():
        first_text = asyncio.Event()

        def seen(event):
            events.append(event)
            if isinstance(event, TextDelta):
                first_text.set()

        task = asyncio.ensure_future(agent.arun("hi", on_event=seen))
        await first_text.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _, took = _on_virtual_clock(monkeypatch, stop_after_first_text)
    (result,) = agent.results

    t = transcript_of(result, events=events)
    assert t.status == "interrupted" and t.text.startswith("first words")
    assert took == at(THINK) and t.timings.first_token_s == at(THINK)


def test_the_response_limit_cuts_a_trickling_server_without_retrying(monkeypatch):
    server = LoopServer(_trickle())
    driver = OpenAIChatPromptDriver("m", api_key="k", transport=server, read_timeout=5, response_timeout=1.5)

    async def collect():
        return [e async for e in driver.stream(Agent(driver).prompt_stack("hi"))]

    events, took = _on_virtual_clock(monkeypatch, collect)
    failed = events[-1]
    assert (
        isinstance(failed, ModelFailed)
        and failed.error.type == "timeout"
        and "response_timeout" in failed.error.message
    )
    assert took == at(1.5) and failed.metadata["latency_s"] == at(1.5) and len(server.requests) == 1


def test_the_default_deadline_is_documented_and_switchable():
    assert defaults.DEFAULT_TIMEOUT == 600 and Agent("openai:m").timeout == 600
    with defaults.using(timeout=5):
        agent = Agent("openai:m")
        assert agent.timeout == 5
    assert agent.timeout == 600  # follows the default in force when it runs
    assert Agent("openai:m", timeout=7).timeout == 7
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="positive number of seconds"):
            Agent("openai:m", timeout=bad)


def test_compare_ends_a_hanging_provider_at_its_deadline_while_the_others_finish(monkeypatch):
    quick, slow = _agent(LoopServer(Reply.sse_file(TEXT)), "quick"), _agent(LoopServer(_hang()), "slow")
    result, took = _on_virtual_clock(monkeypatch, lambda: acompare([quick, slow], "hi", timeout=2))
    figures = {f.provider: f for f in result.figures}
    assert figures["openai:quick"].ok and figures["openai:quick"].error is None
    assert figures["openai:quick"].total_s == 0  # its answer came at once, not at the other's deadline
    assert figures["openai:slow"].error_type == "timeout" and "within 2 s" in figures["openai:slow"].error
    assert took == at(2) and result.wall_s == at(2)


def test_magics_take_a_timeout_and_provider_sets_the_session_default(ip, capsys):  # noqa: F811
    """The magics hand their deadline to the run, which says in its error which one it met (the
    deadline itself is timed on the virtual clock above; here the real loop runs it)."""
    with StubServer(_forever()) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1 --timeout 2")
        assert defaults.session_default().timeout == 2
        capsys.readouterr()
        ip.run_line_magic("provider", "")
        assert "timeout: 2 s per run" in capsys.readouterr().out
        ip.run_cell_magic("agent", "-o res", "hi")
        assert ip.user_ns["res"].error.type == "timeout" and ip.user_ns["res"].text.startswith("tick")
        assert "within 2 s" in ip.user_ns["res"].error.message  # the session's default
        ip.run_cell_magic("agent", "--timeout 1 -o res", "hi")
        assert "within 1 s" in ip.user_ns["res"].error.message  # the cell's own, over the session's
        ip.run_cell_magic("compare", "openai:m openai:m2 --timeout 1 -o cmp", "hi")
        errors = [(f.error_type, f.error) for f in ip.user_ns["cmp"].figures]
        assert len(errors) == 2 and all(kind == "timeout" and "within 1 s" in said for kind, said in errors)
    for magic, line in (("provider", "--timeout 0"), ("agent", "--timeout -1")):
        with pytest.raises(UsageError, match="--timeout must be a positive number"):
            (ip.run_line_magic(magic, line) if magic == "provider" else ip.run_cell_magic(magic, line, "hi"))
    ip.user_ns.pop("cmp", None)


class Fatal(BaseException):
    """An exception outside the Exception tree."""


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt("stop"), SystemExit(3), Fatal("fatal")], ids=lambda e: type(e).__name__
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_tool_raising_outside_exception_is_an_error_result(exc, kind):
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        raise exc

    async def aget_weather(city: str, state: str = "") -> str:
        """Weather now."""
        raise exc

    tool = get_weather if kind == "sync" else aget_weather
    tool.__name__ = "get_weather"
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result = Agent("openai:m", base_url=server.url, tools=[tool], timeout=10).run("weather?")
        second = server.requests[1]["body"]["messages"][-1]
    assert result.error is None and result.text  # the run went on to its answer
    [action] = result.actions
    assert action.output.type == "error" and action.output.exception_type == type(exc).__name__
    assert second["role"] == "tool" and (str(exc) or type(exc).__name__) in json.dumps(second)


def test_a_tool_running_its_own_agent_fails_at_once_and_another_agent_works():
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT), Reply.sse_file(TEXT)) as server:
        agents: dict[str, Agent] = {}

        def get_weather(city: str, state: str = "") -> str:
            """Weather now."""
            try:
                agents["outer"].run("again")
            except RuntimeError as exc:
                nested = str(exc)
            return nested + " | " + Agent("openai:other", base_url=server.url).run(f"weather in {city}").text

        agents["outer"] = Agent("openai:m", base_url=server.url, tools=[get_weather], timeout=10)
        result = agents["outer"].run("weather?")
    assert result.error is None  # a nested run that waited for itself would have met the deadline instead
    output = result.actions[0].output.to_text()
    assert "is running the tool that tried to run it again" in output and "I'm unable to" in output


@pytest.mark.notebook
def test_a_kernel_interrupt_stops_a_runaway_template_and_a_tool_interrupt_is_a_result(tmp_path):
    """In a real kernel (where %%agent cells await): an interrupt stops ``{% for %}`` over a
    huge range with one line and nothing sent; a tool raising KeyboardInterrupt ends as an
    error result; after each, the kernel answers the next cell."""
    from jupyter_client.manager import start_new_kernel

    from ..support.kernels import wait_reply
    from ..support.waiting import wait_until

    rendering = tmp_path / "rendering"  # written as the template starts its loop
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            def run(code: str, timeout: float = 30) -> tuple[dict, list[dict]]:
                return wait_reply(kc, kc.execute(code), timeout)

            setup = (f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1\n"
                     "def get_weather(city: str, state: str = '') -> str:\n    '''Weather now.'''\n"
                     "    raise KeyboardInterrupt('tool stop')\n"
                     f"def huge(n):\n    open({str(rendering)!r}, 'w').close()\n    return range(n)")
            assert run(setup)[0]["content"]["status"] == "ok"

            msg_id = kc.execute("%%agent\n{% for i in huge(10**10) %}x{% endfor %}")
            assert wait_until(rendering.exists), "the template never started rendering"
            km.interrupt_kernel()
            reply, iopub = wait_reply(kc, msg_id, 10)
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "UsageError"
            assert "interrupted while rendering" in reply["content"]["evalue"] and not server.requests
            assert run("1 + 1")[0]["content"]["status"] == "ok"  # the kernel answers: the loop did stop

            reply, _ = run("%%agent --tools get_weather -o res\nWeather?")
            assert reply["content"]["status"] == "ok"
            reply, iopub = run("print(res.error, res.actions[0].output.exception_type, res.actions[0].output.value)")
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
            assert out.strip() == "None KeyboardInterrupt tool stop"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def test_runs_one_after_another_in_one_task_are_not_nested():
    with StubServer(Reply.sse_file(TEXT)) as server:
        agent = Agent("openai:m", base_url=server.url)

        async def twice():
            return [await agent.arun("one"), await agent.arun("two")]

        from ipyagent.agent.loop_thread import run_sync

        results = run_sync(twice())  # on ipyagent's loop: both runs in one task, as a comparison's are
    assert [r.error for r in results] == [None, None] and len(server.requests) == 2


# -- size limits ---------------------------------------------------------------------------------


def test_an_event_over_the_size_limit_is_an_invalid_response_not_retried(monkeypatch):
    import ipyagent.drivers.decode as decode

    monkeypatch.setattr(decode, "MAX_EVENT_BYTES", 1024 * 1024)  # the real limit (64 MiB) read at 1 MiB
    big = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"x" * (2 * 1024 * 1024) + b'"}}]}\n\n'
    with StubServer(Reply(pieces=[big])) as server:
        result = Agent("openai:m", base_url=server.url, timeout=30).run("hi")
    assert result.error.type == "invalid_response" and "1048576 byte limit" in result.error.message
    assert len(server.requests) == 1  # not retried: 150 MB downloaded for nothing otherwise


def test_a_tool_result_over_the_limit_goes_to_task_memory_with_a_notice():
    from ipyagent.memory import TaskMemory
    from ipyagent.tools.off_prompt import HEAD_CHARS, MAX_RESULT_CHARS

    big = "".join(f"line {i}\n" for i in range(200_000))  # ~1.3 MB of text
    assert len(big) > MAX_RESULT_CHARS

    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        return big

    memory = TaskMemory()
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        result = Agent("openai:m", base_url=server.url, tools=[get_weather], memory=memory, timeout=30).run("weather?")
        sent = json.dumps(server.requests[1]["body"]["messages"][-1])
    [action] = result.actions
    assert action.output.type == "info" and "over the 1,000,000-character limit" in action.output.value
    [namespace] = list(memory)
    assert memory[namespace].to_text() == big  # kept once, in Task Memory
    assert big[:HEAD_CHARS] in action.output.value and big[HEAD_CHARS:HEAD_CHARS + 50] not in sent
    assert len(sent) < 10_000 and namespace in sent


# -- bad input at once ---------------------------------------------------------------------------


@pytest.mark.parametrize("given, said", [
    ("{tmp}", "is a folder"), ("{tmp}/missing/runs.sqlite", "does not exist"),
    ("{tmp}/notes.ipynb", "is not a SQLite file"), ("{tmp}/data.csv", "is not a SQLite file"),
])
def test_agent_store_checks_the_path_at_once(ip, tmp_path, given, said):  # noqa: F811
    (tmp_path / "notes.ipynb").write_text('{"cells": []}')
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    ip.run_line_magic("agent", "store")
    with pytest.raises(UsageError, match=said):
        ip.run_line_magic("agent", f"store {given.format(tmp=tmp_path)}")
    ip.run_line_magic("agent", f"store {tmp_path}/good.sqlite")  # a new file in a folder that exists is fine
    assert (tmp_path / "good.sqlite").read_bytes().startswith(b"SQLite format 3")


def test_alias_names_and_out_variables_are_checked(ip, capsys):  # noqa: F811
    before = defaults.session_default().provider
    for bad in ("''", "1fast"):
        ip.run_line_magic("provider", f"--alias {bad} openai:m")
        assert "use letters, digits" in capsys.readouterr().err
    assert defaults.session_default().provider == before  # nothing was set
    with pytest.raises(UsageError, match="a Python keyword"):
        ip.run_cell_magic("agent", "-o class", "hi")
    with pytest.raises(UsageError, match="a Python keyword"):
        ip.run_cell_magic("compare", "openai:m -o lambda", "hi")
    capsys.readouterr()
    with StubServer(Reply.sse_file(TEXT)) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "-o print", "hi")
    assert "-o print hides the builtin print()" in capsys.readouterr().err
    assert ip.user_ns.pop("print").text


def test_compare_panes_are_titled_as_typed_with_the_resolved_id_under():
    from ipyagent.notebook.views.compare_view import CompareWidgetView

    view = CompareWidgetView(["fast", "openai:m"], 1, ["openai:m", "openai:m"])
    assert view.pane_titles() == [
        {"title": "fast", "resolved": "openai:m"},
        {"title": "openai:m", "resolved": "openai:m"},
    ]


def _run_a_tool_that_never_returns(stop: str, tmp_path, monkeypatch):
    """A run whose model calls get_weather, a tool that waits forever, stopped while it runs:
    `stop` ``interrupted`` cancels the run (Stop, a kernel interrupt), ``timeout`` lets its
    1 s deadline pass (on the virtual clock). Events go to a run store as the magics record them."""
    from ipyagent.core import Message, TextBlock
    from ipyagent.memory import RunStore
    from ipyagent.memory.recorder import RunRecorder
    from ipyagent.tools import activity

    started = asyncio.Event()

    @activity
    async def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    store = RunStore(tmp_path / "runs.sqlite")
    recorder = RunRecorder(
        store, thread="t", provider="openai:m", prompt=Message(role="user", content=[TextBlock(text="hi")])
    )
    events: list = []

    def feed(event):
        recorder.feed(event)
        events.append(event)

    server = LoopServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT))
    agent = _agent(server, tools=[get_weather], timeout=1 if stop == "timeout" else None)

    async def main():
        task = asyncio.ensure_future(agent.arun("hi", on_event=feed))
        if stop == "timeout":
            return await task
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return agent.results[-1]

    try:
        result, _ = _on_virtual_clock(monkeypatch, main)
        if stop == "timeout":
            recorder.finish(result)
        else:
            recorder.interrupted()
        return result, events, store.nodes(recorder.run_id)
    finally:
        store.close()  # Python 3.13 warns of an SQLite connection left open (ResourceWarning)


@pytest.mark.parametrize("stop, words", [("interrupted", "interrupted"), ("timeout", "stopped at the deadline")])
def test_a_tool_cut_off_by_the_runs_end_reads_interrupted_not_not_run(stop, words, tmp_path, monkeypatch):
    """A call that had started when the run stopped is marked so (not "not run", which is a call
    never started): in the event, the transcript, its HTML and plain fallbacks, the terminal and
    the run store (whose replay gives it back)."""
    import io

    from ipyagent.core import ToolCallCompleted
    from ipyagent.memory.recorder import replay_events
    from ipyagent.notebook.render.transcript import to_html, to_text, tool_status
    from ipyagent.notebook.views.run_view import TextView, WidgetView

    result, events, nodes = _run_a_tool_that_never_returns(stop, tmp_path, monkeypatch)
    (cut,) = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert cut.stopped == stop and cut.is_error and cut.action.name == "get_weather"
    assert cut.duration_s == (1 if stop == "timeout" else 0)  # the tool started at once: it ran until the run's end
    t = transcript_of(result, events=events)
    (call,) = t.tool_calls
    assert call.stopped == stop and tool_status(call) == f"{words} after {cut.duration_s:.2f} s"
    assert f"{words} after" in to_html(t) and "not run" not in to_html(t) and "ipyagent-tool-error" not in to_html(t)
    assert f"· {words} after" in to_text(t)
    assert Transcript.from_json(t.to_json()).tool_calls[0].stopped == stop
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    for event in events:
        view.feed(event)
    assert f"[{words} get_weather, after {cut.duration_s:.2f} s]" in out.getvalue()
    (stored,) = [n for n in nodes if n["kind"] == "tool_result"]
    assert stored["failed"] and stored["data"]["stopped"] == stop
    (replayed,) = [e for e in replay_events(nodes) if isinstance(e, ToolCallCompleted)]
    assert replayed.stopped == stop
    live = WidgetView("openai:m")  # the live card, as a page (re)opened now is sent it
    for event in events:
        live.state.add(event)
    (card,) = [op[2] for op in live._snapshot() if op[0] == "tool" and "result" in op[2]]
    assert card["stopped"] == stop and card["status"] == "error"
