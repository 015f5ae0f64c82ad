"""The notebook layer: magics, live views, approval buttons (the only layer importing IPython / ipywidgets)."""

from typing import Any

__all__ = ["ApprovalButtons"]


def __getattr__(name: str) -> Any:  # lazy: `%load_ext ipyagent` imports this package and must stay light
    if name == "ApprovalButtons":
        from .views.approval import ApprovalButtons

        return ApprovalButtons
    raise AttributeError(f"module 'ipyagent.notebook' has no attribute {name!r}")
