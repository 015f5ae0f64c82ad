"""Approval of tool calls: Approve / Deny in the live view's card, and how an approved or
denied call reads live, in the saved transcript and in every fallback (HTML, Markdown, text)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from ipyagent.core import ErrorArtifact, InfoArtifact, ModelStarted, ToolAction, ToolCallCompleted, ToolCallDelta
from ipyagent.core.transcript import ToolCallPart, Transcript
from ipyagent.notebook.render.transcript import to_html, to_text, tool_status
from ipyagent.notebook.views.run_view import TextView, WidgetView

from ..support.live_front import FrontEnd, frames_until, run_on_views_clock

LONG = "x" * 300
DENIED = "denied by the user; the tool was not run"


def _ask_and_answer(verdict: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[FrontEnd, bool, list[dict[str, Any]]]:
    action = ToolAction(tag="call_1", name="get_weather", input={"city": LONG})

    async def main() -> tuple[FrontEnd, bool, list[dict[str, Any]]]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(ToolCallDelta(0, call_id="call_1", name="get_weather", arguments='{"city": "' + LONG + '"}'))
        asked = asyncio.ensure_future(view.request_approval(action))
        await frames_until(lambda: front.asks)
        shown = list(front.asks.values())
        front.click(next(iter(front.asks)), verdict)
        answer = await asked
        await frames_until(lambda: not front.asks)
        result = InfoArtifact(value="sunny") if verdict else ErrorArtifact(value=DENIED)
        view.feed(ToolCallCompleted(action, result, 0.25 if verdict else 0.0, "approved" if verdict else "denied"))
        await frames_until(lambda: "status" in front.segments[0]["call"])
        return front, answer, shown

    return run_on_views_clock(main, monkeypatch)


@pytest.mark.parametrize("verdict", [True, False])
def test_the_card_asks_then_shows_the_verdict(verdict: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    front, answer, shown = _ask_and_answer(verdict, monkeypatch)
    assert answer is verdict
    # The card that streamed the call asks (no second card), with the whole arguments to show.
    assert len(front.segments) == 1 and len(shown) == 1
    assert shown[0]["name"] == "get_weather" and shown[0]["arguments"] == {"city": LONG}
    call = front.segments[0]["call"]
    assert call["approval"] == ("approved" if verdict else "denied")
    assert call["status"] == ("ok" if verdict else "error")


def test_a_click_for_another_request_or_without_a_verdict_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})

    async def main() -> tuple[bool, bool]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        asked = asyncio.ensure_future(view.request_approval(action))
        await frames_until(lambda: front.asks)
        view._on_msg(view.live, {"type": "approve", "request": "nope", "verdict": True}, [])
        view._on_msg(view.live, {"type": "approve", "request": front.asks[0]["request"], "verdict": "yes"}, [])
        await asyncio.sleep(0)
        still_waiting = not asked.done()
        front.click(0, False)
        return still_waiting, await asked

    assert run_on_views_clock(main, monkeypatch) == (True, False)


def test_a_front_end_that_says_hello_later_gets_the_pending_question(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page opened (or reopened) while the call waits: the snapshot has the question."""
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})

    async def main() -> tuple[dict[int, Any], bool]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        asked = asyncio.ensure_future(view.request_approval(action))
        await asyncio.sleep(0)
        assert front.messages == []  # headless: nothing sent
        front.hello()
        asks = dict(front.asks)
        front.click(next(iter(asks)), True)
        return asks, await asked

    asks, answer = run_on_views_clock(main, monkeypatch)
    assert [a["arguments"] for a in asks.values()] == [{"city": "Paris"}] and answer is True


def test_the_live_footer_says_a_call_waits_for_approval_then_goes_back_to_streaming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not "streaming…" while nothing streams: the footer's clock reads "waiting for your
    approval" (ticking ``approval``) from the ask to the answer, for a page open all along and
    for one that says hello meanwhile."""
    from ipyagent.core import TextDelta

    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})

    async def main() -> list[Any]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(TextDelta(0, "Let me check. "))
        await frames_until(lambda: front.status.get("ticking") == "streaming")
        asked = asyncio.ensure_future(view.request_approval(action))
        await frames_until(lambda: front.asks)
        asking = front.status["ticking"]
        late = FrontEnd(view)  # a page reopened while the call waits (it takes the messages from now on)
        late.hello()
        late_ticking = late.status["ticking"]
        late.click(next(iter(late.asks)), True)
        await asked
        await frames_until(lambda: late.status.get("ticking") != "approval")
        return [asking, late_ticking, late.status["ticking"]]

    assert run_on_views_clock(main, monkeypatch) == ["approval", "approval", "streaming"]


def test_the_terminal_question_says_it_waits_for_approval(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda question: asked.append(question) or "y")
    view = TextView("openai:m", stream=io.StringIO())
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
    assert asyncio.run(view.request_approval(action)) is True
    assert asked == ['\nwaiting for your approval · run get_weather({"city": "Paris"})? [y/N] ']


# -- the agent loop says which calls were approved or denied -----------------------------


@pytest.mark.parametrize("verdict, label", [(True, "approved"), (False, "denied")])
def test_the_loop_marks_each_call_with_its_verdict(monkeypatch: pytest.MonkeyPatch, verdict: bool, label: str) -> None:
    from ipyagent import Agent
    from ipyagent.tools import FunctionTool

    from ..support.stub_server import FIXTURES, Reply, StubServer

    def get_weather(city: str, state: str = "") -> str:
        return "61 F"

    events: list[Any] = []
    tools = [FunctionTool(get_weather, requires_approval=True)]
    with StubServer(Reply.sse_file(FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"),
                    Reply.sse_file(FIXTURES / "openai-chat" / "stream-text-include-usage.sse")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        result = Agent("openai:m", base_url=server.url, tools=tools, approve=lambda action: verdict).run(
            "Weather?", on_event=events.append
        )
    (done,) = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert done.approval == label
    from ipyagent.agent import transcript_of

    transcript = transcript_of(result, events=events)
    (call,) = [p for m in transcript.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert call.approval == label
    assert tool_status(call).startswith("denied" if not verdict else "approved by you · done in ")


def test_a_call_that_needs_no_approval_is_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipyagent import Agent
    from ipyagent.tools import FunctionTool

    from ..support.stub_server import FIXTURES, Reply, StubServer

    def get_weather(city: str, state: str = "") -> str:
        return "61 F"

    events: list[Any] = []
    with StubServer(Reply.sse_file(FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"),
                    Reply.sse_file(FIXTURES / "openai-chat" / "stream-text-include-usage.sse")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        Agent("openai:m", base_url=server.url, tools=[FunctionTool(get_weather)]).run(
            "Weather?", on_event=events.append
        )
    assert [e.approval for e in events if isinstance(e, ToolCallCompleted)] == [None]


# -- labels: live card, saved transcript, and each fallback -------------------------------


def _transcript(approval: str | None, status: str = "ok") -> Transcript:
    result = DENIED if approval == "denied" else "sunny"
    call = ToolCallPart(
        id="call_1",
        name="get_weather",
        arguments={"city": LONG},
        status="error" if approval == "denied" else status,
        result=result,
        duration_s=0.0 if approval == "denied" else 0.01,
        approval=approval,
    )
    return Transcript.model_validate(
        {"provider": "openai:m", "messages": [{"role": "assistant", "parts": [call.model_dump()]}]}
    )


@pytest.mark.parametrize("approval, label", [
    ("denied", "denied"),
    ("approved", "approved by you · done in 0.01 s"),
    ("preapproved", "approved in advance · done in 0.01 s"),
    (None, "done in 0.01 s"),
])
def test_status_labels_in_every_fallback(approval: str | None, label: str) -> None:
    t = _transcript(approval)
    (call,) = t.messages[0].parts
    assert tool_status(call) == label
    html, text = to_html(t), to_text(t)
    assert f"call_1 · {label}</span>" in html
    assert text.splitlines()[0].endswith(f" · {label}]")
    for fallback in (html, text):
        assert "error in" not in fallback
    # A denied call was not run: it is not drawn as a failed tool.
    assert 'class="ipyagent-tool ipyagent-tool-error"' not in html


def test_an_approved_call_that_failed_says_both() -> None:
    t = _transcript("approved", status="error")
    (call,) = t.messages[0].parts
    assert tool_status(call) == "approved by you · error in 0.01 s"
    assert 'class="ipyagent-tool ipyagent-tool-error"' in to_html(t)


def test_an_approved_call_cut_off_before_its_result() -> None:
    call = ToolCallPart(id="c", name="t", approval="approved")
    assert tool_status(call) == "approved by you"
    assert tool_status(ToolCallPart(id="c", name="t")) == "not run"


def test_a_transcript_without_the_field_still_reads() -> None:
    """Saved before approvals were recorded: no `approval` key."""
    t = Transcript.model_validate({"provider": "openai:m", "messages": [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c", "name": "t", "status": "error", "result": "boom", "duration_s": 0.5}]}]})
    (call,) = t.messages[0].parts
    assert call.approval is None and tool_status(call) == "error in 0.50 s"


def test_long_arguments_are_pretty_printed_in_a_capped_box() -> None:
    html = to_html(_transcript("denied"))
    assert '<div class="ipyagent-meta">arguments</div><pre>{\n "city": "' + LONG in html
    assert "details.ipyagent-tool pre{max-height:16em;overflow:auto}" in html


@pytest.mark.parametrize("approval, head", [
    ("denied", "[denied get_weather] denied by the user"),
    ("approved", "[result get_weather, approved by you, 0.25 s] sunny"),
    (None, "[result get_weather, 0.25 s] sunny"),
])
def test_the_terminal_heads_each_result_with_its_verdict(approval: str | None, head: str) -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
    result = ErrorArtifact(value=DENIED) if approval == "denied" else InfoArtifact(value="sunny")
    view.feed(ToolCallCompleted(action, result, 0.25, approval))
    assert head in out.getvalue()


def test_recorded_runs_replay_the_verdict(tmp_path: Any) -> None:
    from ipyagent.core import Message, TextBlock
    from ipyagent.memory.recorder import RunRecorder, replay_events
    from ipyagent.memory.store import RunStore

    store = RunStore(tmp_path / "runs.sqlite")
    recorder = RunRecorder(
        store, thread="t", provider="openai:m", prompt=Message(role="user", content=[TextBlock(text="Weather?")])
    )
    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
    recorder.feed(ModelStarted(provider="openai", model="m"))
    recorder.feed(ToolCallCompleted(action, ErrorArtifact(value=DENIED), 0.0, "denied"))
    assert recorder.error is None, recorder.error
    (done,) = [e for e in replay_events(store.nodes(recorder.run_id)) if isinstance(e, ToolCallCompleted)]
    assert done.approval == "denied"


def test_a_compare_pane_asks_in_its_card_and_the_click_comes_back_by_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a %%compare cell every run talks through the cell's one widget, tagged "pane/run"."""
    import json

    from ipyagent.notebook.views.compare_view import CompareWidgetView

    action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})

    async def main() -> tuple[dict[str, Any], bool, list[dict[str, Any]]]:
        view = CompareWidgetView(["openai:a", "openai:b"], runs=1)
        sent: list[dict[str, Any]] = []
        view.live.send = lambda content, buffers=None: sent.append(json.loads(json.dumps(content)))
        view._hello()
        view.start(0, 0)
        view.start(1, 0)

        def asks() -> list[dict[str, Any]]:
            return [op[2] for m in sent if m.get("key") == "1/0" for op in m.get("ops", []) if op[0] == "ask" and op[2]]

        asked = asyncio.ensure_future(view.request_approval(1, action))
        await frames_until(asks)
        (ask,) = asks()
        view._on_msg(view.live, {"type": "approve", "key": "0/0", "request": ask["request"], "verdict": True}, [])
        view._on_msg(view.live, {"type": "approve", "key": "1/0", "request": ask["request"], "verdict": False}, [])
        answer = await asked
        await frames_until(
            lambda: (
                ["tool", 0, {"approval": "denied"}]
                in [op for m in sent if m.get("key") == "1/0" for op in m.get("ops", [])]
            )
        )
        return ask, answer, sent

    ask, answer, sent = run_on_views_clock(main, monkeypatch)
    assert ask["arguments"] == {"city": "Paris"}
    assert answer is False  # the other pane's key did not answer it
    assert not [m for m in sent if m.get("key") == "0/0" and "ask" in json.dumps(m)]
