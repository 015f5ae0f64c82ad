"""An MCP server's sampling request, answered by a run's model behind the user's approval
(DESIGN.md, "tools": ipyagent is a full MCP client; MCP specification, "Sampling").

A server asks for one message while one of its tools runs; the run answers it with its own
model (or the ``PROVIDER:MODEL`` the server was added with), once the user approved the request
(as shown, or with the last user message edited), within the run's cap (`RunOptions.max_sampling`).
The answer's tokens and price count in the run's figures (a `SamplingCompleted` event, and the
run's usage and costs).
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core import (
    Message,
    ModelCompleted,
    ModelFailed,
    ModelSettings,
    PromptStack,
    ProviderError,
    SamplingAnswer,
    SamplingCompleted,
    SamplingRequest,
    StopKind,
    TextBlock,
    Usage,
)
from ..drivers import create_driver
from ..tools import InteractionRefused
from .options import MAX_SAMPLING

if TYPE_CHECKING:
    from .loop import AgentRun

#: MCP's words for a reply's stop reason (``CreateMessageResult.stopReason``).
_STOP_WORDS = {StopKind.max_tokens: "maxTokens", StopKind.stop_sequence: "stopSequence", StopKind.tool_use: "toolUse"}


class Sampler:
    """The sampling requests of one run: `__call__` answers one (a `CallContext.sample`)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self.answered = 0

    async def __call__(self, request: SamplingRequest) -> SamplingAnswer:
        """The model's answer to `request`.

        Raises:
            InteractionRefused: over the run's cap, no one to approve it, denied, or the model
                failed (one line each; the server is told).
        """
        options = self.run.options
        limit = options.max_sampling if options.max_sampling is not None else MAX_SAMPLING
        if self.answered >= limit:
            raise self._refused(request, f"this run has answered {limit} sampling requests, its cap (max_sampling)")
        request = await self._approved(request)
        self.answered += 1
        driver, own = self._driver(request)
        try:
            turn = await self._complete(driver, _stack(request))
        finally:
            if own:
                await driver.close()
        usage = turn.usage if isinstance(turn, ModelCompleted) else (turn.partial.usage or Usage())
        cost = turn.metadata.get("cost")
        self.run.usage += usage
        if "cost" in turn.metadata:
            self.run.costs.append(cost)
        if not isinstance(turn, ModelCompleted):
            why = f"{driver.id} failed: {turn.error.message}"
            self._emit(SamplingCompleted(request.action, request.server, driver.id, usage, cost, error=why))
            raise InteractionRefused(why)
        text = turn.message.text
        self._emit(SamplingCompleted(request.action, request.server, driver.id, usage, cost, text=text))
        return SamplingAnswer(text=text, model=driver.id, stop_reason=_STOP_WORDS.get(turn.stop_reason.kind, "endTurn"))

    async def _approved(self, request: SamplingRequest) -> SamplingRequest:
        """`request` as the user approved it (its last user message edited, maybe); refused when
        no one can approve it here or the user denied it."""
        if request.preapproved:
            return request
        approve = self.run.options.approve_sampling
        if approve is None:
            raise self._refused(request, "no one can approve it here; add the server with approve_sampling=True "
                                "(%mcp add … --approve-sampling) to answer without asking")
        verdict = await approve(request)
        if not verdict.approved:
            raise self._refused(request, "denied by the user")
        if verdict.text is None:
            return request
        messages = list(request.messages)
        last = max((n for n, m in enumerate(messages) if m.role == "user"), default=None)
        if last is not None:
            kept = [b for b in messages[last].content if not isinstance(b, TextBlock)]
            messages[last] = Message(role="user", content=[TextBlock(text=verdict.text), *kept])
        return replace(request, messages=messages)

    def _driver(self, request: SamplingRequest) -> tuple[Any, bool]:
        """(the driver that answers, whether it is this request's own to close)."""
        if not request.provider:
            return self.run.driver, False
        try:
            return create_driver(request.provider), True
        except Exception as exc:  # noqa: BLE001 - a bad --sampling is the server's refusal, not the run's failure
            raise self._refused(request, f"its model {request.provider!r} cannot be used: {exc}") from None

    async def _complete(self, driver: Any, stack: PromptStack) -> Any:
        """The driver's last event for `stack` (`ModelCompleted` or `ModelFailed`), its deltas unseen."""
        last: Any = None
        try:
            async with aclosing(driver.stream(stack)) as events:
                async for event in events:
                    last = event
        except ProviderError as exc:
            return ModelFailed(exc, Message(role="assistant"))
        return last

    def _refused(self, request: SamplingRequest, why: str) -> InteractionRefused:
        self._emit(SamplingCompleted(request.action, request.server, request.provider or self.run.driver.id, Usage(),
                                     error=why))
        return InteractionRefused(why)

    def _emit(self, event: SamplingCompleted) -> None:
        try:
            self.run.emit(event)
        except Exception:  # noqa: BLE001 - a view's failure must not fail the server's request
            pass


def _stack(request: SamplingRequest) -> PromptStack:
    """The request as a prompt stack: its system prompt and messages; at most `max_tokens` out.
    Its temperature and stop sequences are left to the model (a reasoning model refuses them)."""
    stack = PromptStack(settings=ModelSettings(max_output_tokens=request.max_tokens))
    if request.system:
        stack.add_system_message(request.system)
    stack.messages.extend(request.messages)
    return stack
