"""How `MCPServer` reaches its server, through the official `mcp` SDK (imported on first start):
the transport (stdio, streamable HTTP with an optional OAuth sign-in, SSE), the `mcp.Client`
session held open in a task of its own, the listing of the server's tools, and work done with
the open client (`use`: resources and prompts, roots). `ServerConnection` is that part of the
server; `MCPServerError` is what it raises, in one line.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import warnings
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2

from .. import __version__
from ..core import redact
from .mcp_content import native_names
from .mcp_oauth import oauth_provider

if TYPE_CHECKING:  # the server imports this module
    from .mcp import MCPServer

T = TypeVar("T")

#: The server whose task runs now (its SDK log records go to its log: `mcp._ServerLogHandler`).
_server_of_task: contextvars.ContextVar["MCPServer | None"] = contextvars.ContextVar(
    "ipyagent_mcp_server", default=None
)


class MCPServerError(Exception):
    """An MCP server that cannot be used: it did not start, refused, stopped. The message is one line."""



def _import_validator() -> None:
    """Import `jsonschema` (run in a worker thread while a server starts). The SDK imports it on
    the first result it validates; with its format checkers installed (JupyterLab brings them)
    that import takes seconds, which would stall ipyagent's loop and every stream on it."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass


def _transport_of(name: str, command: Any, url: str | None, transport: str | None, oauth: bool) -> str:
    """The transport of a server given `command` or `url`. Raises ValueError: neither or both, a URL
    that is not http(s), a transport that does not go with them, OAuth without streamable HTTP."""
    if (not command) == (url is None):
        raise ValueError(f"MCP server {name!r}: give either command=[PROGRAM, ARGS...] or url=URL")
    if url is not None and not url.startswith(("http://", "https://")):
        raise ValueError(f"MCP server {name!r}: the URL must start with http:// or https://, not {url!r}")
    transport = transport or ("stdio" if command else "streamable-http")
    if transport not in ("stdio", "streamable-http", "sse") or (transport == "stdio") != bool(command):
        raise ValueError(
            f"MCP server {name!r}: transport {transport!r} does not go with "
            f"{'a command' if command else 'a URL'}; use {'stdio' if command else 'streamable-http or sse'}"
        )
    if oauth and transport != "streamable-http":
        raise ValueError(f"MCP server {name!r}: oauth=True goes with a URL over streamable HTTP")
    return transport


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups (anyio task groups raise those)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class ServerConnection:
    """A mixin of `MCPServer`: its connection. Uses the server's `name`, `transport`, `command`,
    `url`, `headers`, `env`, `cwd`, `oauth`, `requests`, `processes`, `log_path`, `state`, `tools`,
    `names`, `_client`, `_stop`, `_note`, `_owned` and `start`."""

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """Holds the connection open: enter the client, list tools, wait for `_stop`, close."""
        _server_of_task.set(self)
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(stack)
                if self.processes is not None:
                    self.processes.found()  # the group's leader, while it runs
                tools = await self._list_tools(client)
                self._client, self.tools = client, {t.name: t for t in tools}
                self.requests.tools_changed = False  # changes announced while it started are in this list
                self.names = native_names(self.name, list(self.tools))
                ready.set_result(None)
                await self._stop.wait()  # type: ignore[union-attr]
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # noqa: BLE001 - anyio groups; reported through `ready` or the log
            why = self._describe_failure(_leaf(exc))
            if not ready.done():
                ready.set_exception(MCPServerError(why))
            else:
                self._note(f"connection ended: {why}")
        finally:
            self._client = None
            if self.state == "running":
                self.state = "exited"
            self._note("stopped")

    async def _connect(self, stack: AsyncExitStack) -> Any:
        try:
            from mcp import Client
            from mcp.types import Implementation
        except ImportError:
            raise MCPServerError("needs the `mcp` package: pip install 'ipyagent[mcp]'") from None

        requests = self.requests  # declares sampling, elicitation (form and URL) and roots to the server
        client = Client(
            await self._transport(stack),
            logging_callback=requests.log,
            message_handler=requests.message,
            sampling_callback=requests.sampling,
            elicitation_callback=requests.elicitation,
            list_roots_callback=requests.list_roots,
            client_info=Implementation(name="ipyagent", version=__version__),
        )
        requests.client = client  # a reply it cannot read fails the request waiting for it
        return await stack.enter_async_context(client)

    async def _transport(self, stack: AsyncExitStack) -> Any:
        if self.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            errlog = stack.enter_context(open(self.log_path, "a", buffering=1, encoding="utf-8"))
            env = self.processes.environment(self.env) if self.processes is not None else self.env
            params = StdioServerParameters(command=self.command[0], args=self.command[1:], env=env, cwd=self.cwd)
            return stdio_client(params, errlog=errlog)
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.url, headers=self.headers or None)  # type: ignore[arg-type]
        from mcp.client.streamable_http import streamable_http_client

        # The SDK's own defaults: 30 s to connect/write, 300 s between bytes of a held response stream.
        auth = None
        if self.oauth:
            auth = oauth_provider(self.url, self._show_sign_in, timeout=self.sign_in_timeout)  # type: ignore
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=self.headers, auth=auth, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(self.url, http_client=http)  # type: ignore[arg-type]

    def _show_sign_in(self, link: str) -> None:
        """Show the authorization link of an OAuth sign-in (`on_sign_in`, else printed): an
        ``http(s)`` link only, its control characters removed."""
        link = "".join(c for c in link if c.isprintable())
        if not link.startswith(("https://", "http://")):
            raise MCPServerError(f"MCP server {self.name!r}: its authorization link is not http(s); not opened")
        self._note("sign-in: waiting for the browser to come back")
        if self.on_sign_in is not None:
            self.on_sign_in(link)
        else:
            print(f"MCP server {self.name!r}: sign in at {link}", flush=True)

    @staticmethod
    async def _list_tools(client: Any, cache_mode: str = "use") -> list[Any]:
        tools, cursor = [], None
        for _ in range(100):  # a paginator that never ends cannot hang a start
            page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools += page.tools
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
        return tools

    async def refresh_tools(self) -> bool:
        """List the tools again if the server said they changed (``notifications/tools/list_changed``)
        since they were listed; True when it did. A server that is not running is left alone."""
        if self.state != "running" or not self.requests.tools_changed or self._client is None:
            return False
        return await self._owned(self._relist())

    async def _relist(self) -> bool:
        self.requests.tools_changed = False
        try:
            tools = await self._list_tools(self._client, cache_mode="refresh")
        except Exception as exc:  # noqa: BLE001 - the old list stays; the next call says what is wrong
            self._note(f"could not list the changed tools: {redact(str(exc))[:200]}")
            return False
        self.tools = {t.name: t for t in tools}
        self.names = native_names(self.name, list(self.tools))
        self._note(f"tools changed; now: {', '.join(self.tools) or 'none'}")
        return True

    async def use(self, work: Callable[[Any], Awaitable[T]], doing: str) -> T:
        """``await work(client)`` on the server's loop with its open `mcp.Client`, the server started
        first if need be (`mcp_resources` reads resources and prompts so).

        Raises:
            MCPServerError: it cannot start, or `work` failed: ``MCP server 'NAME' could not DOING: why``.
        """
        if self.state != "running" or self._client is None:
            await self.start()
        try:
            return await self._owned(self._use(work))
        except MCPServerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server's refusal, in one line
            leaf = _leaf(exc)
            why = getattr(leaf, "message", None) or str(leaf) or type(leaf).__name__
            raise MCPServerError(f"MCP server {self.name!r} could not {doing}: {redact(str(why))[:300]}") from None

    async def _use(self, work: Callable[[Any], Awaitable[T]]) -> T:
        _server_of_task.set(self)
        if self._client is None:
            raise MCPServerError(f"MCP server {self.name!r} stopped; %mcp restart {self.name}")
        return await work(self._client)

    async def set_roots(self, roots: Iterable[str | os.PathLike[str]]) -> None:
        """Offer these folders from now on; a running server is told (``notifications/roots/list_changed``)
        and asks for them again."""
        self.requests.roots = [Path(r).expanduser().resolve() for r in roots]
        if self.state == "running" and self._client is not None:
            await self._owned(self._roots_changed())

    async def _roots_changed(self) -> None:
        with warnings.catch_warnings():  # deprecated in the 2026-07-28 protocol; the servers here speak 2025-11-25
            warnings.simplefilter("ignore")
            await self._client.send_roots_list_changed()
        self._note(f"roots changed: {', '.join(map(str, self.requests.roots)) or 'none'}")

    def _describe_failure(self, exc: BaseException) -> str:
        if isinstance(exc, MCPServerError):
            return str(exc)
        if isinstance(exc, FileNotFoundError) and self.command:
            return f"could not start: command {self.command[0]!r} not found"
        if isinstance(exc, OSError) and self.command:
            return f"could not start {self.command[0]!r}: {exc.strerror or exc}"
        name = type(exc).__name__
        text = str(exc).splitlines()[0][:200] if str(exc) else name
        if name in ("ConnectError", "ConnectTimeout") or isinstance(exc, ConnectionError):
            return f"cannot connect to {self.shown_url}: {text}"
        if name == "HTTPStatusError":
            return f"{self.shown_url} answered {text}"
        if text == "Connection closed":  # the SDK's CONNECTION_CLOSED (a server's own -32000 error is its error)
            return "exited during start-up" if self.transport == "stdio" else f"{self.shown_url} closed the connection"
        return f"failed: {name}: {text}"
