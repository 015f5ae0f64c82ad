"""`Agent`: a conversation with one prompt driver, usable from Python and the magics.

`await agent.arun(prompt)` in a notebook cell (top-level await) or
`agent.run(prompt)` anywhere, including inside a running event loop. Both run
the request on the shared background loop (`loop_thread`), so one driver and
its HTTP client always live on one loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import (
    Event,
    Message,
    ModelCompleted,
    ModelFailed,
    PromptStack,
    ProviderError,
    StopReason,
    TextBlock,
    TextDelta,
    ToolAction,
    Usage,
)
from ..drivers import BasePromptDriver, create_driver
from .loop_thread import background_loop, in_background_loop, run_sync


@dataclass
class AgentResult:
    """The outcome of one `%%agent` cell or `Agent.run` call.

    Attributes:
        text: the assistant's text (partial if the run failed or was interrupted).
        message: the assistant `Message` (content blocks, usage, metadata).
        usage: tokens billed by the provider.
        tool_calls: the tool calls the model made.
        stop_reason: why the model stopped; None when it failed.
        error: the `ProviderError` when the run failed, else None.
        interrupted: True when the run was cancelled (kernel interrupt).
        metadata: latency_s, ttft_s (seconds), attempts, replayed, provider, model.
    """

    provider: str
    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason | None = None
    error: ProviderError | None = None
    interrupted: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolAction]:
        return self.message.tool_calls

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted

    def __repr__(self) -> str:
        if self.interrupted:
            state = "interrupted"
        elif self.error is not None:
            state = f"failed: {self.error.type}"
        else:
            state = f"{self.stop_reason}, {self.usage.input} in / {self.usage.output} out tokens"
        return f"<AgentResult {self.provider}: {len(self.text)} chars, {state}>"


class Agent:
    """A conversation with one model.

    Args:
        provider: ``provider:model`` (``openai:gpt-4.1-mini``), ``replay:CASSETTE``,
            or a ready prompt driver.
        system: the system prompt, sent first on every turn.
        **driver_options: passed to `create_driver` (``base_url``, ``api_key_env``,
            ``record``, ``timeout``, ``max_attempts``, ``provider_options``).

    Raises:
        ConfigurationError: unknown provider or missing API key (at creation).
    """

    def __init__(self, provider: str | BasePromptDriver, *, system: str | None = None, **driver_options: Any) -> None:
        self.driver = provider if isinstance(provider, BasePromptDriver) else create_driver(provider, **driver_options)
        self.system = system
        self.messages: list[Message] = []
        self.results: list[AgentResult] = []

    @property
    def provider(self) -> str:
        return self.driver.id

    def prompt_stack(self, prompt: str) -> PromptStack:
        """The request for `prompt`: system prompt, the conversation so far, then `prompt`."""
        stack = PromptStack()
        if self.system:
            stack.add_system_message(self.system)
        stack.messages.extend(self.messages)
        stack.add_user_message(prompt)
        return stack

    async def astream(self, prompt: str) -> AsyncIterator[Event]:
        """Stream one turn's events (run on the caller's loop; prefer `arun`).

        A completed turn joins the conversation; a failed one does not, so the
        next prompt is composed without the broken reply.
        """
        stack = self.prompt_stack(prompt)
        async for event in self.driver.stream(stack):
            if isinstance(event, ModelCompleted):
                self.messages.extend([stack.messages[-1], event.message])
            yield event

    async def _arun(self, prompt: str, on_event: Callable[[Event], Any] | None) -> AgentResult:
        result: AgentResult | None = None
        partial: list[Event] = []
        try:
            async for event in self.astream(prompt):
                if on_event is not None:
                    on_event(event)
                partial.append(event)
                if isinstance(event, ModelCompleted):
                    result = AgentResult(self.provider, event.message, event.usage, event.stop_reason, metadata=event.metadata)
                elif isinstance(event, ModelFailed):
                    result = AgentResult(self.provider, event.partial, event.partial.usage or Usage(), None, event.error, metadata=event.metadata)
        except asyncio.CancelledError:
            result = AgentResult(self.provider, _partial_message(partial), interrupted=True)
            self.results.append(result)
            raise
        assert result is not None, "a driver stream ends with model_completed or model_failed"
        self.results.append(result)
        return result

    async def arun(self, prompt: str, *, on_event: Callable[[Event], Any] | None = None) -> AgentResult:
        """Run one turn and return its result; `on_event` sees every event as it arrives
        (called on ipyagent's background loop thread). Failures are in `result.error`,
        not raised."""
        if in_background_loop():
            return await self._arun(prompt, on_event)
        future = asyncio.run_coroutine_threadsafe(self._arun(prompt, on_event), background_loop())
        return await asyncio.wrap_future(future)

    def run(self, prompt: str, *, on_event: Callable[[Event], Any] | None = None) -> AgentResult:
        """Blocking `arun`; works inside a running event loop (a notebook cell)."""
        return run_sync(self._arun(prompt, on_event))

    def reset(self) -> None:
        """Forget the conversation (the system prompt stays)."""
        self.messages.clear()

    async def aclose(self) -> None:
        await self.driver.close()


def _partial_message(events: list[Event]) -> Message:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return Message(role="assistant", content=[TextBlock(text=text)] if text else [], metadata={"partial": True, "interrupted": True})
