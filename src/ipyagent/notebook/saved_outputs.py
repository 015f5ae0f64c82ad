"""The saved output of each live view this kernel showed, for a page that missed the run's end.

A run's live widget is replaced by its saved output through a display update addressed by its
display id (transcript_output.py). Display ids are not saved in a notebook, and the widget is
closed when the run ends, so a page closed while the run streamed and reopened after it ended
has nothing to draw: ipywidgets restores widgets only from the kernel's open comms or from
saved widget state, and reads "Error displaying widget: model not found" (anywidget adds
nothing to that). The labextension (labextension/src/reopened.ts) asks the kernel instead:

* the live widget's output is marked with `live_metadata()`, so a page knows which of its widget
  outputs are ours;
* a page opening a notebook with such outputs opens one comm on target `TARGET` with
  ``{"model_ids": [...]}``;
* the kernel answers ``{"outputs": {model_id: output}, "pending": [model_id, ...]}``: the
  nbformat output (``display_data`` with the transcript bundle) of every finished run it still
  keeps, and the ids still running; when a pending one ends, the same message again with its
  output (so a page that asked while the run streamed gets it even if the widget's own ``end``
  message missed it). Ids it does not know (another kernel's) are left out.

The kernel keeps the last `KEEP` finished outputs (a 23,000-character answer's is ~55 kB).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

#: The comm target a page opens to ask for saved outputs.
TARGET = "ipyagent.saved_output"
#: How many finished runs' outputs the kernel keeps for pages that come back later.
KEEP = 100


def live_metadata() -> dict[str, Any]:
    """The metadata of a live widget's output (the saved output's replaces it when the run ends)."""
    return {"ipyagent": {"live": True}}


class SavedOutputs:
    """Finished runs' outputs by their live widget's model id, and the pages waiting for running ones.

    `started` and `finished` may be called from any thread (the runs end on the background loop);
    `open` is the comm target (the kernel's thread)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._done: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._live: set[str] = set()
        self._waiting: dict[str, list[Any]] = {}  # live model id -> comms that asked for it
        self._pending: dict[int, set[str]] = {}  # id(comm) -> ids it still waits for
        self._lock = threading.Lock()

    def started(self, model_id: str) -> None:
        with self._lock:
            self._live.add(model_id)

    def finished(self, model_id: str, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """The run shown by widget `model_id` ended with output (`data`, `metadata`): keep it, and
        send it to every page that asked while it ran."""
        output = {"output_type": "display_data", "data": data, "metadata": metadata}
        with self._lock:
            self._live.discard(model_id)
            self._done[model_id] = output
            self._done.move_to_end(model_id)
            while len(self._done) > self.keep:
                self._done.popitem(last=False)
            waiting = self._waiting.pop(model_id, [])
            replies = []
            for comm in waiting:
                pending = self._pending.get(id(comm), set())
                pending.discard(model_id)
                replies.append((comm, sorted(pending)))
                if not pending:
                    self._pending.pop(id(comm), None)
        for comm, pending in replies:
            comm.send({"outputs": {model_id: output}, "pending": pending})

    def answer(self, comm: Any, model_ids: list[str]) -> dict[str, Any]:
        """What a page asking for `model_ids` gets now; it is sent the pending ones as they end."""
        with self._lock:
            outputs = {m: self._done[m] for m in model_ids if m in self._done}
            pending = sorted({m for m in model_ids if m in self._live})
            for model_id in pending:
                self._waiting.setdefault(model_id, []).append(comm)
            if pending:
                self._pending[id(comm)] = set(pending)
        return {"outputs": outputs, "pending": pending}

    def open(self, comm: Any, message: dict[str, Any]) -> None:
        """The comm target: a page asks with ``{"model_ids": [...]}`` (see the module doc)."""
        data = (message.get("content") or {}).get("data") or {}
        ids = data.get("model_ids") if isinstance(data, dict) else None
        model_ids = [m for m in ids if isinstance(m, str)] if isinstance(ids, list) else []
        comm.send(self.answer(comm, model_ids))


#: The kernel's one registry.
SAVED = SavedOutputs()


def register(ipython: Any) -> None:
    """Answer pages on `TARGET` in a kernel (`%load_ext`); nothing in a terminal."""
    if getattr(ipython, "kernel", None) is None:
        return
    from comm import get_comm_manager

    get_comm_manager().register_target(TARGET, SAVED.open)


def unregister(ipython: Any) -> None:
    if getattr(ipython, "kernel", None) is None:
        return
    from comm import get_comm_manager

    get_comm_manager().targets.pop(TARGET, None)
