"""``%agent serve-mcp [--approve-notebook] | stop``: this notebook's tools (`workspace.notebook_tools`)
offered to an outside agent (Claude Code, Codex, Cursor) as an MCP server (`tools.ToolServer`:
streamable HTTP on 127.0.0.1, a random bearer token).

The token never appears in the notebook: it is written to a file only its owner can read (mode 0600, in
Jupyter's runtime directory beside the kernels' connection files), the cell shows that file's path, and
the token is registered with the redactor, so no output, log or store of this session holds it. The file
goes when the server stops or the kernel exits.

Opt-in, one per session. Every insert, edit and run asks for approval as in ``%%agent --notebook``:
Approve / Deny rows (with the change's diff) under the cell that started the server; in terminal
IPython, where only reading and the next input exist, a change no one can approve is refused.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ...core import add_secret
from ...tools import NotebookTools, ToolServer
from ..views.approval import ApprovalButtons
from ..workspace import notebook_tools


def _runtime_dir() -> Path:
    """Jupyter's runtime directory (where kernels keep their connection files), else the temp dir."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return Path(tempfile.gettempdir())
    return Path(jupyter_runtime_dir())


def write_token(token: str, port: int) -> Path:
    """Write `token` to ``ipyagent-mcp-PORT.token`` in `_runtime_dir`, readable by its owner only
    (created with mode 0600, replacing a stale file of that name); returns its path.

    Raises:
        OSError: the directory cannot be made or written.
    """
    folder = _runtime_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ipyagent-mcp-{port}.token"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token)
    return path


class Served:
    """A running server, as ``%agent serve-mcp`` shows it: where it listens, the file holding its token,
    and how a client connects. The token itself is never shown (see the module's docstring)."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        add_secret(server.token)
        self.token_file = write_token(server.token, server.port)
        atexit.register(self.token_file.unlink, missing_ok=True)

    def close(self) -> None:
        """Stop the server, close its notebook and remove the token file."""
        self.server.stop()
        self.server.tool.notebook.close()
        self.token_file.unlink(missing_ok=True)
        atexit.unregister(self.token_file.unlink)

    def __repr__(self) -> str:
        url, path = self.server.url, self.token_file
        return (f"MCP server of this notebook's tools on {url}\n"
                f"its token is in {path} (only you can read it); send it as Authorization: Bearer TOKEN\n"
                f"Claude Code: claude mcp add --transport http notebook {url} "
                f'--header "Authorization: Bearer $(cat {path})"\n'
                "stop it with %agent serve-mcp stop")


def _approver(shell: Any, tools: NotebookTools) -> Any:
    """Approve / Deny rows under this cell, each with the change's diff (a kernel with ipywidgets);
    None (changes refused) elsewhere."""
    if getattr(shell, "kernel", None) is None or importlib.util.find_spec("ipywidgets") is None:
        return None
    import ipywidgets as widgets

    box = widgets.VBox([])
    display(box)
    buttons = ApprovalButtons(box)
    return lambda action: buttons(action, preview=tools.preview(action))


def serve_command(shell: Any, holder: Any, words: list[str]) -> Any:
    """``%agent serve-mcp`` with `words` after it; `holder.mcp_served` keeps the running one.

    Raises:
        UsageError: an unknown option, or a server already running.
    """
    running: Served | None = getattr(holder, "mcp_served", None)
    if words == ["stop"]:
        if running is None:
            print("no MCP server is running (%agent serve-mcp starts one)")
            return None
        running.close()
        holder.mcp_served = None
        print(f"stopped the MCP server on {running.server.url}")
        return None
    if words not in ([], ["--approve-notebook"]):
        raise UsageError("%agent serve-mcp [--approve-notebook] | stop")
    if running is not None:
        raise UsageError(f"an MCP server is already running on {running.server.url}; %agent serve-mcp stop first")
    tools = notebook_tools(approve_edits=words == ["--approve-notebook"], shell=shell)
    server = ToolServer(tools, approve=_approver(shell, tools))
    try:
        server.start()
    except RuntimeError as exc:
        tools.notebook.close()
        raise UsageError(str(exc)) from None
    try:
        holder.mcp_served = Served(server)
    except OSError as exc:
        server.stop()
        tools.notebook.close()
        raise UsageError(f"could not write the MCP server's token file: {exc}") from None
    return holder.mcp_served
