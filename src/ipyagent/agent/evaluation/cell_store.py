"""Where results keep their numbers: a matrix keeps tens of thousands of `EvalResult`s for as long as
the notebook holds the evaluation, and a float object per time and price (24 bytes each, and a slot
each) was a third of what a result kept beyond its answer. Results are placed, as they are made, in
blocks of `SIZE`: a block keeps `WIDTH` floats a result in one `array` (8 bytes each), and a result
keeps its block and its place (a small int, shared); its run id (12 hex digits, a 61-byte str) is a
number in the block's `ids`; the fields almost always left as they were made (an error, a person's
grade) are kept, when set, in the block's `other`, taking no slot. A value an array cannot give back as it was
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
_NO_IDS = array("Q", bytes(8 * SIZE))


class Block:
    """The numbers of up to `SIZE` results: `floats` (NaN: None, or the value in `other`), `ids` (a
    run id's number + 1; 0: None, or the id in `other`), and `other`, place -> a value kept as it was
    given (a run id's place: -1 - its result's place // WIDTH; a `RareField`'s: its `key` + the
    result's place)."""

    __slots__ = ("floats", "ids", "other", "used")

    def __init__(self) -> None:
        self.floats = array("d", _EMPTY)
        self.ids = array("Q", _NO_IDS)
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


class IdField:
    """A result's run id, kept in its block: 12 lowercase hex digits (`memory.new_run_id`, the run
    store's ids) as a number, anything else (None aside) in the block's `other`. It reads back equal,
    a new str each time."""

    __slots__ = ()

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        block, at = obj._block, obj._at // WIDTH
        number = block.ids[at]
        if number:
            return f"{number - 1:012x}"
        return block.other.get(-1 - at)

    def __set__(self, obj: Any, value: Any) -> None:
        block, at = obj._block, obj._at // WIDTH
        number = _id_number(value)
        block.ids[at] = number
        if number or value is None:
            if block.other:
                block.other.pop(-1 - at, None)
        else:
            block.other[-1 - at] = value


def _id_number(value: Any) -> int:
    """The number + 1 of a run id of 12 lowercase hex digits (0: any other value)."""
    if type(value) is not str or len(value) != 12:
        return 0
    try:
        number = int(value, 16)
    except ValueError:
        return 0
    return number + 1 if f"{number:012x}" == value else 0


class RareField:
    """A field of a result almost always left at its `default` (None, ""): kept, once set to another
    value, in the block's `other` (under `key` + the result's place, `key` >= 1000: apart from the
    floats' and the ids' places)."""

    __slots__ = ("default", "key")

    def __init__(self, key: int, default: Any) -> None:
        self.key, self.default = key, default

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj._block.other.get(self.key + obj._at, self.default)

    def __set__(self, obj: Any, value: Any) -> None:
        other, default = obj._block.other, self.default
        if value is default or (type(value) is type(default) and value == default):
            if other:
                other.pop(self.key + obj._at, None)
        else:
            other[self.key + obj._at] = value
