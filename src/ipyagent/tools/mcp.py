"""Tools from MCP servers, through the official `mcp` SDK (imported on first start).

`MCPServer` is one connection: a subprocess spoken to over stdio, or a URL
(streamable HTTP; the SSE transport on request). It starts on first use, on
the event loop of whoever first awaits it (ipyagent's background loop: the
agent and the magics run there), lists the server's tools, and keeps one
`mcp.Client` open in a task of its own until closed. The server's stderr and
the SDK's log records go to a log file (`log_path`, ``%mcp log NAME``), never
to the kernel's streams; what is read back from it, and every start error, passes
the one redactor (`core.redact`). A stdio server runs in a process group of its
own, ended whole when it closes and at interpreter exit (`process_group`).

`MCPToolset` is the `BaseTool` face of a server (all its tools, or some): tools
are offered as ``server_tool`` (`mcp_content.native_names`) and run through the
same dispatch, approval, Task Memory and cards as any tool.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import os
import shlex
import shutil
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import httpx2

from .. import __version__
from ..core import (
    SECRET_ENV,
    SECRET_FIELDS,
    BaseArtifact,
    ErrorArtifact,
    InfoArtifact,
    ListArtifact,
    ToolAction,
    ToolDefinition,
    add_secret,
    add_url,
    redact,
)
from .base_tool import BaseTool
from .call_context import CallContext, current_call
from .mcp_content import (
    check_server_name,
    description,
    input_schema,
    native_names,
    result_artifact,
)
from .mcp_oauth import SIGN_IN_TIMEOUT, oauth_provider
from .mcp_requests import ELICITATION_TIMEOUT, LOG_LEVELS, ClientRequests, log_level_of
from .process_group import ServerProcesses, end_all

T = TypeVar("T")

#: Seconds a server may take to start and answer ``initialize`` (and list its tools).
START_TIMEOUT = 30.0
#: Seconds `close` waits for a server to stop (the SDK closes stdin, then SIGTERM, then SIGKILL, ~6 s at most).
CLOSE_TIMEOUT = 10.0

_live: "weakref.WeakSet[MCPServer]" = weakref.WeakSet()
_server_of_task: contextvars.ContextVar["MCPServer | None"] = contextvars.ContextVar(
    "ipyagent_mcp_server", default=None
)
_log_dir: Path | None = None
_setup_lock = threading.Lock()


class MCPServerError(Exception):
    """An MCP server that cannot be used: it did not start, refused, stopped. The message is one line."""


def log_dir() -> Path:
    """The folder of this process's MCP logs (one file per server, ``sdk.log`` for the rest)."""
    global _log_dir
    with _setup_lock:
        if _log_dir is None:
            _log_dir = Path(tempfile.mkdtemp(prefix=f"ipyagent-mcp-{os.getpid()}-"))
            handler = _ServerLogHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
            logging.getLogger("mcp").addHandler(handler)  # the SDK's records never reach the kernel's stderr
            atexit.register(close_all_at_exit)
        return _log_dir


class _ServerLogHandler(logging.Handler):
    """Writes a record of the SDK to the log of the server whose task logged it (else ``sdk.log``)."""

    def emit(self, record: logging.LogRecord) -> None:
        server = _server_of_task.get()
        path = server.log_path if server is not None else log_dir() / "sdk.log"
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(redact(self.format(record)) + "\n")
        except Exception:  # logging must never break a call
            pass


def _import_validator() -> None:
    """Import `jsonschema` (run in a worker thread while a server starts). The SDK imports it on
    the first result it validates; with its format checkers installed (JupyterLab brings them)
    that import takes seconds, which would stall ipyagent's loop and every stream on it."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass


def _register_secrets(server: "MCPServer") -> None:
    """Tell the one redactor about the server's secrets: its URL's credentials, the values of
    credential headers and of secret-named environment variables passed to it."""
    add_url(server.url)
    for name, value in server.headers.items():
        if name.lower() in SECRET_FIELDS or SECRET_ENV.search(name.replace("-", "_")):
            add_secret(value.split(" ", 1)[-1] if name.lower() == "authorization" else value)
            add_secret(value)
    for name, value in server.env.items():
        if SECRET_ENV.search(name):
            add_secret(value)


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


class MCPServer:
    """One MCP server, used as a tool source: ``Agent(tools=[MCPServer("time", command=["mcp-server-time"])])``.

    Args:
        name: prefixes its tools' names (``time_get_current_time``): a letter, then
            letters, digits, ``_`` or ``-``, at most 32 characters.
        command: the program and its arguments (a list, or one string split like a shell
            does), started as a subprocess that speaks MCP on stdin/stdout.
        url: an ``http(s)://`` endpoint (streamable HTTP, or SSE with ``transport="sse"``).
        env: extra environment variables for the subprocess (it inherits only HOME, PATH,
            SHELL, TERM, USER and LOGNAME otherwise: the SDK's rule, so your keys stay here).
        cwd: the subprocess's working folder.
        headers: HTTP headers sent with every request to `url` (``Authorization``).
        transport: ``stdio`` (with `command`), ``streamable-http`` (default with `url`) or ``sse``.
        requires_approval: every call of its tools waits for your approval.
        off_prompt: its tools' outputs go to Task Memory; the model gets a reference.
        start_timeout: seconds to start and answer ``initialize`` (default 30).
        roots: folders offered to the server (``roots/list``); default: the working folder
            (`cwd`, else the kernel's: the notebook's) for a stdio server, none for a URL.
        sampling: ``PROVIDER:MODEL`` that answers the server's sampling requests (default: the
            model of the run whose tool call it is).
        approve_sampling: answer its sampling requests without asking the user first.
        elicitation_timeout: seconds an elicitation waits for the user before it is declined.
        oauth: sign in with OAuth (the MCP authorization flow, `mcp_oauth`): on the first start
            without a stored token, `on_sign_in(link)` shows the link to open (default: printed),
            and the start waits for the sign-in as well (`sign_in_timeout`, 300 s). Tokens are
            kept in a 0600 file outside the notebook and refreshed when they expire.

    Raises:
        ValueError: a bad name, neither or both of `command` and `url`, a URL that is not http(s).
    """

    def __init__(
        self,
        name: str,
        command: list[str] | str | None = None,
        *,
        url: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        headers: dict[str, str] | None = None,
        transport: str | None = None,
        requires_approval: bool = False,
        off_prompt: bool = False,
        start_timeout: float = START_TIMEOUT,
        roots: Iterable[str | os.PathLike[str]] | None = None,
        sampling: str | None = None,
        approve_sampling: bool = False,
        elicitation_timeout: float = ELICITATION_TIMEOUT,
        oauth: bool = False,
        on_sign_in: Callable[[str], None] | None = None,
    ) -> None:
        self.name = check_server_name(name)
        if isinstance(command, str):
            command = shlex.split(command)
        self.transport = _transport_of(name, command, url, transport, oauth)
        if start_timeout <= 0:
            raise ValueError(f"start_timeout must be more than 0 seconds, not {start_timeout}")
        self.oauth, self.on_sign_in, self.sign_in_timeout = oauth, on_sign_in, SIGN_IN_TIMEOUT
        self.command, self.url = list(command or []), url
        self.env, self.cwd, self.headers = dict(env or {}), (str(cwd) if cwd is not None else None), dict(headers or {})
        _register_secrets(self)
        self.requires_approval, self.off_prompt, self.start_timeout = requires_approval, off_prompt, start_timeout
        self.sampling, self.approve_sampling, self.elicitation_timeout = sampling, approve_sampling, elicitation_timeout
        if roots is None:
            roots = [self.cwd or os.getcwd()] if self.command else []
        #: What the server asks of the client (sampling, elicitation, roots) and tells it (logs, changes).
        self.requests = ClientRequests(self, [Path(r).expanduser().resolve() for r in roots])
        #: stopped (never started or closed), running, exited (died; restarts on next use), failed.
        self.state = "stopped"
        self.tools: dict[str, Any] = {}  # MCP tool name -> the SDK's Tool (name, description, inputSchema)
        self.names: dict[str, str] = {}  # MCP tool name -> the name the model sees
        self.restarts = 0
        self.last_error: str | None = None
        self.log_path = log_dir() / f"{self.name}.log"
        #: Its processes (stdio): the group ended on close, processes that left it (`left_processes`).
        self.processes = ServerProcesses(self.name) if self.command else None
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._can_restart = True  # one automatic restart per death; a successful call re-arms it
        _live.add(self)

    # -- what it is -----------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The command line or URL, as shown to the user: header values never, secrets masked (`core.redact`)."""
        return redact(shlex.join(self.command)) if self.command else f"{self.shown_url} ({self.transport})"

    @property
    def shown_url(self) -> str | None:
        return redact(self.url) if self.url else None

    @property
    def status(self) -> str:
        """`state`, with a running server whose connection has ended shown as ``exited``."""
        return "exited" if self._connection_closed() else self.state

    def native_name(self, tool: str) -> str:
        return self.names[tool]

    def toolset(self, tools: Iterable[str] | None = None) -> "MCPToolset":
        """The server as a tool: all its tools, or only `tools` (MCP names)."""
        return MCPToolset(self, tools)

    def __repr__(self) -> str:
        tools = f", tools={list(self.tools)}" if self.tools else ""
        return f"<MCPServer {self.name} ({self.state}): {self.target}{tools}>"

    @property
    def left_processes(self) -> list[int]:
        """PIDs of running processes the server started that left its process group (a double
        fork), so closing the server did not end them; empty for a URL server."""
        return self.processes.check_left() if self.processes is not None and self.processes.leader else []

    def log(self, lines: int = 50, level: str | None = None) -> str:
        """The last `lines` lines of the server's log (its stderr, connection events, SDK records,
        its log messages), redacted (`core.redact`): a key the server printed is masked. With
        `level`, only its log messages (``notifications/message``) at that level or above
        (`mcp_requests.LOG_LEVELS`)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        rows = text.splitlines()
        if level is not None:
            wanted = LOG_LEVELS[LOG_LEVELS.index(level):]
            rows = [r for r in rows if log_level_of(r) in wanted]
        return redact("\n".join(rows[-lines:]))

    def _note(self, message: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ipyagent: {redact(message)}\n")

    # -- start and stop ---------------------------------------------------------------------

    async def _owned(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the loop the server runs on (the first loop that started it)."""
        loop = asyncio.get_running_loop()
        if self._loop is None or self._loop is loop or self._loop.is_closed() or not self._loop.is_running():
            self._loop = loop
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def start(self) -> None:
        """Start the server (if it is not running) and list its tools.

        Raises:
            MCPServerError: it cannot start: no such command, it exited, it did not answer
                ``initialize`` within `start_timeout` seconds, the URL refused. One line.
        """
        await self._owned(self._start_once())

    async def _start_once(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.state == "running":
                return
            await self._start()

    async def _start(self) -> None:
        if self.command and shutil.which(self.command[0], path=self.env.get("PATH", os.environ.get("PATH"))) is None:
            self.state, self.last_error = "failed", f"command {self.command[0]!r} not found"
            raise MCPServerError(
                f"MCP server {self.name!r}: command {self.command[0]!r} not found; "
                "check the name, or give its full path"
            )
        self._note(f"starting {self.target}")
        warming = asyncio.ensure_future(asyncio.to_thread(_import_validator))
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._runner = asyncio.create_task(self._run(ready), name=f"ipyagent-mcp-{self.name}")
        try:
            waited = self.start_timeout + (self.sign_in_timeout if self.oauth else 0)  # a sign-in waits for you
            await asyncio.wait_for(asyncio.shield(ready), waited)
        except asyncio.TimeoutError:
            await self._halt(now=True)
            self._failed(f"did not answer `initialize` within {self.start_timeout:g} s (start timeout)")
        except asyncio.CancelledError:
            await asyncio.shield(self._halt(now=True))
            self.state = "stopped"
            raise
        except MCPServerError as exc:
            await self._halt()
            self._failed(str(exc))
        await warming
        self.state = "running"
        self._note(f"running; tools: {', '.join(self.tools) or 'none'}")

    def _failed(self, why: str) -> None:
        why = redact(why)
        self.state, self.last_error = "failed", why
        self._note(f"failed: {why}")
        tail = [line for line in self.log(5).splitlines() if "ipyagent:" not in line]
        hint = f"; its last log line: {tail[-1].strip()[:200]!r}" if tail else ""
        raise MCPServerError(f"MCP server {self.name!r} {why}{hint} (see %mcp log {self.name})")

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
        if getattr(exc, "code", None) == -32000 or text == "Connection closed":  # the SDK's CONNECTION_CLOSED
            return "exited during start-up" if self.transport == "stdio" else f"{self.shown_url} closed the connection"
        return f"failed: {name}: {text}"

    async def _halt(self, *, now: bool = False) -> None:
        """Stop the runner task and wait (bounded) for the SDK to stop the process (closing its
        stdin, then SIGTERM and SIGKILL to its process group if it is still running), then end
        whatever is left of the group (`ServerProcesses.end`: a wrapper's children). `now`: cancel
        the runner at once (a start that timed out or was interrupted), else let it close the
        client in order."""
        runner, self._runner = self._runner, None
        if runner is not None and not runner.done():
            if now:
                runner.cancel()
            elif self._stop is not None:
                self._stop.set()
            done, _ = await asyncio.wait([runner], timeout=CLOSE_TIMEOUT)
            if not done:
                runner.cancel()
                await asyncio.wait([runner], timeout=CLOSE_TIMEOUT)
        if self.processes is not None:
            left = await asyncio.to_thread(self.processes.end)
            if left:
                self._note(f"processes left running outside its process group: {', '.join(map(str, left))}")

    async def aclose(self) -> None:
        """Stop the server (its process included); it starts again on next use. Safe to call twice."""
        self._can_restart = True  # closed (or restarted) by the user: automatic restarts allowed again
        if self._runner is None and (self.processes is None or not self.processes.started):
            self.state = "stopped"
            return
        await self._owned(self._halt())
        self.state, self._can_restart = "stopped", True

    # -- calls ------------------------------------------------------------------------------

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
            if getattr(leaf, "code", None) == -32000:  # CONNECTION_CLOSED: it died during the call; not re-sent
                self._note(f"stopped during a call of {tool}")
                await self._halt()
                self.state = "exited"
                return ErrorArtifact(
                    value=f"MCP server {self.name!r} stopped during the call (see %mcp log {self.name}); "
                    "it is restarted on the next call",
                    exception_type="MCPServerError",
                )
            return ErrorArtifact(
                value=f"MCP server {self.name!r}: {getattr(leaf, 'message', None) or leaf}",
                exception_type=type(leaf).__name__,
            )
        finally:
            if context is not None:
                calls.remove(context)
        self._can_restart = True
        return result_artifact(result)


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


def live_servers() -> list[MCPServer]:
    return list(_live)


async def close_all() -> None:
    """Close every MCP server of this process at once (``%unload_ext``)."""
    servers = [s for s in _live if s._runner is not None]
    await asyncio.gather(*(s.aclose() for s in servers), return_exceptions=True)


def close_all_at_exit() -> None:
    """At interpreter exit (kernel shutdown): end every stdio server's process group at once
    (SIGTERM, then SIGKILL after 2 s: `process_group.end_all`), so no process outlives the
    kernel; then close the connections on their own loop (bounded by `CLOSE_TIMEOUT` seconds a
    server) and remove the logs."""
    try:
        end_all(s.processes for s in list(_live) if s.processes is not None and s.processes.leader is not None)
    except Exception:  # noqa: BLE001 - exiting anyway
        pass
    futures = []
    for server in list(_live):
        loop = server._loop
        if server._runner is not None and loop is not None and loop.is_running():
            futures.append(asyncio.run_coroutine_threadsafe(server.aclose(), loop))
    for future in futures:
        try:
            future.result(timeout=CLOSE_TIMEOUT)
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    if _log_dir is not None:  # the logs go with the process
        shutil.rmtree(_log_dir, ignore_errors=True)
