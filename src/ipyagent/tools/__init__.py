"""Tools: `@activity`, `BaseTool`, `FunctionTool`, schema generation and dispatch."""

from .activity import ActivityConfig, activity
from .base_tool import BaseTool, FunctionTool, as_tool, to_artifact
from .toolbox import Toolbox

__all__ = ["ActivityConfig", "activity", "BaseTool", "FunctionTool", "as_tool", "to_artifact", "Toolbox"]
