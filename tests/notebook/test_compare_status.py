"""Terminal ``%%compare`` while it streams: on a TTY one status line (each provider's characters
so far, or how it ended, and the seconds so far), redrawn every `FRAME_S` seconds of the loop's
clock whatever the rate of deltas, erased before a run's block, the interrupt marker and the
table; on a pipe nothing but the blocks. Timed on the virtual clock (no sleeps)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pyte
import pytest

from ipyagent.agent.compare import RunFigures
from ipyagent.core import TextDelta
from ipyagent.notebook.views import compare_view
from ipyagent.notebook.views.compare_view import CompareTextView

from ..support.views import Tty
from ..support.virtual_clock import run_virtual

COLUMNS = 120


@pytest.fixture(autouse=True)
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))  # shutil.get_terminal_size reads these first
    monkeypatch.setenv("LINES", "40")
    monkeypatch.setenv("NO_COLOR", "1")  # the blocks as plain text: the status line is the same either way


def screen(raw: str) -> list[str]:
    """The non-blank rows of `raw` on a VT100 screen (pyte)."""
    shown = pyte.Screen(COLUMNS, 40)
    pyte.Stream(shown).feed(raw.replace("\n", "\r\n"))
    return [line.rstrip() for line in shown.display if line.strip()]


def figures(index: int, total_s: float, error: str | None = None) -> RunFigures:
    return RunFigures(f"openai:{'ab'[index]}", index, 0, 0.1, total_s, 1, 2, stop_reason=None if error else "end_turn",
                      error_type="server_error" if error else None, error=error)


def streamed(view: CompareTextView, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Provider a streams 400 one-character deltas, 5 ms apart (2 s), b none; then a ends, then b
    fails: what was written at each step."""
    seen: dict[str, Any] = {}

    async def main() -> None:
        view.start(0, 0)
        view.start(1, 0)
        for _ in range(400):
            view.feed(0, 0, TextDelta(0, "x"))
            await asyncio.sleep(0.005)
        seen["frames"], seen["streaming"] = view.frames, view.stream.getvalue()
        view.finish(figures(0, 2.0))
        seen["a ended"] = view.stream.getvalue()
        await asyncio.sleep(compare_view.FRAME_S)
        seen["after a"] = view.stream.getvalue()
        view.finish(figures(1, 2.3, error="boom"))
        seen["frames at the end"] = view.frames
        await asyncio.sleep(10 * compare_view.FRAME_S)
        seen["frames later"], seen["timer"] = view.frames, view._timer
        view.show_table()
        seen["end"] = view.stream.getvalue()

    run_virtual(main, monkeypatch, compare_view)
    return seen


def test_a_tty_shows_a_status_line_at_a_bounded_rate_and_erases_it_before_each_block(monkeypatch) -> None:
    view = CompareTextView(["openai:a", "openai:b"], 1, Tty(), titles=["small", "openai:b"])
    seen = streamed(view, monkeypatch)
    # 400 deltas in 2 s: a frame at the start and one per FRAME_S, not one per delta
    assert 2 / compare_view.FRAME_S <= seen["frames"] <= 2 / compare_view.FRAME_S + 2
    last = seen["streaming"].rsplit("\r", 1)[-1].rstrip()
    assert last.startswith("comparing · small ") and last.endswith(" chars · openai:b waiting · 2 s"), last
    assert int(last.split("small ")[1].split(" chars")[0]) >= 390  # the characters so far
    erased = seen["a ended"][len(seen["streaming"]):]
    # rubbed out, then the block
    assert erased.startswith("\r" + " " * len(last) + "\r── small · openai:a ──\n")
    assert seen["after a"].rsplit("\r", 1)[-1].rstrip() == "comparing · small done 2.0 s · openai:b waiting · 2 s"
    # every run ended: no more frames, and the screen holds the blocks and the table, no status line
    assert seen["frames later"] == seen["frames at the end"] and seen["timer"] is None
    shown = screen(seen["end"])
    assert shown[0] == "── small · openai:a ──" and "".join(shown[1:5]) == "x" * 400
    assert shown[5:7] == ["── openai:b ──", "[error] server_error: boom"]
    assert not any("comparing" in line for line in shown), shown


def test_a_pipe_gets_the_blocks_and_no_status_line(monkeypatch) -> None:
    view = CompareTextView(["openai:a", "openai:b"], 1, io.StringIO(), titles=["small", "openai:b"])
    seen = streamed(view, monkeypatch)
    assert seen["frames"] == 0 and seen["streaming"] == "" and seen["timer"] is None
    blocks = f"── small · openai:a ──\n{'x' * 400}\n── openai:b ──\n[error] server_error: boom\n"
    assert seen["end"].startswith(blocks)
    assert "\r" not in seen["end"] and "comparing" not in seen["end"]


def test_an_interrupt_erases_the_status_line_before_its_marker_and_stops_it(monkeypatch) -> None:
    view = CompareTextView(["openai:a"], 2, Tty())

    async def main() -> tuple[str, int, int]:
        view.start(0, 0)
        view.feed(0, 0, TextDelta(0, "Hello"))
        await asyncio.sleep(compare_view.FRAME_S)
        view.mark_interrupted()
        frames = view.frames
        await asyncio.sleep(10 * compare_view.FRAME_S)
        return view.stream.getvalue(), frames, view.frames

    raw, frames, later = run_virtual(main, monkeypatch, compare_view)
    status = "comparing · openai:a run 1/2 5 chars · 0 s"
    marker = "[interrupted; the text above is partial]"  # no pane was stopped: said once under them
    assert raw.endswith(f"\r{status}\r{' ' * len(status)}\r{marker}\n"), repr(raw)
    assert later == frames and view._timer is None


def test_no_status_line_while_an_approval_is_asked(monkeypatch) -> None:
    """The question `input` shows stays alone on its line: the status line is rubbed out first and
    not drawn again until the answer."""
    asked: dict[str, Any] = {}

    class Asking:
        def __init__(self, provider: str, stream: Any) -> None:
            self.stream = stream

        async def request_approval(self, action: Any) -> bool:
            asked["screen"], asked["frames"] = self.stream.getvalue(), view.frames
            await asyncio.sleep(10 * compare_view.FRAME_S)  # the user thinks
            asked["frames after"] = view.frames
            return True

    monkeypatch.setattr(compare_view, "TextView", Asking)
    view = CompareTextView(["openai:a"], 1, Tty())

    async def main() -> bool:
        view.start(0, 0)
        approved = await view.request_approval(0, None)  # type: ignore[arg-type]
        await asyncio.sleep(compare_view.FRAME_S)
        return approved

    assert run_virtual(main, monkeypatch, compare_view) is True
    status = "comparing · openai:a waiting · 0 s"
    assert asked["screen"] == f"\r{status}\r{' ' * len(status)}\r"
    assert asked["frames after"] == asked["frames"] == 1 and view.frames > 1  # drawn again after the answer
