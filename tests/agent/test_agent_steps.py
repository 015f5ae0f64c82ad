"""The agent loop's decisions, step by step, on scripted turns (tests/support/scripted_driver.py):
interrupts and deadlines keep what had arrived, limits stop the run, structured output is
asked again once, failures and refusals are results, usage and cost add up over turns, and
the events come in order. Deadlines and first-token times run on a virtual clock."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

import ipyagent.agent.loop as loop_module
import ipyagent.agent.tool_steps as tool_steps_module
from ipyagent import Agent, RunOptions
from ipyagent.agent import AgentResult
from ipyagent.core import (
    ErrorArtifact,
    HistoryTrimmed,
    InfoArtifact,
    Message,
    MessageError,
    ModelCompleted,
    ModelFailed,
    ProviderError,
    ReasoningDelta,
    StopKind,
    SystemBlock,
    TextArtifact,
    TextBlock,
    TextDelta,
    ToolCallCompleted,
    Usage,
)
from ipyagent.drivers import OUTPUT_TOOL, Cost, Ledger
from ipyagent.tools import BaseTool, FunctionTool, MCPServerError, activity

from ..support.scripted_driver import Script, ScriptedDriver, call, calls, text, usage
from ..support.virtual_clock import run_virtual

WEATHER_CALL = '{"city": "Paris"}'


async def get_weather(city: str) -> str:
    """Weather now."""
    return f"18 C in {city}"


def run(driver: ScriptedDriver, prompt: str = "Weather in Paris?", options: RunOptions | None = None,
        events: list[Any] | None = None, **agent_kw: Any) -> AgentResult:
    """One run of an `Agent` over `driver`, on a fresh loop (the path `Agent.arun` takes on the background loop)."""
    agent = Agent(driver, **agent_kw)
    return asyncio.run(agent._arun(prompt, options or RunOptions(), (events if events is not None else []).append))


def on_virtual_clock(monkeypatch: pytest.MonkeyPatch, main: Callable[[], Awaitable[Any]]) -> Any:
    """`main()` on a loop whose clock jumps to the next timer (the loop's `time.monotonic` reads it)."""
    return run_virtual(main, monkeypatch, loop_module, tool_steps_module)


def interrupt_when_held(
    agent: Agent, driver: ScriptedDriver, prompt: str, events: list[Any]
) -> Callable[[], Awaitable[AgentResult]]:
    """A run cancelled (a kernel interrupt) once the driver holds its stream; its result is the agent's last."""

    async def main() -> AgentResult:
        task = asyncio.create_task(agent._arun(prompt, RunOptions(), events.append))
        held = asyncio.create_task(driver.held.wait())
        await asyncio.wait({task, held}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():  # fail now rather than wait forever for a hold that will not come
            held.cancel()
            pytest.fail(f"the run ended before it was interrupted: {task.result()!r}")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return agent.results[-1]

    return main


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


# -- calls the model wrote badly go back to it -------------------------------------------------------


def test_calls_written_badly_get_their_error_as_result_the_others_run_and_the_run_goes_on() -> None:
    """Arguments that are not JSON failed the whole run (pydantic-ai sends a retry prompt instead): each
    such call, one naming an unknown tool or none, gets an error result naming it (position, id) for
    the model; the other calls of the reply run; the next turn answers."""
    ran: list[str] = []

    async def get_weather(city: str) -> str:
        """Weather now."""
        ran.append(city)
        return f"18 C in {city}"

    driver = ScriptedDriver(
        calls(
            call("c1", "get_weather", '{"city": "Par', 0),
            call("c2", "get_weather", WEATHER_CALL, 1),
            call("c3", "nope", "{}", 2),
            call("c4", "", "{}", 3),
        ),
        text("Paris: 18 C."),
    )
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather])
    assert result.ok and result.text == "Paris: 18 C." and ran == ["Paris"]
    done = {e.action.tag: e for e in events if isinstance(e, ToolCallCompleted)}
    assert list(done) == ["c1", "c2", "c3", "c4"] and [done[t].is_error for t in done] == [True, False, True, True]
    again = "call the tool again with its name and its arguments as one JSON object"
    assert (
        done["c1"].result.value
        == "tool call 1 (id 'c1', tool 'get_weather') was not run: its arguments are not valid JSON "
        f"""(Unterminated string starting at): '{{"city": "Par'; {again}"""
    )
    assert (
        done["c3"].result.value == "tool call 3 (id 'c3') was not run: there is no tool 'nope'; available: get_weather"
    )
    assert done["c4"].result.value == f"tool call 4 (id 'c4') was not run: it names no tool; {again}"
    assert kinds(events).count("model_completed") == 2 and events[kinds(events).index("model_completed")].more_turns
    # the model is sent its calls (arguments it wrote badly as {}) and every result, the errors as errors
    reply, results = driver.stacks[1].messages[-2:]
    assert [(a.name, a.input) for a in reply.tool_calls] == [("get_weather", {}), ("get_weather", {"city": "Paris"}),
                                                            ("nope", {}), ("invalid_tool_call", {})]
    assert [(r.action.tag, r.is_error) for r in results.tool_results] == [
        ("c1", True),
        ("c2", False),
        ("c3", True),
        ("c4", True),
    ]
    assert all(done[r.action.tag].result.value in r.text for r in results.tool_results)


def test_a_call_written_badly_needing_approval_is_not_put_to_the_user() -> None:
    asked: list[Any] = []

    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    driver = ScriptedDriver(calls(call("c1", "delete_file", '{"path": ', 0)), text("ok"))
    result = run(
        driver,
        tools=[FunctionTool(delete_file, requires_approval=True)],
        approve=lambda action: asked.append(action) or True,
    )
    assert (
        result.ok
        and asked == []
        and result.actions[0].output.value.startswith("tool call 1 (id 'c1', tool 'delete_file')")
    )


# -- an on_event callback that raises ----------------------------------------------------------------


def _raising_on(kind: str, seen: list[Any], nth: int = 1) -> Callable[[Any], None]:
    """An on_event that keeps what it sees and raises at the `nth` event of `kind`."""

    def on_event(event: Any) -> None:
        seen.append(event)
        if kinds(seen).count(kind) == nth and event.type == kind:
            raise KeyError("widget\ngone")

    return on_event


def test_an_on_event_raising_mid_reply_ends_the_run_in_one_line_and_keeps_the_partial() -> None:
    """User code raising in on_event lost the reply (the exception left the run): the run ends with a
    ``callback`` error naming it, the text so far kept as a failed partial, the callback not called again."""
    driver, seen = ScriptedDriver(Script([TextDelta(0, "Hel"), TextDelta(0, "lo"), TextDelta(0, " world")])), []
    agent = Agent(driver)
    result = asyncio.run(agent._arun("hi", RunOptions(), _raising_on("text_delta", seen, 2)))
    assert result.error is not None and (result.error.type, result.error.retryable) == ("callback", False)
    assert (
        result.error.message
        == "on_event raised KeyError: 'widget\\ngone'; the run stopped there, the text so far is kept"
    )
    assert result.message.text == "Hello" and result.message.status == "failed"
    assert [m.role for m in result.messages] == ["user", "assistant"] and result.messages[-1] is result.message
    assert result.new_messages == [] and agent.messages == [] and not result.ok
    assert kinds(seen) == ["model_started", "text_delta", "text_delta"]  # not called again, not even with the failure


def test_the_callback_s_exception_is_named_in_at_most_300_characters() -> None:
    from ipyagent.agent.loop import EventCallbackError

    def shown(exc: Exception) -> str:
        return (
            EventCallbackError(exc)
            .as_provider_error()
            .message.removeprefix("on_event raised ")
            .split("; the run stopped")[0]
        )

    exact = ValueError("v" * (300 - len("ValueError: ")))
    assert shown(exact) == f"ValueError: {exact}"  # 300 characters: whole
    longer = ValueError("v" * (301 - len("ValueError: ")))
    assert shown(longer) == f"ValueError: {longer}"[:299] + "…" and len(shown(longer)) == 300
    assert EventCallbackError(exact).as_provider_error().retryable is False  # the same callback would raise again


def test_an_on_event_raising_after_a_reply_stops_the_run_before_its_tools() -> None:
    ran: list[str] = []

    async def get_weather(city: str) -> str:
        """Weather now."""
        ran.append(city)
        return "18 C"

    driver, seen = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text("done")), []
    agent = Agent(driver, tools=[get_weather])
    result = asyncio.run(agent._arun("hi", RunOptions(), _raising_on("model_completed", seen)))
    assert result.error is not None and result.error.type == "callback" and ran == [] and len(driver.stacks) == 1
    assert result.message is result.messages[-1] and result.message.tool_calls[0].tag == "c1"
    assert result.message.complete and result.message.error is None  # a whole reply, kept as it came
    assert kinds(seen) == ["model_started", "tool_call_delta", "model_completed"]


def test_an_on_event_raising_as_a_stopped_run_ends_does_not_replace_its_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = ScriptedDriver(Script([TextDelta(0, "Hel"), TextDelta(0, "lo")], hold_after=1))
    agent, seen = Agent(driver), []
    on_event = _raising_on("model_failed", seen)

    async def main() -> AgentResult:
        task = asyncio.create_task(agent._arun("hi", RunOptions(timeout=5), on_event))
        return await task

    result = on_virtual_clock(monkeypatch, main)  # held until the deadline
    assert result.error is not None and result.error.type == "timeout" and result.message.text == "Hel"
    assert kinds(seen)[-1] == "model_failed"  # told, and its exception there ignored: the run was over


# -- an interrupted run keeps what had arrived ---------------------------------------------------------


def test_an_interrupt_mid_reply_keeps_its_reasoning_text_and_tool_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    streamed = [
        ReasoningDelta(0, "Paris, so metric", signature="sig-1"),
        TextDelta(1, "Let me look "),
        TextDelta(1, "that up."),
        call("c1", "get_weather", WEATHER_CALL, 2),
        call("c2", "get_weather", '{"city": "Lon', 3),
    ]
    driver = ScriptedDriver(Script(streamed, stop=StopKind.tool_use, wait_s=1.5, hold_after=len(streamed)))
    agent, events = Agent(driver, tools=[get_weather]), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Weather in Paris and London?", events))

    assert result.interrupted and result.error is None and not result.ok and result.stop_reason is None
    message = result.message
    assert (
        message.role == "assistant"
        and message.reasoning == "Paris, so metric"
        and message.content[0].signature == "sig-1"
    )
    assert message.text == "Let me look that up."
    [kept] = message.tool_calls
    assert (kept.tag, kept.name, kept.input, kept.output) == ("c1", "get_weather", {"city": "Paris"}, None)
    assert message.status == "interrupted" and message.error is None
    assert message.metadata == {
        "partial_tool_calls": [{"id": "c2", "name": "get_weather", "raw_arguments": '{"city": "Lon'}]
    }
    assert [m.role for m in result.messages] == ["user", "assistant"] and result.messages[1] is message
    assert result.metadata == {"ttft_s": 1.5}  # the first delta came 1.5 s into the turn
    assert result.new_messages == [] and agent.messages == []  # an interrupted run does not join the conversation
    assert result.actions == []  # nothing ran
    assert kinds(events) == [
        "model_started",
        "reasoning_delta",
        "text_delta",
        "text_delta",
        "tool_call_delta",
        "tool_call_delta",
    ]


def test_an_interrupt_while_a_tool_runs_keeps_the_reply_that_asked_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    started = asyncio.Event()

    async def slow_weather(city: str) -> str:
        """Weather, slowly."""
        started.set()
        await asyncio.Event().wait()  # never returns: the run is interrupted meanwhile
        return "unreachable"

    driver = ScriptedDriver(calls(call("c1", "slow_weather", WEATHER_CALL), wait_s=0.75, usage=usage(10, 3),
                                  cost={"input_usd": 0.01, "output_usd": 0.02, "total_usd": 0.03}))
    driver.held = started  # the run is cancelled once the tool has started
    agent, events = Agent(driver, tools=[slow_weather]), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Weather?", events))

    assert result.interrupted and [m.role for m in result.messages] == ["user", "assistant"]
    assert result.message is result.messages[1] and result.message.tool_calls[0].tag == "c1"
    assert result.message.status == "interrupted"
    assert result.metadata == {"ttft_s": 0.75}
    # the completed turn stays billed
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 3)
    assert result.cost == Cost(0.01, 0.02, 0.03)
    assert (
        kinds(events) == ["model_started", "tool_call_delta", "model_completed", "tool_call_completed"]
        and events[2].more_turns
    )
    # the call that was running is marked cut off (not "not run"), with the seconds it had run
    (cut,) = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert cut.stopped == "interrupted" and cut.is_error and cut.action.tag == "c1"
    assert cut.duration_s == 0.0  # cancelled as it started, on the virtual clock
    assert cut.result.value == "interrupted while the tool ran; it may not have finished"


def test_an_interrupt_before_the_next_reply_arrives_keeps_the_last_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = ScriptedDriver(
        calls(call("c1", "get_weather", WEATHER_CALL)),
        calls(call("c2", "get_weather", '{"city": "Lyon"}')),
        Script(hold_after=0),
    )
    agent, events = Agent(driver, tools=[get_weather]), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Weather?", events))

    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert (
        result.message is result.messages[3] and result.message.tool_calls[0].tag == "c2"
    )  # the latest reply, not the first
    assert [a.tag for a in result.actions] == ["c1", "c2"]
    assert result.metadata == {"ttft_s": 0.0}
    assert kinds(events)[-1] == "model_started"


def test_an_interrupt_before_anything_arrived_has_an_empty_reply_and_no_first_token_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = ScriptedDriver(Script(hold_after=0))
    agent, events = Agent(driver), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Hello?", events))

    assert result.interrupted and result.message.role == "assistant" and result.message.content == []
    assert [m.role for m in result.messages] == ["user"]  # no empty reply is added
    assert result.metadata == {}
    assert kinds(events) == ["model_started"]


# -- the deadline ------------------------------------------------------------------------------------


def test_the_deadline_ends_a_stalled_reply_as_timeout_keeping_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = ScriptedDriver(Script([TextDelta(0, "first words")], wait_s=0.5, hold_after=1))  # never released
    agent, events = Agent(driver, timeout=2.5), []
    result = on_virtual_clock(monkeypatch, lambda: agent._arun("Hello?", RunOptions(), events.append))

    error = result.error
    assert error is not None and error.type == "timeout" and not error.retryable
    assert error.message == ("the run did not finish within 2.5 s (timeout); the text so far is kept; "
                             "give it longer with --timeout SECONDS (timeout= in Python)")
    assert not result.interrupted and result.stop_reason is None
    assert result.text == "first words" and result.message.metadata == {} and result.message.status == "failed"
    assert result.message.error == MessageError.of(result.error)
    assert [m.role for m in result.messages] == ["user", "assistant"] and result.messages[1] is result.message
    assert result.metadata == {"ttft_s": 0.5}
    # the view and the run store see the end as a failure carrying the partial reply
    failed = events[-1]
    assert isinstance(failed, ModelFailed) and failed.error is error and failed.partial is result.message
    assert failed.metadata == {"ttft_s": 0.5}
    assert agent.messages == [] and agent.results == [result]


def test_the_deadline_cuts_a_running_tool_and_keeps_the_reply_that_called_it(monkeypatch: pytest.MonkeyPatch) -> None:
    async def stuck(city: str) -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return "unreachable"

    driver = ScriptedDriver(
        Script([TextDelta(0, "Checking. "), call("c1", "stuck", WEATHER_CALL, 1)], stop=StopKind.tool_use, wait_s=1)
    )
    agent, events = Agent(driver, tools=[stuck], timeout=3), []
    result = on_virtual_clock(monkeypatch, lambda: agent._arun("Weather?", RunOptions(), events.append))

    assert result.error is not None and result.error.type == "timeout" and "within 3 s" in result.error.message
    assert result.text == "Checking. " and result.message.tool_calls[0].tag == "c1"
    assert result.message.status == "failed" and result.message.error.type == "timeout"
    assert [m.role for m in result.messages] == ["user", "assistant"]
    # the running call is marked as cut by the deadline (not "not run"), before the run's failure
    assert kinds(events)[-3:] == ["model_completed", "tool_call_completed", "model_failed"]
    assert events[-2].stopped == "timeout" and events[-2].action.tag == "c1" and events[-2].is_error
    assert events[-2].result.value == "stopped at the run's deadline while the tool ran; it may not have finished"
    assert events[-2].duration_s == 2.0  # from its start, 1 s into the run, to the 3 s deadline


# -- limits ----------------------------------------------------------------------------------------


def test_max_steps_stops_after_that_many_turns_with_the_last_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = ScriptedDriver(
        *(calls(call(f"c{n}", "get_weather", WEATHER_CALL), usage=usage(10 * n, n)) for n in (1, 2, 3, 4))
    )
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather], max_steps=3)

    assert len(driver.stacks) == 3
    error = result.error
    assert error is not None and error.type == "max_steps" and not error.retryable
    assert error.message == "stopped after 3 model turns (max_steps); the tool results so far are kept"
    assert result.message.tool_calls[0].tag == "c3"  # the third reply, whose results are kept after it
    assert [m.role for m in result.messages] == ["user"] + ["assistant", "tool"] * 3
    assert [a.tag for a in result.actions] == ["c1", "c2", "c3"] and all(
        a.output == TextArtifact(value="18 C in Paris") for a in result.actions
    )
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (60, 6, 66)
    assert isinstance(events[-1], ModelFailed) and events[-1].error is error and events[-1].partial is result.message
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [True, True, True]


def test_one_step_asks_once() -> None:
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)))
    result = run(driver, tools=[get_weather], max_steps=1)
    assert len(driver.stacks) == 1 and result.error is not None and result.error.type == "max_steps"
    assert result.message.tool_calls[0].tag == "c1" and result.actions[0].output == TextArtifact(value="18 C in Paris")


# -- a reply cut off by max_tokens ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments", [WEATHER_CALL, '{"city": "Par'], ids=["whole-call", "call-cut-inside-its-arguments"]
)
def test_a_tool_call_cut_off_by_max_tokens_is_not_run(arguments: str) -> None:
    ran: list[str] = []

    async def weather(city: str) -> str:
        """Weather now."""
        ran.append(city)
        return "18 C"

    driver = ScriptedDriver(
        Script([TextDelta(0, "Looking"), call("c1", "weather", arguments, 1)], stop=StopKind.max_tokens),
        text("never asked"),
    )
    events: list[Any] = []
    result = run(driver, events=events, tools=[weather])

    assert ran == [] and len(driver.stacks) == 1
    error = result.error
    assert error is not None and error.type == "invalid_response" and not error.retryable
    assert error.message == ("the model ran out of output tokens while writing a tool call; "
                             "raise max_completion_tokens or ask for less")
    assert result.text == "Looking" and [m.role for m in result.messages] == ["user", "assistant"]
    completed = [e for e in events if isinstance(e, ModelCompleted)]
    assert [e.more_turns for e in completed] == [False] and kinds(events)[-1] == "model_failed"


def test_text_cut_off_by_max_tokens_is_still_the_answer() -> None:
    result = run(ScriptedDriver(text("A long answer that stops mid", stop=StopKind.max_tokens)))
    assert result.ok and result.text == "A long answer that stops mid" and result.stop_reason == "max_tokens"


def test_calls_run_whatever_the_stop_reason_says() -> None:
    driver = ScriptedDriver(Script([call("c1", "get_weather", WEATHER_CALL)], stop=StopKind.end_turn), text("18 C."))
    result = run(driver, tools=[get_weather])
    assert result.ok and len(driver.stacks) == 2 and result.actions[0].output == TextArtifact(value="18 C in Paris")


# -- failures and refusals are results --------------------------------------------------------------


def test_a_turn_failing_mid_stream_ends_the_run_billed_with_its_partial_reply() -> None:
    failure = ProviderError("server", "upstream reset", status=502)
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL), usage=usage(10, 3)),
                            Script([TextDelta(0, "It is")], usage=usage(7, 1), error=failure, metadata={"attempts": 1}),
                            text("never asked"))
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather])

    assert len(driver.stacks) == 2 and result.error is failure and result.stop_reason is None
    assert result.text == "It is" and result.metadata == {"attempts": 1}
    assert (result.usage.input_tokens, result.usage.output_tokens) == (17, 4)  # the partial turn's usage counts too
    assert events[-1].error is failure and events[-1].partial is result.message
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [True]


COST_1 = {"input_usd": 0.01, "output_usd": 0.02, "total_usd": 0.03}
COST_2 = {"input_usd": 0.001, "output_usd": 0.002, "total_usd": 0.003}


def test_a_failed_turn_keeps_its_partial_reply_in_the_run_but_not_in_the_conversation() -> None:
    failure = ProviderError("server", "upstream reset", status=502)
    driver = ScriptedDriver(
        calls(call("c1", "get_weather", WEATHER_CALL), cost=COST_1),
        Script(
            [ReasoningDelta(0, "hm", "sig"), TextDelta(1, "It is"), call("c2", "get_weather", '{"ci', 2)],
            usage=usage(7, 1),
            cost=COST_2,
            error=failure,
        ),
        text("Paris is sunny."),
    )
    agent = Agent(driver, tools=[get_weather])
    result = asyncio.run(agent._arun("Weather in Paris?", RunOptions(), [].append))

    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    partial = result.messages[-1]
    assert partial is result.message and partial.status == "failed"
    assert (partial.reasoning, partial.content[0].signature, partial.text) == ("hm", "sig", "It is")
    assert result.new_messages == [] and agent.messages == []  # never joins the conversation as if complete
    assert result.cost == Cost(0.011, 0.022, 0.033)  # the failed turn's billed usage has its price
    # the next run starts from the last completed turn: the failed one is not sent
    again = asyncio.run(agent._arun("And Nice?", RunOptions(), [].append))
    assert again.ok and [m.text for m in driver.stacks[-1].messages] == ["And Nice?"]


def test_a_failed_turn_with_nothing_arrived_or_billed_adds_no_message_and_keeps_the_cost() -> None:
    failure = ProviderError("authentication", "bad key", status=401)
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL), cost=COST_1, usage=usage(10, 3)),
                            Script(usage=None, error=failure))
    result = run(driver, tools=[get_weather])
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert result.message.content == [] and result.message is not result.messages[-1]
    assert result.cost == Cost(0.01, 0.02, 0.03) and (result.usage.input_tokens, result.usage.output_tokens) == (10, 3)
    unpriced = run(
        ScriptedDriver(Script([TextDelta(0, "a")], usage=usage(5, 1), error=failure))
    )  # billed, price unknown
    assert unpriced.cost is None and unpriced.usage.input_tokens == 5 and unpriced.messages[-1].text == "a"


def test_a_request_refused_before_sending_is_a_failed_turn() -> None:
    refusal = ProviderError("unsupported_capability", "m takes no images", retryable=False)
    events: list[Any] = []
    result = run(ScriptedDriver(Script(refuse=refusal)), events=events)

    nothing = Message(role="assistant", status="failed", error=MessageError.of(refusal))
    assert result.error is refusal and result.message == nothing and result.usage.total_tokens == 0
    [failed] = events
    assert isinstance(failed, ModelFailed) and failed.error is refusal and failed.partial == nothing


def test_a_spent_budget_starts_no_run() -> None:
    spent = Ledger()
    spent.budget = 0.0  # spent: the total (0) has reached it
    driver, events = ScriptedDriver(text("never asked")), []
    result = run(driver, events=events, options=RunOptions(ledger=spent))  # the budget comes with the run
    assert driver.stacks == [] and result.error is not None and result.error.type == "budget"
    assert [e.error for e in events] == [result.error] and result.message == Message(role="assistant")
    fresh = ScriptedDriver(text("asked"))
    assert run(fresh, options=RunOptions(ledger=Ledger())).ok and len(fresh.stacks) == 1  # another ledger, no budget


def test_a_run_records_its_billed_turns_in_its_ledger_replays_excepted() -> None:
    """The run, not the driver, records what it spent, in the ledger it was given
    (`RunOptions.ledger`; by default the session's, `Defaults.ledger`)."""
    billed = Usage(input_tokens=3, output_tokens=4)
    ledger = Ledger()
    price = {"input_usd": 0.1, "output_usd": 0.2, "total_usd": 0.3}
    paid = Script(deltas=[TextDelta(0, "ok")], usage=billed, cost=price,
                  metadata={"provider": "scripted", "model": "m-1"})
    assert run(ScriptedDriver(paid), options=RunOptions(ledger=ledger)).ok
    assert ledger.turns == [("scripted", "m-1", 0.3, 3, 4)]
    replayed = Script(deltas=[TextDelta(0, "ok")], usage=billed, cost=None, metadata={"replayed": True})
    assert run(ScriptedDriver(replayed), options=RunOptions(ledger=ledger)).ok and len(ledger.turns) == 1
    broke = Script(deltas=[TextDelta(0, "o")], usage=billed, error=ProviderError("server", "down"),
                   cost={"input_usd": 0.0, "output_usd": 0.1, "total_usd": 0.1}, metadata={"provider": "scripted"})
    assert run(ScriptedDriver(broke), options=RunOptions(ledger=ledger)).error.type == "server"
    assert ledger.turns[-1] == ("scripted", "", 0.1, 3, 4)  # billed before it failed: spent all the same


def test_a_tool_source_that_cannot_start_fails_the_run_before_sending() -> None:
    class Broken(BaseTool):
        async def prepare(self) -> None:
            raise MCPServerError("the MCP server 'files' did not start: npx not found")

        @activity
        def read(self, path: str) -> str:
            """Read a file."""
            return path

    driver, events = ScriptedDriver(text("never asked")), []
    result = run(driver, events=events, tools=[Broken()])
    error = result.error
    assert driver.stacks == [] and error is not None and error.type == "tool_unavailable" and not error.retryable
    assert error.message == "the MCP server 'files' did not start: npx not found"
    assert [e.error for e in events] == [error] and result.message == Message(role="assistant")


def test_a_failing_tool_is_an_error_result_and_the_run_goes_on() -> None:
    async def get_weather(city: str) -> str:
        """Weather now."""
        raise ConnectionError(f"no route to the weather service for {city}")

    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text("The service is down."))
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather])

    assert result.ok and result.text == "The service is down."
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.is_error and isinstance(done.result, ErrorArtifact) and done.approval is None
    [block] = driver.stacks[1].messages[-1].tool_results
    assert block.is_error and "no route to the weather service for Paris" in block.text and block.action.tag == "c1"


# -- approval --------------------------------------------------------------------------------------


@pytest.mark.parametrize("verdict, approval, sent", [(True, "approved", "18 C in Paris"),
                                                     (False, "denied", "denied by the user; the tool was not run")])
def test_the_verdict_decides_the_call_and_is_on_its_event(verdict: bool, approval: str, sent: str) -> None:
    asked_on: list[int] = []

    def approve(action: Any) -> bool:  # a blocking callback (input(), a dialog)
        asked_on.append(threading.get_ident())
        return verdict

    loop_threads: list[int] = []

    async def main(agent: Agent, events: list[Any]) -> AgentResult:
        loop_threads.append(threading.get_ident())
        return await agent._arun("Weather?", RunOptions(), events.append)

    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text("Done."))
    agent, events = Agent(driver, tools=[FunctionTool(get_weather, requires_approval=True)], approve=approve), []
    result = asyncio.run(main(agent, events))

    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.approval == approval and done.result.to_text() == sent and done.is_error is (not verdict)
    assert driver.stacks[1].messages[-1].tool_results[0].text == sent and result.actions[0].output is done.result
    assert len(asked_on) == 1 and asked_on != loop_threads  # asked off the loop: a dialog does not stall other runs


def test_a_call_approved_in_advance_is_not_asked_and_says_so_on_its_event() -> None:
    """A tool that would ask but was let through by an option (``--approve-runs``): run, marked ``preapproved``."""

    class Preapproved(FunctionTool):
        def preapproved(self, activity: str) -> bool:
            return True

    asked: list[Any] = []
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text("Done."))
    agent, events = Agent(driver, tools=[Preapproved(get_weather)], approve=asked.append), []
    asyncio.run(agent._arun("Weather?", RunOptions(), events.append))
    [done] = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.approval == "preapproved" and done.result.to_text() == "18 C in Paris" and asked == []


# -- structured output -------------------------------------------------------------------------------


class Weather(BaseModel):
    city: str
    celsius: int


def test_an_invalid_output_is_asked_for_again_once_then_reported() -> None:
    driver = ScriptedDriver(text("It is warm.", usage=usage(10, 2)), text('{"city": "Paris"}', usage=usage(20, 3)),
                            text('{"city": "Paris", "celsius": 18}'))
    events: list[Any] = []
    result = run(driver, options=RunOptions(output_schema=Weather), events=events, max_steps=10)

    assert len(driver.stacks) == 2  # asked again once, not until max_steps
    correction = driver.stacks[1].messages[-1]
    assert correction.role == "user" and correction.text.startswith(
        "Your reply could not be used: the reply is not JSON"
    )
    error = result.error
    assert error is not None and error.type == "invalid_output" and not error.retryable
    assert error.message.startswith(
        "the reply did not match Weather, even when asked again: the output does not match Weather"
    )
    assert "celsius" in error.message
    assert error.raw == {"text": '{"city": "Paris"}', "tool_input": None}
    assert result.output is None and result.text == '{"city": "Paris"}'
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 5)
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [True, False]
    assert isinstance(events[-1], ModelFailed) and events[-1].error is error


def test_output_retries_count_down_from_their_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_module, "OUTPUT_RETRIES", 2)
    driver = ScriptedDriver(
        text("warm"), text("still warm"), text("very warm"), text('{"city": "Paris", "celsius": 18}')
    )
    result = run(driver, options=RunOptions(output_schema=Weather))
    assert len(driver.stacks) == 3 and result.error is not None and result.error.type == "invalid_output"


def test_an_output_tool_call_gets_its_verdict_and_the_valid_one_is_the_output() -> None:
    driver = ScriptedDriver(calls(call("o1", OUTPUT_TOOL, '{"city": "Paris"}')),
                            calls(call("o2", OUTPUT_TOOL, '{"city": "Paris", "celsius": 18}')))
    events: list[Any] = []
    result = run(driver, options=RunOptions(output_schema=Weather, output_strategy="tool"), events=events)

    assert result.ok and result.output == Weather(city="Paris", celsius=18) and result.stop_reason == "tool_use"
    verdicts = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert [v.action.tag for v in verdicts] == ["o1", "o2"] and [v.duration_s for v in verdicts] == [0.0, 0.0]
    assert isinstance(verdicts[0].result, ErrorArtifact) and "celsius" in verdicts[0].result.value
    assert verdicts[1].result == InfoArtifact(value="accepted as the final result")
    [retry_result] = driver.stacks[1].messages[-1].tool_results  # the invalid call answered, for a valid request
    assert retry_result.is_error and retry_result.action.tag == "o1"
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [True, False]
    # the conversation keeps the outputs as JSON text, not calls of a tool later turns do not declare
    assert [m.role for m in result.new_messages] == ["user", "assistant", "user", "assistant"]
    assert result.new_messages[-1].content == [TextBlock(text='{"city": "Paris", "celsius": 18}')]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


def test_with_an_output_schema_a_real_tool_call_still_runs_first() -> None:
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text('{"city": "Paris", "celsius": 18}'))
    result = run(driver, options=RunOptions(output_schema=Weather), tools=[get_weather])
    assert result.ok and result.output == Weather(city="Paris", celsius=18) and len(driver.stacks) == 2
    assert result.actions[0].output == TextArtifact(value="18 C in Paris")


def test_a_valid_first_output_ends_the_run_at_once() -> None:
    driver = ScriptedDriver(text('{"city": "Paris", "celsius": 18}'), text("never asked"))
    events: list[Any] = []
    result = run(driver, options=RunOptions(output_schema=Weather), events=events)
    assert result.ok and result.output == Weather(city="Paris", celsius=18) and len(driver.stacks) == 1
    assert result.text == '{"city": "Paris", "celsius": 18}' and result.message.role == "assistant"
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [False]


# -- usage, cost, events --------------------------------------------------------------------------------


def test_usage_and_cost_add_up_over_turns_and_events_come_in_order() -> None:
    driver = ScriptedDriver(
        Script(
            [
                TextDelta(0, "Let me check."),
                call("c1", "get_weather", WEATHER_CALL, 1),
                call("c2", "get_weather", '{"city": "Nice"}', 2),
            ],
            stop=StopKind.tool_use,
            usage=usage(100, 20),
            cost={"input_usd": 0.1, "output_usd": 0.2, "total_usd": 0.3},
        ),
        text(
            "Paris 18 C, Nice 18 C.",
            usage=usage(150, 10),
            cost={"input_usd": 0.15, "output_usd": 0.1, "total_usd": 0.25},
        ),
    )
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather])

    assert kinds(events) == [
        "model_started",
        "text_delta",
        "tool_call_delta",
        "tool_call_delta",
        "model_completed",
        "tool_call_completed",
        "tool_call_completed",
        "model_started",
        "text_delta",
        "model_completed",
    ]
    assert [e.action.tag for e in events if isinstance(e, ToolCallCompleted)] == ["c1", "c2"]
    assert [e.more_turns for e in events if isinstance(e, ModelCompleted)] == [True, False]
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (250, 30, 280)
    assert result.cost == Cost(0.25, 0.3, 0.55)
    assert result.metadata == {
        "cost": {"input_usd": 0.15, "output_usd": 0.1, "total_usd": 0.25}
    }  # the last turn's figures
    assert result.metadata is not events[-1].metadata
    # the tool message carries both results, in call order
    tool_message = result.messages[2]
    assert tool_message.role == "tool" and [b.action.tag for b in tool_message.tool_results] == ["c1", "c2"]
    assert [b.text for b in tool_message.tool_results] == ["18 C in Paris", "18 C in Nice"]
    assert result.new_messages == result.messages and result.new_messages is not result.messages


def test_one_turn_of_unknown_price_makes_the_run_cost_unknown() -> None:
    driver = ScriptedDriver(
        calls(call("c1", "get_weather", WEATHER_CALL), cost={"input_usd": 0.1, "output_usd": 0.2, "total_usd": 0.3}),
        text("18 C."),
    )
    assert run(driver, tools=[get_weather]).cost is None


# -- the request each turn sends ---------------------------------------------------------------------


def test_each_request_carries_the_system_prompt_history_run_messages_and_schema() -> None:
    history = [
        Message(role="user", content=[TextBlock(text="Earlier")]),
        Message(role="assistant", content=[TextBlock(text="Noted")]),
    ]
    driver = ScriptedDriver(calls(call("c1", "get_weather", WEATHER_CALL)), text('{"city": "Paris", "celsius": 18}'))
    run(driver, options=RunOptions(history=history, output_schema=Weather, output_strategy="rule"), system="Be brief.",
        tools=[get_weather])

    first, second = driver.stacks
    assert [t.name for t in first.tools] == ["get_weather"]
    assert [(m.role, m.text) for m in first.messages] == [
        ("system", "Be brief."),
        ("user", "Earlier"),
        ("assistant", "Noted"),
        ("user", "Weather in Paris?"),
    ]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert first.output_schema is Weather and first.output_strategy == "rule"


def test_react_puts_the_protocol_after_the_system_prompt_and_offers_no_native_tools() -> None:
    driver = ScriptedDriver(text("Hello."), tools=False)  # no native tool calls: ReAct unless told otherwise
    run(driver, system="Be brief.", tools=[get_weather])
    [stack] = driver.stacks
    assert stack.tools == []
    system = stack.messages[0].text
    assert system.startswith("Be brief.\n\nYou can use tools.") and "- get_weather: Weather now." in system


@pytest.mark.parametrize("react, native", [(None, True), (False, True), (True, False)])
def test_react_only_when_asked_or_the_driver_has_no_tools(react: bool | None, native: bool) -> None:
    driver = ScriptedDriver(text("Hello."))
    run(driver, tools=[get_weather], react=react)
    [stack] = driver.stacks
    assert bool(stack.tools) is native and ("<tool_call" in stack.messages[0].text) is not native


def test_native_tools_can_be_forced_on_a_driver_without_them_and_no_tools_means_no_protocol() -> None:
    forced = ScriptedDriver(text("Hello."), tools=False)
    run(forced, tools=[get_weather], react=False)
    assert [t.name for t in forced.stacks[0].tools] == ["get_weather"]
    bare = ScriptedDriver(text("Hello."), tools=False)
    run(bare)
    assert [m.role for m in bare.stacks[0].messages] == ["user"]  # no system prompt at all


def test_system_blocks_get_the_protocol_as_a_block_and_fit_the_budget() -> None:
    driver = ScriptedDriver(text("Hello."), tools=False)
    blocks = [SystemBlock(text="Static rules."), SystemBlock(text="x" * 40_000, dynamic=True, source="notes"),
              SystemBlock(text="Short note.", dynamic=True, priority=1, source="memory")]
    run(driver, system=blocks, system_budget=5_000, tools=[get_weather])
    [stack] = driver.stacks
    assert [b.source for b in stack.system_blocks] == ["user", "memory", "react"]
    assert stack.system_blocks[2].text.startswith("You can use tools.") and not stack.system_blocks[2].dynamic
    assert [b.source for b in stack.system_dropped] == ["notes"]
    assert [m.role for m in stack.messages] == ["user"]


def test_a_tool_source_that_learns_its_tools_at_run_time_is_offered_them() -> None:
    class Late(BaseTool):
        """Offers nothing until prepared (as an MCP server before it lists its tools)."""

        def __init__(self) -> None:
            super().__init__(denylist=["now"])

        async def prepare(self) -> None:
            self.denylist = []

        @activity
        def now(self) -> str:
            """The time."""
            return "noon"

    driver = ScriptedDriver(text("Hello."))
    run(driver, tools=[Late()], react=True)
    [stack] = driver.stacks
    assert "- Late_now: The time." in stack.messages[0].text  # ReAct decided on the prepared tools


# -- ReAct calls -------------------------------------------------------------------------------------


def test_react_results_go_back_as_one_user_message_tied_by_id() -> None:
    reply = ('<tool_call id="a">{"name": "get_weather", "input": {"city": "Paris"}}</tool_call>'
             '<tool_call id="b">not json</tool_call>')
    driver = ScriptedDriver(text(reply), text("18 C."), tools=False)
    events: list[Any] = []
    result = run(driver, events=events, tools=[get_weather])

    observation = driver.stacks[1].messages[-1]
    assert observation.role == "user"
    parts = observation.text.split("\n\n")
    assert parts[0] == '<tool_result id="a">\n18 C in Paris\n</tool_result>'
    assert parts[1].startswith('<tool_result id="b" error="true">\nthe tool_call block holds no JSON object')
    done = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert [(e.action.tag, e.action.name) for e in done] == [("a", "get_weather"), ("b", "invalid_tool_call")]
    assert not done[0].is_error and done[1].is_error and done[1].duration_s == 0.0
    assert [a.tag for a in result.actions] == ["a", "b"] and result.ok


def test_an_interrupt_while_tool_sources_start_keeps_only_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    starting = asyncio.Event()

    class Slow(BaseTool):
        async def prepare(self) -> None:  # an MCP server that takes its time
            starting.set()
            await asyncio.Event().wait()

        @activity
        def read(self, path: str) -> str:
            """Read a file."""
            return path

    driver = ScriptedDriver(text("never asked"))
    driver.held = starting
    agent, events = Agent(driver, tools=[Slow()]), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Read it.", events))
    assert result.interrupted and result.message == Message(role="assistant", status="interrupted")
    assert [m.role for m in result.messages] == ["user"] and driver.stacks == [] and events == []


# -- what the model is given before a run (Agent.prompt_stack: composed, no tool prepared) ------------------


@pytest.mark.parametrize("tools, react, native", [(False, None, False), (True, None, True), (False, False, True)])
def test_the_first_request_offers_tools_natively_or_by_react(tools: bool, react: bool | None, native: bool) -> None:
    agent = Agent(ScriptedDriver(tools=tools), tools=[get_weather], react=react)
    stack = agent.prompt_stack("Weather?")
    assert [t.name for t in stack.tools] == (["get_weather"] if native else [])
    assert [m.role for m in stack.messages] == (["user"] if native else ["system", "user"])


def test_a_stack_composed_without_a_prompt_is_the_history_alone() -> None:
    history = [Message(role="user", content=[TextBlock(text="Earlier")])]
    stack = Agent(ScriptedDriver()).prompt_stack(None, RunOptions(history=history))
    assert stack.messages == history


# -- off-prompt outputs ------------------------------------------------------------------------------


def test_an_off_prompt_output_goes_to_task_memory_and_the_model_gets_a_reference() -> None:
    from ipyagent.core import ArtifactStored
    from ipyagent.memory import TaskMemory

    async def report(city: str) -> str:
        """A long report."""
        return f"Report on {city}: " + "data " * 50

    memory = TaskMemory()
    driver = ScriptedDriver(calls(call("c1", "report", WEATHER_CALL)), text("Stored."))
    events: list[Any] = []
    result = run(driver, events=events, tools=[FunctionTool(report, off_prompt=True)], memory=memory)

    [entry] = memory.entries()
    assert entry.artifact.to_text().startswith("Report on Paris: data") and entry.call_id == "c1"
    [stored] = [e for e in events if isinstance(e, ArtifactStored)]
    assert (stored.call_id, stored.namespace) == ("c1", entry.namespace)
    assert kinds(events).index("artifact_stored") < kinds(events).index("tool_call_completed")
    [block] = driver.stacks[1].messages[-1].tool_results
    assert entry.namespace in block.text and "Report on Paris" not in block.text  # the model sees the reference only
    assert result.actions[0].output.name == "off_prompt_reference"
    assert "TaskMemory_read" in [t.name for t in driver.stacks[0].tools]  # and can read it


def test_a_tool_source_that_turns_out_off_prompt_gets_the_task_memory_reader() -> None:
    from ipyagent.memory import TaskMemory

    class Late(BaseTool):
        def __init__(self) -> None:
            super().__init__(denylist=["dump"], off_prompt=True)

        async def prepare(self) -> None:
            self.denylist = []

        @activity
        async def dump(self) -> str:
            """Everything."""
            return "all of it " * 20

    def summarize_it(stack: Any) -> Script:  # the model asks the reader about what the reference names
        namespace = json.loads(stack.messages[-1].tool_results[0].text)["namespace"]
        return calls(call("c2", "TaskMemory_summarize", json.dumps({"namespace": namespace})))

    memory = TaskMemory()
    driver = ScriptedDriver(
        calls(call("c1", "Late_dump", "{}")), summarize_it, text("It repeats itself."), text("Done.")
    )
    ledger = Ledger()
    result = run(driver, tools=[Late()], memory=memory, options=RunOptions(ledger=ledger))
    assert result.ok and [e.tool for e in memory.entries()] == ["Late"]  # stored in the run's memory
    assert len(ledger.turns) == 4  # three turns of the run, and the reader's question to the model
    assert {"Late_dump", "TaskMemory_summarize"} <= {t.name for t in driver.stacks[0].tools}
    # the reader found it there, and asked the run's model about it
    assert "all of it all of it" in driver.stacks[2].messages[-1].text
    summary = result.actions[1]
    assert (
        summary.name == "TaskMemory"
        and summary.output.type != "error"
        and "It repeats itself." in summary.output.to_text()
    )


# -- more decisions -------------------------------------------------------------------------------------


def test_an_output_tool_call_invalid_twice_reports_its_input() -> None:
    driver = ScriptedDriver(
        calls(call("o1", OUTPUT_TOOL, '{"city": "Paris"}')), calls(call("o2", OUTPUT_TOOL, '{"celsius": 18}'))
    )
    result = run(driver, options=RunOptions(output_schema=Weather, output_strategy="tool"))
    error = result.error
    assert error is not None and error.type == "invalid_output" and "city" in error.message
    assert error.raw == {"text": "", "tool_input": {"celsius": 18}}
    assert result.new_messages == []  # a failed run adds nothing to its conversation


def test_the_approver_is_asked_about_each_call() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def approve(action: Any) -> bool:
        asked.append((action.tag, action.input))
        return action.input["city"] == "Paris"

    driver = ScriptedDriver(
        calls(call("c1", "get_weather", WEATHER_CALL), call("c2", "get_weather", '{"city": "Lyon"}', 1)), text("Done.")
    )
    result = run(driver, tools=[FunctionTool(get_weather, requires_approval=True)], approve=approve)
    assert sorted(asked) == [("c1", {"city": "Paris"}), ("c2", {"city": "Lyon"})]
    assert [a.output.to_text() for a in result.actions] == ["18 C in Paris", "denied by the user; the tool was not run"]


def test_a_stream_that_ends_without_a_result_is_a_failed_turn_keeping_its_text() -> None:
    class Truncated(ScriptedDriver):
        async def stream(self, prompt_stack: Any) -> Any:
            async for event in super().stream(prompt_stack):
                if isinstance(event, (ModelCompleted, ModelFailed)):
                    return  # a broken third-party driver: no final event
                yield event

    events: list[Any] = []
    result = run(Truncated(text("Half an answer")), events=events)
    error = result.error
    assert error is not None and error.type == "invalid_response" and not error.retryable
    assert error.message == "the scripted:m stream ended without a result (a driver bug); the text so far is kept"
    assert result.text == "Half an answer" and result.message.metadata == {} and result.message.status == "failed"
    assert result.message.error == MessageError.of(error)
    assert result.messages[-1] is result.message
    assert kinds(events) == ["model_started", "text_delta", "model_failed"] and events[-1].partial is result.message


# -- the agent's own thread (issue 27) -----------------------------------------------------------


def _turn(agent: Agent, prompt: Any, options: RunOptions | None = None, events: list[Any] | None = None) -> AgentResult:
    return asyncio.run(agent._arun(prompt, options or RunOptions(), (events if events is not None else []).append))


def test_an_agent_owns_its_thread_and_each_run_adds_its_turn() -> None:
    """A failed run's turn is kept, marked, and left out of the next request; `messages` is what
    the next request carries; another agent on the same thread continues the conversation."""
    from ipyagent.agent import Thread

    thread = Thread("t")
    down = Script([TextDelta(0, "brok")], error=ProviderError("server", "down"), usage=None)
    driver = ScriptedDriver(text("first"), down, text("second"))
    agent = Agent(driver, thread=thread, system="Be brief.")
    assert agent.thread is thread and thread.system == "Be brief."
    for prompt in ("one", "two", "three"):
        _turn(agent, prompt)
    assert [(t.status, t.messages[0].text) for t in thread.turns] == [("ok", "one"), ("failed", "two"), ("ok", "three")]
    assert thread.turns[1].messages[-1].status == "failed" and thread.turns[1].error == "down"
    assert [m.text for m in driver.stacks[2].messages[1:]] == ["one", "first", "three"]  # the failed turn left out
    assert [m.text for m in agent.messages] == ["one", "first", "three", "second"]
    assert agent.messages == thread.compose().messages
    other = ScriptedDriver(text("fourth"))
    _turn(Agent(other, thread=thread), "four")
    assert other.stacks[0].messages[0].text == "Be brief." and len(thread.turns) == 4
    agent.reset()
    assert thread.turns == [] and agent.messages == [] and thread.system == "Be brief."


def test_a_run_given_a_history_leaves_the_agent_s_thread_alone() -> None:
    agent = Agent(ScriptedDriver(text("a"), text("b")))
    _turn(agent, "one")
    _turn(agent, "two", RunOptions(history=[]))
    assert len(agent.thread.turns) == 1 and [m.text for m in agent.messages] == ["one", "a"]


def test_an_interrupted_run_s_turn_joins_the_thread_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = ScriptedDriver(Script([TextDelta(0, "Hel"), TextDelta(0, "lo")], hold_after=1))
    agent, events = Agent(driver), []
    result = on_virtual_clock(monkeypatch, interrupt_when_held(agent, driver, "Say hello", events))
    [turn] = agent.thread.turns
    assert result.interrupted and turn.status == "interrupted" and turn.messages[-1].text == "Hel"
    assert turn.messages[-1].status == "interrupted" and agent.messages == []


def test_old_turns_are_left_out_whole_to_fit_max_history_and_the_window() -> None:
    driver = ScriptedDriver(*(text(f"answer {n}") for n in range(5)))
    agent = Agent(driver)
    for n in range(3):
        _turn(agent, f"question {n}")
    events: list[Any] = []
    _turn(agent, "question 3", RunOptions(max_history=1), events)
    [notice] = [e for e in events if isinstance(e, HistoryTrimmed)]
    assert (notice.dropped_turns, notice.kept_turns, notice.reason) == (2, 1, "max_history")
    assert [m.text for m in driver.stacks[3].messages] == ["question 2", "answer 2", "question 3"]
    tight: list[Any] = []  # a window that holds the prompt and the reply's reserve, no history
    _turn(agent, "question 4", RunOptions(context_window=270), tight)
    assert [e.reason for e in tight if isinstance(e, HistoryTrimmed)] == ["context_window"]
    assert [m.text for m in driver.stacks[4].messages] == ["question 4"]


def test_the_user_message_is_built_once_and_sent_as_built() -> None:
    from ipyagent.memory import ContextBlock

    driver = ScriptedDriver(text("ok"))
    agent = Agent(driver)
    block = ContextBlock(source="variable", name="df", kind="DataFrame", text="3 rows")
    user = agent.user_message("What is in df?", RunOptions(context=(block,)))
    assert [b.text for b in user.content] == [block.to_text(), "What is in df?"]
    result = _turn(agent, user, RunOptions(context=(block,)))  # the context is in the message: not added again
    assert driver.stacks[0].messages[-1] is user and result.messages[0] is user
    assert agent.thread.turns[0].messages[0] is user
