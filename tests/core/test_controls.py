"""core.visible_controls: text for a terminal or text/plain shows control characters, never runs them."""

from __future__ import annotations

from ipyagent.core import visible_controls

C0 = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20)]]
C1 = [chr(c) for c in range(0x80, 0xA0)]


def test_every_control_but_newline_and_tab_is_replaced_by_a_visible_form() -> None:
    shown = visible_controls("a" + "".join([*C0, "\x7f", *C1]) + "\tb\nc")
    assert shown.endswith("\tb\nc") and shown.startswith("a")
    assert not any(c in shown for c in [*C0, "\x7f", *C1])
    assert shown[1:1 + len(C0)] == "".join(chr(0x2400 + ord(c)) for c in C0)  # Unicode's control pictures
    assert "\u2421" in shown  # DEL


def test_del_and_the_first_c1_control_have_their_own_forms() -> None:
    assert visible_controls("\x7f") == "\u2421"  # DEL: its control picture
    assert visible_controls("\x80\x9f") == "\u241b@\u241b_"  # C1 from 0x80 on: ESC and code - 0x40


def test_escape_sequences_are_shown_as_text() -> None:
    osc52 = "\x1b]52;c;cm0gLXJmIC8=\x07"  # clipboard write
    assert visible_controls(osc52) == "␛]52;c;cm0gLXJmIC8=␇"
    assert visible_controls("\x1b]0;title\x07\x1b[2J") == "␛]0;title␇␛[2J"
    assert visible_controls("\x1bP1$r\x1b\\") == "␛P1$r␛\\"  # DCS, ended by ST
    assert visible_controls("\x9b2J \x9d0;t\x9c") == "␛[2J ␛]0;t␛\\"  # C1: ESC and the 7-bit equivalent


def test_crlf_reads_as_a_newline_and_a_lone_carriage_return_is_shown() -> None:
    assert visible_controls("one\r\ntwo\rthree") == "one\ntwo␍three"


def test_printable_text_is_kept_as_it_is() -> None:
    text = "é — 日本 ✓ \u00a0 ␛ already"  # from U+00A0 on, and our own visible forms
    assert visible_controls(text) is text
    assert visible_controls("") == ""
