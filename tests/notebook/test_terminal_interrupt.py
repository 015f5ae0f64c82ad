"""The terminal's interrupt marker: one wording for ``%%agent`` and ``%%compare`` (as the notebook's
"■ interrupted; the text above is partial"), once under each stopped pane of a comparison and no
second line after them; plain text (a pipe, ``NO_COLOR``) and rich colour alike."""

from __future__ import annotations

import io

import pytest

from ipyagent.agent.compare import RunFigures
from ipyagent.core import TextDelta, TextPart, Transcript, TranscriptMessage
from ipyagent.notebook.views.compare_view import CompareTextView
from ipyagent.notebook.views.text_view import TextView

from ..support.views import Tty

MARKER = "[interrupted; the text above is partial]"


def stopped(index: int, transcript: Transcript | None = None) -> RunFigures:
    return RunFigures(f"openai:{'ab'[index]}", index, 0, error_type="cancelled", error="interrupted",
                      transcript=transcript)


def answered(index: int) -> RunFigures:
    return RunFigures(f"openai:{'ab'[index]}", index, 0, output_tokens=3)


def compare_output(stream: io.StringIO, figures: list[RunFigures], texts: list[str]) -> str:
    view = CompareTextView(["openai:a", "openai:b"], 1, stream)
    for fig, text in zip(figures, texts):
        view.start(fig.index, 0)
        if text:
            view.feed(fig.index, 0, TextDelta(0, text))
        view.finish(fig)
    view.mark_interrupted()
    return stream.getvalue()


def test_agent_and_compare_say_the_same_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(TextDelta(0, "so far"))
    view.mark_interrupted()
    assert out.getvalue().splitlines()[1] == MARKER
    raw = compare_output(io.StringIO(), [answered(0), stopped(1)], ["Paris.", "The capi"])
    # once, under its pane
    assert raw == f"── openai:a ──\nParis.\n── openai:b ──\nThe capi\n{MARKER}\n"


def test_each_stopped_pane_has_the_marker_once_and_nothing_after_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    raw = compare_output(io.StringIO(), [stopped(0), stopped(1)], ["Par", ""])
    assert raw == f"── openai:a ──\nPar\n{MARKER}\n── openai:b ──\n{MARKER}\n"
    assert "[interrupted]" not in raw and "cancelled" not in raw


def test_a_colour_terminal_has_the_marker_once_per_stopped_pane(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    said = [TranscriptMessage(role="assistant", parts=[TextPart(text="The capital is Pa")])]
    partial = Transcript(provider="openai:a", status="interrupted", messages=said)
    failed = Transcript(provider="openai:b", status="failed")  # stopped before an answer: no text
    raw = compare_output(Tty(), [stopped(0, partial), stopped(1, failed)], ["The capital is Pa", ""])
    assert raw.count(MARKER) == 2 and "[interrupted]" not in raw and "cancelled" not in raw
    assert raw.index("The capital is Pa") < raw.index(MARKER)
