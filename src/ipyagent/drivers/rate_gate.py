"""`RateGate`: one provider's 429 back-off shared by every request of a lane.

A driver retries a 429 by itself, honouring ``Retry-After`` for that request
(`BasePromptDriver`). When many requests to one provider are in flight (an
evaluation's lane), the provider's ``Retry-After`` speaks for all of them: a
driver given a gate waits at it before each attempt, and a 429 holds the gate
closed for the time the provider asked. Requests to other providers (other
drivers, other gates) go on.
"""

from __future__ import annotations

import asyncio
import time

#: Seconds a 429 without ``Retry-After`` closes the gate.
DEFAULT_HOLD_S = 1.0


class RateGate:
    """A gate closed until a moment on the monotonic clock.

    Attributes:
        holds: how many 429s closed (or extended) the gate.
        held_s: seconds the gate was asked to stay closed, summed.
    """

    def __init__(self) -> None:
        self._until = 0.0
        self.holds = 0
        self.held_s = 0.0

    @property
    def closed_for(self) -> float:
        """Seconds until the gate opens (0.0 when open)."""
        return max(0.0, self._until - time.monotonic())

    def hold(self, seconds: float | None) -> None:
        """Close the gate for `seconds` from now (None: `DEFAULT_HOLD_S`); never shortens a hold."""
        seconds = DEFAULT_HOLD_S if seconds is None else max(0.0, float(seconds))
        until = time.monotonic() + seconds
        self.holds += 1
        self.held_s += seconds
        self._until = max(self._until, until)

    async def wait(self) -> None:
        """Return once the gate is open (at once when it is)."""
        while (left := self._until - time.monotonic()) > 0:
            await asyncio.sleep(left)
