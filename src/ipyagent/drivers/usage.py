"""A provider's usage block read in one place, for every driver (DESIGN.md "core": Usage).

Usage is the bill, not the answer. A block of the wrong shape (a count that is a fraction,
text, negative; details that are no object; no object at all) is dropped: the turn completes
with its text, its usage is unknown (zero counts) and so is its price, and one line says so
(`StreamMeta.usage_error`, then the turn's ``metadata["usage_error"]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core import Usage
from .aggregate import StreamMeta

#: The longest detail a `usage_error` quotes, characters.
DETAIL_CHARS = 200


def wire_usage(raw: Any, **counts: Any) -> Usage:
    """`Usage` of token `counts` read off the wire, `raw` kept; each count a whole number >= 0.

    Raises:
        ValueError: naming the first count that is not (``input_tokens is 1.5, not a whole
            number of tokens``); a bool, a float (even 12.0) and text are not.
    """
    check_counts(**counts)
    return Usage(raw=raw, **counts)


def check_counts(**counts: Any) -> None:
    """Raises ValueError naming the first of `counts` that is not a whole number >= 0 (a bool, a
    float, even 12.0, and text are not): for counts a driver adds up before `wire_usage`."""
    for name, value in counts.items():
        if type(value) is not int or value < 0:
            raise ValueError(f"{name} is {value!r}, not a whole number of tokens")


def read_usage(read: Callable[[Any], Usage], raw: Any, **fields: Any) -> StreamMeta:
    """A `StreamMeta` of `fields` (request id, model, stop reason...) and the usage `read(raw)`
    gives; when `read` raises (the block is of the wrong shape), no usage and `usage_error`
    saying why, as one line."""
    try:
        usage = read(raw)
    except Exception as exc:  # noqa: BLE001 - whatever the shape broke, the reply is still good
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if len(detail) > DETAIL_CHARS:
            detail = detail[:DETAIL_CHARS - 1] + "…"
        return StreamMeta(usage_error=detail, **fields)
    return StreamMeta(usage=usage, **fields)
