"""A toy prompt driver for tests of the driver template (`drivers/base.py`): one JSON object a
line, over an in-process transport that serves scripted replies, so the template's decisions are
tested apart from any provider's protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2

from ipyagent.core import PromptStack, ProviderError, StopKind, TextDelta, ToolCallDelta, Usage
from ipyagent.drivers import StreamDecoder, StreamMeta
from ipyagent.drivers.base import BasePromptDriver, Capabilities


class Toy(BasePromptDriver):
    """One JSON object a line: ``{"text": ...}`` is a text delta, ``{"call": [id, name, args]}`` a
    tool call's delta, ``{"stop": KIND}`` the stop reason (``""``: a raw one only), ``{"usage":
    [in, out]}`` (``{"bad_usage": WHY}``: one that could not be read), ``{"model": ..}`` and
    ``{"id": ..}`` stream facts; ``{"end": 1}`` ends the reply before its body does (as OpenAI's
    ``[DONE]``). SSE-style lines (``data:``, ``:``) are read too."""

    protocol = "toy"
    default_base_url = "http://toy.invalid/v1/"
    known_options = frozenset({"temperature_name"})
    stream_types = ("application/x-ndjson",)
    capabilities = Capabilities(tools=True, structured_output_native=False)

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        self.built = prompt_stack
        return "/chat", {"model": self.model, "roles": [m.role for m in prompt_stack.messages]}

    def headers(self) -> dict[str, str]:
        return self.bearer_headers("application/x-ndjson")

    framing = "lines"

    def decoder(self) -> "ToyDecoder":
        return ToyDecoder(self)

    def frames(self, response: httpx2.Response) -> AsyncIterator[Any]:
        self.seen = response
        return super().frames(response)

    def whole(self, data: dict[str, Any]) -> list[Any] | None:
        """The items of a whole JSON reply; None: not readable (the base's default)."""
        return None

    @staticmethod
    def _item(item: dict[str, Any]) -> Any:
        if "text" in item:
            return TextDelta(0, item["text"])
        if "call" in item:
            return ToolCallDelta(item.get("at", 1), *item["call"])
        if "usage" in item:
            return StreamMeta(usage=Usage(input_tokens=item["usage"][0], output_tokens=item["usage"][1]))
        if "bad_usage" in item:
            return StreamMeta(usage_error=item["bad_usage"])
        if "model" in item or "id" in item:
            return StreamMeta(model=item.get("model"), request_id=item.get("id"))
        return StreamMeta(stop_kind=StopKind(item["stop"]) if item["stop"] else None, stop_raw=item["stop"] or "raw")


class ToyDecoder(StreamDecoder):
    """The toy protocol, a line at a time."""

    def __init__(self, driver: Toy) -> None:
        super().__init__()
        self.driver = driver

    def feed(self, line: str) -> Sequence[Any]:
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line or line.startswith((":", "[", "]", "event:", "id:", "retry:")):
            return ()
        value = self.driver.stream_json(line)
        if "end" in value:
            self.done = True
            return ()
        item = self.driver._item(value)
        if isinstance(item, StreamMeta):
            self.note(item)
            return ()
        return (item,)

    def whole(self, data: dict[str, Any]) -> list[Any] | None:
        items = self.driver.whole(data)
        if items is None:
            return None
        for item in items:
            if isinstance(item, StreamMeta):
                self.note(item)
        return [item for item in items if not isinstance(item, StreamMeta)]


def hi_stack() -> PromptStack:
    """A request saying "hi"."""
    stack = PromptStack()
    stack.add_user_message("hi")
    return stack


def ndjson(*items: dict[str, Any]) -> bytes:
    """The toy protocol's body for `items`."""
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


class Scripted(httpx2.AsyncBaseTransport):
    """Answers each request with the next (status, headers, body or byte pieces); keeps the requests."""

    def __init__(self, *replies: tuple[int, dict[str, str], Any]) -> None:
        self.replies, self.requests = list(replies), []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, body = self.replies[min(len(self.requests), len(self.replies) - 1)]
        self.requests.append(request)
        if isinstance(body, list):
            self.body = Pieces(body)
            return httpx2.Response(status, headers=headers, stream=self.body)
        return httpx2.Response(status, headers=headers, content=body)


class Pieces(httpx2.AsyncByteStream):
    """A body in pieces: bytes are sent, a number is a pause (seconds, on the loop's clock), an
    exception is raised (a broken connection), an `asyncio.Event` is waited for."""

    def __init__(self, pieces: list[Any]) -> None:
        self.pieces, self.sent, self.closed = pieces, 0, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            if isinstance(piece, (int, float)):
                await asyncio.sleep(piece)
                continue
            if isinstance(piece, BaseException):
                raise piece
            if isinstance(piece, asyncio.Event):
                await piece.wait()
                continue
            self.sent += 1
            yield piece

    async def aclose(self) -> None:
        self.closed = True


#: The toy protocol's content type.
NDJSON = {"content-type": "application/x-ndjson"}


def run_turn(driver: BasePromptDriver, stack: PromptStack | None = None) -> list[Any]:
    """Every event of one turn of `stack` (default `hi_stack`); the driver closed after."""

    async def main() -> list[Any]:
        try:
            return [event async for event in driver.stream(stack or hi_stack())]
        finally:
            await driver.close()

    return asyncio.run(main())


def assert_error(error: ProviderError, etype: str, message: str, *, retryable: bool) -> None:
    """`error` has this type, this exact message, and is retryable or not."""
    assert (error.type, error.message, error.retryable) == (etype, message, retryable)


JSON = {"content-type": "application/json"}
#: A reply saying "Hello", then its stop reason and usage.
TEXT = [{"text": "Hel"}, {"text": "lo"}, {"stop": "end_turn"}, {"usage": [7, 2]}]


class Coded(Toy):
    """An error body ``{"code": .., "message": .., "type": ..}`` read as the provider gives it."""

    def parse_error_body(self, status: int, data: Any) -> tuple[Any, Any, Any]:
        if isinstance(data, dict):
            return data.get("code"), data.get("message"), data.get("type")
        return super().parse_error_body(status, data)
