"""The questions a live view asks the user inside a tool call's card and waits on: run this call?
(Approve / Deny), answer this MCP server's sampling request? (Approve / Edit / Deny), and an MCP
server's elicitation (a form drawn from its schema, or a link to open; Accept / Decline / Cancel).

Each question is an ``ask`` op on the call's segment (``["ask", sid, {request, kind, ...}]``, None
once answered); the front end answers with a message on the widget (`WidgetView._on_msg`):
``{"type": "approve", "request", "verdict", "text"?}`` or ``{"type": "elicit", "request", "action",
"content"}``. A form answer that does not fit its schema is sent back with ``errors`` and waited on
again.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any

from ...core import (
    ElicitationAnswer,
    ElicitationRequest,
    SamplingRequest,
    SamplingVerdict,
    ToolAction,
    form_fields,
    read_form,
    redact_data,
)

#: Characters of one message of a sampling request shown in its card.
SHOWN_CHARS = 4_000

#: Seconds a question waits for a front end to show it when none has said hello yet. A run no
#: browser shows (``jupyter nbconvert --execute``, papermill, nbclient) has no one to answer:
#: its questions get the answer no one gave (`unanswered`) instead of holding the run for ever.
FRONT_END_GRACE_S = 5.0

#: Why such a question was answered without the user.
NO_FRONT_END = "no front end shows this cell (a run without a browser)"


@dataclass
class Pending:
    """One question waiting: its answer, the call's segment, the ``ask`` op's data, the request."""

    answer: asyncio.Future[Any]
    segment: Any
    ask: dict[str, Any]
    request: Any = None


def sampling_ask(request: SamplingRequest) -> dict[str, Any]:
    """A sampling request as its card shows it: the server, its system prompt, each message's text
    (cut to `SHOWN_CHARS`), the tokens it may take, the model hints; `editable` is the text of its
    last user message, which the user may change before approving."""
    messages = [{"role": m.role, "text": _cut(m.text or " ".join(f"[{b.type}]" for b in m.content))}
                for m in request.messages]
    last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
    return {"kind": "sampling", "server": request.server, "system": _cut(request.system or ""), "messages": messages,
            "max_tokens": request.max_tokens, "hints": list(request.hints),
            "model": request.provider or "", "editable": last}


def elicitation_ask(request: ElicitationRequest) -> dict[str, Any]:
    """An elicitation as its card shows it: the server's message, and the form's fields
    (`core.FormField.as_json`) or the link to open (http and https only)."""
    ask: dict[str, Any] = {"kind": "elicitation", "server": request.server, "message": _cut(request.message)}
    if request.url is not None:
        ask["url"] = request.url if request.url.lower().startswith(("https://", "http://")) else ""
    else:
        ask["fields"] = [f.as_json() for f in form_fields(request.schema)]
    return ask


def unanswered(pending: Pending) -> Any:
    """The answer to a question no one can see: a call not run (False), a sampling request
    refused, an elicitation declined (saying why: `NO_FRONT_END`)."""
    kind = pending.ask.get("kind")
    if kind == "sampling":
        return SamplingVerdict(False)
    if kind == "elicitation":
        return ElicitationAnswer("decline", reason=NO_FRONT_END)
    return False


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"… ({len(text) - SHOWN_CHARS:,} more characters)"


class Asks:
    """The questions of one `WidgetView` (`view`), waiting for the front end's answers."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.pending: dict[str, Pending] = {}
        self._ids = itertools.count(1)
        self.shown = asyncio.Event()  # a front end said hello (`WidgetView._hello`, on the loop)

    async def ask(self, segment: Any, data: dict[str, Any], request: Any = None) -> Any:
        """Show `data` as a question in `segment`'s card; the answer, once the user gives it."""
        view = self.view
        key = f"{segment.sid}-{next(self._ids)}"
        ask = redact_data({"request": key, **data})
        pending = self.pending[key] = Pending(asyncio.get_running_loop().create_future(), segment, ask, request)
        answering = data.get("kind") == "elicitation"  # the footer says what it waits for
        view.state.asking += 1
        view.state.answering += answering
        self._show(segment, ask)
        try:
            if not await self._front_end():
                return unanswered(pending)
            return await pending.answer
        finally:
            self.pending.pop(key, None)
            view.state.asking -= 1
            view.state.answering -= answering
            self._show(segment, None)

    async def _front_end(self) -> bool:
        """Whether a front end shows the view, waiting `FRONT_END_GRACE_S` for one to say hello."""
        if self.shown.is_set():
            return True
        try:
            await asyncio.wait_for(self.shown.wait(), FRONT_END_GRACE_S)
        except asyncio.TimeoutError:
            return False
        return True

    def _show(self, segment: Any, ask: dict[str, Any] | None) -> None:
        view = self.view
        if view._synced:
            view._record_created()
            view._ops.append(["ask", segment.sid, ask])
            view._schedule()

    def ops(self) -> list[list[Any]]:
        """The questions waiting, as ops (a snapshot's)."""
        return [["ask", p.segment.sid, p.ask] for p in self.pending.values()]

    def answered(self, content: dict[str, Any]) -> None:
        """A front end's answer (on the loop): settles the question it names; a form whose answers
        do not fit is asked again with what is wrong."""
        pending = self.pending.get(str(content.get("request")))
        if pending is None or pending.answer.done():
            return
        kind = pending.ask.get("kind")
        if content.get("type") == "approve" and isinstance(content.get("verdict"), bool):
            verdict = content["verdict"]
            if kind == "sampling":
                text = content.get("text")
                edited = text if isinstance(text, str) and text != pending.ask.get("editable") else None
                pending.answer.set_result(SamplingVerdict(verdict, edited))
            elif kind is None:
                pending.answer.set_result(verdict)
        elif content.get("type") == "elicit" and kind == "elicitation":
            self._elicited(pending, content)

    def _elicited(self, pending: Pending, content: dict[str, Any]) -> None:
        action = content.get("action")
        if action not in ("accept", "decline", "cancel"):
            return
        if action != "accept" or pending.request is None or pending.request.url is not None:
            pending.answer.set_result(ElicitationAnswer(action))
            return
        raw = content.get("content") if isinstance(content.get("content"), dict) else {}
        values, errors = read_form(pending.request.schema, raw)
        if errors:
            pending.ask = {**pending.ask, "errors": errors}
            self._show(pending.segment, pending.ask)
            return
        pending.answer.set_result(ElicitationAnswer("accept", values))


class CardQuestions:
    """A mixin of a live view (`run_view.WidgetView`): the questions of a run's callbacks asked in
    the call's card and waited on. Uses the view's `state` (its segments), `asks` and `_tool_op`."""

    async def request_approval(self, action: ToolAction, preview: str | None = None) -> bool:
        """Ask with Approve / Deny buttons in the call's card (an `Agent.approve` callback):
        True when approved. A front end answers with an ``approve`` message (`_on_msg`).
        `preview`: what the call would change (a notebook edit's diff), shown above the buttons."""
        segment = self.state.tool_segment(action)
        ask = {"name": segment.name or action.native_name, "arguments": action.input}
        verdict = await self.asks.ask(segment, {**ask, "preview": preview} if preview else ask)
        segment.approval = "approved" if verdict else "denied"
        self._tool_op(segment, {"approval": segment.approval})
        return verdict

    async def request_sampling(self, request: SamplingRequest) -> SamplingVerdict:
        """Ask in the call's card whether an MCP server's sampling request may go to the model, as
        shown or with its last user message edited (a `RunOptions.approve_sampling` callback)."""
        segment = self.state.tool_segment(request.action) if request.action is not None else None
        if segment is None:
            return SamplingVerdict(False)
        arguments = request.action.input  # the card shows the call's arguments while it asks
        return await self.asks.ask(segment, {**sampling_ask(request), "arguments": arguments}, request)

    async def request_elicitation(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Draw an MCP server's elicitation in the call's card, a form or a link, and wait for the
        user's answer (a `RunOptions.elicit` callback); the card notes what was answered (`ToolCallNote`)."""
        segment = self.state.tool_segment(request.action) if request.action is not None else None
        if segment is None:
            return ElicitationAnswer("decline")
        arguments = request.action.input  # the card shows the call's arguments while it asks
        return await self.asks.ask(segment, {**elicitation_ask(request), "arguments": arguments}, request)
