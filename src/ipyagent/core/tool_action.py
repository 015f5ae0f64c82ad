"""Tool calls (`ToolAction`) and the two-way native tool-name mapping of `BaseTool` methods.

A `BaseTool` method's call names a tool (``Calculator``) and one of its
activities (``add_numbers``). On the wire it travels as one native name,
``Calculator_add_numbers``: the tool part is letters and digits, the activity
part letters, digits and underscores, so the first ``_`` splits them. A plain
function tool keeps its own name (``word_count`` is ``word_count``, no path):
a name read off the wire stays whole until the toolbox, which knows which
names are `BaseTool` methods, resolves it (`Toolbox.resolve`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_TOOL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_ACTIVITY_RE = re.compile(r"^[A-Za-z0-9_]+$")
#: Most providers cap function names at 64 characters of ``[A-Za-z0-9_-]``.
MAX_NATIVE_NAME = 64


class ToolNameError(ValueError):
    """A tool or activity name that cannot map to a native tool name."""


def to_native_name(tool: str, activity: str) -> str:
    """``("Calculator", "add")`` -> ``"Calculator_add"``.

    Raises:
        ToolNameError: the tool name is not letters and digits (starting with a
            letter), the activity not letters, digits and underscores, or the
            joined name is longer than 64 characters.
    """
    if not _TOOL_RE.match(tool):
        raise ToolNameError(
            f"tool name {tool!r} cannot be sent to a model: use letters and digits only, starting with a letter"
        )
    if not _ACTIVITY_RE.match(activity):
        raise ToolNameError(
            f"activity name {activity!r} of tool {tool!r} cannot be sent to a model: "
            "use letters, digits and underscores only"
        )
    native = f"{tool}_{activity}"
    if len(native) > MAX_NATIVE_NAME:
        raise ToolNameError(
            f"tool name {native!r} is {len(native)} characters; providers accept at most {MAX_NATIVE_NAME}"
        )
    return native


def from_native_name(native: str) -> tuple[str, str | None]:
    """``"Calculator_add_numbers"`` -> ``("Calculator", "add_numbers")``: the inverse of
    `to_native_name`, for a name known to be a `BaseTool` method's.

    A name not in that form (no ``_``, or parts that `to_native_name` would
    reject: a model calling a function we did not declare in our form) maps to
    ``(native, None)``, so the mapping stays two-way.

    Raises:
        ToolNameError: the name is empty.
    """
    if not native:
        raise ToolNameError("empty tool name")
    tool, sep, activity = native.partition("_")
    # Split only when `to_native_name` gives the same name back; any other name
    # (``_private``, ``web-search_query``) is a plain function name.
    if sep and _TOOL_RE.match(tool) and _ACTIVITY_RE.match(activity) and len(native) <= MAX_NATIVE_NAME:
        return tool, activity
    return native, None


class ToolAction(BaseModel):
    """One tool call: the model asks tool `name` to run activity `path` on `input`.

    Attributes:
        tag: the provider's call id (``call_...``, ``toolu_...``), used to tie the
            result to the call.
        name: the tool's name.
        path: the activity's name, or None for a plain function tool.
        input: the arguments as a dict (never a JSON string).
        output: None until run; then the result artifact.
    """
    model_config = ConfigDict(defer_build=True)

    tag: str
    name: str
    path: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    output: Any = None

    @property
    def native_name(self) -> str:
        """The name sent on the wire (``Tool_activity``, or the name alone)."""
        return to_native_name(self.name, self.path) if self.path else self.name

    @classmethod
    def from_native(cls, tag: str, native_name: str, input: dict[str, Any]) -> "ToolAction":
        """A call as read off the wire: the whole native name, no path (a plain function's
        name, ``word_count``, must not become tool ``word`` activity ``count``)."""
        if not native_name:
            raise ToolNameError("empty tool name")
        return cls(tag=tag, name=native_name, input=input)
