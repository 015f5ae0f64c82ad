"""Where results keep their numbers: a matrix keeps tens of thousands of `EvalResult`s for as long as
the notebook holds the evaluation, and a float object per time and price (24 bytes each, and a slot
each) was a third of what a result kept beyond its answer. Results are placed, as they are made, in
blocks of `SIZE`: a block keeps `WIDTH` floats a result in one `array` (8 bytes each), and a result
keeps its block and its place (a small int, shared). A value an array cannot give back as it was
given (an int, a float subclass, a NaN, any other object) is kept in the block's `other` instead."""

from __future__ import annotations

import threading
from array import array
from typing import Any

#: Results a block holds, and floats a result keeps (`EvalResult`'s float fields); SIZE * WIDTH is at
#: most 256, so a result's place is one of the small ints Python shares.
SIZE, WIDTH = 64, 4
_NAN = float("nan")
_EMPTY = array("d", [_NAN]) * (SIZE * WIDTH)


class Block:
    """The numbers of up to `SIZE` results: `floats` (NaN: None, or the value in `other`), and
    `other`, place -> a value kept as it was given."""

    __slots__ = ("floats", "other", "used")

    def __init__(self) -> None:
        self.floats = array("d", _EMPTY)
        self.other: dict[int, Any] = {}
        self.used = 0


_lock = threading.Lock()
_current = [Block()]


def place() -> tuple[Block, int]:
    """A new result's (block, place): the place of its first float in the block's arrays."""
    with _lock:
        block = _current[0]
        if block.used == SIZE:
            block = _current[0] = Block()
        at = block.used * WIDTH
        block.used += 1
    return block, at


class FloatField:
    """An optional float of a result, kept in its block (`offset`: which of the result's `WIDTH`)."""

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        block, at = obj._block, obj._at + self.offset
        value = block.floats[at]
        if value == value:
            return value
        return block.other.get(at)

    def __set__(self, obj: Any, value: Any) -> None:
        block, at = obj._block, obj._at + self.offset
        if type(value) is float and value == value:
            block.floats[at] = value
            if block.other:
                block.other.pop(at, None)
            return
        block.floats[at] = _NAN
        if value is None:
            block.other.pop(at, None)
        else:
            block.other[at] = value
