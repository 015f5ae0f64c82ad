"""Waiting for something to happen in another thread or process (a server's request, a file, a
kernel's state), by polling the condition, never for a number of seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, every: float = 0.02) -> bool:
    """True as soon as `condition()` is truthy (looked at once at least), False past `timeout`
    seconds (a guard against a test that would hang, not a measure: callers assert the result)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
