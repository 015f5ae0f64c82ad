"""Reading a reply (`drivers/decode.py`, DESIGN.md "drivers"): the base cuts the body into frames
(SSE events, or lines ended by CR or LF only) and feeds them to the driver's `StreamDecoder`; the
read loop (`decode.read_head`, `TurnSteps._relay`) stops at the decoder's stop signal and asks it once
for what is left. Each test fails when its decision flips (`make mutation`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx2
import pytest

from ipyagent.core import ProviderError, StopKind, TextDelta, Usage
from ipyagent.drivers import StreamDecoder, StreamMeta
from ipyagent.drivers.decode import LineFramer, body_frames, stream_json

from ..support.finalizer import left_to_the_loop
from ..support.toy_driver import NDJSON, TEXT, Scripted, Toy, assert_error, ndjson, run_turn


def _frames(
    body: bytes | list[bytes], framing: str, content_type: str | None = None
) -> tuple[list[Any], httpx2.Response]:
    pieces = body if isinstance(body, list) else [body]

    async def stream() -> Any:
        for piece in pieces:
            yield piece

    headers = {"content-type": content_type} if content_type else {}
    response = httpx2.Response(200, headers=headers, content=stream(), request=httpx2.Request("POST", "http://h"))

    async def main() -> list[Any]:
        return [frame async for frame in body_frames(response, framing)]

    return asyncio.run(main()), response


# -- lines ---------------------------------------------------------------------------------------


def test_a_line_ends_at_lf_crlf_or_cr_and_nowhere_else() -> None:
    framer = LineFramer()
    assert framer.feed("a\nb\r\nc\rd\u2028e\x85f\x0bg\x1ch") == ["a", "b", "c"]
    assert framer.flush() == ["d\u2028e\x85f\x0bg\x1ch"]
    assert framer.flush() == []


def test_a_line_may_arrive_in_pieces_and_a_crlf_split_between_two_is_one_break() -> None:
    framer = LineFramer()
    assert framer.feed("par") == [] and framer.feed("t") == []
    assert framer.feed("ial\r") == []  # held: the next piece may begin with the CR's LF
    assert framer.feed("\nnext\n") == ["partial", "next"]
    assert framer.feed("one\r") == [] and framer.feed("two\n") == ["one", "two"]  # a lone CR is a break of its own
    assert framer.feed("last\r") == [] and framer.flush() == ["last"]  # the body ended after its CR
    assert framer.feed("\r") == [] and framer.flush() == [""]  # an empty line ended by a CR
    assert framer.feed("x") == [] and framer.flush() == ["x"] and framer.flush() == []


def test_lines_framing_gives_every_line_the_last_one_without_its_break_too() -> None:
    frames, _ = _frames([b"a\n\nb\r", b"\nc"], "lines")
    assert frames == ["a", "", "b", "c"]


def test_lines_are_decoded_as_utf_8_even_when_a_character_is_split_between_pieces() -> None:
    data = "é\n".encode()
    frames, _ = _frames([data[:1], data[1:]], "lines", "application/x-ndjson; charset=utf-8")
    assert frames == ["é"]


# -- SSE -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/json"])
def test_sse_framing_reads_a_reply_labelled_otherwise_as_sse(content_type: str | None) -> None:
    frames, response = _frames(b"event: e\ndata: 1\ndata: 2\n\n: comment\n\ndata: x\n\n", "sse", content_type)
    assert [(f.event, f.data) for f in frames] == [("e", "1\n2"), ("message", "x")]
    assert response.headers["content-type"] == "text/event-stream"


def test_sse_framing_keeps_the_label_of_an_event_stream() -> None:
    _, response = _frames(b"data: x\n\n", "sse", "text/event-stream; charset=utf-8")
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"


def test_an_sse_event_may_take_64_mib_but_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx2's default limit, 1 MiB, is less than real single events (a base64 image)."""
    from ipyagent.drivers import decode

    big = b"data: " + b"x" * (2 * 1024 * 1024) + b"\n\n"
    frames, _ = _frames(big, "sse", "text/event-stream")
    assert len(frames[0].data) == 2 * 1024 * 1024 and decode.MAX_EVENT_BYTES == 64 * 1024 * 1024
    monkeypatch.setattr(decode, "MAX_EVENT_BYTES", 1000)
    with pytest.raises(httpx2.SSEError, match="1000 byte limit"):
        _frames(b"data: " + b"x" * 2000 + b"\n\n", "sse", "text/event-stream")


def _two_events() -> httpx2.Response:
    async def stream() -> Any:
        yield b"data: 1\n\n"
        yield b"data: 2\n\n"

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=stream(),
                           request=httpx2.Request("POST", "http://h"))


def test_httpx2_s_event_source_closed_early_leaves_what_it_reads_to_the_event_loop() -> None:
    """httpx2 2.17: closing `EventSource`'s iterator (as a reader does at the stop signal) does not
    close the ``aiter_text`` it reads, nor that one its ``aiter_bytes``: the loop's finalizer does,
    later, in tasks of their own that hold the response (once the loop has ended, in a reference
    cycle on Python 3.12+). Hence `body_frames` gives EventSource text it closes itself (`_text`);
    when this fails, httpx2 closes them and `EventSource(response)` will do again."""
    async def run() -> None:
        events = aiter(httpx2.EventSource(_two_events()))
        await anext(events)
        await events.aclose()  # type: ignore[attr-defined]

    assert left_to_the_loop(run) == ["Response.aiter_text", "Response.aiter_bytes"]


@pytest.mark.parametrize("framing", ["sse", "lines"])
def test_frames_closed_early_close_what_they_read_and_the_response(framing: str) -> None:
    response = _two_events()

    async def run() -> None:
        frames = body_frames(response, framing)
        await anext(frames)
        await frames.aclose()  # type: ignore[attr-defined]

    assert left_to_the_loop(run) == [] and response.is_closed


def test_another_framing_is_refused() -> None:
    with pytest.raises(ValueError, match="framing is 'sse' or 'lines', not 'ndjson'"):
        _frames(b"", "ndjson")


# -- the decoder's defaults, and stream_json -----------------------------------------------------


def test_a_decoder_starts_with_no_facts_not_done_nothing_left_and_no_whole_reply() -> None:
    decoder = StreamDecoder()
    assert decoder.meta == StreamMeta() and decoder.done is False
    assert tuple(decoder.finish()) == () and decoder.whole({"a": 1}) is None
    with pytest.raises(NotImplementedError):
        decoder.feed("line")


def test_a_noted_fact_replaces_only_the_fields_it_sets() -> None:
    decoder = StreamDecoder()
    decoder.note(StreamMeta(stop_raw="stop", stop_kind=StopKind.end_turn, model="m"))
    decoder.note(StreamMeta(usage=Usage(input_tokens=3), model=""))
    assert decoder.meta == StreamMeta(
        usage=Usage(input_tokens=3), stop_raw="stop", stop_kind=StopKind.end_turn, model=""
    )


def test_a_stream_line_that_is_not_json_is_quoted_up_to_200_characters() -> None:
    line = "<" + "z" * 300
    with pytest.raises(ProviderError) as raised:
        stream_json("p", line)
    assert_error(
        raised.value, "invalid_response", f"p sent a stream line that is not JSON: {line[:200]!r}", retryable=False
    )
    assert stream_json("p", '{"a": [1]}') == {"a": [1]}


# -- the read loop: the head, the rest, the stop signal, what is left -----------------------------


class Counting(StreamDecoder):
    """Reads ``t:TEXT`` lines as text, ``stop`` as the stop reason, ``end`` as the stop signal;
    keeps what it was fed and how often `finish` was called; `left` is what `finish` gives."""

    def __init__(self, left: Sequence[Any] = ()) -> None:
        super().__init__()
        self.fed: list[str] = []
        self.finished = 0
        self.left = list(left)

    def feed(self, line: str) -> Sequence[Any]:
        self.fed.append(line)
        if line == "end":
            self.done = True
        elif line == "stop":
            self.note(StreamMeta(stop_raw="stop", stop_kind=StopKind.end_turn))
        elif line.startswith("t:"):
            return (TextDelta(0, line[2:]),)
        return ()

    def finish(self) -> Sequence[Any]:
        self.finished += 1
        return self.left


class Lines(Toy):
    left: Sequence[Any] = ()

    def decoder(self) -> Counting:
        self.made = Counting(self.left)
        return self.made


def _turn(body: bytes, left: Sequence[Any] = ()) -> tuple[Any, Counting]:
    driver = Lines("m", transport=Scripted((200, NDJSON, body)))
    driver.left = left
    return run_turn(driver)[-1], driver.made


def test_no_frame_is_fed_after_the_stop_signal_and_what_is_left_is_asked_for_once() -> None:
    done, decoder = _turn(b"t:a\nt:b\nstop\nend\nt:after\n")
    assert done.message.text == "ab" and decoder.fed == ["t:a", "t:b", "stop", "end"] and decoder.finished == 1


def test_what_is_left_at_the_end_of_the_body_is_relayed_after_the_rest() -> None:
    done, decoder = _turn(b"t:a\nstop\n", left=[TextDelta(0, "z")])
    assert done.message.text == "az" and decoder.finished == 1


def test_what_is_left_is_checked_like_every_delta() -> None:
    failed, _ = _turn(b"t:a\nstop\n", left=[TextDelta(0, 5)])  # type: ignore[arg-type]
    assert failed.type == "model_failed" and failed.partial.text == "a"
    assert (
        failed.error.message
        == "toy sent a reply ipyagent could not read (TypeError: a text_delta whose text is int (5), not text)"
    )


def test_a_body_read_to_its_end_before_any_delta_asks_once_and_relays_what_is_left() -> None:
    events = run_turn(Lines("m", transport=Scripted((200, NDJSON, b"stop\n"))))
    assert [e.type for e in events] == ["model_started", "model_completed"]
    done, decoder = _turn(b"stop\n", left=[TextDelta(0, "only at the end")])
    assert done.message.text == "only at the end" and decoder.finished == 1


def test_the_stop_signal_before_any_delta_ends_the_reply() -> None:
    done, decoder = _turn(b"stop\nend\nt:after\n", left=[TextDelta(0, "left")])
    assert done.type == "model_completed" and done.message.text == "left" and decoder.fed == ["stop", "end"]
    assert decoder.finished == 1


def test_the_facts_are_those_of_the_try_that_answered(no_sleep: list[float]) -> None:
    transport = Scripted((500, NDJSON, b"{}"), (200, NDJSON, ndjson({"model": "second"}, *TEXT)))
    done = run_turn(Toy("m", transport=transport))[-1]
    assert done.metadata["model"] == "second" and done.usage == Usage(input_tokens=7, output_tokens=2)
