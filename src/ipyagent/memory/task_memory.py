"""Task Memory: off-prompt artifacts kept under a namespace each (DESIGN.md, "memory").

A tool marked off-prompt gives its output to a `TaskMemory` instead of the
prompt; the model gets `reference(entry)`, a short JSON object saying where the
output is, what it is, how big, and how to read it with the ``TaskMemory``
tool. Everything stays in process memory (and in the run store, when one is on).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core import ArtifactStored, BaseArtifact
from .artifacts import describe_size, size_of

#: Namespaces are ``{activity}-{n}``, n counting up per process: fresh per call, and the
#: same from one fresh run of a notebook to the next (so recorded cassettes still match).
_counter = itertools.count(1)
_counter_lock = threading.Lock()
_NAME_RE = re.compile(r"[^A-Za-z0-9_]+")

#: The name of the tool that reads Task Memory (`tools.builtin.TaskMemoryTool`).
READER_TOOL = "TaskMemory"


def new_namespace(activity: str | None) -> str:
    with _counter_lock:
        n = next(_counter)
    return f"{_NAME_RE.sub('_', activity or 'output').strip('_') or 'output'}-{n}"


@dataclass
class MemoryEntry:
    """One stored artifact and where it came from."""

    namespace: str
    artifact: BaseArtifact
    memory: str
    tool: str
    activity: str | None = None
    call_id: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def kind(self) -> str:
        return self.artifact.type  # type: ignore[attr-defined]

    @property
    def size(self) -> dict[str, int]:
        return size_of(self.artifact)

    def event(self) -> ArtifactStored:
        return ArtifactStored(self.call_id or "", self.tool, self.activity, self.memory, self.namespace,
                              self.artifact, self.size)

    def summary(self) -> dict[str, Any]:
        """A JSON-able line for listings: namespace, type, size, producing tool."""
        producer = f"{self.tool}.{self.activity}" if self.activity and self.activity != self.tool else self.tool
        return {"namespace": self.namespace, "type": self.kind, "size": self.size,
                "size_text": describe_size(self.size), "tool": producer, "memory": self.memory}


class TaskMemory:
    """Artifacts stored off-prompt, by namespace. Thread-safe.

    Args:
        name: how references and the reading tool name this memory.

    ``memory[namespace]`` is the artifact (KeyError naming the known
    namespaces when absent); ``memory.entry(namespace)`` its `MemoryEntry`.
    """

    def __init__(self, name: str = "TaskMemory") -> None:
        self.name = name
        self._entries: dict[str, MemoryEntry] = {}
        self._lock = threading.Lock()

    def store(self, artifact: BaseArtifact, *, tool: str, activity: str | None = None,
              call_id: str | None = None, namespace: str | None = None) -> MemoryEntry:
        """Keep `artifact` under a fresh namespace (or `namespace`) and return its entry."""
        entry = MemoryEntry(namespace or new_namespace(activity or tool), artifact, self.name, tool, activity, call_id)
        with self._lock:
            self._entries[entry.namespace] = entry
        return entry

    def entry(self, namespace: str) -> MemoryEntry:
        """Raises: KeyError with the namespaces that exist."""
        with self._lock:
            found = self._entries.get(namespace)
            known = list(self._entries)
        if found is None:
            hint = ", ".join(known[-10:]) if known else "nothing is stored yet"
            raise KeyError(f"no artifact under namespace {namespace!r} in {self.name}; stored: {hint}")
        return found

    def entries(self) -> list[MemoryEntry]:
        with self._lock:
            return list(self._entries.values())

    def __getitem__(self, namespace: str) -> BaseArtifact:
        return self.entry(namespace).artifact

    def __contains__(self, namespace: object) -> bool:
        return namespace in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __repr__(self) -> str:
        return f"<TaskMemory {self.name}: {len(self)} artifacts>"


def reference(entry: MemoryEntry, reader: str = READER_TOOL) -> str:
    """What the model receives instead of an off-prompt output: a JSON object with the
    memory name, namespace, producing tool and activity, artifact type and size, and how
    to read it (the reading tool's activities). Holds no part of the content."""
    ns = entry.namespace
    unit = "rows" if entry.kind == "table" else "bytes" if entry.kind in ("blob", "image") else "characters"
    how = {
        "read": f"{reader}_read(namespace={ns!r}, offset=0, length=N) returns {unit} offset..offset+N",
        "search": f"{reader}_search(query=..., namespace={ns!r}) returns matching passages with their positions",
        "query": f"{reader}_query(namespace={ns!r}, question=...) answers a question from the whole artifact",
        "summarize": f"{reader}_summarize(namespace={ns!r})",
        "list": f"{reader}_list() lists everything stored",
    }
    if entry.kind == "image":
        how = {k: how[k] for k in ("read", "query", "list")}
    ref: dict[str, Any] = {
        "stored_off_prompt": True,
        "memory": entry.memory,
        "namespace": ns,
        "tool": entry.tool,
        "activity": entry.activity,
        "artifact_type": entry.kind,
        "size": entry.size,
    }
    mime = getattr(entry.artifact, "mime_type", None)
    if mime:
        ref["mime_type"] = mime
    if entry.kind == "table":
        ref["columns"] = entry.artifact.columns  # type: ignore[attr-defined]
    ref["how_to_read"] = how
    return json.dumps(ref, ensure_ascii=False)
