"""Where results keep their numbers: a matrix keeps tens of thousands of `EvalResult`s for as long as
the notebook holds the evaluation, and a float object per time and price (24 bytes each), a str per
run id (61 bytes) and a slot per field were most of what a result kept beyond its answer.

Results are placed, as they are made, in blocks of `SIZE`; a result keeps its block and its place in
it (a small int, shared). A block keeps its results' times and prices in one `array` of floats and
their run ids as numbers; the fields almost always left as they were made (an error, a person's grade)
only when set. A value an array cannot give back as it was given (an int for a float, a NaN, a run id
of another form) is kept, as given, in the block's `other`, under the field's `key` + the place.
The fields read most (status, verdict, tokens) stay slots: a descriptor costs a Python call a read."""

from __future__ import annotations

import threading
from array import array
from typing import Any

#: Results a block holds (a place is one of the small ints Python shares), and floats a result keeps.
SIZE, WIDTH = 256, 4
_NAN = float("nan")
_NO_FLOATS = array("d", [_NAN]) * (SIZE * WIDTH)
_NO_IDS = array("Q", bytes(8 * SIZE))
_HEX = "0123456789abcdef"


class Block:
    """The numbers of up to `SIZE` results: `floats` (NaN: None, or the value is in `other`), `ids` (a
    run id's number + 1; 0: None, or the id is in `other`), and `other`: a field's key + a place -> a
    value as it was given."""

    __slots__ = ("floats", "ids", "other", "used")

    def __init__(self) -> None:
        self.floats = array("d", _NO_FLOATS)
        self.ids = array("Q", _NO_IDS)
        self.other: dict[int, Any] = {}
        self.used = 0


_lock = threading.Lock()
_current = [Block()]


def place() -> tuple[Block, int]:
    """A new result's (block, place)."""
    with _lock:
        block = _current[0]
        if block.used == SIZE:
            block = _current[0] = Block()
        at = block.used
        block.used += 1
    return block, at


class FloatField:
    """An optional float of a result (`offset`: which of its `WIDTH`; its key in `other`: offset *
    SIZE): a float kept in the block's `floats`; any other value but None (an int, a float subclass,
    a NaN, a Decimal) in `other`."""

    __slots__ = ("key", "offset")

    def __init__(self, offset: int) -> None:
        self.offset, self.key = offset, offset * SIZE

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj._block.floats[obj._at * WIDTH + self.offset]
        if value == value:  # not NaN
            return value
        return obj._block.other.get(self.key + obj._at)

    def __set__(self, obj: Any, value: Any) -> None:
        block, at = obj._block, obj._at
        if type(value) is float and value == value:
            block.floats[at * WIDTH + self.offset] = value
            if block.other:
                block.other.pop(self.key + at, None)
            return
        block.floats[at * WIDTH + self.offset] = _NAN
        if value is None:
            block.other.pop(self.key + at, None)
        else:
            block.other[self.key + at] = value


class IdField:
    """A result's run id (its key in `other`: `key` * SIZE): 12 lowercase hex digits
    (`memory.new_run_id`, the run store's ids) kept as a number in the block's `ids`, anything else
    (None aside) in `other`. It reads back equal, a new str each time."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key * SIZE

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        number = obj._block.ids[obj._at]
        if number:
            return f"{number - 1:012x}"
        return obj._block.other.get(self.key + obj._at)

    def __set__(self, obj: Any, value: Any) -> None:
        block, at = obj._block, obj._at
        number = _id_number(value)
        block.ids[at] = number
        if number or value is None:
            if block.other:
                block.other.pop(self.key + at, None)
        else:
            block.other[self.key + at] = value


def _id_number(value: Any) -> int:
    """The number + 1 of a run id of 12 lowercase hex digits (0: any other value)."""
    if type(value) is not str or len(value) != 12 or value.strip(_HEX):
        return 0
    return int(value, 16) + 1


class RareField:
    """A field of a result almost always left at its `default` (None, ""): kept, once set to another
    value, in the block's `other` (under `key` * SIZE + the place); set back to it, removed."""

    __slots__ = ("default", "key")

    def __init__(self, key: int, default: Any) -> None:
        self.key, self.default = key * SIZE, default

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

