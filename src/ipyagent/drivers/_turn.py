"""One model turn's bookkeeping inside `BasePromptDriver.stream` (internal).

The driver template goes send (with retries) -> relay -> complete, the way
httpx's client goes ``send`` -> ``_send_handling_redirects`` ->
``_send_single_request``. What those steps learn about the turn (attempts,
waits, the request id, the first token's time, the deltas) is kept here, in
typed fields, and turned into each event's metadata dict only at the end, a
fresh dict for each reader.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from tenacity import RetryCallState

from ..core import DeltaMessage, redact
from .aggregate import Aggregator, StreamMeta
from .decode import StreamDecoder


@dataclass(slots=True)
class Opened:
    """A response that answered 2xx (its body bounded by the response deadline): the frames
    of its body not read yet (None: read to its end), the decoder reading them, and the
    deltas read up to the first (`head`)."""

    response: httpx2.Response
    frames: AsyncIterator[Any] | None
    decoder: StreamDecoder
    head: list[DeltaMessage]


@dataclass(slots=True)
class Turn:
    """What one model turn has gathered so far. Times are `time.monotonic()` seconds."""

    started: float
    replayed: bool = False
    settings: dict[str, Any] | None = None
    system_blocks: list[dict[str, Any]] | None = None
    agg: Aggregator = field(default_factory=Aggregator)
    meta: StreamMeta = field(default_factory=StreamMeta)
    attempts: int = 0
    retry_waits: list[float] = field(default_factory=list)
    last_error: str | None = None
    request_id: str | None = None
    ttft_s: float | None = None
    partial_tool_calls: list[dict[str, Any]] | None = None
    retry_error: Any = None  # the last failed try's ProviderError, before a retry
    opened: Opened | None = None  # the response `_send` opened

    # -- tenacity hooks ----------------------------------------------------------------

    def attempt(self, state: RetryCallState) -> None:
        self.attempts = state.attempt_number

    def waiting(self, state: RetryCallState) -> None:
        self.retry_waits.append(round(state.upcoming_sleep, 3))
        exc = state.outcome.exception() if state.outcome else None
        self.last_error = str(exc)
        self.retry_error = exc

    def model_or(self, default: str) -> str:
        """The model the stream named (a server may answer with another), else `default`; a
        name that is not text (a broken proxy's object) is not one."""
        model = self.meta.model
        return model if isinstance(model, str) and model else default

    # -- the events' metadata ----------------------------------------------------------

    def metadata(self, provider: str, model: str, **extra: Any) -> dict[str, Any]:
        """A new dict: attempts, retry waits (seconds), replayed, request id, first-token and
        total latency (seconds), provider and model, and `extra` (cost...); ``usage_error``, one
        line, when the provider's usage block could not be read (usage and price unknown)."""
        data: dict[str, Any] = {
            "attempts": self.attempts,
            "retry_waits": list(self.retry_waits),
            "replayed": self.replayed,
        }
        if self.settings:
            data["settings"] = dict(self.settings)  # shown in footers and transcripts
        if self.system_blocks:
            data["system_blocks"] = list(self.system_blocks)  # what %agent inspect shows
        if self.last_error is not None:
            data["last_error"] = self.last_error
        data["request_id"] = self.meta.request_id or self.request_id
        data["ttft_s"] = self.ttft_s
        if self.meta.usage_error is not None:  # usage is not the answer: the turn goes on, its usage and price unknown
            data["usage_error"] = redact(
                f"{provider} sent a usage block ipyagent could not read ({self.meta.usage_error}); "
                "this turn's usage and price are unknown"
            )
        if self.partial_tool_calls is not None:
            data["partial_tool_calls"] = list(self.partial_tool_calls)
        data["latency_s"] = time.monotonic() - self.started
        data["provider"], data["model"] = provider, model
        data.update(extra)
        return data
