"""The live views without a kernel: `WidgetView` (ipywidgets works with no comm) and `TextView`."""

from __future__ import annotations

import asyncio
import io
import re
import time

from ipyagent.core import (
    Message,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ProviderError,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ipyagent.notebook.render import markdown_to_html
from ipyagent.notebook.view import FRAME_INTERVAL, TextView, WidgetView


def completed(text: str, *, input: int = 14, output: int = 30, ttft: float = 0.05, latency: float = 1.25, kind: str = "end_turn") -> ModelCompleted:
    return ModelCompleted(
        message=Message(role="assistant", content=[TextBlock(text=text)], usage=Usage(input_tokens=input, output_tokens=output)),
        usage=Usage(input_tokens=input, output_tokens=output),
        stop_reason=StopReason(kind=kind, raw="stop"),
        metadata={"ttft_s": ttft, "latency_s": latency, "attempts": 1},
    )


def deltas_for(n: int) -> list[str]:
    """`n` deltas forming Markdown with structure (headings, lists, code), like a real reply."""
    out = []
    for i in range(n):
        if i % 200 == 0:
            out.append(f"\n\n## Part {i // 200}\n\n")
        elif i % 50 == 0:
            out.append(f"\n- item **{i}** ")
        elif i % 97 == 0:
            out.append(" `x<y>` ")
        else:
            out.append(f"w{i} ")
    return out


def test_widget_view_coalesces_a_fast_stream_and_ends_exact() -> None:
    pieces = deltas_for(2000)
    full = "".join(pieces)

    async def main() -> tuple[WidgetView, float, int, list[float]]:
        view = WidgetView("openai:m")
        frame_times: list[float] = []
        # When each frame that changed the body began (the view stamps it before rendering).
        view.body.observe(lambda change: frame_times.append(view._last_frame), names="value")
        view.feed(ModelStarted(provider="openai", model="m"))
        start = time.monotonic()
        for n, piece in enumerate(pieces, 1):
            view.feed(TextDelta(0, piece))
            if n % 20 == 0:
                await asyncio.sleep(0.01)  # ~2,000 deltas per second
        streaming_frames = view.frames
        view.feed(completed(full))
        elapsed = time.monotonic() - start
        await asyncio.sleep(0.05)  # nothing further may arrive after the final frame
        return view, elapsed, streaming_frames, frame_times

    view, elapsed, streaming_frames, frame_times = asyncio.run(main())
    assert elapsed >= 1.0
    assert view.frames <= elapsed * 34 + 2, (view.frames, elapsed)
    assert streaming_frames >= 5, streaming_frames
    assert view.frames == streaming_frames + 1  # the final frame, and nothing after it
    # Every frame but possibly the final one (same text as the last timed frame) changed the body.
    assert view.frames - 1 <= len(frame_times) <= view.frames
    # Streaming frames are at least the interval apart; only the final frame may come sooner.
    gaps = [b - a for a, b in zip(frame_times[:-1], frame_times[1:-1])]
    assert min(gaps) >= FRAME_INTERVAL - 0.001, min(gaps)
    assert view.body.value == markdown_to_html(full)
    footer = view.footer.value
    assert "openai:m" in footer
    assert "14 in / 30 out tokens" in footer
    assert "first token 0.05 s" in footer
    assert "total 1.25 s" in footer
    assert "streaming" not in footer


def test_trailing_frame_is_sent_when_deltas_stop() -> None:
    async def main() -> tuple[WidgetView, str, str]:
        view = WidgetView("openai:m")
        for piece in ("alpha ", "beta ", "gamma"):
            view.feed(TextDelta(0, piece))
        right_after = view.body.value
        await asyncio.sleep(0.1)
        return view, right_after, view.body.value

    view, right_after, later = asyncio.run(main())
    # The first delta is drawn at once; the other two wait for the coalescing timer.
    assert right_after == markdown_to_html("alpha ")
    assert later == markdown_to_html("alpha beta gamma")
    assert view.frames == 2
    assert "streaming" in view.footer.value and "first token" in view.footer.value


def test_mark_interrupted_keeps_partial_text() -> None:
    async def main() -> tuple[WidgetView, int]:
        view = WidgetView("openai:m")
        for piece in ("The answer ", "is **forty", "-two"):
            view.feed(TextDelta(0, piece))
        view.mark_interrupted()  # a pending coalesced frame is replaced by the final one
        frames = view.frames
        await asyncio.sleep(0.08)
        return view, frames

    view, frames = asyncio.run(main())
    assert view.frames == frames  # the cancelled timer did not fire afterwards
    body = view.body.value
    assert body.startswith(markdown_to_html("The answer is **forty-two"))
    assert "interrupted" in body and "partial" in body
    assert "interrupted" in view.footer.value
    assert "streaming" not in view.footer.value


def test_widget_view_failure_shows_partial_text_and_error() -> None:
    async def main() -> WidgetView:
        view = WidgetView("openai:m")
        view.feed(TextDelta(0, "Half an"))
        view.feed(ModelFailed(error=ProviderError("connection", "connection reset by peer"), partial=Message(role="assistant")))
        return view

    view = asyncio.run(main())
    assert markdown_to_html("Half an") in view.body.value
    assert "connection reset by peer" in view.body.value
    assert "failed" in view.footer.value


def test_text_view_prints_deltas_in_order_then_footer() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    pieces = ["Hello", ", ", "world", "! ", "**bold** stays raw"]
    view.feed(ModelStarted(provider="openai", model="m"))
    for piece in pieces:
        view.feed(TextDelta(0, piece))
    # Written as they arrive, not at the end; the word still arriving waits for its end (a secret may be in it).
    assert out.getvalue() == "".join(pieces)[: -len("raw")]
    view.feed(completed("".join(pieces), input=7, output=5, ttft=0.12, latency=0.5))
    text = out.getvalue()
    body, footer = text[: len("".join(pieces))], text[len("".join(pieces)) :]
    assert body == "".join(pieces)
    assert re.fullmatch(r"\n\[openai:m · 7 in / 5 out tokens · first token 0\.12 s · total 0\.50 s\]\n", footer), footer


def test_text_view_shows_tool_calls_and_stop_reason() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(ToolCallDelta(0, call_id="call_1", name="get_weather", arguments='{"city":'))
    view.feed(ToolCallDelta(0, arguments=' "Paris"}'))
    view.feed(completed("", kind="tool_use"))
    text = out.getvalue()
    assert '[tool call get_weather] {"city": "Paris"}' in text
    assert "stop: tool_use" in text.splitlines()[-1]


def test_text_view_prints_failure_message() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(TextDelta(0, "partial"))
    error = ProviderError("authentication", "Invalid API Key (HTTP 401)", status=401)
    view.feed(ModelFailed(error=error, partial=Message(role="assistant", content=[TextBlock(text="partial")])))
    lines = out.getvalue().splitlines()
    assert lines[0] == "partial"
    assert lines[1] == "[error] Invalid API Key (HTTP 401)"
    assert lines[2].startswith("[openai:m") and lines[2].endswith("failed]")
    assert len(lines) == 3


def test_text_view_interrupted() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(TextDelta(0, "so far"))
    view.mark_interrupted()
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["so far", "[interrupted]"]
    assert lines[2].endswith("interrupted]")
