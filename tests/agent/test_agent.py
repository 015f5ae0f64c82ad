"""`ipyagent.Agent` over the stub server, and `run_sync` on the shared background loop."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import ipyagent
from ipyagent.agent import AgentResult, loop_thread, run_sync
from ipyagent.agent.loop_thread import background_loop
from ipyagent.core import ModelCompleted, ModelStarted, TextDelta

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
ERROR_401 = FIXTURES / "openai-compatible" / "mistral-error-401.json"
ERROR_401_HTTP = FIXTURES / "openai-compatible" / "mistral-error-401.http.json"
SECRET = "sk-test-agent-0123456789"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer(Reply.sse_file(TEXT)) as s:
        yield s


@pytest.fixture
def agent(server: StubServer) -> Iterator[ipyagent.Agent]:
    a = ipyagent.Agent("openai:m", base_url=f"{server.url}/v1", api_key_env="OPENAI_API_KEY")
    yield a
    run_sync(a.aclose())


def check_ok(result: AgentResult) -> None:
    exp = expected_from(TEXT)
    assert isinstance(result, AgentResult)
    assert result.ok and result.error is None
    assert result.text == exp.text
    assert result.usage.input_tokens == exp.usage["prompt_tokens"]
    assert result.usage.output_tokens == exp.usage["completion_tokens"]
    assert result.stop_reason == "end_turn"
    assert result.provider == "openai:m"


def test_run_from_sync_code(agent: ipyagent.Agent, server: StubServer) -> None:
    events: list[object] = []
    result = agent.run("What's the weather?", on_event=events.append)
    check_ok(result)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert request["body"]["messages"] == [{"role": "user", "content": "What's the weather?"}]
    assert isinstance(events[0], ModelStarted) and isinstance(events[-1], ModelCompleted)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.text
    assert agent.results == [result]
    assert "end_turn, 14 in / 30 out tokens" in repr(result)


def test_run_inside_a_running_event_loop(agent: ipyagent.Agent) -> None:
    """pydantic-ai #2077: a blocking run() called where an event loop is already running."""

    async def cell() -> tuple[AgentResult, asyncio.AbstractEventLoop]:
        return agent.run("What's the weather?"), asyncio.get_running_loop()

    loop = asyncio.new_event_loop()
    try:
        result, cell_loop = loop.run_until_complete(cell())
    finally:
        loop.close()
    check_ok(result)
    assert cell_loop is loop and cell_loop is not background_loop()


def test_arun_under_asyncio_run(agent: ipyagent.Agent, server: StubServer) -> None:
    async def main() -> list[AgentResult]:
        first = await agent.arun("one")
        second = await agent.arun("two")
        return [first, second]

    first, second = asyncio.run(main())
    check_ok(first)
    check_ok(second)
    # The second turn carries the first one.
    assert [m["role"] for m in server.requests[1]["body"]["messages"]] == ["user", "assistant", "user"]
    # The driver still works from sync code afterwards, although asyncio.run closed its loop.
    check_ok(agent.run("three"))


def test_a_finished_run_leaves_its_agent_and_run_to_reference_counting(agent: ipyagent.Agent) -> None:
    """An evaluation makes an agent a run (`Agent.fresh`): neither it nor its run may be in a reference
    cycle, or each run's ~55 objects wait for the garbage collector (its collections walk them all)."""
    check_ok(agent.fresh().run("warm-up"))
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds stays in gc.garbage, to be named
    try:
        fresh = agent.fresh()
        check_ok(fresh.run("What's the weather?"))
        del fresh
        gc.collect()
        left = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left & {"Agent", "OneRunAtATime", "AgentRun", "Sampler", "AgentResult", "Message", "Thread"}, left


def test_an_empty_conversation_is_not_fitted_to_the_window(
    agent: ipyagent.Agent, server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh agent (an evaluation's every run) has no turns to fit: no estimate of the prompt's tokens;
    a conversation with turns is fitted as before."""
    import ipyagent.agent.agent as agent_module

    fitted: list[int] = []
    history_for = agent_module.history_for
    monkeypatch.setattr(agent_module, "history_for", lambda thread, *a: fitted.append(1) or history_for(thread, *a))
    check_ok(agent.run("What's the weather?"))
    assert fitted == [] and server.requests[0]["body"]["messages"] == [
        {"role": "user", "content": "What's the weather?"}]
    check_ok(agent.run("And tomorrow?"))
    assert fitted == [1]
    assert [m["content"] for m in server.requests[1]["body"]["messages"]] == [
        "What's the weather?", expected_from(TEXT).text, "And tomorrow?"]


def test_a_run_without_off_prompt_tools_copies_no_options(
    agent: ipyagent.Agent, server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation's every run is a fresh agent's, with no off-prompt tool: its options, made for
    the run (`Agent.options`), are used as they are, not copied for the task memory nor for an
    empty history; a conversation with turns gets its history in a copy."""
    import ipyagent.agent.agent as agent_module

    copied: list[set[str]] = []
    replace = agent_module.replace
    monkeypatch.setattr(agent_module, "replace", lambda obj, **changes: copied.append(set(changes)) or replace(
        obj, **changes))
    check_ok(agent.run("What's the weather?"))
    assert copied == [] and server.requests[0]["body"]["messages"] == [
        {"role": "user", "content": "What's the weather?"}]
    check_ok(agent.run("And tomorrow?"))
    assert copied == [{"history"}]
    assert len(server.requests[1]["body"]["messages"]) == 3


def test_failed_turn_is_not_added_to_the_conversation() -> None:
    error = Reply.error_file(ERROR_401, ERROR_401_HTTP)
    with StubServer(error, Reply.sse_file(TEXT), error, Reply.sse_file(TEXT)) as server:
        agent = ipyagent.Agent(
            "openai:m", base_url=f"{server.url}/v1", api_key_env="OPENAI_API_KEY", system="Be brief."
        )
        try:
            failed = agent.run("first try")
            assert not failed.ok
            assert failed.error is not None and failed.error.type == "authentication"
            assert failed.error.status == 401
            assert failed.stop_reason is None and failed.text == ""
            assert agent.messages == []
            assert len(server.requests) == 1  # a 401 is not retried

            ok = agent.run("second try")
            check_ok(ok)
            assert [(m.role, m.text) for m in agent.messages] == [("user", "second try"), ("assistant", ok.text)]
            # The failed prompt was not sent again; the system prompt was, but is not stored.
            assert server.requests[1]["body"]["messages"] == [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "second try"},
            ]

            again = agent.run("third try")
            assert again.error is not None and again.error.type == "authentication"
            assert len(agent.messages) == 2

            agent.run("fourth try")
            sent = server.requests[3]["body"]["messages"]
            assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
            assert [m.get("content") for m in sent if m["role"] == "user"] == ["second try", "fourth try"]
            assert agent.results[0] is failed and len(agent.results) == 4

            agent.reset()
            assert agent.messages == [] and agent.system == "Be brief."
        finally:
            run_sync(agent.aclose())


def test_run_sync_rejects_the_background_loop_itself() -> None:
    async def inner() -> int:
        return 1

    async def nested() -> str:
        coro = inner()
        try:
            run_sync(coro)
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "use await" in run_sync(nested())


def _interrupted_run_sync(coro: Any, started: threading.Event) -> None:
    """Run `coro` with `run_sync` inside a running loop (as a cell does), and send SIGINT to this thread
    once `started` is set and the thread waits on run_sync's result; returns when KeyboardInterrupt
    came out of run_sync (TOOLCHAIN.md §7)."""
    main = threading.get_ident()

    def waiting_for_the_result() -> bool:  # the main thread is blocked in run_sync's future.result()
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "result" and "concurrent" in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    def interrupt_once_started() -> None:  # Ctrl-C while the cell waits on a started run
        if started.wait(30):
            while not waiting_for_the_result():
                started.wait(0.001)
            # To the main thread itself: a signal sent to the process may land on another thread,
            # and then the main thread's wait on the lock is never interrupted (the test hung).
            signal.pthread_kill(main, signal.SIGINT)

    async def outer() -> None:
        run_sync(coro)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    loop = asyncio.new_event_loop()
    try:
        threading.Thread(target=interrupt_once_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(outer())
    finally:
        loop.close()
        signal.signal(signal.SIGINT, previous)
    assert started.is_set()


def test_run_sync_interrupt_cancels_the_coroutine_and_waits_for_its_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bound is not what this test is about: a loaded machine must not make the cleanup look lost.
    monkeypatch.setattr(loop_thread, "CLEANUP_WAIT_S", 120.0)
    seen: list[str] = []
    started = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only the interrupt ends it
        except asyncio.CancelledError:
            for _ in range(3):  # cleanup that takes a few turns of the loop, like closing a stream
                await asyncio.sleep(0)
            seen.append("cancelled")
            raise

    _interrupted_run_sync(forever(), started)
    # run_sync waited for the coroutine's cleanup before re-raising.
    assert seen == ["cancelled"]

    # The background loop is still usable afterwards.
    async def answer() -> int:
        return 42

    assert run_sync(answer()) == 42


def test_an_interrupted_run_sync_stops_waiting_for_a_cleanup_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_thread, "CLEANUP_WAIT_S", 0.05)
    started, release, cleaned = threading.Event(), threading.Event(), threading.Event()

    async def hangs_in_cleanup() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            while not release.is_set():  # a cleanup stuck on something that never comes
                await asyncio.sleep(0.01)
            cleaned.set()
            raise

    _interrupted_run_sync(hangs_in_cleanup(), started)
    # The cell ended while the cleanup still waited: the bound, not the cleanup, ended the wait.
    assert not cleaned.is_set()
    release.set()
    assert cleaned.wait(30)
