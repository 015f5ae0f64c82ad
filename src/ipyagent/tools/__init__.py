"""Tools: `@activity`, `BaseTool`, `FunctionTool`, schema generation and dispatch; `MCPServer`
for the tools of an MCP server (the `mcp` SDK is imported only when one starts)."""

from .activity import ActivityConfig, activity
from .base_tool import BaseTool, FunctionTool, as_tool, to_artifact
from .mcp import MCPServer, MCPServerError, MCPToolset
from .toolbox import Toolbox

__all__ = ["ActivityConfig", "activity", "BaseTool", "FunctionTool", "as_tool", "to_artifact", "Toolbox",
           "MCPServer", "MCPServerError", "MCPToolset"]
