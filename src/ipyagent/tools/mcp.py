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

Here: the server's settings, start and stop, its log and the servers alive in this process;
its transport and session are `mcp_connection`, its tool calls and its toolset `mcp_toolset`.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import shlex
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..core import SECRET_ENV, SECRET_FIELDS, add_secret, add_url, redact
from .mcp_connection import MCPServerError, ServerConnection, _import_validator, _server_of_task, _transport_of
from .mcp_content import check_server_name
from .mcp_oauth import SIGN_IN_TIMEOUT
from .mcp_requests import ELICITATION_TIMEOUT, LOG_LEVELS, ClientRequests, log_level_of
from .mcp_toolset import MCPToolset, ToolCalls
from .process_group import ServerProcesses, end_all

__all__ = ["CLOSE_TIMEOUT", "START_TIMEOUT", "MCPServer", "MCPServerError", "MCPToolset", "close_all",
           "close_all_at_exit", "live_servers", "log_dir"]

T = TypeVar("T")

#: Seconds a server may take to start and answer ``initialize`` (and list its tools).
START_TIMEOUT = 30.0
#: Seconds `close` waits for a server to stop (the SDK closes stdin, then SIGTERM, then SIGKILL, ~6 s at most).
CLOSE_TIMEOUT = 10.0

_live: "weakref.WeakSet[MCPServer]" = weakref.WeakSet()
_log_dir: Path | None = None
_setup_lock = threading.Lock()


def log_dir() -> Path:
    """The folder of this process's MCP logs (one file per server, ``sdk.log`` for the rest)."""
    global _log_dir
    with _setup_lock:
        if _log_dir is None:
            _log_dir = Path(tempfile.mkdtemp(prefix=f"ipyagent-mcp-{os.getpid()}-"))
            handler = _ServerLogHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
            sdk = logging.getLogger("mcp")
            sdk.addHandler(handler)  # the SDK's records never reach the kernel's stderr (or a root handler)
            sdk.propagate = False
            logging.getLogger("client").addFilter(_SessionRecords(handler))
            atexit.register(close_all_at_exit)
        return _log_dir


class _ServerLogHandler(logging.Handler):
    """Writes a record of the SDK to the log of the server whose task logged it (else ``sdk.log``)."""

    def emit(self, record: logging.LogRecord) -> None:
        server = _server_of_task.get()
        path = server.log_path if server is not None else log_dir() / "sdk.log"
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(_one_entry(redact(self.format(record))) + "\n")
        except Exception:  # logging must never break a call
            pass


def _one_entry(text: str) -> str:
    """A log entry of ipyagent's or the SDK's (a traceback, pydantic's errors) with its later lines
    indented, so they are told from the server's own lines (`MCPServer._failed` quotes its last)."""
    return "\n    ".join(text.splitlines())


class _SessionRecords(logging.Filter):
    """On the ``client`` logger: the SDK's client session logs there (mcp 2.x), not under ``mcp``,
    e.g. "Failed to validate notification" with a traceback quoting the server's data. Its records
    go to `handler` (the server's log, redacted) and no further; other ``client`` records pass."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}mcp{os.sep}" not in record.pathname:
            return True
        self.handler.handle(record)
        return False



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


class MCPServer(ServerConnection, ToolCalls):
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
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ipyagent: {_one_entry(redact(message))}\n")

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
        tail = [line for line in self.log(20).splitlines() if "ipyagent:" not in line and not line[:1].isspace()]
        hint = f"; its last log line: {tail[-1].strip()[:200]!r}" if tail else ""
        raise MCPServerError(f"MCP server {self.name!r} {why}{hint} (see %mcp log {self.name})")

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
