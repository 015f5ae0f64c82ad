"""A run as a saved transcript: an `AgentResult` and its events become a `core.Transcript`,
a `Comparison` a `core.ComparisonRecord` (the documents a saved notebook shows, DESIGN.md "notebook").

The converter lives in the agent layer because it reads what only this layer knows: the
result of a run and the events it emitted, through the one event dispatch (`EventHandler`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..core import (
    PREVIEW_CHARS,
    ActionResultBlock,
    ArtifactStored,
    ArtifactSummary,
    ComparisonEntry,
    ComparisonRecord,
    ComparisonTable,
    EventHandler,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PartialReply,
    TextBlock,
    Timings,
    SamplingCompleted,
    ToolCallCompleted,
    ToolCallNote,
    ToolTiming,
    Transcript,
    TranscriptCost,
    TranscriptError,
    TranscriptUsage,
    reply_so_far,
    transcript_messages,
)
from .result import AgentResult

if TYPE_CHECKING:
    from .compare import Comparison


def transcript_of(result: AgentResult | None, *, log: RunLog | None = None, events: Iterable[Any] = (),
                  prompt: str | None = None, elapsed_s: float | None = None, provider: str | None = None) -> Transcript:
    """The transcript of a finished (or interrupted) run.

    Args:
        result: the run's `AgentResult`, or None when the run was interrupted before it made one.
        log: what the run's events said (`RunLog`), when available: tool timings, Task Memory
            artifacts (`ArtifactStored`), and the messages of an interrupted run.
        events: the run's events instead of `log` (a stored run's, read back).
        prompt: the user's prompt, used when `result` does not hold it.
        elapsed_s: the run's wall time in seconds, measured by the caller.
        provider: ``provider:model`` when `result` is None.
    """
    run = log
    if run is None:
        run = RunLog()
        for event in events:
            run.feed(event)
    interrupted = result is None or result.interrupted
    error = result.error if result is not None else None
    if error is None and run.failed and not interrupted:
        error = run.failed[-1].error
    messages = _messages(result, run, prompt)
    turn_meta = [e.metadata or {} for e in run.completed + run.failed]
    meta = dict(result.metadata or {}) if result is not None else {}
    stop = result.stop_reason if result is not None else None
    cost = _cost(result.cost if result is not None else None, run.completed)
    return Transcript(
        provider=provider or (result.provider if result is not None else None) or _provider_from(turn_meta, meta),
        model=meta.get("model") or next((m.get("model") for m in reversed(turn_meta) if m.get("model")), None),
        status="interrupted" if interrupted else ("failed" if error is not None else "completed"),
        stop_reason=str(stop) if stop is not None else None,
        stop_reason_raw=getattr(stop, "raw", None),
        messages=transcript_messages(messages, {tag: deque(queue) for tag, queue in run.timings.items()}),
        artifacts=[artifact_summary(e) for e in run.artifacts],
        usage=_usage(result, run.completed),
        cost=cost,
        price_unknown=cost is None and any("cost" in (e.metadata or {}) for e in run.completed),
        price_note=next((m["price_note"] for m in turn_meta if m.get("price_note")), None) if cost is None else None,
        timings=_timings(run, messages, turn_meta, meta, interrupted, elapsed_s),
        error=TranscriptError(type=str(error.type), message=str(error.message), code=error.code)
        if error is not None
        else None,
        attempts=meta.get("attempts") or next((m.get("attempts") for m in turn_meta if m.get("attempts")), None),
        replayed=bool(meta.get("replayed") or any(m.get("replayed") for m in turn_meta)),
        settings=meta.get("settings") or next((m["settings"] for m in turn_meta if m.get("settings")), {}),
    )


def comparison_record(
    comparison: Comparison,
    *,
    prompt: str | None = None,
    table: ComparisonTable | None = None,
    titles: list[str] | None = None,
    selected: list[int | None] | None = None,
) -> ComparisonRecord:
    """The saved form of a `Comparison` (``%%compare``): one transcript per run, in provider
    then run order (each run's own, as its figures were read, else built from its result). A
    run whose agent could not be built becomes a failed transcript. `titles` are the panes'
    titles as typed (aliases), kept when they differ from the providers; `selected` the run each
    pane shows (picked by the user live; None: its last), kept when one was picked."""
    entries = []
    for fig in sorted(comparison.figures, key=lambda f: (f.index, f.run)):
        if fig.transcript is not None:
            transcript = fig.transcript.model_copy()
        elif fig.result is not None:
            transcript = transcript_of(fig.result, prompt=prompt)
        else:
            transcript = Transcript(
                provider=str(fig.provider),
                status="failed",
                error=TranscriptError(type=str(fig.error_type or "error"), message=str(fig.error or "the run failed")),
            )
        entries.append(ComparisonEntry(index=fig.index, run=fig.run, transcript=transcript))
    providers = [str(p) for p in comparison.providers]
    return ComparisonRecord(
        providers=providers,
        runs=int(comparison.runs or 1),
        wall_s=_round(comparison.wall_s),
        entries=entries,
        table=table,
        titles=titles if titles and titles != providers else None,
        interrupted=bool(comparison.interrupted),
        selected=selected if selected and any(r is not None for r in selected) else None,
    )


def artifact_summary(event: ArtifactStored) -> ArtifactSummary:
    """An off-prompt artifact as a transcript lists it: where it is stored, its kind and size,
    and a preview cut to `PREVIEW_CHARS` characters."""
    try:
        preview = event.artifact.to_text() if hasattr(event.artifact, "to_text") else str(event.artifact)
    except Exception:  # noqa: BLE001 - a preview is best effort; the artifact is still listed
        preview = ""
    preview = str(preview or "")
    if len(preview) > PREVIEW_CHARS:
        preview = preview[:PREVIEW_CHARS] + "…"
    return ArtifactSummary(
        call_id=event.call_id,
        tool=event.tool,
        namespace=event.namespace,
        memory=event.memory,
        kind=str(event.kind or "unknown"),
        size={str(k): int(v) for k, v in dict(event.size or {}).items() if isinstance(v, (int, float))},
        preview=preview,
    )


class RunLog(EventHandler):
    """What a transcript reads from a run's events, kept as they come (`feed`): the finished and
    failed turns, each tool call's `ToolTiming` and result, the stored artifacts, and the reply of
    a turn still streaming (its driver's record, `ModelStarted.reply`). No delta is kept: a live
    view keeps this rather than the run's events."""

    def __init__(self) -> None:
        self.completed: list[ModelCompleted] = []
        self.failed: list[ModelFailed] = []
        self.artifacts: list[ArtifactStored] = []
        #: Tool call id -> its calls' timings in the order they ran (ids may repeat across turns).
        self.timings: dict[str, deque[ToolTiming]] = defaultdict(deque)
        self.notes: dict[str, list[str]] = defaultdict(list)  # notes of calls still running, by id
        self.turns = 0
        self.streamed: list[Message] = []  # the turns' messages, in order, as the events tell them
        self._open: PartialReply | bool = False  # the streaming turn's reply (True: one without a record)

    def feed(self, event: Any) -> None:
        """Keep what `event` says (call for each event of the run, in order)."""
        self.handle(event)

    def on_model_started(self, event: ModelStarted) -> None:
        self.turns += 1
        self._open = event.reply if event.reply is not None else True

    def on_model_completed(self, event: ModelCompleted) -> None:
        self.completed.append(event)
        self.streamed.append(event.message)
        self._open = False

    def on_model_failed(self, event: ModelFailed) -> None:
        self.failed.append(event)
        self.streamed.append(event.partial)
        self._open = False

    def on_tool_call_completed(self, event: ToolCallCompleted) -> None:
        notes = tuple(self.notes.pop(event.action.tag, []))
        self.timings[event.action.tag].append(
            ToolTiming(float(event.duration_s), bool(event.is_error), event.approval, event.stopped, notes)
        )
        # each tool result after the reply that called it
        result = ActionResultBlock(action=event.action, text=event.result.to_text(), is_error=bool(event.is_error))
        self.streamed.append(Message(role="tool", content=[result]))

    def on_tool_call_note(self, event: ToolCallNote) -> None:
        self.notes[event.action.tag].append(event.text)

    def on_sampling_completed(self, event: SamplingCompleted) -> None:
        if event.action is not None:
            self.notes[event.action.tag].append(event.note)

    def on_artifact_stored(self, event: ArtifactStored) -> None:
        self.artifacts.append(event)

    def open_turn(self) -> Message | None:
        """The reply of a turn that started and never ended (interrupted), as its driver's record
        gives it; None when it said nothing."""
        if self._open is True or self._open is False:
            return None
        message = reply_so_far(self._open, "interrupted")
        return message if message is not None and message.content else None


def _messages(result: AgentResult | None, run: RunLog, prompt: str | None) -> list[Message]:
    """The run's messages: the result's (a failed turn's partial reply among them), else
    rebuilt from the events (a result that carries none, a run stored without its result)."""
    last = result.message if result is not None else None
    messages = list(result.messages) if result is not None else []
    if messages:
        return messages
    messages = [Message(role="user", content=[TextBlock(text=prompt)])] if prompt else []
    messages += run.streamed
    if (open_turn := run.open_turn()) is not None:
        messages.append(open_turn)
    if not any(m.role == "assistant" for m in messages) and last is not None and last.content:
        messages.append(last)
    return messages


def _timings(
    run: RunLog,
    messages: list[Message],
    turn_meta: list[dict[str, Any]],
    meta: dict[str, Any],
    interrupted: bool,
    elapsed_s: float | None,
) -> Timings:
    """Total and first-token seconds, turns and each turn's latency. A single finished turn
    reports the driver's own latency, as the live footer shows it."""
    latencies = [round(float(m["latency_s"]), 4) for m in turn_meta if m.get("latency_s") is not None]
    ttft = (turn_meta[0] if turn_meta else meta).get("ttft_s")
    turns = run.turns or sum(1 for m in messages if m.role == "assistant")
    single = (latencies[0] if latencies else meta.get("latency_s")) if turns == 1 and not interrupted else None
    if single is not None:
        elapsed_s = single
    elif elapsed_s is None:
        tool_seconds = sum(t.seconds for q in run.timings.values() for t in q)
        elapsed_s = (sum(latencies) + tool_seconds) or None
    return Timings(total_s=_round(elapsed_s), first_token_s=_round(ttft), turns=turns, turn_latencies_s=latencies)


def _round(value: Any) -> float | None:
    return round(float(value), 4) if isinstance(value, (int, float)) else None


def _provider_from(turn_meta: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    for m in [meta, *turn_meta]:
        if m.get("provider") and m.get("model"):
            return f"{m['provider']}:{m['model']}"
    return "unknown"


def _usage(result: AgentResult | None, completed: list[ModelCompleted]) -> TranscriptUsage:
    """The run's usage; without a result, the completed turns' usage summed."""
    fields = tuple(TranscriptUsage.model_fields)
    if result is None:
        return TranscriptUsage(**{f: sum(int(getattr(e.usage, f, 0) or 0) for e in completed) for f in fields})
    return TranscriptUsage(**{f: int(getattr(result.usage, f, 0) or 0) for f in fields})


def _cost(cost: Any, completed: list[ModelCompleted]) -> TranscriptCost | None:
    """`result.cost` in whatever shape it comes (a Cost, a dict, a number), else the
    sum of the turns' ``metadata["cost"]`` when every turn has a price."""
    if cost is None and completed:
        per_turn = [(e.metadata or {}).get("cost") for e in completed]
        if all(isinstance(c, dict) and "total_usd" in c for c in per_turn):
            cost = {k: sum(float(c.get(k) or 0) for c in per_turn) for k in ("input_usd", "output_usd", "total_usd")}
    if cost is None:
        return None
    if isinstance(cost, (int, float)):
        return TranscriptCost(total_usd=float(cost))
    if not isinstance(cost, dict):
        to_dict = getattr(cost, "to_dict", None) or getattr(cost, "model_dump", None)
        cost = (
            to_dict()
            if callable(to_dict)
            else {k: getattr(cost, k, None) for k in ("input_usd", "output_usd", "total_usd")}
        )
    try:
        return TranscriptCost(
            **{
                k: (float(cost[k]) if cost.get(k) is not None else None)
                for k in ("input_usd", "output_usd", "total_usd")
                if k in cost
            }
        )
    except (TypeError, ValueError, KeyError):
        return None
