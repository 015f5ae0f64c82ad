"""The memory layer (DESIGN.md, "memory"): Task Memory and the run store.

Sits above core/drivers and below tools/agent; never imports the notebook layer.

The module itself is subscriptable: ``ipyagent.memory["fetch_page-1"]`` is the
artifact stored under that namespace in the current session's Task Memory
(`current_memory()`), ``list(ipyagent.memory)`` its namespaces.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports
from .summarize import summarize  # eager: the name is also its module's (tests/test_layers.py)

if TYPE_CHECKING:
    from .task_memory import TaskMemory

#: The layer's public names, each loaded on first use.
__getattr__ = lazy_exports(__name__, {
    "task_memory": ("TaskMemory", "MemoryEntry", "reference"),
    "artifacts": ("describe_size", "size_of", "to_memory_artifact"),
    "reading": ("read_slice", "search", "unit_of"),
    "recorder": ("RunRecorder", "message_json", "replay_events", "stored_transcript"),
    "store": ("STORE_ENV", "STORE_ENV_ALIAS", "RunStore", "StoreError", "check_store_path", "default_store_path",
              "new_run_id", "store_location"),
    "store_backends": ("is_url", "shown_location"),
    "store_evaluations": ("cached_run",),
    "store_admin": ("DEFAULT_STORE_MAX_SIZE", "Pruned", "human_size", "prune", "summary"),
    "tokens": ("CHARS_PER_TOKEN", "estimate_text", "estimate_tokens", "output_reserve"),
    "summarize": ("DEFAULT_BUDGET", "keep_ends"),
    "context": ("ContextBlock", "context_block", "variable_block"),
    "query": ("SUMMARY_QUESTION", "ask"),
})

__all__ = ["current_memory", "set_current_memory", "summarize", *__getattr__.exports]

_lock = threading.Lock()
_current: "TaskMemory | None" = None


def current_memory() -> "TaskMemory":
    """The session's Task Memory (created on first use); agents use it unless given their own."""
    global _current
    with _lock:
        if _current is None:
            from .task_memory import TaskMemory

            _current = TaskMemory()
        return _current


def set_current_memory(memory: "TaskMemory") -> None:
    """Make `memory` the one `ipyagent.memory[...]` and new agents use."""
    global _current
    with _lock:
        _current = memory


class _MemoryModule(types.ModuleType):
    """``ipyagent.memory[namespace]`` reads the current Task Memory."""

    def __getitem__(self, namespace: str) -> Any:
        return current_memory()[namespace]

    def __contains__(self, namespace: object) -> bool:
        return namespace in current_memory()

    def __iter__(self) -> Iterator[str]:
        return iter(current_memory())

    def __len__(self) -> int:
        return len(current_memory())


sys.modules[__name__].__class__ = _MemoryModule
