"""A run's transcript: a versioned JSON record of one agent run, for saved notebooks and tools.

When an ``%%agent`` run ends, its cell output carries this document, once, as
``application/vnd.ipyagent.transcript+json``, so a saved, reopened or exported
notebook still shows the run without a kernel: the JupyterLab extension in
``labextension/`` renders it.

It lives in core (pydantic only, no IPython, no agent import) so every layer
can read or write it: the notebook layer publishes it, the run store can keep
it, and a script reading a saved ``.ipynb`` needs nothing else. `from_result`
reads an `AgentResult` by duck typing for the same reason.

No secrets: usage and errors leave out the provider's raw objects (which are
not needed to show a run), and nothing from request headers is ever read.
A ``%%compare`` cell saves a `ComparisonRecord` (one transcript per run) the
same way, as ``application/vnd.ipyagent.comparison+json``. The JSON Schema of
both is published beside this module as ``transcript.schema.json``
(``python -m ipyagent.core.transcript`` prints it).
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from .messages import TokenCounts

#: The MIME type of a transcript in a cell output.
MIME_TYPE = "application/vnd.ipyagent.transcript+json"
#: The version of the document format; bumped on any incompatible change.
VERSION = 1
#: Artifact previews are cut to this many characters.
PREVIEW_CHARS = 400
#: Characters of a tool result kept in a saved transcript (the model saw the whole result).
RESULT_CHARS = 20_000


class _Model(BaseModel):
    # Unknown keys are ignored, so a reader keeps working when a later version adds fields.
    model_config = ConfigDict(extra="ignore")


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Model):
    """Model reasoning; shown collapsed. `redacted`: the provider sent it encrypted (no text)."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    redacted: bool = False


class ToolCallPart(_Model):
    """A tool call with its result once run.

    `status`: ``ok`` / ``error`` (the tool failed, or was denied or not run) /
    ``pending`` (no result: the run stopped first). `duration_s` in seconds.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error", "pending"] = "pending"
    result: str | None = None
    duration_s: float | None = None

    @field_validator("result")
    @classmethod
    def _cap(cls, value: str | None) -> str | None:
        """A saved notebook keeps the head of a huge result: it is stored in every fallback."""
        if value is not None and len(value) > RESULT_CHARS:
            return f"{value[:RESULT_CHARS]}\n… ({len(value) - RESULT_CHARS:,} more characters not saved)"
        return value


#: Image types a saved transcript shows inline (``data:`` URLs of raster images load nothing).
RASTER_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Base64 characters of one image kept in a transcript (about 6 MB of image).
MAX_IMAGE_CHARS = 8_000_000


class OtherPart(_Model):
    """Content shown as a one-line summary: an image, audio, provider-specific data.

    An image the model returned keeps its `mime_type` and base64 `data` (raster types
    only), so a saved notebook shows it as an image."""

    type: Literal["other"] = "other"
    kind: str
    summary: str
    mime_type: str | None = None
    data: str | None = None


Part = Annotated[Union[TextPart, ReasoningPart, ToolCallPart, OtherPart], Field(discriminator="type")]


class TranscriptMessage(_Model):
    """One message of the run. Tool results are inside the calls they answer, so
    tool-result messages do not appear on their own."""

    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part] = Field(default_factory=list)


class ArtifactSummary(_Model):
    """An off-prompt tool output kept in Task Memory: what it is, not the content.

    `size` is ``{"chars": n}`` / ``{"rows": n, "columns": n}`` / ``{"bytes": n}`` /
    ``{"items": n}``; `preview` is at most `PREVIEW_CHARS` characters of its text.
    """

    call_id: str | None = None
    tool: str | None = None
    namespace: str | None = None
    memory: str | None = None
    kind: str = "unknown"
    size: dict[str, int] = Field(default_factory=dict)
    preview: str = ""
    #: The entry as ``%agent memory`` draws it (Markdown, a table, an image), as sanitized HTML:
    #: set by the notebook layer; renderers sanitize it again (the labextension with DOMPurify).
    html: str | None = None


class TranscriptUsage(TokenCounts):
    """Tokens billed by the provider, summed over the run's model turns (`Usage` without `raw`).

    A transcript saved with the old names (``input``, ``output``, ``cache_read``...) still loads.
    """

    model_config = ConfigDict(extra="ignore")


class TranscriptCost(_Model):
    """The run's price in US dollars."""

    input_usd: float | None = None
    output_usd: float | None = None
    total_usd: float


class TranscriptError(_Model):
    type: str
    message: str
    code: str | int | None = None


class Timings(_Model):
    """Seconds. `total_s`: the whole run (model turns and tools); `first_token_s`:
    from the first request to its first token; `turns`: model turns taken."""

    total_s: float | None = None
    first_token_s: float | None = None
    turns: int = 0
    turn_latencies_s: list[float] = Field(default_factory=list)


class NextCell(_Model):
    """Code from the answer offered as a new cell (``--code``): `language` is the fence label
    asked for (``python``, ``sql``, ``all``); `source` the code. Renderers show it with an
    insert button and a copy button, for front ends that ignore ``set_next_input``."""

    language: str = "python"
    source: str


class Transcript(_Model):
    """One run, as saved in a notebook (format ``ipyagent.transcript``, `VERSION` 1).

    `provider` is ``provider:model`` as the run was asked for; `model` the model
    the provider said answered. `status` is ``completed``, ``failed`` (see
    `error`) or ``interrupted`` (the text is partial).
    """

    format: Literal["ipyagent.transcript"] = "ipyagent.transcript"
    version: Literal[1] = VERSION
    provider: str
    model: str | None = None
    status: Literal["completed", "failed", "interrupted"] = "completed"
    stop_reason: str | None = None
    stop_reason_raw: str | None = None
    messages: list[TranscriptMessage] = Field(default_factory=list)
    artifacts: list[ArtifactSummary] = Field(default_factory=list)
    usage: TranscriptUsage = Field(default_factory=TranscriptUsage)
    cost: TranscriptCost | None = None
    #: True when the run was priced but genai-prices did not know the model (the footer says "unknown price").
    price_unknown: bool = False
    timings: Timings = Field(default_factory=Timings)
    error: TranscriptError | None = None
    attempts: int | None = None
    replayed: bool = False
    next_cell: NextCell | None = None
    #: The generation settings the run used (`ModelSettings.as_dict`), empty when none was set.
    settings: dict[str, Any] = Field(default_factory=dict)
    #: A heading drawn above the run (``%agent history``: ``turn 2 · run 1a2b3c``).
    title: str | None = None
    #: Draw the user's messages too, each above the reply it got (``%agent history``). A cell's
    #: transcript leaves its prompt out: the prompt is the cell above.
    show_prompts: bool = False
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def text(self) -> str:
        """The assistant's text, all turns joined (what the live view shows as the answer)."""
        return "".join(p.text for m in self.messages if m.role == "assistant" for p in m.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for m in self.messages for p in m.parts if isinstance(p, ToolCallPart)]

    def to_json(self) -> dict[str, Any]:
        """The JSON document (plain dicts and lists)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> "Transcript":
        """Read a saved transcript.

        Raises:
            ValueError: not a transcript, or a version this ipyagent does not know
                (the message says which).
        """
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict) or data.get("format") != "ipyagent.transcript":
            raise ValueError("not an ipyagent transcript (its 'format' is not 'ipyagent.transcript')")
        if data.get("version") != VERSION:
            raise ValueError(f"transcript version {data.get('version')!r} is not supported (this ipyagent reads version {VERSION})")
        return cls.model_validate(data)

    @classmethod
    def from_result(cls, result: Any, *, events: Iterable[Any] = (), prompt: str | None = None,
                    elapsed_s: float | None = None, provider: str | None = None) -> "Transcript":
        """Build the transcript of a finished (or interrupted) run.

        Args:
            result: an `AgentResult` (read by attribute: ``provider``, ``message``,
                ``messages``, ``usage``, ``stop_reason``, ``error``, ``interrupted``,
                ``metadata``, and ``cost`` when present), or None when the run was
                interrupted before it made one.
            events: the run's events, as a view received them, when available: they
                add tool durations, Task Memory artifacts (``artifact_stored``), and
                the messages of an interrupted run.
            prompt: the user's prompt, used when `result` does not hold it.
            elapsed_s: the run's wall time in seconds, measured by the caller.
            provider: ``provider:model`` when `result` is None.
        """
        events = list(events)
        meta: dict[str, Any] = dict(getattr(result, "metadata", None) or {})
        completed = [e for e in events if getattr(e, "type", None) == "model_completed"]
        failed = [e for e in events if getattr(e, "type", None) == "model_failed"]
        interrupted = bool(getattr(result, "interrupted", False)) or result is None
        error = getattr(result, "error", None)
        if error is None and failed and not interrupted:
            error = failed[-1].error

        messages = list(getattr(result, "messages", None) or [])
        last = getattr(result, "message", None)
        if not messages:
            messages = _messages_from_events(events, prompt, last)
        elif _partial_left_out(messages, last):
            messages.append(last)  # a turn that failed mid-stream: its partial reply stays visible
        durations = _durations(events)
        tool_seconds = sum(d for q in durations.values() for d, _ in q)
        parts_messages = _convert(messages, durations)

        stop = getattr(result, "stop_reason", None)
        turn_meta = [e.metadata or {} for e in completed + failed]
        latencies = [round(float(m["latency_s"]), 4) for m in turn_meta if m.get("latency_s") is not None]
        ttft = (turn_meta[0] if turn_meta else meta).get("ttft_s")
        turns = (sum(1 for e in events if getattr(e, "type", None) == "model_started")
                 or sum(1 for m in messages if getattr(m, "role", None) == "assistant"))
        single = (latencies[0] if latencies else meta.get("latency_s")) if turns == 1 and not interrupted else None
        if single is not None:
            elapsed_s = single  # the driver's own figure, as the live footer shows it
        elif elapsed_s is None:
            elapsed_s = (sum(latencies) + tool_seconds) or None
        model = meta.get("model") or next((m.get("model") for m in reversed(turn_meta) if m.get("model")), None)
        attempts = meta.get("attempts") or next((m.get("attempts") for m in turn_meta if m.get("attempts")), None)
        status = "interrupted" if interrupted else ("failed" if error is not None else "completed")
        return cls(
            provider=provider or getattr(result, "provider", None) or _provider_from(turn_meta, meta),
            model=model,
            status=status,
            stop_reason=str(stop) if stop is not None else None,
            stop_reason_raw=getattr(stop, "raw", None),
            messages=parts_messages,
            artifacts=_artifacts(result, events),
            usage=_usage(getattr(result, "usage", None), completed),
            cost=(cost := _cost(getattr(result, "cost", None), completed)),
            price_unknown=cost is None and any("cost" in (e.metadata or {}) for e in completed),
            timings=Timings(total_s=_round(elapsed_s), first_token_s=_round(ttft), turns=turns, turn_latencies_s=latencies),
            error=TranscriptError(type=str(error.type), message=str(error.message), code=error.code) if error is not None else None,
            attempts=attempts,
            replayed=bool(meta.get("replayed") or any(m.get("replayed") for m in turn_meta)),
            settings=meta.get("settings") or next((m["settings"] for m in turn_meta if m.get("settings")), {}),
        )

    @classmethod
    def from_messages(cls, messages: Iterable[Any], *, provider: str, status: str = "completed",
                      error: str | None = None, title: str | None = None) -> "Transcript":
        """The transcript of stored messages (a thread's turn: its prompt, replies, tool calls
        and results), drawn with its prompts (`show_prompts`). Usage is the sum of the
        assistant messages' usage; no timings are known beyond the model turns taken.

        `status` is ``completed``, ``failed`` (with `error`, one line) or ``interrupted``.
        """
        messages = list(messages)
        replies = [m for m in messages if getattr(m, "role", None) == "assistant"]
        usages = [m.usage for m in replies if getattr(m, "usage", None) is not None]
        fields = tuple(TranscriptUsage.model_fields)
        usage = TranscriptUsage(**{f: sum(int(getattr(u, f, 0) or 0) for u in usages) for f in fields})
        return cls(provider=provider, status=status, messages=_convert(messages, {}), usage=usage,
                   timings=Timings(turns=len(replies)), title=title, show_prompts=True,
                   error=TranscriptError(type="failed", message=error) if status == "failed" and error else None)



#: The MIME type of a comparison (``%%compare``): one transcript per run, side by side.
COMPARISON_MIME_TYPE = "application/vnd.ipyagent.comparison+json"


class ComparisonEntry(_Model):
    """One run of a comparison: the provider's position (`index`, 0-based), the run number
    (`run`, 0-based) and its transcript."""

    index: int
    run: int = 0
    transcript: Transcript


class ComparisonTable(_Model):
    """The figures table of a comparison as shown: column titles and rows of cell texts (per
    provider its median row, then with several runs one row per run); `row_runs` gives each
    row's ``[provider index, run]``, run None for a provider's row (empty in older records)."""

    columns: list[str] = Field(default_factory=list)
    rows: list[list[str]] = Field(default_factory=list)
    row_runs: list[list[int | None]] = Field(default_factory=list)


class ComparisonRecord(_Model):
    """The same prompt sent to several providers (``%%compare``), as saved in a notebook.

    `entries` are in provider order, then run order; `wall_s` is the whole comparison's
    time in seconds.
    """

    format: Literal["ipyagent.comparison"] = "ipyagent.comparison"
    version: Literal[1] = VERSION
    providers: list[str] = Field(default_factory=list)
    runs: int = 1
    wall_s: float | None = None
    entries: list[ComparisonEntry] = Field(default_factory=list)
    table: ComparisonTable | None = None
    #: The panes' titles as the user typed them (aliases), when they differ from `providers`.
    titles: list[str] | None = None
    #: True when the comparison was stopped: finished runs are complete, stopped ones partial.
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_comparison(cls, comparison: Any, *, prompt: str | None = None, table: ComparisonTable | None = None,
                        titles: list[str] | None = None) -> "ComparisonRecord":
        """Build from an `agent.compare.Comparison` (read by attribute: ``providers``, ``runs``,
        ``wall_s``, ``interrupted``, ``figures`` with ``index``, ``run``, ``provider``, ``transcript``
        (else ``result``), ``error_type``, ``error``). A run whose agent could not be built becomes
        a failed transcript."""
        entries = []
        for fig in sorted(getattr(comparison, "figures", []), key=lambda f: (f.index, f.run)):
            result = getattr(fig, "result", None)
            if isinstance(getattr(fig, "transcript", None), Transcript):  # the run's record, as its figures were read
                transcript = fig.transcript.model_copy()
            elif result is not None:
                transcript = Transcript.from_result(result, prompt=prompt)
            else:
                transcript = Transcript(provider=str(fig.provider), status="failed", error=TranscriptError(
                    type=str(getattr(fig, "error_type", None) or "error"), message=str(getattr(fig, "error", None) or "the run failed")))
            entries.append(ComparisonEntry(index=fig.index, run=fig.run, transcript=transcript))
        return cls(providers=[str(p) for p in getattr(comparison, "providers", [])], runs=int(getattr(comparison, "runs", 1) or 1),
                   wall_s=_round(getattr(comparison, "wall_s", None)), entries=entries, table=table,
                   titles=titles if titles and titles != list(getattr(comparison, "providers", [])) else None,
                   interrupted=bool(getattr(comparison, "interrupted", False)))


# -- building helpers ------------------------------------------------------------------


def _round(value: Any) -> float | None:
    return round(float(value), 4) if isinstance(value, (int, float)) else None


def _provider_from(turn_meta: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    for m in [meta, *turn_meta]:
        if m.get("provider") and m.get("model"):
            return f"{m['provider']}:{m['model']}"
    return "unknown"


def _durations(events: list[Any]) -> dict[str, deque[tuple[float, bool]]]:
    """Tool call id -> (seconds, is_error) in the order they ran (ids may repeat across turns)."""
    found: dict[str, deque[tuple[float, bool]]] = defaultdict(deque)
    for e in events:
        if getattr(e, "type", None) == "tool_call_completed":
            found[e.action.tag].append((float(e.duration_s), bool(e.is_error)))
    return found


def _partial_left_out(messages: list[Any], last: Any) -> bool:
    """True when the run's last reply (partial, of a failed turn) is not among its messages."""
    return (last is not None and getattr(last, "role", None) == "assistant" and bool(getattr(last, "content", None))
            and getattr(messages[-1], "role", None) != "assistant" and not any(m is last for m in messages))


def _messages_from_events(events: list[Any], prompt: str | None, last: Any) -> list[Any]:
    """The run's messages rebuilt from its events (an interrupted or failed run keeps none),
    each tool result after the reply that called it."""
    from .content import ActionResultBlock, ReasoningBlock, TextBlock
    from .messages import Message

    messages: list[Any] = [Message(role="user", content=[TextBlock(text=prompt)])] if prompt else []
    text: list[str] = []
    reasoning: list[str] = []
    open_turn = False
    for e in events:
        kind = getattr(e, "type", None)
        if kind == "model_started":
            text, reasoning, open_turn = [], [], True
        elif kind == "text_delta":
            text.append(e.text)
        elif kind == "reasoning_delta":
            reasoning.append(e.text)
        elif kind == "model_completed":
            messages.append(e.message)
            open_turn = False
        elif kind == "model_failed":
            messages.append(e.partial)
            open_turn = False
        elif kind == "tool_call_completed":
            result = ActionResultBlock(action=e.action, text=_result_text(e.result), is_error=bool(e.is_error))
            messages.append(Message(role="tool", content=[result]))
    if open_turn and (text or reasoning):
        content: list[Any] = [ReasoningBlock(text="".join(reasoning))] if reasoning else []
        content += [TextBlock(text="".join(text))] if text else []
        messages.append(Message(role="assistant", content=content))
    if not any(getattr(m, "role", None) == "assistant" for m in messages) and last is not None and getattr(last, "content", None):
        messages.append(last)
    return messages


def _result_text(output: Any) -> str:
    return output.to_text() if hasattr(output, "to_text") else str(output)


def _convert(messages: list[Any], durations: dict[str, deque[tuple[float, bool]]]) -> list[TranscriptMessage]:
    out: list[TranscriptMessage] = []
    open_calls: dict[str, ToolCallPart] = {}
    for message in messages:
        parts: list[Any] = []
        for block in getattr(message, "content", []):
            kind = getattr(block, "type", None)
            if kind == "text":
                if parts and isinstance(parts[-1], TextPart):
                    parts[-1].text += block.text
                else:
                    parts.append(TextPart(text=block.text))
            elif kind == "reasoning":
                parts.append(ReasoningPart(text=block.text, redacted=bool(getattr(block, "redacted", False))))
            elif kind == "action_call":
                action = block.action
                call = ToolCallPart(id=action.tag, name=_native_name(action), arguments=dict(action.input or {}))
                if action.output is not None:
                    call.result = _result_text(action.output)
                    call.status = "error" if getattr(action.output, "type", None) == "error" else "ok"
                queue = durations.get(action.tag)
                if queue:
                    call.duration_s, is_error = queue.popleft()
                    call.duration_s = round(call.duration_s, 4)
                    if call.result is not None and is_error:
                        call.status = "error"
                open_calls[action.tag] = call
                parts.append(call)
            elif kind == "action_result":
                call = open_calls.pop(block.action.tag, None)
                if call is None:  # a result whose call we do not have: keep it visible
                    parts.append(ToolCallPart(id=block.action.tag, name=_native_name(block.action),
                                              arguments=dict(block.action.input or {}), result=block.text,
                                              status="error" if block.is_error else "ok"))
                elif call.result is None:
                    call.result, call.status = block.text, "error" if block.is_error else "ok"
            elif kind in ("image", "audio"):
                mime, data = getattr(block, "mime_type", "") or "", getattr(block, "data", None)
                keep = kind == "image" and mime in RASTER_TYPES and data and len(data) <= MAX_IMAGE_CHARS
                parts.append(OtherPart(kind=kind, summary=f"<{kind} {mime}>", mime_type=mime or None, data=data if keep else None))
            elif kind is not None:
                parts.append(OtherPart(kind=str(kind), summary=json.dumps(getattr(block, "value", None), default=str)[:PREVIEW_CHARS]))
        role = getattr(message, "role", "assistant")
        if parts:
            out.append(TranscriptMessage(role=role, parts=parts))
    return out


def _native_name(action: Any) -> str:
    try:
        return action.native_name
    except Exception:  # a name a model made up that does not map back
        return str(getattr(action, "name", "") or "tool call")


def _usage(usage: Any, completed: list[Any]) -> TranscriptUsage:
    fields = tuple(TranscriptUsage.model_fields)
    if usage is None:  # no result: the completed turns' usage, summed
        return TranscriptUsage(**{f: sum(int(getattr(e.usage, f, 0) or 0) for e in completed) for f in fields})
    return TranscriptUsage(**{f: int(getattr(usage, f, 0) or 0) for f in fields})


def _cost(cost: Any, completed: list[Any]) -> TranscriptCost | None:
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
        cost = to_dict() if callable(to_dict) else {k: getattr(cost, k, None) for k in ("input_usd", "output_usd", "total_usd")}
    try:
        return TranscriptCost(**{k: (float(cost[k]) if cost.get(k) is not None else None)
                                 for k in ("input_usd", "output_usd", "total_usd") if k in cost})
    except (TypeError, ValueError, KeyError):
        return None


def _artifacts(result: Any, events: list[Any]) -> list[ArtifactSummary]:
    """Task Memory artifacts: ``artifact_stored`` events, or ``result.artifacts`` when a
    result carries them. Read defensively: fields may be missing."""
    sources = [e for e in events if getattr(e, "type", None) == "artifact_stored"]
    if not sources:
        sources = list(getattr(result, "artifacts", None) or [])
    out = []
    for item in sources:
        get = item.get if isinstance(item, dict) else (lambda k, d=None, _i=item: getattr(_i, k, d))
        artifact = get("artifact")
        kind = get("kind") or getattr(artifact, "type", None) or "unknown"
        preview = get("preview") or get("summary")
        if preview is None and artifact is not None:
            try:
                preview = artifact.to_text() if hasattr(artifact, "to_text") else str(artifact)
            except Exception:
                preview = ""
        if isinstance(preview, dict):
            preview = json.dumps(preview, default=str)
        preview = str(preview or "")
        if len(preview) > PREVIEW_CHARS:
            preview = preview[:PREVIEW_CHARS] + "…"
        size = get("size") or {}
        out.append(ArtifactSummary(
            call_id=get("call_id"), tool=get("tool"), namespace=get("namespace"), memory=get("memory"),
            kind=str(kind), size={str(k): int(v) for k, v in dict(size).items() if isinstance(v, (int, float))},
            preview=preview,
        ))
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of both documents: a transcript (`MIME_TYPE`) or a
    comparison (`COMPARISON_MIME_TYPE`), told apart by ``format``."""
    schema = TypeAdapter(Union[Transcript, ComparisonRecord]).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "ipyagent transcript", **schema}


if __name__ == "__main__":  # python -m ipyagent.core.transcript > src/ipyagent/core/transcript.schema.json
    print(json.dumps(json_schema(), indent=2))
