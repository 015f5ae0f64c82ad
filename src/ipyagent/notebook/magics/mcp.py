"""``%mcp``: add, list, restart, remove MCP servers and read their logs.

The servers are kept on `AgentMagics.mcp_servers`, where ``%%agent --tools NAME``
and ``--tools NAME.tool`` find them (`resolve_tools`). The work is done by
`ipyagent.tools.mcp`; each server runs on ipyagent's background loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ...agent import run_sync
from ...tools import MCP_LOG_LEVELS as LOG_LEVELS
from ...tools import MCPServer, MCPServerError, MCPToolset, TokenFile
from ..redacted_io import plain_output
from . import mcp_read
from .options import split_words

USAGE = {
    "add": "%mcp add NAME [--env K=V] [--cwd DIR] [--root DIR] [OPTIONS] -- COMMAND [ARGS...]\n"
    "       %mcp add NAME --url URL [--header K=V] [--transport streamable-http|sse] [--oauth] [--root DIR] [OPTIONS]\n"
    "       OPTIONS: --approve --off-prompt --start --timeout S --sampling PROVIDER:MODEL --approve-sampling "
    "--elicitation-timeout S",
    "list": "%mcp list",
    "remove": "%mcp remove NAME",
    "restart": "%mcp restart NAME",
    "log": "%mcp log NAME [-n LINES] [--level debug|info|notice|warning|error|critical|alert|emergency]",
    "roots": "%mcp roots NAME [DIR ...]",
    "resources": "%mcp resources NAME",
    "prompts": "%mcp prompts NAME",
    "prompt": "%mcp prompt NAME PROMPT [ARG=VALUE ...]",
    "subscribe": "%mcp subscribe NAME URI",
    "signout": "%mcp signout NAME",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one UsageError line instead of argparse's exit
        raise UsageError(f"%mcp {self.prog}: {message}\nusage: {USAGE[self.prog]}")


def _add_parser() -> _Parser:
    p = _Parser(prog="add", add_help=False)
    p.add_argument("name")
    p.add_argument("--url")
    p.add_argument("--header", action="append", default=[], metavar="K=V")
    p.add_argument("--transport", choices=("streamable-http", "sse"))
    p.add_argument("--oauth", action="store_true")
    p.add_argument("--env", action="append", default=[], metavar="K=V")
    p.add_argument("--cwd")
    p.add_argument("--approve", action="store_true")
    p.add_argument("--off-prompt", action="store_true")
    p.add_argument("--start", action="store_true")
    p.add_argument("--timeout", type=float)
    p.add_argument("--root", action="append", default=None, metavar="DIR")
    p.add_argument("--sampling", metavar="PROVIDER:MODEL")
    p.add_argument("--approve-sampling", action="store_true")
    p.add_argument("--elicitation-timeout", type=float, metavar="S")
    return p


def _options(args: Any) -> dict[str, Any]:
    """`MCPServer` keyword arguments of ``%mcp add``'s options.

    Raises:
        UsageError: a timeout not above 0, a ``--root`` that is not a folder, a bad ``--sampling``.
    """
    for flag in ("timeout", "elicitation_timeout"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise UsageError(f"%mcp add: --{flag.replace('_', '-')} must be more than 0 seconds, not {value:g}")
    options: dict[str, Any] = {"requires_approval": args.approve, "off_prompt": args.off_prompt,
                               "sampling": args.sampling, "approve_sampling": args.approve_sampling}
    if args.oauth:
        options.update(oauth=True, on_sign_in=lambda link: show_sign_in(args.name, link))
    if args.sampling is not None and ":" not in args.sampling:
        raise UsageError(f"%mcp add: --sampling takes PROVIDER:MODEL, as %provider does, not {args.sampling!r}")
    if args.timeout is not None:
        options["start_timeout"] = args.timeout
    if args.elicitation_timeout is not None:
        options["elicitation_timeout"] = args.elicitation_timeout
    if args.root is not None:
        missing = [d for d in args.root if not os.path.isdir(os.path.expanduser(d))]
        if missing:
            raise UsageError(f"%mcp add: --root {missing[0]!r} is not a folder")
        options["roots"] = args.root
    return options


def show_sign_in(name: str, link: str) -> None:
    """An OAuth sign-in's link, printed in the cell (JupyterLab makes it a link): open it, sign
    in, and the browser comes back to ipyagent's listener on 127.0.0.1 (`tools.mcp_oauth`)."""
    print(f"mcp: sign in to {name}: open {link}\n     (ipyagent waits for the browser to come back)", flush=True)


def _pairs(values: list[str], flag: str, sep: str = "=") -> dict[str, str]:
    out = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise UsageError(f"%mcp add: {flag} needs KEY{sep}VALUE, not {item!r}")
        out[key.strip()] = value
    return out


def resolve_tools(servers: dict[str, MCPServer], names: list[str]) -> tuple[list[MCPToolset], list[str]]:
    """(toolsets for the ``--tools`` names that are MCP servers, the other names).

    ``NAME`` offers all of server NAME's tools, ``NAME.tool`` one of them; several
    picks of one server merge into one toolset. Servers start here (first use), so a
    bad server or tool name is reported before anything is sent.

    Raises:
        UsageError: a server cannot start, or has no such tool (one line).
    """
    picks: dict[str, list[str] | None] = {}
    rest = []
    for name in names:
        server, dot, tool = name.partition(".")
        if server not in servers:
            rest.append(name)
            continue
        if not dot:
            picks[server] = None
        elif picks.get(server, []) is not None:
            picks[server] = [*picks.get(server, []), tool]  # type: ignore[misc]
    toolsets = []
    for server, tools in picks.items():
        toolset = MCPToolset(servers[server], tools)
        try:
            run_sync(toolset.prepare())
        except MCPServerError as exc:
            raise UsageError(f"--tools {server}: {exc}") from None
        toolsets.append(toolset)
    return toolsets, rest


@magics_class
class MCPMagics(Magics):
    """``%mcp``; the servers live on `AgentMagics.mcp_servers`."""

    def __init__(self, shell: Any, agent_magics: Any) -> None:
        super().__init__(shell)
        self.agent_magics = agent_magics

    @property
    def servers(self) -> dict[str, MCPServer]:
        return self.agent_magics.mcp_servers

    @staticmethod
    def _error(message: str) -> None:
        print(f"ipyagent: {message}", file=sys.stderr)

    def _server(self, name: str | None, sub: str) -> MCPServer:
        if not name:
            raise UsageError(f"%mcp {sub}: name the server\nusage: {USAGE[sub]}")
        if name not in self.servers:
            known = ", ".join(self.servers) or "none yet (%mcp add NAME -- COMMAND)"
            raise UsageError(f"%mcp {sub}: no MCP server {name!r}; added: {known}")
        return self.servers[name]

    @line_magic
    @plain_output
    def mcp(self, line: str) -> None:
        """Tools from MCP servers, usable with ``%%agent --tools NAME`` (or ``NAME.tool``).

        ``%mcp add NAME -- COMMAND [ARGS...]`` (a stdio server; ``--env K=V``, ``--cwd DIR``),
        ``%mcp add NAME --url URL [--header K=V] [--transport sse]``, with ``--approve``
        (ask before every call), ``--off-prompt`` (results to Task Memory), ``--start``
        (start now; else on first use), ``--timeout S`` (start timeout, default 30 s).
        ``--root DIR`` (repeatable: the folders offered to the server; a stdio server's default
        is its working folder), ``--sampling PROVIDER:MODEL`` (the model that answers the server's
        sampling requests; default the run's), ``--approve-sampling`` (answer them without asking),
        ``--elicitation-timeout S`` (seconds a question to you waits before it is declined).
        ``%mcp list``, ``%mcp log NAME [--level LEVEL]``, ``%mcp roots NAME [DIR ...]``,
        ``%mcp restart NAME``, ``%mcp remove NAME``. ``%mcp resources NAME`` and ``%mcp prompts
        NAME`` list them; ``%%agent --with mcp:NAME/URI`` sends a resource as context;
        ``%mcp prompt NAME PROMPT [ARG=VALUE ...]`` puts a prompt in a new cell below;
        ``%mcp subscribe NAME URI``: ``%mcp list`` counts the resource's updates.
        ``--oauth`` (with ``--url``): sign in with OAuth; the link to open is printed, and the
        tokens are kept outside the notebook (``%mcp signout NAME`` deletes them).
        What it prints is redacted, and servers' control characters are shown, not run.
        """
        words = split_words(line, "%mcp")
        if not words or words[0] not in USAGE:
            given = f"unknown subcommand {words[0]!r}; " if words else ""
            raise UsageError(f"%mcp: {given}use one of: {', '.join(USAGE)}\nusage: {USAGE['add']}")
        sub, rest = words[0], words[1:]
        if sub == "add":
            self._add(rest)
        elif sub == "list":
            self._list()
        elif sub == "log":
            self._log(rest)
        elif sub == "roots":
            self._roots(rest)
        elif sub in ("resources", "prompts", "prompt", "subscribe"):
            self._read(sub, rest)
        elif sub == "signout":
            self._sign_out(rest)
        else:
            if len(rest) != 1:
                raise UsageError(f"%mcp {sub}: takes one server name\nusage: {USAGE[sub]}")
            server = self._server(rest[0], sub)
            run_sync(server.aclose())
            if sub == "remove":
                del self.servers[server.name]
                print(f"mcp: removed {server.name} (server stopped){_left(server)}")
            else:
                self._start(server)

    def _add(self, words: list[str]) -> None:
        command: list[str] = []
        if "--" in words:
            at = words.index("--")
            words, command = words[:at], words[at + 1 :]
        args = _add_parser().parse_args(words)
        if args.name in self.servers:
            raise UsageError(f"%mcp add: {args.name!r} is already added; %mcp remove {args.name} first")
        if bool(command) == bool(args.url):
            raise UsageError(f"%mcp add: give a command after -- or --url URL, one of them\nusage: {USAGE['add']}")
        if command and (args.header or args.transport):
            raise UsageError("%mcp add: --header and --transport go with --url")
        if command and args.oauth:
            raise UsageError("%mcp add: --oauth goes with --url")
        if args.oauth and args.transport == "sse":
            raise UsageError("%mcp add: --oauth goes with streamable HTTP, not --transport sse")
        if args.url and (args.env or args.cwd):
            raise UsageError("%mcp add: --env and --cwd go with a command (after --)")
        options = _options(args)
        try:
            server = MCPServer(
                args.name,
                command or None,
                url=args.url,
                env=_pairs(args.env, "--env"),
                cwd=args.cwd,
                headers=_pairs(args.header, "--header"),
                transport=args.transport,
                **options,
            )
        except ValueError as exc:
            raise UsageError(f"%mcp add: {exc}") from None
        if server.command and not _found(server):
            self._error(
                f"MCP server {server.name!r}: command {server.command[0]!r} not found; check the name, or give "
                "its full path"
            )
            return
        self.servers[server.name] = server
        if args.start:
            self._start(server)
        else:
            print(f"mcp: added {server.name} ({server.target}); it starts on first use")

    def _start(self, server: MCPServer) -> None:
        try:
            run_sync(server.start())
        except MCPServerError as exc:
            self._error(str(exc))
            return
        print(f"mcp: {server.name} running; tools: {', '.join(server.names.values()) or 'none'}")

    def _list(self) -> None:
        if not self.servers:
            print("no MCP servers: %mcp add NAME -- COMMAND [ARGS...] or %mcp add NAME --url URL")
            return
        for server in self.servers.values():
            named = (("approve", server.requires_approval), ("off-prompt", server.off_prompt),
                     ("approve-sampling", server.approve_sampling), ("oauth", server.oauth))
            flags = "".join(f", {f}" for f, on in named if on)
            flags += f", sampling by {server.sampling}" if server.sampling else ""
            print(f"{server.name}  {server.status}{flags}  {server.target}")
            if server.state == "failed" and server.last_error:
                print(f"  {server.last_error}")
            if server.left_processes:
                print(f"  {_left(server).lstrip('; ')}")
            _print_requests(server)
            for tool, native in server.names.items():
                description = server.tools[tool].description or ""
                print(f"  {native}: {description.splitlines()[0] if description else ''}")
            if not server.names and server.state != "failed":
                print("  (tools listed once started: %%agent --tools NAME, %tools or %mcp restart NAME)")

    def _log(self, words: list[str]) -> None:
        lines, level = 50, None
        if "-n" in words:
            at = words.index("-n")
            try:
                lines = int(words[at + 1])
            except (IndexError, ValueError):
                raise UsageError(f"%mcp log: -n needs a number of lines\nusage: {USAGE['log']}") from None
            words = words[:at] + words[at + 2 :]
        if "--level" in words:
            at = words.index("--level")
            level = words[at + 1].lower() if at + 1 < len(words) else ""
            if level not in LOG_LEVELS:
                raise UsageError(f"%mcp log: --level takes one of {', '.join(LOG_LEVELS)}\nusage: {USAGE['log']}")
            words = words[:at] + words[at + 2 :]
        if len(words) != 1:
            raise UsageError(f"%mcp log: takes one server name\nusage: {USAGE['log']}")
        server = self._server(words[0], "log")
        text = server.log(lines, level=level)
        if text:
            print(text)
        elif level:
            print(f"(no log messages of {server.name} at level {level} or above)")
        else:
            print(f"(the log of {server.name} is empty: {server.log_path})")

    def _read(self, sub: str, words: list[str]) -> None:
        """``%mcp resources|prompts NAME``, ``%mcp prompt NAME PROMPT [ARG=VALUE ...]``,
        ``%mcp subscribe NAME URI`` (`mcp_read`)."""
        server = self._server(words[0] if words else None, sub)
        rest = words[1:]
        if sub in ("resources", "prompts") and rest or sub == "subscribe" and len(rest) != 1:
            raise UsageError(f"%mcp {sub}: wrong arguments\nusage: {USAGE[sub]}")
        if sub == "resources":
            mcp_read.print_resources(server)
        elif sub == "prompts":
            mcp_read.print_prompts(server)
        elif sub == "prompt":
            mcp_read.prompt_into_cell(self.shell, server, rest)
        else:
            mcp_read.subscribe(server, rest[0])

    def _sign_out(self, words: list[str]) -> None:
        """``%mcp signout NAME``: stop the server and delete its OAuth tokens and registration."""
        server = self._server(words[0] if len(words) == 1 else None, "signout")
        if not server.oauth:
            raise UsageError(f"%mcp signout: {server.name} was not added with --oauth")
        run_sync(server.aclose())
        TokenFile(server.url).forget()  # type: ignore[arg-type]
        print(f"mcp: signed out of {server.name}; its tokens are deleted (the next use signs in again)")

    def _roots(self, words: list[str]) -> None:
        """``%mcp roots NAME``: the folders offered; ``%mcp roots NAME DIR ...``: offer these instead
        (a running server is told: ``notifications/roots/list_changed``)."""
        if not words:
            raise UsageError(f"%mcp roots: name the server\nusage: {USAGE['roots']}")
        server = self._server(words[0], "roots")
        if len(words) > 1:
            missing = [d for d in words[1:] if not os.path.isdir(os.path.expanduser(d))]
            if missing:
                raise UsageError(f"%mcp roots: {missing[0]!r} is not a folder")
            run_sync(server.set_roots(words[1:]))
        roots = ", ".join(str(r) for r in server.requests.roots) or "none"
        told = " (the server was told)" if len(words) > 1 and server.state == "running" else ""
        print(f"mcp: {server.name} roots: {roots}{told}")


def _print_requests(server: MCPServer) -> None:
    """`%mcp list`'s lines of what a server was given and told: its roots, its resources' updates
    (``notifications/resources/updated``), its tools or lists changed."""
    requests = server.requests
    print(f"  roots: {', '.join(str(r) for r in requests.roots) or 'none'}")
    for uri, count in requests.updates.items():
        if count:
            print(f"  resource updated: {uri} ({count} time{'s' if count > 1 else ''})")
        else:
            print(f"  subscribed: {uri} (no update yet)")
    if requests.tools_changed:
        print("  tools changed: listed again before the next model turn")
    for what in sorted(requests.lists_changed):
        print(f"  {what} changed: %mcp {what} {server.name} lists them again")


def _left(server: MCPServer) -> str:
    """``; it left ...`` naming the processes a server started that left its process group and
    still run (closing the server did not end them), or nothing."""
    pids = server.left_processes
    if not pids:
        return ""
    listed = ", ".join(map(str, pids))
    return (f"; it left process{'es' if len(pids) > 1 else ''} {listed} running outside its process group "
            f"(not stopped by ipyagent: kill {' '.join(map(str, pids))})")


def _found(server: MCPServer) -> bool:
    return shutil.which(server.command[0], path=server.env.get("PATH", os.environ.get("PATH"))) is not None
