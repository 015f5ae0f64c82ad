"""Spans of a run and of an evaluation, built from what the run emits (OpenTelemetry's GenAI
semantic conventions: opentelemetry.io/docs/specs/semconv/gen-ai/, agent spans and client spans).

    invoke_agent {thread}     one per run (INTERNAL): provider, model, settings, server, usage summed
                              over its turns, the last stop reason, cost; error.type when it failed
      chat {model}            one per model turn (CLIENT), from `ModelStarted` to its `ModelCompleted`
                              / `ModelFailed` (the driver's one record of the turn)
      execute_tool {name}     one per tool call (INTERNAL), from its `ToolCallCompleted`
    evaluate {column}         one per evaluation cell (row × column × repeat), with one
                              ``gen_ai.evaluation.result`` event per check; the cell's run is its child

The builder reads events only (`RunSpans`, an `EventHandler` beside the run's own ``on_event``):
no driver is touched. Message contents go on spans only when tracing was turned on with
``content``, and then through `core.redact` (``gen_ai.input.messages`` / ``gen_ai.output.messages``
/ ``gen_ai.system_instructions`` in the conventions' JSON parts form, ``gen_ai.tool.call.arguments``
/ ``result``). A failure here never reaches the run: it is logged and the run's spans stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ...core import (
    Event,
    EventHandler,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelSettings,
    ModelStarted,
    ProviderError,
    ToolCallCompleted,
    redact,
    redact_json,
    system_text,
)
from ...drivers import otel_provider_name
from .tracing import Tracing, current, log, parent_span

#: `ModelSettings` field -> ``gen_ai.request.*`` attribute.
SETTING_ATTRIBUTES = {"temperature": "gen_ai.request.temperature", "top_p": "gen_ai.request.top_p",
                      "max_output_tokens": "gen_ai.request.max_tokens", "seed": "gen_ai.request.seed",
                      "stop": "gen_ai.request.stop_sequences"}


def server_attributes(url: str | None) -> dict[str, Any]:
    """``server.address`` / ``server.port`` of `url` (the port of its scheme when it names none)."""
    if not url:
        return {}
    parts = urlsplit(url)
    if not parts.hostname:
        return {}
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return {"server.address": parts.hostname, **({"server.port": port} if port else {})}


def setting_attributes(settings: ModelSettings | None) -> dict[str, Any]:
    """The ``gen_ai.request.*`` attributes of the settings a run sends (those set)."""
    found: dict[str, Any] = {}
    for name, attribute in SETTING_ATTRIBUTES.items():
        value = getattr(settings, name, None)
        if value is not None:
            found[attribute] = list(value) if isinstance(value, tuple) else value
    return found


def usage_attributes(usage: Any) -> dict[str, Any]:
    """``gen_ai.usage.*`` of a `Usage` (input tokens include the cached ones, as the conventions count)."""
    if usage is None:
        return {}
    found = {"gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens}
    if usage.cache_read_tokens:
        found["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        found["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    return found


def _parts(message: Message) -> list[dict[str, Any]]:
    """A message's content blocks as the conventions' message parts (media named, never sent)."""
    parts: list[dict[str, Any]] = []
    for block in message.content:
        kind = block.type
        if kind in ("text", "reasoning"):
            parts.append({"type": kind, "content": block.text})  # type: ignore[union-attr]
        elif kind == "action_call":
            action = block.action  # type: ignore[union-attr]
            parts.append({"type": "tool_call", "id": action.tag, "name": action.native_name, "arguments": action.input})
        elif kind == "action_result":
            parts.append({"type": "tool_call_response", "id": block.action.tag,  # type: ignore[union-attr]
                          "response": block.text})  # type: ignore[union-attr]
        else:
            parts.append({"type": kind})
    return parts


def _message(message: Message, finish: str | None = None) -> dict[str, Any]:
    role = "tool" if message.role == "tool" else message.role
    found: dict[str, Any] = {"role": role, "parts": _parts(message)}
    if finish is not None:
        found["finish_reason"] = finish
    return found


def _error(span: Any, error: ProviderError | None, kind: str | None = None, text: str | None = None) -> None:
    """Mark `span` failed: ``error.type`` (the `ProviderError` type, or `kind`) and status ERROR with
    a redacted one-line description."""
    from opentelemetry.trace import Status, StatusCode

    kind = error.type if error is not None else kind
    span.set_attribute("error.type", str(kind or "error"))
    description = error.message if error is not None else (text or str(kind))
    span.set_status(Status(StatusCode.ERROR, redact(" ".join(str(description).split()))[:300]))


class RunSpans(EventHandler):
    """The spans of one run: the ``invoke_agent`` span opened now, a ``chat`` span per model turn and
    an ``execute_tool`` span per tool call as their events arrive, closed by `finish`.

    Args:
        tracing: the tracing in force.
        driver: the run's prompt driver (provider, model, base URL).
        options: the run's resolved `RunOptions` (settings, system prompt, history).
        user: the run's user message (None: none).
        thread: the conversation thread's name (``gen_ai.agent.name``, ``gen_ai.conversation.id``).
    """

    __slots__ = ("tracing", "tracer", "root", "context", "chat", "inputs", "base", "broken", "last_stop")

    def __init__(self, tracing: Tracing, driver: Any, options: Any, user: Message | None, thread: str | None) -> None:
        from opentelemetry.trace import SpanKind, set_span_in_context

        self.tracing, self.tracer, self.broken = tracing, tracing.tracer, False
        self.base = {"gen_ai.provider.name": otel_provider_name(driver.provider),
                     "gen_ai.request.model": driver.model, **setting_attributes(options.settings)}
        attributes = {"gen_ai.operation.name": "invoke_agent", **self.base, **server_attributes(driver.base_url)}
        if thread:
            attributes.update({"gen_ai.agent.name": thread, "gen_ai.conversation.id": thread})
        if options.output_schema is not None:
            attributes["gen_ai.output.type"] = "json"
        parent = parent_span.get()
        self.root = self.tracer.start_span(f"invoke_agent {thread}" if thread else "invoke_agent",
                                           context=set_span_in_context(parent) if parent is not None else None,
                                           kind=SpanKind.INTERNAL, attributes=attributes)
        self.context = set_span_in_context(self.root)
        self.chat: Any = None
        self.last_stop: str | None = None
        self.inputs: list[dict[str, Any]] = []  # the conversation so far, in the conventions' form (content only)
        if tracing.content:
            self.inputs = [_message(m) for m in [*(options.history or ()), *([user] if user is not None else [])]]
            system = system_text(options.system)
            if system:
                self.root.set_attribute("gen_ai.system_instructions",
                                        redact_json([{"type": "text", "content": system}]))
            if user is not None:
                self.root.set_attribute("gen_ai.input.messages", redact_json([_message(user)]))

    def tee(self, emit: Callable[[Event], Any]) -> Callable[[Event], Any]:
        """`emit` with every event seen here first."""

        def both(event: Event) -> Any:
            self.see(event)
            return emit(event)

        return both

    def see(self, event: Event) -> None:
        """`handle` the event; a failure is logged once and the run's spans stop (the run goes on)."""
        if self.broken or not isinstance(event, (ModelStarted, ModelCompleted, ModelFailed, ToolCallCompleted)):
            return
        try:
            self.handle(event)
        except Exception:  # noqa: BLE001 - tracing must never break a run
            self.broken = True
            log.warning("ipyagent tracing: a span could not be built; this run's spans stop here", exc_info=True)

    # -- events --------------------------------------------------------------------------

    def on_model_started(self, event: ModelStarted) -> None:
        from opentelemetry.trace import SpanKind

        self._end_chat(None, "interrupted")  # a turn that never ended (cannot happen: one turn at a time)
        attributes = {"gen_ai.operation.name": "chat", **self.base,
                      "gen_ai.provider.name": otel_provider_name(event.provider), "gen_ai.request.model": event.model,
                      **server_attributes((event.request or {}).get("url"))}
        self.chat = self.tracer.start_span(f"chat {event.model}", context=self.context, kind=SpanKind.CLIENT,
                                           attributes=attributes)
        if self.tracing.content:
            self.chat.set_attribute("gen_ai.input.messages", redact_json(self.inputs))

    def on_model_completed(self, event: ModelCompleted) -> None:
        if self.chat is None:
            return
        finish = event.stop_reason.raw or event.stop_reason.kind.value
        self.last_stop = finish
        self._response(self.chat, event.metadata, event.usage)
        self.chat.set_attribute("gen_ai.response.finish_reasons", [finish])
        if self.tracing.content:
            output = _message(event.message, finish)
            self.chat.set_attribute("gen_ai.output.messages", redact_json([output]))
            self.inputs.append(output)
        self.chat.end()
        self.chat = None

    def on_model_failed(self, event: ModelFailed) -> None:
        if self.chat is None:  # the loop's own failure after a turn (max_steps, invalid output): `finish` says
            return
        self._response(self.chat, event.metadata, event.partial.usage)
        self._end_chat(event.error)

    def on_tool_call_completed(self, event: ToolCallCompleted) -> None:
        from opentelemetry.trace import SpanKind

        end = time.time_ns()
        action = event.action
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": action.native_name,
                      "gen_ai.tool.call.id": action.tag, "gen_ai.tool.type": "function"}
        if event.approval is not None:
            attributes["ipyagent.tool.approval"] = event.approval
        span = self.tracer.start_span(f"execute_tool {action.native_name}", context=self.context,
                                      kind=SpanKind.INTERNAL, attributes=attributes,
                                      start_time=end - int(event.duration_s * 1e9))
        text = event.result.to_text() if hasattr(event.result, "to_text") else str(event.result)
        if self.tracing.content:
            span.set_attribute("gen_ai.tool.call.arguments", redact_json(action.input))
            span.set_attribute("gen_ai.tool.call.result", redact(text))
            self._tool_result(action.tag, text)
        if event.stopped is not None:
            _error(span, None, event.stopped)
        elif event.is_error:
            _error(span, None, "tool_error", text if self.tracing.content else None)
        span.end(end_time=end)

    # -- the end -------------------------------------------------------------------------

    def finish(self, result: Any) -> None:
        """Close the run's spans with its `AgentResult` (None: it raised): usage, stop reason, cost, error."""
        if self.broken:
            return
        try:
            self._finish(result)
        except Exception:  # noqa: BLE001 - tracing must never break a run
            log.warning("ipyagent tracing: a run's span could not be closed", exc_info=True)

    def _finish(self, result: Any) -> None:
        root = self.root
        error = getattr(result, "error", None)
        interrupted = result is None or result.interrupted
        self._end_chat(error, "interrupted" if interrupted else None)
        if result is not None:
            root.set_attributes(usage_attributes(result.usage))
            if self.last_stop is not None:
                root.set_attribute("gen_ai.response.finish_reasons", [self.last_stop])
            if result.cost is not None:
                root.set_attribute("ipyagent.cost_usd", float(result.cost))
            if self.tracing.content and result.message is not None and result.message.content:
                root.set_attribute("gen_ai.output.messages", redact_json([_message(result.message, self.last_stop)]))
        if error is not None:
            _error(root, error)
        elif result is None:
            _error(root, None, "exception", "the run raised an exception")
        elif interrupted:
            _error(root, None, "interrupted", "the run was interrupted")
        root.end()

    def _response(self, span: Any, metadata: dict[str, Any], usage: Any) -> None:
        if metadata.get("model"):
            span.set_attribute("gen_ai.response.model", str(metadata["model"]))
        if metadata.get("request_id"):
            span.set_attribute("gen_ai.response.id", str(metadata["request_id"]))
        span.set_attributes(usage_attributes(usage))
        cost = metadata.get("cost")
        if isinstance(cost, dict) and cost.get("total_usd") is not None:
            span.set_attribute("ipyagent.cost_usd", float(cost["total_usd"]))

    def _end_chat(self, error: ProviderError | None, kind: str | None = None) -> None:
        if self.chat is None:
            return
        if error is not None or kind is not None:
            _error(self.chat, error, kind)
        self.chat.end()
        self.chat = None

    def _tool_result(self, tag: str, text: str) -> None:
        """A tool result joins the conversation the next chat span shows (one ``tool`` message per turn's results)."""
        part = {"type": "tool_call_response", "id": tag, "response": text}
        if self.inputs and self.inputs[-1]["role"] == "tool":
            self.inputs[-1]["parts"].append(part)
        else:
            self.inputs.append({"role": "tool", "parts": [part]})


def run_spans(driver: Any, options: Any, user: Message | None, thread: str | None) -> RunSpans | None:
    """The spans of a run starting now, None when tracing is off (nothing imported then)."""
    tracing = current()
    if tracing is None:
        return None
    try:
        return RunSpans(tracing, driver, options, user, thread)
    except Exception:  # noqa: BLE001 - tracing must never break a run
        log.warning("ipyagent tracing: a run's span could not be started", exc_info=True)
        return None


@contextmanager
def evaluation_span(name: str, attributes: dict[str, Any],
                    finish: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """A span around an evaluation or one of its cells (None and nothing when tracing is off): runs
    started inside are its children; `finish(span)` sets what is known at the end, then it ends."""
    tracing = current()
    if tracing is None:
        yield None
        return
    from opentelemetry.trace import SpanKind, set_span_in_context

    parent = parent_span.get()
    span = tracing.tracer.start_span(name, context=set_span_in_context(parent) if parent is not None else None,
                                     kind=SpanKind.INTERNAL, attributes=attributes)
    token = parent_span.set(span)
    try:
        yield span
    finally:
        parent_span.reset(token)
        try:
            if finish is not None:
                finish(span)
        except Exception:  # noqa: BLE001 - tracing must never break an evaluation
            log.warning("ipyagent tracing: an evaluation span could not be closed", exc_info=True)
        span.end()


def cell_attributes(evaluation_id: str, cell: Any) -> dict[str, Any]:
    """What an evaluation cell's span says from its start: the evaluation, row, column, variant, repeat."""
    found = {"gen_ai.operation.name": "evaluate", "ipyagent.evaluation.id": evaluation_id,
             "ipyagent.evaluation.row": cell.row, "ipyagent.evaluation.column": cell.provider,
             "ipyagent.evaluation.repeat": cell.repeat}
    if cell.variant is not None:
        found["ipyagent.evaluation.variant"] = cell.variant
    return found


def cell_checks(cell: Any) -> Callable[[Any], None]:
    """What an evaluation cell's span gets at its end: its status, verdict and one
    ``gen_ai.evaluation.result`` event per check (name, ``pass`` / ``fail`` label, score; the
    reason only with message contents on, as it may quote the answer), and the checks as attribute arrays."""

    def finish(span: Any) -> None:
        tracing = current()
        content = tracing is not None and tracing.content
        outcomes = list(cell.outcomes)
        span.set_attributes({
            "ipyagent.evaluation.status": cell.status, "ipyagent.evaluation.cached": bool(cell.cached),
            "ipyagent.evaluation.checks": [o.name for o in outcomes],
            "ipyagent.evaluation.check_passed": [bool(o.passed) for o in outcomes],
            "ipyagent.evaluation.checks_passed": sum(bool(o.passed) for o in outcomes),
            "ipyagent.evaluation.checks_failed": sum(not o.passed for o in outcomes),
        })
        if cell.passed is not None:
            span.set_attribute("ipyagent.evaluation.passed", bool(cell.passed))
        for outcome in outcomes:
            event = {"gen_ai.evaluation.name": outcome.name, "gen_ai.evaluation.score.label":
                     "pass" if outcome.passed else "fail",
                     "gen_ai.evaluation.score.value": float(outcome.score if outcome.score is not None
                                                            else outcome.passed)}
            if content and outcome.reason:
                event["gen_ai.evaluation.explanation"] = redact(outcome.reason)
            span.add_event("gen_ai.evaluation.result", event)
        if cell.status not in ("ok",) and cell.error_type:
            _error(span, None, cell.error_type, cell.error if content else None)

    return finish


__all__ = ["RunSpans", "cell_attributes", "cell_checks", "evaluation_span", "run_spans", "server_attributes",
           "setting_attributes"]
