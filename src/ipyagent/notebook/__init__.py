"""The notebook layer: magics, live views, approval buttons (the only layer importing IPython / ipywidgets)."""

from .approval import ApprovalButtons

__all__ = ["ApprovalButtons"]
