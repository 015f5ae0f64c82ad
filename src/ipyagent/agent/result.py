"""`AgentResult`: the outcome of one agent run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import (
    Citation,
    ImageBlock,
    Message,
    ProviderError,
    ServerToolCallBlock,
    StopReason,
    TextBlock,
    ToolAction,
    Usage,
)
from ..drivers import Cost


@dataclass
class AgentResult:
    """The outcome of one `%%agent` cell or `Agent.run` call.

    Attributes:
        text: the assistant's text (partial if the run failed or was interrupted).
        message: the last assistant `Message` (content blocks, usage, metadata).
        usage: tokens billed by the provider, summed over the run's model turns.
        tool_calls: the tool calls the model made, each with its `output`.
        messages: every message the run added (user, assistant, tool results), as sent.
        new_messages: what the run adds to its conversation: `messages` as a later request
            must carry them (a structured output's tool call as its JSON text); empty
            unless the run completed.
        stop_reason: why the model stopped; None when it failed.
        error: the `ProviderError` when the run failed, else None.
        interrupted: True when the run was cancelled (kernel interrupt).
        metadata: latency_s, ttft_s (seconds), attempts, replayed, provider, model.
        output: with an output schema, the validated reply (an instance of the
            pydantic model; the parsed JSON for a JSON Schema dict); else None.
        cost: the run's price from genai-prices, summed over model turns: a `Cost`, a
            float in USD with `input_usd` / `output_usd` parts; None when unknown.
    """

    provider: str
    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason | None = None
    error: ProviderError | None = None
    interrupted: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    new_messages: list[Message] = field(default_factory=list)
    actions: list[ToolAction] = field(default_factory=list)
    output: Any = None
    cost: Cost | None = None

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolAction]:
        """Every tool call of the run, across model turns, with its `output` once run."""
        if self.actions:  # every call that ran, ReAct ones included
            return list(self.actions)
        return [a for m in self.messages for a in m.tool_calls] or self.message.tool_calls

    @property
    def images(self) -> list[Any]:
        """The images the model returned in this run (`ImageBlock`: ``mime_type``, base64 ``data``),
        in order: Gemini inline image parts, Responses image generation results."""

        messages = [m for m in (self.messages or [self.message]) if m is not None and m.role == "assistant"]
        return [b for m in messages for b in m.content if isinstance(b, ImageBlock)]

    @property
    def citations(self) -> list[Citation]:
        """The sources the answer cites, in order, across the run's replies (`core.Citation`: the
        span of the answer cited as `text` and its `start` / `end` in its text block, the URL or
        document, title, and the quoted text where the provider gives it)."""
        messages = [m for m in (self.messages or [self.message]) if m is not None and m.role == "assistant"]
        found = []
        for block in (b for m in messages for b in m.content if isinstance(b, TextBlock) and b.citations):
            for cited in block.citations:
                start = cited.start if cited.start is not None else 0
                end = cited.end if cited.end is not None else len(block.text)
                found.append(cited.model_copy(update={"text": block.text[start:end] or None}))
        return found

    @property
    def server_tool_calls(self) -> list[Any]:
        """The provider-side tool calls of the run (`core.ServerToolCallBlock`: web searches, code
        executions...), in order; their results are `core.ServerToolResultBlock` in `messages`."""
        messages = [m for m in (self.messages or [self.message]) if m is not None and m.role == "assistant"]
        return [b for m in messages for b in m.content if isinstance(b, ServerToolCallBlock)]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted

    def __repr__(self) -> str:
        if self.interrupted:
            state = "interrupted"
        elif self.error is not None:
            state = f"failed: {self.error.type}"
        else:
            state = f"{self.stop_reason}, {self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
        return f"<AgentResult {self.provider}: {len(self.text)} chars, {state}>"
