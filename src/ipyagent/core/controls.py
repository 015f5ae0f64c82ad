"""Text for a terminal or a ``text/plain`` output: control characters shown, never obeyed.

Model, tool and server text is untrusted. A terminal acts on C0 controls (a bell, a
backspace, a carriage return that overwrites a line), on C1 controls (``\\x9b`` is a
one-byte CSI) and on escape sequences: ``ESC ] 52 ; c ; … BEL`` writes the clipboard
(OSC 52), ``ESC ] 0 ; … BEL`` sets the window title, ``ESC [ 2 J`` clears the screen, DCS
strings reach the terminal's own parsers. `visible_controls` replaces each such character
with a visible form, so the sequence is shown, not run (``␛]52;c;…␇``); newlines and tabs
stay, and ``\\r\\n`` reads as a newline. Our own colours are added after this, never to
untrusted text.

The visible forms (Unicode's Control Pictures block, ECMA-48 for C1):

* C0 ``\\x00``-``\\x1f`` (but tab and newline): U+2400 + code (``\\x1b`` -> ``␛``, ``\\x07`` -> ``␇``);
* DEL ``\\x7f``: ``␡``;
* C1 ``\\x80``-``\\x9f``: ``␛`` and the 7-bit equivalent (``\\x9b`` -> ``␛[``, ``\\x9d`` -> ``␛]``).
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, and C1 controls: what a terminal may act on.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\u241b" + chr(code - 0x40)


def visible_controls(text: str) -> str:
    """`text` with every control character but newline and tab replaced by its visible form
    (module docstring): ``"a\\x1b]0;t\\x07"`` -> ``"a␛]0;t␇"``. ``\\r\\n`` becomes ``\\n``.
    Cost: one regular-expression scan; text without controls is returned as it is."""
    if not text or CONTROLS.search(text) is None:
        return text
    return CONTROLS.sub(_visible, text.replace("\r\n", "\n"))
