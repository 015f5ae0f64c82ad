"""The notebook layer: magics, live views, approval buttons (the only layer importing IPython / ipywidgets)."""

from typing import Any

__all__ = ["ApprovalButtons", "notebook_tools"]


def __getattr__(name: str) -> Any:  # lazy: `%load_ext ipyagent` imports this package and must stay light
    if name == "ApprovalButtons":
        from .views.approval import ApprovalButtons

        return ApprovalButtons
    if name == "notebook_tools":  # the notebook as the agent's workspace
        from .workspace import notebook_tools

        return notebook_tools
    raise AttributeError(f"module 'ipyagent.notebook' has no attribute {name!r}")
