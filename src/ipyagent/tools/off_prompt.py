"""Off-prompt outputs: an activity marked off-prompt gives its output to Task Memory,
and the model gets a reference instead (DESIGN.md, "tools" and "memory").

Errors and "returned nothing" notes are never stored off-prompt: the model must see them.
"""

from __future__ import annotations

from typing import Any

from ..core import ArtifactStored, BaseArtifact, ErrorArtifact, InfoArtifact, ToolAction
from ..memory.task_memory import TaskMemory, reference
from .toolbox import Toolbox


def memories_of(toolbox: Toolbox, default: TaskMemory) -> list[TaskMemory]:
    """`default` and every memory named in the tools' ``output_memory``, once each."""
    found = [default]
    for tool in toolbox.tools:
        for memories in getattr(tool, "output_memory", {}).values():
            found += [m for m in memories if all(m is not f for f in found)]
    return found


def has_off_prompt(toolbox: Toolbox) -> bool:
    return any(tool.is_off_prompt(a) for tool in toolbox.tools for a in tool.activities())


def store_output(toolbox: Toolbox, action: ToolAction, artifact: BaseArtifact, default: TaskMemory,
                 reader: str = "TaskMemory") -> tuple[BaseArtifact, list[ArtifactStored]]:
    """(what the model gets, events for the view) for one call's output.

    An off-prompt activity's output (other than an error or an info note) is stored
    in its memories under one fresh namespace; the model gets `reference()` as an
    info artifact. Any other output passes unchanged, with no events.
    """
    route = toolbox.route(action)
    if route is None or isinstance(artifact, (ErrorArtifact, InfoArtifact)):
        return artifact, []
    tool, activity = route
    if not tool.is_off_prompt(activity):
        return artifact, []
    memories: list[Any] = tool.output_memory.get(activity) or [default]
    first = memories[0].store(artifact, tool=tool.name, activity=activity, call_id=action.tag)
    entries = [first] + [m.store(artifact, tool=tool.name, activity=activity, call_id=action.tag,
                                 namespace=first.namespace) for m in memories[1:]]
    return InfoArtifact(value=reference(first, reader), name="off_prompt_reference"), [e.event() for e in entries]
