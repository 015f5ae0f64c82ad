"""Tools: `@activity`, `BaseTool`, `FunctionTool`, schema generation and dispatch; `MCPServer`
for the tools of an MCP server (the `mcp` SDK is imported only when one starts)."""

from .._lazy import lazy_exports
from .activity import ACTIVITY_ATTR, ActivityConfig, activity
from .base_tool import BaseTool, FunctionTool, to_artifact
from .call_context import CallContext, InteractionRefused, current_call
from .mcp import MCPServer, MCPServerError, MCPToolset, close_all, close_all_at_exit
from .mcp_requests import LOG_LEVELS as MCP_LOG_LEVELS
from .toolbox import Toolbox, as_tool

__getattr__ = lazy_exports(__name__, {
    "builtin.task_memory": ("with_task_memory",),  # the Task Memory activities, added to an agent's tools
    "off_prompt": ("store_output",),  # a tool output sent to Task Memory
    # an MCP server's resources and prompts, read for the user (%mcp resources, --with mcp:NAME/URI)
    "mcp_resources": ("PromptText", "get_prompt", "list_prompts", "list_resources", "prompt_cell",
                      "read_resource", "subscribe_resource"),
    "mcp_oauth": ("TokenFile",),  # OAuth tokens of a remote MCP server, outside the notebook
    # the notebook as the agent's workspace (a front end's `NotebookAccess` is the notebook layer's)
    "notebook": ("NotebookAccess", "NotebookCell", "NotebookTools", "NotebookUnsupported"),
    "mcp_serve": ("ToolServer",),  # a tool's activities as an MCP server (%agent serve-mcp)
})

__all__ = [
    "ActivityConfig",
    "ACTIVITY_ATTR",
    "activity",
    "BaseTool",
    "FunctionTool",
    "as_tool",
    "to_artifact",
    "Toolbox",
    "CallContext",
    "InteractionRefused",
    "current_call",
    "MCPServer",
    "MCPServerError",
    "MCPToolset",
    "MCP_LOG_LEVELS",
    "close_all",
    "close_all_at_exit",
    *__getattr__.exports,
]
