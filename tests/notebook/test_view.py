"""The live views without a kernel: `WidgetView` (ipywidgets works with no comm) and `TextView`."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest

from ipyagent.core import (
    Message,
    ModelFailed,
    ModelStarted,
    ProviderError,
    TextBlock,
    TextDelta,
    Timings,
    ToolCallDelta,
    Transcript,
    TranscriptCost,
    TranscriptUsage,
    Usage,
    footer_figures,
)
from ipyagent.notebook.views import run_view as view_module
from ipyagent.notebook.views.run_view import FRAME_INTERVAL, TextView, WidgetView, make_view

from ..support import live_front
from ..support.live_front import FrontEnd
from ..support.virtual_clock import run_virtual
from ..support.views import completed


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


async def _stream(view: WidgetView, pieces: list[str], rate: float) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    view.feed(ModelStarted(provider="openai", model="m"))
    for i, piece in enumerate(pieces):
        ahead = start + i / rate - loop.time()
        if ahead > 0:
            await asyncio.sleep(ahead)
        view.feed(TextDelta(0, piece))
    return loop.time() - start


def test_widget_view_coalesces_a_fast_stream_sends_only_what_changed_and_ends_exact(monkeypatch) -> None:
    pieces = deltas_for(1_500)
    full = "".join(pieces)

    async def main() -> tuple[WidgetView, FrontEnd, float]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        elapsed = await _stream(view, pieces, rate=5_000)
        view.feed(completed(full))
        return view, front, elapsed

    # On a virtual clock: the deltas come exactly 0.2 ms apart, and the frame timer is the only pace.
    view, front, elapsed = run_virtual(main, monkeypatch, view_module, live_front)
    assert front.text == full  # exact
    frames = front.frames
    # Coalesced: the first delta goes at once (with the snapshot), then one frame per FRAME_INTERVAL
    # while deltas flow, then the final frame as soon as the run completes, not held for the timer.
    assert elapsed == pytest.approx((len(pieces) - 1) / 5_000)
    gaps = [b - a for a, b in zip(front.times, front.times[1:])]
    assert gaps[0] == 0 and gaps[1:-1] == pytest.approx([FRAME_INTERVAL] * (len(gaps) - 2))
    assert 0 < gaps[-1] < FRAME_INTERVAL
    assert len(frames) == int(elapsed / FRAME_INTERVAL) + 2
    # Each frame carries only the text that arrived since the last: the answer is sent once in all.
    sent = sum(len(op[2]) for m in frames for op in m["ops"] if op[0] == "text")
    assert sent == len(full)
    assert front.status["ticking"] is None
    footer = " · ".join(front.status["figures"])
    assert footer == "openai:m · 14 in / 30 out tokens · first token 0.05 s · total 1.25 s"


def test_nothing_is_sent_before_a_front_end_says_hello_then_it_catches_up(monkeypatch) -> None:
    async def main() -> tuple[WidgetView, FrontEnd, int]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        view.feed(ModelStarted(provider="openai", model="m"))
        for piece in ("# Title\n\n", "alpha ", "beta "):
            view.feed(TextDelta(0, piece))
        await asyncio.sleep(0.05)
        before = len(front.messages)
        front.hello()  # a page opened (or reopened) mid-run
        view.feed(TextDelta(0, "gamma"))
        await asyncio.sleep(0.05)
        view.feed(completed("# Title\n\nalpha beta gamma"))
        return view, front, before

    view, front, before = run_virtual(main, monkeypatch, view_module, live_front)
    assert before == 0  # headless runs cost no messages
    assert front.messages[0]["type"] == "snapshot"
    assert front.messages[0]["doc"]["ops"][1] == ["text", 0, "# Title\n\nalpha beta "]
    assert front.text == "# Title\n\nalpha beta gamma"


def test_trailing_frame_is_sent_when_deltas_stop_and_the_clock_waits_for_the_first_token(monkeypatch) -> None:
    async def main() -> tuple[FrontEnd, str | None, list[str]]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        view.feed(ModelStarted(provider="openai", model="m"))
        front.hello()
        waiting = front.status["ticking"]
        for piece in ("alpha ", "beta ", "gamma"):
            view.feed(TextDelta(0, piece))
        right_after = [front.text]
        await asyncio.sleep(0.1)
        later = front.text
        view.feed(completed("alpha beta gamma"))
        return front, waiting, right_after, later

    front, waiting, right_after, later = run_virtual(main, monkeypatch, view_module, live_front)
    assert waiting == "waiting"  # "waiting for the first token · 2.1 s", ticking in the browser
    # The first delta is sent at once; the other two wait for the coalescing timer. The word still
    # arriving is held back (a secret split across deltas is redacted whole) until the text ends.
    assert right_after == ["alpha "]
    assert later == "alpha beta "
    assert front.text == "alpha beta gamma"
    assert len(front.frames) == 3


def test_mark_interrupted_keeps_partial_text(monkeypatch) -> None:
    async def main() -> tuple[WidgetView, FrontEnd, int]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        for piece in ("The answer ", "is **forty", "-two"):
            view.feed(TextDelta(0, piece))
        view.mark_interrupted()  # a pending coalesced frame is replaced by the final one
        frames = view.frames
        await asyncio.sleep(0.08)
        return view, front, frames

    view, front, frames = run_virtual(main, monkeypatch, view_module, live_front)
    assert view.frames == frames  # the cancelled timer did not fire afterwards
    assert front.text == "The answer is **forty-two"
    assert front.interrupted
    assert front.status["ticking"] is None and front.status["figures"][-1] == "interrupted"


def test_widget_view_failure_shows_partial_text_and_error() -> None:
    async def main() -> FrontEnd:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(TextDelta(0, "Half an"))
        view.feed(
            ModelFailed(
                error=ProviderError("connection", "connection reset by peer"), partial=Message(role="assistant")
            )
        )
        return front

    front = asyncio.run(main())
    assert front.text == "Half an"
    assert front.error == "connection reset by peer"
    assert front.status["figures"][-1] == "failed"


def test_tool_call_fragments_stream_then_the_card_gets_its_result(monkeypatch) -> None:
    from ipyagent.core import InfoArtifact, ToolAction, ToolCallCompleted

    async def main() -> FrontEnd:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(ToolCallDelta(0, call_id="call_1", name="get_weather", arguments='{"city":'))
        view.feed(ToolCallDelta(0, arguments=' "Paris"}'))
        await asyncio.sleep(0.05)
        action = ToolAction(tag="call_1", name="get_weather", input={"city": "Paris"})
        view.feed(ToolCallCompleted(action, InfoArtifact(value="sunny"), 0.25))
        await asyncio.sleep(0.05)
        return front

    front = run_virtual(main, monkeypatch, view_module, live_front)
    (card,) = front.segments.values()
    assert card["kind"] == "tool" and card["text"] == '{"city": "Paris"}'
    assert card["call"] == {"id": "call_1", "name": "get_weather", "status": "ok", "result": "sunny",
                            "duration_s": 0.25, "arguments": {"city": "Paris"}}


def test_end_sends_the_transcript_once_then_close_leaves_no_widget() -> None:
    from ipywidgets.widgets.widget import _instances

    async def main() -> tuple[WidgetView, FrontEnd]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(TextDelta(0, "done"))
        view.feed(completed("done"))
        return view, front

    view, front = asyncio.run(main())
    assert view.widget is view.live  # Approve / Deny are in its cards: no box around it
    ids = {w.model_id for w in (view.live, view.live.layout)}
    view.end({"format": "ipyagent.transcript", "status": "completed"})
    view.close()
    assert front.final == {"format": "ipyagent.transcript", "status": "completed"}
    assert front.output is None  # a run's end inside a larger widget (%%compare) is no cell output
    assert not ids & set(_instances)  # nothing left for the notebook's widget state


def test_the_end_message_follows_the_display_update_and_carries_the_same_saved_output(monkeypatch) -> None:
    """A page reopened mid-run has no display id for the update: it puts the output the `end`
    message carries in place itself (live.ts), so that output must be the update's, whole; and
    it comes after the update, so a page the update reached has already dropped its live view."""
    from ipyagent.notebook.views import transcript_output
    from ipyagent.notebook.views.transcript_output import LiveTranscript

    sent: list[tuple[str, Any]] = []
    monkeypatch.setattr(transcript_output, "update_display",
                        lambda data, **kw: sent.append(("update", {"data": data, "metadata": kw["metadata"]})))

    async def main() -> tuple[FrontEnd, str]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        model_id = view.widget.model_id  # (closed once the run ends)
        receive = front.receive
        view.live.send = lambda content, buffers=None: (sent.append(("widget", content["type"])), receive(content))
        front.hello()
        live = LiveTranscript(view, provider="openai:m", prompt="Hi", show=False)
        live.feed(ModelStarted(provider="openai", model="m"))
        live.feed(TextDelta(0, "Hello **there**"))
        live.feed(completed("Hello **there**"))
        live.finish(None)
        return front, model_id

    front, model_id = asyncio.run(main())
    order = [kind if kind == "update" else f"widget {what}" for kind, what in sent if kind == "update" or what == "end"]
    assert order == ["update", "widget end"]
    (update,) = [payload for kind, payload in sent if kind == "update"]
    assert front.output == update
    (end,) = [m for m in front.messages if m["type"] == "end"]
    assert end["output"]["model_id"] == model_id  # the outputs showing this widget are replaced
    assert set(update["data"]) == {"application/vnd.ipyagent.transcript+json", "text/html", "text/plain"}
    assert "Hello" in update["data"]["text/html"]


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


def test_a_failed_turn_billed_before_it_failed_shows_its_tokens_and_price() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    first = completed("", kind="tool_use")  # 14 in / 30 out, $0.10
    first.metadata["cost"], first.more_turns = {"input_usd": 0.04, "output_usd": 0.06, "total_usd": 0.1}, True
    view.feed(first)
    billed = Message(role="assistant", content=[TextBlock(text="Half")], usage=Usage(input_tokens=43, output_tokens=10))
    view.feed(ModelFailed(ProviderError("invalid_request", "Token limit reached"), billed,
                          {"cost": {"input_usd": 0.5, "output_usd": 0.25, "total_usd": 0.75}}))
    footer = out.getvalue().splitlines()[-1]
    assert "57 in / 40 out tokens" in footer and footer.endswith(" · $0.85 · failed]")
    # the loop's own failure after a completed turn (max_steps, a cut-off call) carries that turn's
    # message, already counted: no "cost" in its metadata, so not counted twice
    again = TextView("openai:m", stream=io.StringIO())
    again.feed(first)
    again.feed(ModelFailed(ProviderError("max_steps", "stopped after 1 model turns"), first.message, {}))
    assert (again.state.input_tokens, again.state.output_tokens, len(again.state.costs)) == (14, 30, 1)


def test_the_footer_at_the_end_reads_as_the_saved_transcripts_masked_values_included(capsys) -> None:
    """RunState's footer (the terminal's last line, the widget's until the saved transcript replaces
    it) has core.footer_figures' figures in its order: the cost, the values masked, then the state."""
    view = make_view("openai:m", widgets=False, masked={"cell template": 1, "error": 2})
    first = completed("", kind="tool_use")  # 14 in / 30 out, $0.10
    first.metadata["cost"], first.more_turns = {"input_usd": 0.04, "output_usd": 0.06, "total_usd": 0.1}, True
    view.feed(first)
    view.feed(ModelFailed(ProviderError("invalid_request", "Token limit reached"), first.message, {}))
    live = view.state.footer_figures()
    saved = Transcript(provider="openai:m", status="failed", usage=TranscriptUsage(input_tokens=14, output_tokens=30),
                       cost=TranscriptCost(total_usd=0.1), masked={"cell template": 1, "error": 2},
                       timings=Timings(total_s=0.5))
    timeless = [re.sub(r"[0-9.]+ s$", "N s", figure) for figure in live]
    assert timeless == [re.sub(r"[0-9.]+ s$", "N s", figure) for figure in footer_figures(saved)]
    assert live[-2:] == ["3 values masked (cell template 1, error 2)", "failed"]
    plain = make_view("openai:m", widgets=False)
    assert not any("masked" in figure for figure in plain.state.footer_figures())


def test_text_view_interrupted() -> None:
    out = io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(TextDelta(0, "so far"))
    view.mark_interrupted()
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["so far", "[interrupted; the text above is partial]"]  # as %%compare's panes
    assert lines[2].endswith("interrupted]") and " · total " in lines[2]  # timed as the notebook's footer is


def test_every_frame_passes_the_redactor_even_a_secret_split_across_deltas(monkeypatch) -> None:
    from ipyagent.core.redact import add_secret

    secret = "sk-live-view-0123456789abcdef"
    add_secret(secret)
    pieces = ["the key is ", secret[:9], secret[9:20], secret[20:], " and more", " words"]

    async def main() -> FrontEnd:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        for piece in pieces:
            view.feed(TextDelta(0, piece))
            await asyncio.sleep(0.04)  # a frame between any two deltas
        view.feed(ModelFailed(error=ProviderError("server", f"echoed {secret}"), partial=Message(role="assistant")))
        return front

    front = run_virtual(main, monkeypatch, view_module, live_front)
    wire = repr(front.messages)
    assert secret not in wire and secret[9:20] not in wire
    assert front.text == "the key is [redacted] and more words"
    assert front.error == "echoed [redacted]"


# -- before the first token: retry notices -------------------------------------------------------


def _retry(attempt: int = 2, wait: float = 2.0) -> Any:
    from ipyagent.core import RetryScheduled

    return RetryScheduled(attempt, 3, wait, ProviderError("rate_limit", "slow down", status=429))


def test_the_live_footer_shows_a_retry_notice_until_the_first_token() -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(_retry())
        while front.status.get("figures", [])[-1:] != ["retrying 2/3 in 2.0 s · 429 rate limit"]:
            await asyncio.sleep(0.005)
        retrying = dict(front.status)
        view.feed(TextDelta(0, "hello "))
        while front.text != "hello ":
            await asyncio.sleep(0.005)
        return retrying, dict(front.status)

    retrying, streaming = asyncio.run(main())
    assert retrying["ticking"] == "waiting"  # "… · waiting for the first token · 3.1 s", ticking in the browser
    assert retrying["figures"] == ["openai:m", "retrying 2/3 in 2.0 s · 429 rate limit"]
    assert streaming["figures"][-1].startswith("first token") and streaming["ticking"] == "streaming"


def test_no_frame_carries_empty_text() -> None:
    async def main() -> FrontEnd:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        for piece in ("one ", "two ", "three"):
            view.feed(TextDelta(0, piece))
            await asyncio.sleep(0.04)
        view.feed(completed("one two three"))
        return front

    front = asyncio.run(main())
    texts = [op for m in front.frames for op in m["ops"] if op[0] == "text"]
    assert texts and all(op[2] for op in texts), texts
    assert front.text == "one two three"


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_a_tty_shows_the_wait_and_the_retry_notice_then_erases_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the whole line fits
    out = _Terminal(tty=True)
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    assert re.fullmatch(r"\r\x1b\[2Kwaiting for the first token · 0\.\d s", out.getvalue()), repr(out.getvalue())
    view.feed(_retry())
    last = out.getvalue().rsplit("\r\x1b[2K", 1)[1]
    assert re.fullmatch(r"retrying 2/3 in 2\.0 s · 429 rate limit · waiting for the first token · 0\.\d s", last), last
    view._wait.show()  # what its timer does every TICK seconds
    view.feed(TextDelta(0, "Hello "))
    assert out.getvalue().endswith("\r\x1b[2KHello ")  # erased before the answer
    view.feed(completed("Hello world"))
    assert "retrying" not in out.getvalue().rsplit("\r\x1b[2K", 1)[1]


def test_a_pipe_gets_no_wait_line_and_no_retry_notice() -> None:
    out = _Terminal(tty=False)
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(_retry())
    view.feed(TextDelta(0, "Hello "))
    assert out.getvalue() == "Hello "


def test_the_wait_line_ticks_on_the_loop_and_stops_at_the_first_token() -> None:
    out = _Terminal(tty=True)
    view = TextView("openai:m", stream=out)

    async def main() -> tuple[int, Any]:
        view._wait.TICK = 0.01
        view.feed(ModelStarted(provider="openai", model="m"))
        while out.getvalue().count("waiting for the first token") < 3:
            await asyncio.sleep(0.005)
        view.feed(TextDelta(0, "Hi "))
        return out.getvalue().count("waiting for the first token"), view._wait._timer

    drawn, timer = asyncio.run(main())
    assert drawn >= 3 and timer is None  # redrawn by its timer, which stopped with the first token


def test_a_retry_in_a_later_turn_is_a_line_of_its_own_on_a_tty() -> None:
    out = _Terminal(tty=True)
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(TextDelta(0, "First turn. "))
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(_retry(wait=1.0))
    head, notice = out.getvalue().rsplit("[retrying 2/3 in 1.0 s · 429 rate limit]", 1)
    assert "First turn." in head and head.rstrip("\x1b[0123456789m").endswith("\n")  # a line of its own
    assert "waiting for the first token" not in notice


def test_a_cards_media_and_views_go_live_with_its_result(monkeypatch) -> None:
    """A tool's image, audio and file reach the live card as media (base64, drawn by the front end),
    its text without ``<image …>`` placeholders, and a ``structuredContent`` kept only for the user
    (`shown_only`) in the card's text."""
    from ipyagent.core import (AudioArtifact, BlobArtifact, ImageArtifact, JsonArtifact, ListArtifact, TextArtifact,
                               ToolAction, ToolCallCompleted)

    png = b"\x89PNG\r\n\x1a\n" + b"p" * 20
    result = ListArtifact(value=[TextArtifact(value="Here it is"), ImageArtifact(value=png),
                                 AudioArtifact(value=b"RIFF", mime_type="audio/wav"),
                                 BlobArtifact(value=b"\x1f\x8b", mime_type="application/gzip", name="file:///tmp/x.gz"),
                                 JsonArtifact(value={"content": "Here it is"}, name="structuredContent",
                                              shown_only=True)])

    async def main() -> FrontEnd:
        view = WidgetView("openai:m")
        front = FrontEnd(view)
        front.hello()
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(ToolCallDelta(0, call_id="call_1", name="draw", arguments="{}"))
        view.feed(ToolCallCompleted(ToolAction(tag="call_1", name="draw", input={}), result, 0.1))
        await asyncio.sleep(0.05)
        return front

    front = run_virtual(main, monkeypatch, view_module, live_front)
    (card,) = front.segments.values()
    call = card["call"]
    assert call["result"] == 'Here it is\n\n{"content": "Here it is"}' and "<image" not in call["result"]
    import base64
    assert call["media"] == [
        {"kind": "image", "mime_type": "image/png", "size": len(png), "data": base64.b64encode(png).decode()},
        {"kind": "audio", "mime_type": "audio/wav", "size": 4, "data": base64.b64encode(b"RIFF").decode()},
        {"kind": "blob", "mime_type": "application/gzip", "size": 2, "name": "file:///tmp/x.gz", "data": "H4s="}]
