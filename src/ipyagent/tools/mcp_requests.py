"""What an MCP server asks of ipyagent, the client (MCP specification 2025-11-25, "Client features"
and "Utilities"): sampling (``sampling/createMessage``), elicitation (``elicitation/create``, form
and URL mode), roots (``roots/list``), and its notifications: progress, log messages, resource
updates and list changes.

`ClientRequests` holds one server's answers; `MCPServer` hands its methods to the SDK's `Client`
as callbacks. A request that comes during a tool call is answered through that call's run
(`CallContext`): the run's model samples, the run's view asks the user. A server's request does
not say which of its calls it serves, so it goes to the call of that server started last.
Nothing here imports the SDK at module level.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from ..core import (
    ElicitationAnswer,
    ElicitationRequest,
    ImageBlock,
    Message,
    SamplingRequest,
    TextBlock,
    ToolCallNote,
    ToolCallProgress,
    redact,
)
from .call_context import CallContext, InteractionRefused

#: Seconds an elicitation waits for the user before it is declined (``%mcp add … --elicitation-timeout``).
ELICITATION_TIMEOUT = 300.0
#: MCP log levels, least to most severe (RFC 5424 severities).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def sampling_messages(params: Any) -> list[Message]:
    """A ``sampling/createMessage`` request's messages as ipyagent messages: text and images kept,
    other content (audio, tool use) as a line saying what it was."""
    out = []
    for message in params.messages:
        blocks: list[Any] = []
        for content in message.content_as_list:
            kind = getattr(content, "type", None)
            if kind == "text":
                blocks.append(TextBlock(text=content.text))
            elif kind == "image":
                blocks.append(ImageBlock(mime_type=content.mime_type, data=content.data))
            else:
                blocks.append(TextBlock(text=f"[{kind} content, not shown to the model]"))
        out.append(Message(role="assistant" if message.role == "assistant" else "user", content=blocks))
    return out


def _hints(params: Any) -> list[str]:
    preferences = getattr(params, "model_preferences", None)
    return [h.name for h in (getattr(preferences, "hints", None) or []) if getattr(h, "name", None)]


def root_uri(path: str | Path) -> str:
    """A folder as a root's ``file://`` URI (absolute, resolved)."""
    return Path(path).expanduser().resolve().as_uri()


class ClientRequests:
    """One server's answers to what it asks, and what it tells (`server`: the `MCPServer`).

    `calls` are the contexts of the server's calls in flight; `roots` the folders offered
    (``roots/list``); `updates` counts ``notifications/resources/updated`` per URI; `tools_changed`
    is set by ``notifications/tools/list_changed`` until the tools are listed again.
    """

    def __init__(self, server: Any, roots: list[Path]) -> None:
        self.server = server
        self.calls: list[CallContext] = []
        self.roots = roots
        self.updates: dict[str, int] = {}
        self.tools_changed = False
        self.lists_changed: set[str] = set()
        self.client: Any = None  # the server's `mcp.Client`, from before its handshake

    def _call(self) -> CallContext | None:
        return self.calls[-1] if self.calls else None

    # -- progress -------------------------------------------------------------------------

    def progress(self, context: CallContext | None) -> Any:
        """The SDK's progress callback of one call: each ``notifications/progress`` becomes a
        `ToolCallProgress` of the call (asking for it is what sends the call's ``progressToken``)."""

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if context is None:
                return
            _emit(context, ToolCallProgress(context.action, progress, total, redact(message) if message else None))

        return report

    # -- sampling ---------------------------------------------------------------------------

    async def sampling(self, _context: Any, params: Any) -> Any:
        """``sampling/createMessage``: answered by the run of the call it came during, after the
        user's approval (`CallContext.sample`); an error for the server when refused."""
        from mcp import types

        call = self._call()
        why = None
        if call is None or call.sample is None:
            why = "ipyagent answers sampling requests only while one of this server's tools runs in an agent run"
        else:
            request = SamplingRequest(
                server=self.server.name, messages=sampling_messages(params), max_tokens=params.max_tokens,
                system=params.system_prompt, temperature=params.temperature, stop=params.stop_sequences,
                hints=_hints(params), provider=self.server.sampling, preapproved=self.server.approve_sampling,
                action=call.action)
            try:
                answer = await call.sample(request)
            except InteractionRefused as exc:
                why = str(exc)
        if why is not None:
            self.server._note(f"sampling refused: {why}")
            return types.ErrorData(code=-1, message=f"sampling refused: {why}")
        self.server._note(f"sampling answered by {answer.model}")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=answer.text),
                                         model=answer.model, stop_reason=answer.stop_reason)

    # -- elicitation ------------------------------------------------------------------------

    async def elicitation(self, _context: Any, params: Any) -> Any:
        """``elicitation/create``: the user answers in the view of the call it came during (a form,
        or a link to open); no call, no one to ask, or no answer within the server's
        `elicitation_timeout` seconds: declined."""
        from mcp import types

        call = self._call()
        url = getattr(params, "url", None)
        request = ElicitationRequest(server=self.server.name, message=str(params.message or ""),
                                     schema=None if url else params.requested_schema, url=url,
                                     elicitation_id=getattr(params, "elicitation_id", None),
                                     action=call.action if call is not None else None)
        answer = ElicitationAnswer("decline")
        if call is not None and call.elicit is not None:
            try:
                answer = await asyncio.wait_for(call.elicit(request), self.server.elicitation_timeout)
            except asyncio.TimeoutError:
                answer = ElicitationAnswer("decline", reason=f"no answer within {self.server.elicitation_timeout:g} s")
                self.server._note(f"elicitation declined: {answer.reason}")
        self.server._note(f"elicitation ({request.mode}): {answer.action}")
        if call is not None:
            _emit(call, ToolCallNote(call.action, elicitation_note(request, answer)))
        return types.ElicitResult(action=answer.action, content=answer.content if answer.action == "accept" else None)

    # -- roots, logging, notifications ----------------------------------------------------

    async def list_roots(self, _context: Any) -> Any:
        """``roots/list``: the folders given with ``--root`` (a stdio server's default: its working folder)."""
        from mcp import types

        roots = [types.Root(uri=root_uri(p), name=Path(p).name or str(p)) for p in self.roots]
        return types.ListRootsResult(roots=roots)

    async def log(self, params: Any) -> None:
        """``notifications/message``: one line of the server's log, with its level, redacted."""
        data = params.data if isinstance(params.data, str) else repr(params.data)
        source = f" {params.logger}" if getattr(params, "logger", None) else ""
        self.server._note(f"server log [{params.level}]{source}: {redact(data)}")

    async def message(self, message: Any) -> None:
        """Every notification the session surfaces: list changes and resource updates are noted
        (`tools_changed`, `lists_changed`, `updates`), transport errors go to the log."""
        if isinstance(message, Exception):
            self.server._note(f"transport error: {type(message).__name__}: {redact(str(message))[:300]}")
            self._fail_unread(message)
            return
        method = getattr(getattr(message, "root", message), "method", "")
        if method == "notifications/tools/list_changed":
            self.tools_changed = True
        elif method in ("notifications/resources/list_changed", "notifications/prompts/list_changed"):
            self.lists_changed.add(method.split("/")[1])
        elif method == "notifications/resources/updated":
            uri = str(getattr(getattr(getattr(message, "root", message), "params", None), "uri", ""))
            self.updates[uri] = self.updates.get(uri, 0) + 1
            self.server._note(f"resource updated: {uri} (at {time.strftime('%H:%M:%S')})")


    def _fail_unread(self, error: Exception) -> None:
        """A reply the SDK could not read (invalid JSON, nested deeper than its parser allows, a
        wrong shape such as ``"result": null``) is dropped by the SDK, and the request it answers
        would wait for the run's deadline or the start timeout: fail that request now (its caller
        gets an ``MCPError``: ``its answer could not be read: CAUSE``). The request is found by
        the reply's ``id`` (`unread_reply`); a line with none (garbage) is only logged."""
        unread = unread_reply(error)
        dispatcher = getattr(getattr(self.client, "_session", None), "_dispatcher", None)
        pending, resolve = getattr(dispatcher, "_pending", None), getattr(dispatcher, "_resolve_pending", None)
        if unread is None or not isinstance(pending, dict) or resolve is None:
            return
        request_id, cause = unread
        if request_id not in pending and str(request_id) not in map(str, pending):
            return
        from mcp.types import PARSE_ERROR, ErrorData

        self.server._note(f"request {request_id} failed: its answer could not be read: {cause}")
        resolve(request_id, ErrorData(code=PARSE_ERROR, message=f"its answer could not be read: {cause}"))


#: The start of a JSON object up to its first nested value, and a top-level ``"id"`` at its end.
_HEAD = re.compile(r"\s*\{([^{}\[\]]*)")
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"[^"\\]*")')
_TAIL_ID = re.compile(r'"id"\s*:\s*(-?\d+|"[^"\\]*")\s*\}\s*$')


def unread_reply(error: Exception) -> tuple[int | str, str] | None:
    """The ``id`` of the reply a transport's parse error (pydantic's ``ValidationError``) was
    about, and the cause in one line (pydantic's message, which does not quote the data); None
    for a line that is no reply (garbage, a notification, a request of the server's).

    Invalid JSON is not parsed: its ``id`` is read where a reply has it, among the keys before
    the first nested value, else as the last key."""
    try:
        details = error.errors(include_url=False)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not pydantic's
        return None
    if not details:
        return None
    value = details[0].get("input")
    if isinstance(value, dict):
        request_id = value.get("id")
        if "method" in value or not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            return None
        shape = "JSONRPCError" if "error" in value else "JSONRPCResponse"
        detail = next((d for d in details if d["loc"][:1] == (shape,)), details[0])
        where = ".".join(map(str, detail["loc"][1:]))
        return request_id, redact(f"{where}: {detail['msg']}" if where else detail["msg"])[:200]
    if not isinstance(value, str) or (head := _HEAD.match(value)) is None:
        return None
    if '"method"' in head.group(1) or '"method"' in value[-300:]:
        return None
    found = _ID.search(head.group(1)) or _TAIL_ID.search(value[-300:])
    if found is None:
        return None
    token = found.group(1)
    return (token[1:-1] if token.startswith('"') else int(token)), redact(str(details[0]["msg"]))[:200]


def _emit(context: CallContext, event: Any) -> None:
    try:
        context.emit(event)
    except Exception:  # noqa: BLE001 - a view's failure must not fail the server's request
        pass


def elicitation_note(request: ElicitationRequest, answer: ElicitationAnswer) -> str:
    """A card's line for an elicitation: what the server asked and what the user answered."""
    what = "to open a link" if request.url is not None else "for input"
    if answer.reason:
        done = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}[answer.action]
        return f"{request.server} asked you {what}: {done}, {answer.reason}"
    done = {"accept": "you answered", "decline": "you declined", "cancel": "you cancelled"}[answer.action]
    return f"{request.server} asked you {what}: {done}"


def log_level_of(line: str) -> str | None:
    """The level of a server log line written by `ClientRequests.log`, None for other lines."""
    marker = "server log ["
    at = line.find(marker)
    if at < 0:
        return None
    level = line[at + len(marker):].split("]", 1)[0]
    return level if level in LOG_LEVELS else None
