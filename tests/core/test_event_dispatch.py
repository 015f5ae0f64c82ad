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
