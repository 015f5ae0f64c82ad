"""An MCP server as a tool: its tool calls (`ToolCalls`, the part of `MCPServer` that sends
``tools/call`` and restarts a server that stopped, once) and its `BaseTool` face (`MCPToolset`:
tools offered as ``server_tool``, `mcp_content.native_names`, run through the same dispatch,
approval, Task Memory and cards as any tool).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..core import BaseArtifact, ErrorArtifact, InfoArtifact, ListArtifact, ToolAction, ToolDefinition, redact
from .base_tool import BaseTool
from .call_context import CallContext, current_call
from .mcp_connection import MCPServerError, _leaf, _server_of_task
from .mcp_content import description, input_schema, result_artifact

if TYPE_CHECKING:  # the server imports this module
    from .mcp import MCPServer

#: The SDK's code for "the connection closed" (``mcp_types.CONNECTION_CLOSED``; the SDK is imported on first start).
CONNECTION_CLOSED = -32000


class ToolCalls:
    """A mixin of `MCPServer`: calls of its tools. Uses the server's `name`, `transport`, `state`, `tools`,
    `requests`, `restarts`, `last_error`, `_client`, `_can_restart`, `_note`, `_owned`,
    `_start_once` and `_halt`."""

    async def call(self, tool: str, arguments: dict[str, Any], context: CallContext | None = None) -> BaseArtifact:
        """Call MCP tool `tool` and return its result as an artifact (`mcp_content.result_artifact`).

        Every call asks for progress (it sends a ``progressToken``); the server's progress goes to
        the call's run as `ToolCallProgress` events, and its sampling requests and elicitations
        during the call are answered through that run (`context`, by default the calling task's
        `current_call()`).

        Starts the server if needed. A server that stopped (found dead, or died during a
        call, which is then an error result and is not sent again) is restarted on the next
        call, whose result starts with a note saying so. One that stops again before a call
        succeeds is not restarted (``%mcp restart NAME`` does it).
        Never raises, except `asyncio.CancelledError` (which the SDK turns into a
        ``notifications/cancelled`` to the server).
        """
        return await self._owned(self._call(tool, arguments, context if context is not None else current_call()))

    def _connection_closed(self) -> bool:
        """The connection of a running server has ended (its process exited, the HTTP session
        dropped) while no call was waiting. Reads the SDK's dispatcher state; False if unknown."""
        session = getattr(self._client, "_session", None)
        return self.state == "running" and bool(getattr(getattr(session, "_dispatcher", None), "_closed", False))

    def _closed_by(self, error: BaseException) -> bool:
        """`error` (a call's) says the connection ended: the SDK's dispatcher has closed (the
        process's stdout ended, the HTTP session dropped), or it is the SDK's own CONNECTION_CLOSED
        (``Connection closed``; over HTTP also ``SSE stream …``). A live server's own error with
        that code (-32000 opens JSON-RPC's "server error" range) is not: it is the call's result."""
        if self._connection_closed():
            return True
        message = str(getattr(error, "message", ""))
        if getattr(error, "code", None) != CONNECTION_CLOSED:
            return False
        return message == "Connection closed" or (self.transport != "stdio" and message.startswith("SSE stream "))

    async def _call(self, tool: str, arguments: dict[str, Any], context: CallContext | None) -> BaseArtifact:
        _server_of_task.set(self)
        if self._connection_closed():  # it died while idle: nothing was sent yet
            self._note("found stopped")
            await self._halt()
            self.state = "exited"
        died = self.state == "exited"
        if died and not self._can_restart:
            self.state, self.last_error = "failed", "stopped again after a restart"
            return ErrorArtifact(
                value=f"MCP server {self.name!r} stopped again after a restart; see %mcp log {self.name}, "
                f"then %mcp restart {self.name}",
                exception_type="MCPServerError",
            )
        try:
            await self._start_once()
        except MCPServerError as exc:
            return ErrorArtifact(value=str(exc), exception_type="MCPServerError")
        note = None
        if died:
            self.restarts += 1
            self._can_restart = False
            note = f"MCP server {self.name!r} had stopped; ipyagent restarted it (restart {self.restarts})"
            self._note(note)
        if tool not in self.tools:
            return ErrorArtifact(
                value=f"MCP server {self.name!r} has no tool {tool!r}; it has {', '.join(self.tools) or 'none'}"
            )
        artifact = await self._invoke(tool, arguments, context)
        return (
            artifact if note is None else ListArtifact(value=[InfoArtifact(value=note, name="mcp_restart"), artifact])
        )

    async def _invoke(self, tool: str, arguments: dict[str, Any], context: CallContext | None) -> BaseArtifact:
        """One ``tools/call`` of a running server, with a progress token; its result, or the error."""
        calls = self.requests.calls
        if context is not None:
            calls.append(context)  # the server's requests during the call go to its run
        try:
            result = await self._client.call_tool(tool, arguments, progress_callback=self.requests.progress(context))
        except Exception as exc:  # noqa: BLE001 - a failed call is an error result for the model
            leaf = _leaf(exc)
            if self._closed_by(leaf):  # it died during the call; not re-sent
                self._note(f"stopped during a call of {tool}")
                await self._halt()
                self.state = "exited"
                return ErrorArtifact(
                    value=f"MCP server {self.name!r} stopped during the call (see %mcp log {self.name}); "
                    "it is restarted on the next call",
                    exception_type="MCPServerError",
                )
            return ErrorArtifact(
                value=f"MCP server {self.name!r}: {redact(call_error(leaf))}",
                exception_type=type(leaf).__name__,
            )
        finally:
            if context is not None:
                calls.remove(context)
        self._can_restart = True
        return result_artifact(result)


def call_error(error: BaseException) -> str:
    """What a failed ``tools/call`` says to the model: the server's error message; a result the SDK
    could not validate (pydantic's ``ValidationError``: dozens of blocks with links) as one line, its
    first problem and how many more (pydantic's messages quote no data)."""
    errors = getattr(error, "errors", None)
    try:
        details = errors(include_url=False) if callable(errors) else None
    except Exception:  # noqa: BLE001 - not pydantic's
        details = None
    if not details:
        return str(getattr(error, "message", None) or error or type(error).__name__)
    first = details[0]
    where = ".".join(map(str, first.get("loc", ())))
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    kind = getattr(error, "title", None) or "result"
    return f"its result is not a valid {kind}: {where + ': ' if where else ''}{first.get('msg', '')}{more}"


class MCPToolset(BaseTool):
    """An MCP server's tools (all, or `tools`) as a `BaseTool`; activities are MCP tool names.

    Tools are known once the server has started (`prepare`, which the agent awaits
    before each run); until then it offers none.
    """

    def __init__(self, server: MCPServer, tools: Iterable[str] | None = None) -> None:
        self.server = server
        self.name = server.name
        self.allowlist = list(tools) if tools is not None else None
        self.denylist: list[str] = []
        self.off_prompt = server.off_prompt
        self.requires_approval = server.requires_approval
        self.extra_schema_properties: dict[str, dict[str, Any]] = {}
        self.output_memory: dict[str, list[Any]] = {}

    @property
    def _functions(self) -> dict[str, Any]:  # type: ignore[override]
        return {}

    async def prepare(self) -> None:
        """Start the server if it never listed its tools (first use), and check the chosen tools exist.
        A server that has stopped since is left to the next call, which restarts it once and says so.

        Raises:
            MCPServerError: the server cannot start, or has no tool of that name.
        """
        if self.server.state == "stopped" or not self.server.tools:
            await self.server.start()
        else:
            await self.server.refresh_tools()
        missing = [t for t in self.allowlist or () if t not in self.server.tools]
        if missing:
            raise MCPServerError(
                f"MCP server {self.name!r} has no tool {missing[0]!r}; it has {', '.join(self.server.tools) or 'none'}"
            )

    async def refresh(self) -> bool:
        """Between model turns: the server's tools again if it said they changed; True when they did."""
        return await self.server.refresh_tools()

    def activities(self) -> list[str]:
        names = list(self.server.tools)
        return [n for n in names if n in self.allowlist] if self.allowlist is not None else names

    def native_name(self, activity: str) -> str:
        return self.server.native_name(activity)

    def is_off_prompt(self, activity: str) -> bool:
        return self.off_prompt

    def needs_approval(self, activity: str) -> bool:
        return self.requires_approval

    def description(self, activity: str) -> str:
        return description(self.server.tools[activity])

    def schema(self) -> dict[str, dict[str, Any]]:
        return {a: input_schema(self.server.tools[a]) for a in self.activities()}

    def tool_definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(name=self.native_name(a), description=self.description(a), parameters=s)
            for a, s in self.schema().items()
        ]

    async def run(self, activity: str, action: ToolAction) -> BaseArtifact:
        if activity not in self.activities():
            return ErrorArtifact(value=f"{action.native_name} is not an available tool of MCP server {self.name!r}")
        return await self.server.call(activity, dict(action.input), current_call())

    def __repr__(self) -> str:
        only = f" {self.allowlist}" if self.allowlist is not None else ""
        return f"<MCPToolset {self.name}{only}: {self.server.state}>"
