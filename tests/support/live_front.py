"""A Python stand-in for the live view's front end (labextension/src/live.ts, `LiveDoc`):
it takes the kernel's messages to a `WidgetView` and keeps the run they describe."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ipyagent.notebook.views import run_state, run_view, text_view
from ipyagent.notebook.views.run_view import FRAME_INTERVAL

from .virtual_clock import run_virtual

T = TypeVar("T")


class FrontEnd:
    """Attach to `view` (its widget's ``send`` is replaced); `hello()` asks for the snapshot."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.messages: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.seq = -1
        self.segments: dict[int, dict[str, Any]] = {}
        self.notices: list[str] = []
        self.error: str | None = None
        self.interrupted = False
        self.status: dict[str, Any] = {}
        self.final: dict[str, Any] | None = None
        self.output: dict[str, Any] | None = None  # the saved output a reopened page puts in place
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        view.live.send = self.receive

    def hello(self) -> None:
        self.view._hello()  # what the kernel does on the loop when the front end says hello

    def click(self, sid: int, verdict: bool) -> None:
        """Approve (True) or Deny (False) in card `sid`, as live.ts sends it (on the kernel's thread)."""
        ask = self.segments[sid]["ask"]
        self.view._on_msg(self.view.live, {"type": "approve", "request": ask["request"], "verdict": verdict}, [])

    def send(self, sid: int, **content: Any) -> None:
        """Answer the question in card `sid` as live.ts does: ``type`` ``approve`` (``verdict``,
        ``text``) or ``elicit`` (``action``, ``content``)."""
        ask = self.segments[sid]["ask"]
        self.view._on_msg(self.view.live, {**content, "request": ask["request"]}, [])

    @property
    def asks(self) -> dict[int, dict[str, Any]]:
        """The cards waiting for Approve / Deny: sid -> {request, name, arguments}."""
        return {sid: s["ask"] for sid, s in self.segments.items() if s.get("ask")}

    def receive(self, content: dict[str, Any], buffers: Any = None) -> None:
        content = json.loads(json.dumps(content))  # what goes over the wire
        self.messages.append(content)
        self.times.append(time.monotonic())
        if content["type"] == "snapshot":
            self.segments, self.notices, self.error, self.interrupted = {}, [], None, False
            for op in content["doc"]["ops"]:
                self.apply(op)
            self.seq = content["seq"]
        elif content["type"] == "ops":
            assert self.seq >= 0 and content["seq"] == self.seq + 1, "ops out of order or before the snapshot"
            self.seq = content["seq"]
            for op in content["ops"]:
                self.apply(op)
        elif content["type"] == "end":
            self.final = content["doc"]
            self.output = _saved_output(content)
        for loop, changed in list(self._waiters):
            loop.call_soon_threadsafe(changed.set)

    async def until(self, check: Callable[[], Any], limit: float = 30.0) -> None:
        """Wait until `check()` holds, woken by each message the kernel sends (the only way this
        front end's state changes), not by polling; for a run on a real loop and real servers.

        Raises:
            AssertionError: no message made `check()` hold within `limit` seconds of the last one.
        """
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        self._waiters.append(waiter)
        try:
            while not check():
                waiter[1].clear()
                if check():
                    return
                try:
                    await asyncio.wait_for(waiter[1].wait(), limit)
                except TimeoutError:
                    raise AssertionError(f"condition not reached: no message for {limit} s") from None
        finally:
            self._waiters.remove(waiter)

    def apply(self, op: list[Any]) -> None:
        name = op[0]
        if name == "seg":
            self.segments.setdefault(op[1], {"kind": op[2], "text": "", "call": dict(op[3] or {})})
        elif name == "text":
            self.segments[op[1]]["text"] += op[2]
        elif name == "tool":
            self.segments[op[1]]["call"].update(op[2])
        elif name == "ask":
            self.segments[op[1]]["ask"] = op[2]
        elif name == "artifact":
            self.segments[op[1]]["artifact"] = op[2]
        elif name == "notice":
            self.notices.append(op[1])
        elif name == "error":
            self.error = op[1]
        elif name == "interrupted":
            self.interrupted = True
        elif name == "status":
            self.status = op[1]

    @property
    def text(self) -> str:
        return "".join(s["text"] for s in self.segments.values() if s["kind"] == "text")

    @property
    def frames(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == "ops"]


def _saved_output(end: dict[str, Any]) -> dict[str, Any] | None:
    """The output an ``end`` message carries, rebuilt as saved_output.ts does: (data, metadata)."""
    output = end.get("output")
    if output is None:
        return None
    return {"data": {**output["fallbacks"], output["mime"]: end["doc"]}, "metadata": output["metadata"]}


async def frames_until(check: Callable[[], Any]) -> None:
    """Let the loop run, a frame at a time, until `check()` holds; for a coroutine run by
    `run_on_views_clock`, where a frame's timer fires at once: the bound is 100 frames of the
    loop's clock, not of the wall's.

    Raises:
        AssertionError: `check()` still false after 100 frames.
    """
    for _ in range(100):
        if check():
            return
        await asyncio.sleep(FRAME_INTERVAL)
    raise AssertionError("condition not reached")


def run_on_views_clock(main: Callable[[], Awaitable[T]], monkeypatch: Any) -> T:
    """`main()` on a `VirtualClockLoop`; the views' frame timers and their `time.monotonic()` (and
    this module's) read the loop's clock."""
    return run_virtual(main, monkeypatch, run_state, run_view, text_view, sys.modules[__name__])
