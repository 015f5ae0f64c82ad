"""Off-prompt outputs: an activity marked off-prompt gives its output to Task Memory,
and the model gets a reference instead (DESIGN.md, "tools" and "memory").

Errors and "returned nothing" notes are never stored off-prompt: the model must see them
(an error over `MAX_RESULT_CHARS`, a tool raising with its data in the message, is sent cut
to its head, and kept whole in Task Memory).

Any other tool result longer than `MAX_RESULT_CHARS` (about 1 MB of text) goes to Task
Memory too, whatever its activity says: the model gets a notice with its head, and the
result is kept once (in Task Memory), not also in the run's messages.
"""

from __future__ import annotations

from typing import Any

from ..core import ArtifactStored, BaseArtifact, ErrorArtifact, InfoArtifact, ListArtifact, ToolAction
from ..memory import MemoryEntry, TaskMemory, reference
from .toolbox import Toolbox

#: Characters of one tool result a model is sent at most; a longer result goes to Task Memory.
MAX_RESULT_CHARS = 1_000_000
#: Characters of such a result's head sent with the notice.
HEAD_CHARS = 2_000


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
    if isinstance(artifact, ErrorArtifact) and len(artifact.value) > MAX_RESULT_CHARS:
        return _cut_error(artifact, action, default, route)
    if route is None or isinstance(artifact, (ErrorArtifact, InfoArtifact)):
        return artifact, []
    tool, activity = route
    if not tool.is_off_prompt(activity):
        text = artifact.to_text()
        if len(text) <= MAX_RESULT_CHARS:
            return artifact, []
        entry = default.store(artifact, tool=tool.name, activity=activity, call_id=action.tag)
        readable = any(t.name == reader for t in toolbox.tools)
        return InfoArtifact(value=oversized_notice(entry, text, reader if readable else None),
                            name="off_prompt_reference"), [entry.event()]
    artifact = model_view(artifact)
    memories: list[Any] = tool.output_memory.get(activity) or [default]
    first = memories[0].store(artifact, tool=tool.name, activity=activity, call_id=action.tag)
    entries = [first] + [m.store(artifact, tool=tool.name, activity=activity, call_id=action.tag,
                                 namespace=first.namespace) for m in memories[1:]]
    return InfoArtifact(value=reference(first, reader), name="off_prompt_reference"), [e.event() for e in entries]


def model_view(artifact: BaseArtifact) -> BaseArtifact:
    """`artifact` without the items only shown to the user (`BaseArtifact.shown_only`): what Task
    Memory keeps of an off-prompt output; a list left with one item is that item."""
    if not isinstance(artifact, ListArtifact) or not any(a.shown_only for a in artifact.value):
        return artifact
    kept = [a for a in artifact.value if not a.shown_only]
    return kept[0] if len(kept) == 1 else artifact.model_copy(update={"value": kept})


def _cut_error(error: ErrorArtifact, action: ToolAction, default: TaskMemory,
               route: Any) -> tuple[BaseArtifact, list[ArtifactStored]]:
    """An error over `MAX_RESULT_CHARS`: its head for the model, still an error; whole in `default`."""
    tool, activity = route if route is not None else (None, None)
    entry = default.store(error, tool=tool.name if tool else action.native_name, activity=activity, call_id=action.tag)
    cut = (
        f"{error.value[:HEAD_CHARS]}… (an error of {len(error.value):,} characters, over the "
        f"{MAX_RESULT_CHARS:,}-character "
        f"limit for a tool result: its first {HEAD_CHARS:,} are shown; kept whole in Task Memory, namespace "
        f"{entry.namespace!r})"
    )
    return error.model_copy(update={"value": cut}), [entry.event()]


def oversized_notice(entry: MemoryEntry, text: str, reader: str | None) -> str:
    """What the model gets for a result over `MAX_RESULT_CHARS`: why, where it is, how to read
    it (when a `reader` tool is in the run) and its first `HEAD_CHARS` characters."""
    where = reference(entry, reader) if reader else f"Task Memory, namespace {entry.namespace!r} (the user can read it)"
    return (
        f"This result is {len(text):,} characters, over the {MAX_RESULT_CHARS:,}-character limit for a tool result, "
        f"so it was stored off-prompt: {where}. Its first {HEAD_CHARS:,} characters:\n{text[:HEAD_CHARS]}"
    )
