"""Terminal IPython: a run's footer is one line no wider than the screen, and a Markdown heading
is bold, not drawn as rich's underlined magenta (which reads as a link)."""

from __future__ import annotations

import re

import pyte
import pytest
from rich.cells import cell_len

from ipyagent.core import ModelStarted, ProviderError, RetryScheduled, TextDelta
from ipyagent.notebook.views.run_view import TextView
from ipyagent.notebook.views.terminal import fit_figures

from ..support.views import Tty, completed

SGR = re.compile(r"\x1b\[([0-9;]*)m")
FIGURES = ["openai:gpt-4.1-mini", "30 in / 22 out tokens", "first token 0.05 s", "total 0.77 s", "2 model turns",
           "$0.000123", "temperature 0"]


def footer(figures: list[str]) -> str:
    return "[" + " · ".join(figures) + "]"


@pytest.mark.parametrize("width", [120, 100, 80, 60, 40, 30])
def test_a_footer_fits_leaving_out_the_least_telling_figures_first(width: int) -> None:
    shown = fit_figures(FIGURES, width)
    assert cell_len(footer(shown)) <= width
    assert shown[0] == FIGURES[0]  # the provider stays
    left_out = [f for f in FIGURES if f not in shown]
    assert (shown[-1] == "…") is bool(left_out)
    # settings, turns, first token, tokens, then cost and time
    order = ["temperature 0", "2 model turns", "first token 0.05 s", "30 in / 22 out tokens", "$0.000123",
             "total 0.77 s"]
    assert left_out == [f for f in FIGURES if f in order[:len(left_out)]]


def test_a_footer_keeps_how_the_run_ended_and_cuts_a_long_provider() -> None:
    assert fit_figures(FIGURES, 200) == FIGURES  # room: nothing left out
    shown = fit_figures(["openai:gpt-4.1-mini-2025-04-14", "total 2.07 s", "failed"], 24)
    assert shown[1:] == ["failed", "…"] and shown[0].endswith("…") and cell_len(footer(shown)) <= 24


def test_the_footer_on_a_narrow_terminal_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setenv("LINES", "30")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = Tty()
    view = TextView("openai:gpt-4.1-mini", stream=out)
    view.feed(ModelStarted(provider="openai", model="gpt-4.1-mini"))
    view.feed(TextDelta(0, "## Jupyter kernels in short\n\nA kernel runs code.\n"))
    view.feed(completed("## Jupyter kernels in short\n\nA kernel runs code.\n"))
    screen = pyte.Screen(50, 30)
    pyte.Stream(screen).feed(out.getvalue().replace("\n", "\r\n"))
    lines = [line.rstrip() for line in screen.display if line.strip()]
    # not wrapped onto a next row
    assert lines[-1].startswith("[openai:gpt-4.1-mini · ") and lines[-1].endswith("…]")
    assert lines[-2] == "A kernel runs code."
    heading = next(m.group(1) for m in SGR.finditer(out.getvalue())
                   if out.getvalue()[m.end():].startswith("Jupyter kernels in short"))
    assert "1" in heading.split(";") and not {"4", "35"} & set(heading.split(";"))  # bold; not underlined, not magenta


def test_the_wait_line_with_a_retry_notice_is_cut_to_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out = Tty()
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(RetryScheduled(2, 3, 1.0, ProviderError("connection", "could not connect")))
    line = out.getvalue().rsplit("\r\x1b[2K", 1)[1]
    assert line == "retrying 2/3 in 1.0 s · connection err…"  # 39 cells: rewritten in place, never wrapped
