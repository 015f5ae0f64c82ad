"""``%agent serve-mcp [--approve-notebook] | stop``: this notebook's tools (`workspace.notebook_tools`)
offered to an outside agent (Claude Code, Codex, Cursor) as an MCP server (`tools.ToolServer`:
streamable HTTP on 127.0.0.1, a random bearer token).

Opt-in, one per session. Every insert, edit and run asks for approval as in ``%%agent --notebook``:
Approve / Deny rows (with the change's diff) under the cell that started the server; in terminal
IPython, where only reading and the next input exist, a change no one can approve is refused.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ...tools import NotebookTools, ToolServer
from ..views.approval import ApprovalButtons
from ..workspace import notebook_tools


class Served:
    """A running server, as ``%agent serve-mcp`` shows it: where it listens, its token, and how a client
    connects. Shown as the cell's result (not printed: printed text passes the redactor, which
    would mask the token the user has to copy)."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server

    def __repr__(self) -> str:
        url, token = self.server.url, self.server.token
        return (f"MCP server of this notebook's tools on {url}\n"
                f"token (a header on every request): Authorization: Bearer {token}\n"
                f"Claude Code: claude mcp add --transport http notebook {url} "
                f'--header "Authorization: Bearer {token}"\n'
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
        running.server.stop()
        running.server.tool.notebook.close()
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
    holder.mcp_served = Served(server)
    return holder.mcp_served
