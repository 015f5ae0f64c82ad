"""`ToolServer`: a `BaseTool`'s activities offered to an outside agent (Claude Code, Codex, Cursor) as
an MCP server, with the official `mcp` SDK over streamable HTTP (MCP specification 2025-06-18,
"Transports"), on 127.0.0.1 only, behind a random bearer token (``Authorization: Bearer TOKEN``;
a request without it gets 401 before the SDK sees it).

A call goes through the same path as a model's: the tool's approval rule (`BaseTool.needs_approval`)
asks the `approve` callback, and a call no one approves is refused; a tool's error is the MCP
result's error (``isError``).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import inspect
import itertools
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core import ErrorArtifact, ToolAction
from .base_tool import BaseTool

#: Where the server listens: this machine only.
HOST = "127.0.0.1"

#: Seconds `ToolServer.start` waits for the server to listen.
START_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class _TokenGate:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer TOKEN`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer TOKEN (%agent serve-mcp shows it)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class ToolServer:
    """Serve `tool`'s activities (named as a model sees them: ``notebook_read_cell``) over MCP.

    Args:
        tool: the tool whose activities are offered.
        approve: asked for each call the tool says needs approval (``approve(action) -> bool`` or
            an awaitable of it); None refuses such calls.
        port: the port (default: a free one).
        name: the server's name in ``initialize``.

    Attributes:
        url: ``http://127.0.0.1:PORT/mcp`` once started. token: the bearer token (random, per server).
    """

    def __init__(self, tool: BaseTool, *, approve: Callable[[ToolAction], Any] | None = None, port: int = 0,
                 name: str = "ipyagent-notebook") -> None:
        self.tool, self.approve, self.name = tool, approve, name
        self.port = port or _free_port()
        self.token = secrets.token_urlsafe(32)
        self.url = f"http://{HOST}:{self.port}/mcp"
        self._ids = itertools.count(1)
        self._web: Any = None
        self._thread: threading.Thread | None = None

    def app(self) -> Any:
        """The ASGI app: the SDK's streamable HTTP app of the tool's activities, behind the token."""
        from mcp.server.mcpserver import MCPServer

        server = MCPServer(self.name)
        for activity in self.tool.activities():
            server.add_tool(self._handler(activity), name=self.tool.native_name(activity),
                            description=self.tool.description(activity))
        return _TokenGate(server.streamable_http_app(host=HOST), self.token)

    def _handler(self, activity: str) -> Callable[..., Any]:
        """An async function with the activity's signature (the SDK derives the input schema from it)."""
        from mcp.server.mcpserver.exceptions import ToolError

        async def call(**arguments: Any) -> str:
            action = ToolAction.from_native(f"mcp-{next(self._ids)}", self.tool.native_name(activity), arguments)
            if self.tool.needs_approval(activity) and not await self._approved(action):
                raise ToolError(f"{action.native_name}: not approved by the notebook's user; it was not run")
            artifact = await self.tool.run(activity, action)
            if isinstance(artifact, ErrorArtifact):
                raise ToolError(str(artifact.value))
            return artifact.to_text()

        return functools.update_wrapper(call, self.tool._functions[activity])

    async def _approved(self, action: ToolAction) -> bool:
        if self.approve is None:
            return False
        verdict = await asyncio.get_running_loop().run_in_executor(None, self.approve, action)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)

    def start(self) -> None:
        """Listen, in a thread of its own. Raises `RuntimeError` when the server does not start."""
        import uvicorn

        self._web = uvicorn.Server(uvicorn.Config(self.app(), host=HOST, port=self.port, log_level="warning",
                                                  lifespan="on"))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._web.serve()), daemon=True,
                                        name="ipyagent-mcp-serve")
        self._thread.start()
        deadline, pause = time.monotonic() + START_TIMEOUT_S, threading.Event()
        while not self._web.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the MCP server could not listen on {HOST}:{self.port}")
            pause.wait(0.02)

    def stop(self) -> None:
        """Stop listening; open sessions end."""
        if self._web is not None:
            self._web.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._web = self._thread = None
