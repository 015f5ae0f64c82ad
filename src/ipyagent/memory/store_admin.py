"""A bounded run store: its size and counts, pruning oldest-first, and the cap that warns.

`summary` says what a store holds. `prune` deletes finished runs, oldest first: those
started before `older_than` seconds ago, and/or as many as bring the store's pages in use
under `max_size` bytes; then VACUUM gives the space back (the file shrinks). A run that
something keeps is never deleted unless `everything`: one a person graded, one an
evaluation's saved outcomes name (`RunStore.referenced_runs`), one a conversation thread
of the session still holds (`keep`), and any run still ``running``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

#: The run store's size past which the session warns once (``%agent settings store_max_size=``).
DEFAULT_STORE_MAX_SIZE = 2 * 1000**3


def human_size(size: float) -> str:
    """``512 bytes``, ``12.3 kB``, ``50.0 MB``, ``2 GB`` (decimal units, as disks are sold)."""
    for unit, scale in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(size)} bytes"


def summary(store: Any) -> str:
    """``PATH · 52.3 MB · 1,204 runs, 3 evaluations, 17 artifacts``."""
    counts = store.counts()
    return (f"{store.path} · {human_size(store.size())} · {counts['runs']:,} runs, "
            f"{counts['evaluations']:,} evaluations, {counts['artifacts']:,} artifacts")


@dataclass(frozen=True)
class Pruned:
    """What `prune` did: runs deleted, runs kept because something keeps them, bytes before and after."""

    deleted: int
    protected: int
    size_before: int
    size_after: int

    def describe(self) -> str:
        kept = f"; {self.protected:,} kept (graded, in a saved evaluation or a live thread; --all deletes them too)" \
            if self.protected else ""
        return (f"pruned {self.deleted:,} run{'s' if self.deleted != 1 else ''}: "
                f"{human_size(self.size_before)} -> {human_size(self.size_after)}{kept}")


def prune(store: Any, *, older_than: float | None = None, max_size: int | None = None, everything: bool = False,
          keep: set[str] | frozenset[str] = frozenset(), now: float | None = None) -> Pruned:
    """Delete finished runs oldest-first (module docstring) and VACUUM; what was done.

    Args:
        older_than: seconds; runs started before that long ago go.
        max_size: bytes; the oldest runs go until the pages in use are within it.
        everything: delete runs that something keeps too.
        keep: run ids the caller still holds (its threads).
        now: the time to count `older_than` from (seconds since the epoch; tests).
    """
    before = store.size()
    protected = set() if everything else store.referenced_runs() | set(keep)
    runs = store.finished_runs()
    cutoff = None if older_than is None else (time.time() if now is None else now) - older_than
    candidates = [(run_id, size) for run_id, started, size in runs
                  if run_id not in protected and (cutoff is None or started < cutoff)]
    held = sum(1 for run_id, _, _ in runs if run_id in protected)
    deleted = 0
    if max_size is None:
        store.delete_runs([run_id for run_id, _ in candidates])
        deleted = len(candidates)
    else:
        while candidates and store.live_bytes() > max_size:  # each pass deletes what the excess seems to be
            excess, take = store.live_bytes() - max_size, 0
            while take < len(candidates) and excess > 0:
                excess -= candidates[take][1]
                take += 1
            store.delete_runs([run_id for run_id, _ in candidates[:take]])
            deleted, candidates = deleted + take, candidates[take:]
    if deleted:
        store.vacuum()
    return Pruned(deleted, held, before, store.size())
