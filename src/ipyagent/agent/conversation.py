"""Conversation threads: named histories of runs, and how the next prompt is composed.

An `Agent` owns its thread (a notebook's named thread, shared by the cells that name it):
each run adds its turn (`result_turn`). A thread is a list of turns; a turn is one run's messages (the user prompt,
then each assistant message and the tool results that followed it). A failed
or interrupted turn is kept, marked, for the record, and skipped when the next
prompt is composed. History is trimmed by whole turns only, so a tool call is
never separated from its result.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from ..core import ActionCallBlock, ActionResultBlock, HistoryTrimmed, Message, system_text
from ..memory import estimate_text, estimate_tokens, output_reserve

DEFAULT_THREAD = "default"
#: The result given to a call that has none in the record (the ``tool`` structured-output
#: strategy takes the call as the answer and runs nothing); providers reject a call without one.
ANSWER_RESULT = "(recorded: this call was the answer itself; nothing was run)"


@dataclass
class Turn:
    """One run in a thread. `status` is ``ok``, ``failed`` or ``interrupted``."""

    messages: list[Message]
    status: str = "ok"
    run_id: str | None = None
    provider: str | None = None
    error: str | None = None
    tokens: int = 0

    def __post_init__(self) -> None:
        if not self.tokens:
            self.tokens = estimate_tokens(self.messages)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Composition:
    """The history a request carries: `messages`, how many turns were kept and dropped, and
    `estimated_tokens` (our estimate of `messages`, not a provider count)."""

    messages: list[Message]
    kept_turns: int
    dropped_turns: int = 0
    skipped_failed: int = 0
    estimated_tokens: int = 0
    budget_tokens: int | None = None
    reason: str | None = None

    def notice(self, thread: str) -> HistoryTrimmed | None:
        """The event telling the view that old turns were left out, or None."""
        if not self.dropped_turns:
            return None
        return HistoryTrimmed(thread, self.dropped_turns, self.kept_turns, self.estimated_tokens,
                              self.budget_tokens, self.reason or "max_history")


def close_dangling_calls(messages: list[Message]) -> list[Message]:
    """`messages` with a tool result added after any tool call that has none (a structured
    answer given as a tool call); calls that have results are left as they are."""
    answered = {b.action.tag for m in messages for b in m.content if isinstance(b, ActionResultBlock)}
    out: list[Message] = []
    for message in messages:
        out.append(message)
        if message.role != "assistant":
            continue
        dangling = [
            b.action for b in message.content if isinstance(b, ActionCallBlock) and b.action.tag not in answered
        ]
        if dangling:
            out.append(
                Message(
                    role="tool",
                    content=[
                        ActionResultBlock(action=a.model_copy(update={"output": None}), text=ANSWER_RESULT)
                        for a in dangling
                    ],
                )
            )
    return out


class Thread:
    """A named conversation: its system prompt and its turns."""

    def __init__(self, name: str = DEFAULT_THREAD, system: str | None = None) -> None:
        self.name = name
        self.system = system
        self.turns: list[Turn] = []

    def add(self, turn: Turn) -> Turn:
        self.turns.append(turn)
        return turn

    def reset(self) -> None:
        """Forget the turns (the system prompt stays)."""
        self.turns.clear()

    def messages(self) -> list[Message]:
        """Every message of every turn, failed ones included (their partial messages
        have a `Message.status` other than ``complete``)."""
        return [m for t in self.turns for m in t.messages]

    def compose(self, *, max_turns: int | None = None, budget_tokens: int | None = None) -> Composition:
        """The history for the next request: completed turns only, newest last.

        `max_turns` keeps at most that many of the latest turns; `budget_tokens` drops the
        oldest turns, whole, until our estimate of the rest fits. Partial and failed
        messages are never sent.
        """
        usable = [t for t in self.turns if t.ok]
        skipped = len(self.turns) - len(usable)
        dropped, reason = 0, None
        if max_turns is not None and len(usable) > max(0, max_turns):
            dropped = len(usable) - max(0, max_turns)
            usable, reason = usable[dropped:], "max_history"
        if budget_tokens is not None:
            total = sum(t.tokens for t in usable)
            while usable and total > budget_tokens:
                total -= usable.pop(0).tokens
                dropped += 1
                reason = "context_window"
        messages = [m for t in usable for m in close_dangling_calls(t.messages) if m.complete]
        return Composition(
            messages, len(usable), dropped, skipped, sum(t.tokens for t in usable), budget_tokens, reason
        )

    def __repr__(self) -> str:
        return f"<Thread {self.name}: {len(self.turns)} turns>"


class ThreadStore:
    """The session's threads by name; a name used for the first time starts an empty thread."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._lock = threading.Lock()

    def get(self, name: str | None = None) -> Thread:
        name = name or DEFAULT_THREAD
        with self._lock:
            thread = self._threads.get(name)
            if thread is None:
                thread = self._threads[name] = Thread(name)
            return thread

    def names(self) -> list[str]:
        return list(self._threads)

    def __contains__(self, name: object) -> bool:
        return name in self._threads

    def remove(self, name: str) -> bool:
        """Drop thread `name` (turns and system prompt); False when there was none."""
        with self._lock:
            return self._threads.pop(name, None) is not None


def history_for(thread: Thread, user: Message, options: Any, window: int) -> Composition:
    """What a run of `user` with `options` (a `RunOptions`) carries of `thread`: its completed turns,
    the oldest left out whole to fit `options.max_history` turns and the context `window` (tokens,
    our estimate) beside the system prompt, `user` and the tool definitions."""
    fixed = estimate_text(system_text(options.system)) + estimate_tokens([user])
    fixed += estimate_text(json.dumps([d.model_dump() for d in options.tools.definitions()]))
    budget = max(0, window - output_reserve(window) - fixed)
    return thread.compose(max_turns=options.max_history, budget_tokens=budget)


def result_turn(result: Any, *, run_id: str | None = None) -> Turn:
    """The turn a finished run (`AgentResult`) adds to its thread: a completed run's
    `new_messages` (as a later request must carry them); a failed or interrupted run's
    `messages` as they were, its partial reply marked by its status, kept for the record
    and skipped when the next prompt is composed."""
    provider = getattr(result, "provider", None)
    if result.error is None and not result.interrupted:
        return Turn(list(result.new_messages or result.messages), "ok", run_id, provider)
    status = "interrupted" if result.interrupted else "failed"
    error = result.error.message if result.error is not None else "interrupted"
    return Turn(list(result.messages), status, run_id, provider, error)
