"""The one dispatch over events (`core.EventHandler`): each event reaches its own method, and only it."""

from __future__ import annotations

import dataclasses

import pytest

from ipyagent.core import (
    Citation,
    CitationDelta,
    ArtifactStored,
    BlockDelta,
    EventHandler,
    HistoryTrimmed,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ProviderError,
    RetryScheduled,
    ReasoningDelta,
    SamplingCompleted,
    ServerToolDelta,
    StopReason,
    TextArtifact,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallNote,
    ToolCallProgress,
    Usage,
    reply_so_far,
)
from ipyagent.core import events

EVENTS = [
    ModelStarted("openai", "m"),
    RetryScheduled(2, 3, 1.0, ProviderError("rate_limit", "slow down", status=429)),
    TextDelta(0, "hi"),
    ReasoningDelta(1, "think"),
    ToolCallDelta(2, "call_1", "f", "{}"),
    BlockDelta(3, TextBlock(text="whole")),
    ServerToolDelta(4, "srv_1", "web_search", "web_search", '{"query"', "searching"),
    CitationDelta(0, Citation(url="https://example.com")),
    ModelCompleted(Message(role="assistant"), Usage(), StopReason(kind="end_turn")),
    ModelFailed(ProviderError("server", "boom"), Message(role="assistant")),
    ToolCallCompleted(ToolAction(tag="call_1", name="f", input={}), TextArtifact(value="ok"), 0.1),
    ArtifactStored("call_1", "f", None, "TaskMemory", "f-1", TextArtifact(value="x"), {"chars": 1}),
    HistoryTrimmed("default", 1, 2, 300, 1000, "max_history"),
    ToolCallProgress(ToolAction(tag="call_1", name="f", input={}), 1, 4, "one of four"),
    ToolCallNote(ToolAction(tag="call_1", name="f", input={}), "asked you for input: you answered"),
    SamplingCompleted(ToolAction(tag="call_1", name="f", input={}), "ev", "openai:m", Usage(), text="hi"),
]


class Recorder(EventHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def __getattribute__(self, name: str):
        if name.startswith("on_"):
            return lambda event: self.seen.append((name, event)) or name
        return super().__getattribute__(name)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_each_event_reaches_the_method_named_for_its_type(event) -> None:
    handler = Recorder()
    assert handler.handle(event) == f"on_{event.type}"
    assert handler.seen == [(f"on_{event.type}", event)]


def test_every_event_type_has_a_method_and_a_case() -> None:
    kinds = {
        field.default for cls in events.Event.__args__ for field in dataclasses.fields(cls) if field.name == "type"
    }
    assert kinds == {e.type for e in EVENTS}
    assert all(callable(getattr(EventHandler, f"on_{kind}")) for kind in kinds)


def test_a_handler_names_only_what_it_reads() -> None:
    class Texts(EventHandler):
        def __init__(self) -> None:
            self.text = ""

        def on_text_delta(self, event: TextDelta) -> None:
            self.text += event.text

    handler = Texts()
    for event in [*EVENTS, TextDelta(0, " there"), object()]:  # anything else is ignored, a stranger too
        handler.handle(event)
    assert handler.text == "hi there"


class _Reply:
    """A `PartialReply` whose deltas formed `message`, or formed none (`fails`)."""

    def __init__(self, message=None, fails=None):
        self.message, self.fails, self.asked = message, fails, []

    def partial(self, status="partial", error=None):
        self.asked.append((status, error))
        if self.fails:
            raise self.fails
        return self.message


def test_the_reply_so_far_is_asked_of_the_one_record_and_none_when_it_forms_no_message() -> None:
    message = Message(role="assistant", content=[TextBlock(text="so far")])
    reply, error = _Reply(message), ProviderError("server", "boom")
    assert reply_so_far(reply) is message and reply.asked == [("partial", None)]
    assert reply_so_far(reply, "failed", error) is message and reply.asked[-1] == ("failed", error)
    assert reply_so_far(None) is None and reply_so_far(_Reply()) is None
    assert reply_so_far(_Reply(fails=ValueError("no message"))) is None
    assert reply_so_far(_Reply(fails=TypeError("no message"))) is None


@pytest.mark.parametrize(("kind", "status", "line"), [
    ("rate_limit", 429, "retrying 2/3 in 2.0 s · 429 rate limit"),
    ("connection", None, "retrying 2/3 in 2.0 s · connection error"),
    ("server", 503, "retrying 2/3 in 2.0 s · 503 server error"),
    ("timeout", None, "retrying 2/3 in 2.0 s · timed out"),
    ("overloaded", None, "retrying 2/3 in 2.0 s · overloaded"),
    ("odd_kind", None, "retrying 2/3 in 2.0 s · odd kind"),
])
def test_a_retry_line_puts_the_attempt_and_the_wait_first(kind, status, line) -> None:
    error = ProviderError(kind, "m", status=status)
    assert RetryScheduled(attempt=2, max_attempts=3, wait_s=1.96, error=error).text == line


def test_a_sampling_note_says_who_answered_with_what_or_why_it_was_refused() -> None:
    usage = Usage(input_tokens=3, output_tokens=4)
    done = SamplingCompleted(action=None, server="docs", provider="openai:m", usage=usage, text="Hello\n  there")
    assert done.note == "sampling request from docs answered by openai:m (3 in / 4 out tokens): Hello there"
    long = SamplingCompleted(action=None, server="docs", provider="p:m", usage=usage, text="x" * 121)
    assert long.note.endswith(": " + "x" * 119 + "…")
    exact = SamplingCompleted(action=None, server="docs", provider="p:m", usage=usage, text="x" * 120)
    assert exact.note.endswith(": " + "x" * 120)
    refused = SamplingCompleted(action=None, server="docs", provider="p:m", usage=usage, text="x", error="denied")
    assert refused.note == "sampling request from docs refused: denied"
