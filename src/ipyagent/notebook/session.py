"""The notebook session's shared state: conversation threads, Task Memory and the run store.

``%%agent`` (magics/agent.py) and the ``%agent`` subcommands (magics/session.py)
share one `Session`. Wiring only: a cell's agent owns the cell's thread (it composes
the history, trimmed to ``--max-history`` and the context window, and adds the run's
turn); `Session.begin` builds the run's user message once and returns an `ActiveRun`
that records the run's events in the run store as they come.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..agent import DEFAULT_THREAD, RunOptions, ThreadStore
from ..core import Event, Message
from ..memory import (
    DEFAULT_STORE_MAX_SIZE,
    STORE_ENV,
    RunRecorder,
    RunStore,
    StoreError,
    current_memory,
    default_store_path,
    human_size,
    store_location,
)
from .render.evaluation_saved import DEFAULT_OUTPUT_MAX


class Session:
    """Threads, Task Memory and the run store of one kernel (or IPython shell)."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.threads = ThreadStore()
        self.memory = current_memory()
        self.store_path: str | Path | None = default_store_path()  # a path, or a PostgreSQL URL
        self._store: RunStore | None = None
        self.store_error: str | None = None
        self.run_ids: list[str] = []
        self.last_context: list[dict[str, Any]] = []  # the context blocks of the last run (%agent inspect)
        self.last_masked: dict[str, int] = {}  # values masked in its context, by block (%agent inspect)
        self.store_max_size = DEFAULT_STORE_MAX_SIZE  # bytes past which `check_store_size` warns (0: never)
        self.size_warned = False
        self.eval_output_max = DEFAULT_OUTPUT_MAX  # bytes an evaluation's saved output takes at most

    # -- the run store -----------------------------------------------------------------

    @property
    def store(self) -> RunStore | None:
        """The open run store, opened on first use; None when off or when it cannot be
        opened (the reason is printed once and kept in `store_error`)."""
        if self._store is None and self.store_path is not None and self.store_error is None:
            try:
                self._store = RunStore(self.store_path)
                self._store.mark_abandoned()
            except StoreError as exc:
                self.store_error = str(exc)
                print(
                    f"ipyagent: {exc}; runs are not recorded (%agent store PATH to choose another file)",
                    file=sys.stderr,
                )
        return self._store

    def check_store_size(self) -> None:
        """Warn once (one line on stderr) when the run store has grown past `store_max_size`."""
        store = self._store
        if store is None or not self.store_max_size or self.size_warned:
            return
        size = store.size()
        if size > self.store_max_size:
            self.size_warned = True
            print(f"ipyagent: the run store {store.path} is {human_size(size)}, past store_max_size="
                  f"{human_size(self.store_max_size)}; %agent store --prune deletes its oldest runs to that size "
                  "(--max-size, --older-than 30d), %agent settings store_max_size=... moves the cap", file=sys.stderr)

    def set_store(self, path: str | Path | None) -> None:
        """Use the store at `path` (a SQLite file, a ``postgresql://`` URL) from now on (None: keep no store)."""
        self.close()
        self.store_path = store_location(path) if path is not None else None
        self.store_error = None

    # -- runs --------------------------------------------------------------------------

    def begin(self, agent: Any, prompt: str, options: RunOptions, *, record: bool = True,
              metadata: dict[str, Any] | None = None) -> "ActiveRun":
        """Prepare one run of `prompt` by `agent` (whose thread is the cell's: the agent composes
        the history and adds the run's turn). Returns the run's wiring: its user message, built
        once (`Agent.user_message`), and its recorder in the run store (`record`)."""
        store = self.store if record else None
        return ActiveRun(self, agent, prompt, agent.user_message(prompt, options), store, metadata, options)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class ActiveRun:
    """One run in progress: feeds its events to the run store, and gives the store the outcome
    when the run ends. `user` is the run's user message; `options` the run's options with its
    run id (the agent keeps it with the run's turn in its thread)."""

    def __init__(self, session: Session, agent: Any, prompt: str, user: Message, store: RunStore | None,
                 metadata: dict[str, Any] | None, options: RunOptions) -> None:
        self.session, self.agent, self.user = session, agent, user
        self.recorder: RunRecorder | None = None
        if store is not None:
            self.recorder = RunRecorder(store, thread=agent.thread.name, provider=agent.provider, prompt=user,
                                        prompt_text=prompt, session=session.id, metadata=metadata)
            if not self.recorder.active:
                self._warn(self.recorder.error)
                self.recorder = None
        self.run_id = self.recorder.run_id if self.recorder is not None else None
        if self.run_id:
            session.run_ids.append(self.run_id)
        self.options = replace(options, run_id=self.run_id)
        self._ended = False

    @staticmethod
    def _warn(message: str | None) -> None:
        if message:
            print(f"ipyagent: {message}", file=sys.stderr)

    def feed(self, event: Event) -> None:
        if self.recorder is not None:
            self.recorder.feed(event)

    def wrap(self, on_event: Any) -> Any:
        """`on_event` that also records each event here first."""

        def both(event: Event) -> None:
            self.feed(event)
            on_event(event)

        return both

    def finish(self, result: Any) -> Any:
        """The run ended: the store gets the outcome, and `result` its run id."""
        if self._ended:
            return result
        self._ended = True
        if self.recorder is not None:
            self.recorder.finish(result)
            self._warn(self.recorder.error)
            self.session.check_store_size()
        if self.run_id and isinstance(getattr(result, "metadata", None), dict):
            result.metadata["run_id"] = self.run_id
        return result

    def keep_transcript(self, transcript: Any) -> None:
        """Store the transcript the cell showed (a `Transcript`, or None), so ``%agent replay``
        shows the same one."""
        if transcript is not None and self.recorder is not None:
            self.recorder.keep_transcript(transcript.to_json())

    def interrupted(self) -> None:
        """The run was cancelled: the store writes the reply that was streaming, marked, and the
        run ``interrupted`` (the agent added the interrupted turn to its thread)."""
        if self._ended:
            return
        self._ended = True
        if self.recorder is not None:
            self.recorder.interrupted()


__all__ = ["ActiveRun", "DEFAULT_THREAD", "STORE_ENV", "Session", "default_store_path"]
