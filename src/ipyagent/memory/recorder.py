"""`RunRecorder`: writes one run's events to the run store as they happen, and
`replay_events` reads them back as events a view can draw again.

Each node is written once, when what it records has ended: the request when the
turn starts, the assistant message when the turn completes or fails (a failed
turn's partial reply marked ``partial`` and ``failed``), then its tool calls and
results. Nothing is written while a reply streams: an interrupted run's reply is
written once, as the driver's record of it stood (`ModelStarted.reply`), marked
``partial`` and ``failed``, its status ``interrupted``. A process killed mid-turn
leaves its run ``running`` without that reply, which the next store on the host
marks ``interrupted`` (`RunStore.mark_abandoned`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import TypeAdapter

from ..core import (
    MESSAGE_FIELDS,
    ActionCallBlock,
    Artifact,
    ArtifactStored,
    Event,
    EventHandler,
    HistoryTrimmed,
    Message,
    MessageError,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    Usage,
    reply_so_far,
)
from .store import RunStore

_ARTIFACT = None


def _artifact_adapter() -> Any:
    global _ARTIFACT
    if _ARTIFACT is None:
        _ARTIFACT = TypeAdapter(Artifact)
    return _ARTIFACT


def artifact_json(artifact: Any) -> Any:
    """An artifact as JSON data (bytes as base64)."""
    if hasattr(artifact, "model_dump_json"):
        return json.loads(artifact.model_dump_json())
    return {"type": "text", "value": str(artifact)}


def artifact_from_json(data: Any) -> Any:
    return _artifact_adapter().validate_json(json.dumps(data))


def message_json(message: Message) -> dict[str, Any]:
    """A message as JSON data, without the tool outputs held by calls (a result's text is
    in its own block; outputs are stored as tool_result nodes)."""
    # one pass
    data = message.model_dump(mode="json")
    for block in data.get("content", []):
        if isinstance(block.get("action"), dict):
            block["action"]["output"] = None
    return data


def _response_meta(metadata: dict[str, Any]) -> dict[str, Any]:
    """What the driver said about a response (request id, latency, attempts, retry waits,
    cost), JSON-ready."""
    return dict(metadata)


def _retry(metadata: dict[str, Any]) -> dict[str, Any]:
    return {"waits": metadata.get("retry_waits"), "last_error": metadata.get("last_error")}


class RunRecorder(EventHandler):
    """Feeds one run's events into `store`. Never raises: a write that fails (disk full,
    a locked file past the timeout) turns recording off for this run and keeps the
    reason in `error`.

    Args:
        store: the run store.
        thread: the conversation thread's name.
        provider: ``provider:model``.
        prompt: the run's user message (its context blocks, images and files included).
        prompt_text: the prompt as the user wrote it, for the list of runs (default: the
            message's text).
        session: the writing session's id.
        metadata: anything else about the run (tools, options).
    """

    def __init__(
        self,
        store: RunStore,
        *,
        thread: str | None,
        provider: str,
        prompt: Message,
        prompt_text: str | None = None,
        session: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.error: str | None = None
        self.turn = 0
        self._open: ModelStarted | None = None  # the start of the turn whose reply streams
        self._started = time.monotonic()
        self._ended = False
        self._metadata = dict(metadata or {})
        name, _, model = provider.partition(":")
        self.provider, self.model = name, model
        self.run_id = ""
        text = prompt.text if prompt_text is None else prompt_text
        self._safe(lambda: self._start(thread, prompt, text, session, metadata))

    def _start(
        self, thread: str | None, prompt: Message, text: str, session: str | None, metadata: dict[str, Any] | None
    ) -> None:
        self.run_id = self.store.start_run(
            thread=thread,
            provider=self.provider,
            model=self.model,
            prompt=text,
            session=session,
            metadata=metadata,
        )
        self.store.add_node(self.run_id, "message", role="user", data=message_json(prompt))

    @property
    def active(self) -> bool:
        return self.error is None and bool(self.run_id)

    def _safe(self, write: Any) -> None:
        if self.error is not None:
            return
        try:
            write()
        except (
            Exception
        ) as exc:  # the store records the run; it must never break it (sqlite, I/O, unserializable values)
            self.error = f"the run store stopped recording this run: {type(exc).__name__}: {exc}"

    def feed(self, event: Event) -> None:
        """Record one event (call for every event of the run, in order)."""
        if self.active:
            self._safe(lambda: self.handle(event))

    def on_model_started(self, event: ModelStarted) -> None:
        self.turn += 1
        self._open = event
        self.store.add_node(
            self.run_id, "request", turn=self.turn, provider=event.provider, model=event.model, data=event.request or {}
        )

    def _reply_node(self, **fields: Any) -> None:
        """The assistant message node of the turn that ends now."""
        started, self._open = self._open, None
        where = {"provider": started.provider, "model": started.model} if started is not None else {}
        self.store.add_node(self.run_id, "message", turn=self.turn, role="assistant", **where, **fields)

    def on_model_completed(self, event: ModelCompleted) -> None:
        meta = event.metadata
        data = message_json(event.message)
        data["stop_reason"] = {"kind": event.stop_reason.kind.value, "raw": event.stop_reason.raw}
        data["response"] = _response_meta(meta)
        data["more_turns"] = event.more_turns
        self._reply_node(
            usage=event.usage.model_dump(),
            latency_s=meta.get("latency_s"),
            ttft_s=meta.get("ttft_s"),
            attempts=meta.get("attempts"),
            retry=_retry(meta),
            data=data,
        )
        for call in event.message.tool_calls:
            self.store.add_node(
                self.run_id,
                "tool_call",
                turn=self.turn,
                data={**call.model_dump(mode="json", exclude={"output"}), "native_name": call.native_name},
            )

    def on_tool_call_completed(self, event: ToolCallCompleted) -> None:
        action = event.action
        self.store.add_node(
            self.run_id,
            "tool_result",
            turn=self.turn,
            failed=event.is_error,
            latency_s=event.duration_s,
            data={
                "action": action.model_dump(mode="json", exclude={"output"}),
                "result": artifact_json(event.result),
                "is_error": event.is_error,
                "approval": event.approval,
                "stopped": event.stopped,
            },
        )

    def on_artifact_stored(self, event: ArtifactStored) -> None:
        self.store.add_node(
            self.run_id,
            "artifact",
            turn=self.turn,
            data={
                "call_id": event.call_id,
                "tool": event.tool,
                "activity": event.activity,
                "memory": event.memory,
                "namespace": event.namespace,
                "kind": event.kind,
                "size": event.size,
                "artifact": artifact_json(event.artifact),
            },
        )

    def on_history_trimmed(self, event: HistoryTrimmed) -> None:
        self.store.add_node(
            self.run_id,
            "notice",
            turn=self.turn,
            data={
                "type": event.type,
                "thread": event.thread,
                "dropped_turns": event.dropped_turns,
                "kept_turns": event.kept_turns,
                "estimated_tokens": event.estimated_tokens,
                "budget_tokens": event.budget_tokens,
                "reason": event.reason,
            },
        )

    def on_model_failed(self, event: ModelFailed) -> None:
        """A failed turn: its partial reply's node (when the turn was streaming: the loop's own failure
        after a completed reply, max_steps or invalid output, has none to add), then the failure."""
        meta = event.metadata
        if self._open is not None:
            partial = message_json(event.partial)
            partial["response"] = _response_meta(meta)
            self._reply_node(
                partial=True,
                failed=True,
                usage=(event.partial.usage or Usage()).model_dump(),
                latency_s=meta.get("latency_s"),
                attempts=meta.get("attempts"),
                retry=_retry(meta),
                data=partial,
            )
        self.store.add_node(
            self.run_id,
            "failure",
            turn=self.turn,
            failed=True,
            data={"error": event.error.to_dict(), "response": _response_meta(meta)},
        )

    def keep_transcript(self, doc: dict[str, Any]) -> None:
        """Keep the transcript the cell showed (`core.transcript.Transcript` JSON), as a
        ``transcript`` node: ``%agent replay`` shows it again as it was, figures and all."""
        if self.run_id and self.error is None:
            self._safe(lambda: self.store.add_node(self.run_id, "transcript", turn=self.turn or None, data=doc))

    def interrupted(self) -> None:
        """The run was cancelled (kernel interrupt): the reply that was streaming is written as
        its driver's record of it stood (status ``interrupted``, node ``partial`` and ``failed``),
        and the run ``interrupted``."""
        if not self.active or self._ended:
            return

        def write() -> None:
            if self._open is not None:
                reply = reply_so_far(self._open.reply, "interrupted") or Message(role="assistant", status="interrupted")
                self._reply_node(partial=True, failed=True, data=message_json(reply))
            self.store.add_node(
                self.run_id,
                "failure",
                turn=self.turn,
                failed=True,
                data={"error": {"type": "cancelled", "message": "interrupted by the user"}},
            )
            self.store.finish_run(
                self.run_id,
                "interrupted",
                duration_s=time.monotonic() - self._started,
                error={"type": "cancelled", "message": "interrupted by the user"},
            )

        self._ended = True
        self._safe(write)

    def finish(self, result: Any) -> None:
        """The run ended with `result` (an `AgentResult`): status, usage, cost, error."""
        if not self.active or self._ended:
            return
        self._ended = True
        if result.interrupted:
            self._ended = False
            self.interrupted()
            return
        status = "ok" if result.error is None else "failed"
        meta = {
            k: v for k, v in (result.metadata or {}).items() if k in ("latency_s", "ttft_s", "attempts", "replayed")
        }
        meta = {**self._metadata, **meta}  # what the run started with (tools, context) stays
        output = getattr(result, "output", None)
        if output is not None:  # the validated structured output
            meta["output"] = output.model_dump(mode="json") if hasattr(output, "model_dump") else output
        self._safe(
            lambda: self.store.finish_run(
                self.run_id,
                status,
                duration_s=time.monotonic() - self._started,
                usage=result.usage.model_dump(),
                cost=_cost(result),
                error=result.error.to_dict() if result.error is not None else None,
                metadata=meta or None,
            )
        )


def _cost(result: Any) -> float | None:
    """`AgentResult.cost` when there is one (a number, or an object with a total)."""
    cost = getattr(result, "cost", None)
    if cost is None:
        return None
    if isinstance(cost, (int, float)):
        return float(cost)
    for name in ("total", "total_usd", "usd", "amount"):
        value = getattr(cost, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def stored_transcript(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The transcript JSON a run's cell showed (its ``transcript`` node), or None for a run
    stored without one (a terminal run, or a store written before it was kept)."""
    found = [n.get("data") for n in nodes if n["kind"] == "transcript" and n.get("data")]
    return found[-1] if found else None


class _StoredReply:
    """A stored turn's partial reply, as `ModelStarted.reply` gives a live one (`PartialReply`)."""

    __slots__ = ("message",)

    def __init__(self, message: Message) -> None:
        self.message = message

    def partial(self, status: Any = "partial", error: ProviderError | None = None) -> Message | None:
        if not self.message.content:
            return None
        update = {"status": status} if error is None else {"status": status, "error": MessageError.of(error)}
        return self.message.model_copy(update=update)


def replay_events(nodes: list[dict[str, Any]]) -> list[Any]:
    """The events of a stored run, rebuilt from its nodes in order, for a view to draw
    again: ModelStarted (with the partial reply of a turn that never ended as its `reply`), the
    message's blocks as whole deltas, ModelCompleted or ModelFailed, ArtifactStored,
    ToolCallCompleted, HistoryTrimmed. A cancelled run ends with the string ``"interrupted"``
    (views have `mark_interrupted`)."""
    events: list[Any] = []
    partial: Message | None = None
    started: ModelStarted | None = None
    for node in nodes:
        kind, data = node["kind"], node.get("data") or {}
        if kind == "request":
            started = ModelStarted(provider=node.get("provider") or "", model=node.get("model") or "")
            events.append(started)
        elif kind == "message" and node.get("role") == "assistant":
            message = Message.model_validate({k: v for k, v in data.items() if k in MESSAGE_FIELDS})
            for index, block in enumerate(message.content):
                if isinstance(block, TextBlock):
                    events.append(TextDelta(index, block.text))
                elif isinstance(block, ReasoningBlock):
                    events.append(ReasoningDelta(index, block.text))
                elif isinstance(block, ActionCallBlock):
                    raw = block.raw_arguments if block.raw_arguments is not None else json.dumps(block.action.input)
                    events.append(ToolCallDelta(index, block.action.tag, block.action.native_name, raw))
            if node.get("partial"):
                partial = message
                if started is not None:
                    started.reply = _StoredReply(message)
                continue
            usage = Usage.model_validate(node.get("usage") or {})
            stop = data.get("stop_reason") or {"kind": "end_turn"}
            metadata = dict(data.get("response") or {})
            # run_continues: stores before issue 12
            more = bool(data.get("more_turns", metadata.pop("run_continues", False)))
            reason = StopReason(kind=stop["kind"], raw=stop.get("raw"))
            events.append(ModelCompleted(message, usage, reason, metadata, more))
        elif kind == "artifact":
            events.append(ArtifactStored(data["call_id"], data["tool"], data.get("activity"), data["memory"],
                                         data["namespace"], artifact_from_json(data["artifact"]),
                                         data.get("size") or {}))
        elif kind == "tool_result":
            action = ToolAction.model_validate(data["action"])
            result = artifact_from_json(data["result"])
            action.output = result
            events.append(ToolCallCompleted(action, result, node.get("latency_s") or 0.0, data.get("approval"),
                                            data.get("stopped")))
        elif kind == "notice" and data.get("type") == "history_trimmed":
            events.append(HistoryTrimmed(data["thread"], data["dropped_turns"], data["kept_turns"],
                                         data["estimated_tokens"], data.get("budget_tokens"), data["reason"]))
        elif kind == "failure":
            error = data.get("error") or {}
            if error.get("type") == "cancelled":
                events.append("interrupted")
            else:
                events.append(ModelFailed(ProviderError(error.get("type", "server"), error.get("message", "failed"),
                                                        code=error.get("code"), retryable=error.get("retryable")),
                                          partial or Message(role="assistant"), dict(data.get("response") or {})))
            partial = None
    return events
