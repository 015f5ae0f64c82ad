"""What a driver and its model can do, and the checks made before anything is sent
(DESIGN.md, "drivers": no silent downgrade).

A request that needs a capability the model lacks (tools, vision, PDF documents, a
structured-output strategy, reasoning) fails with ``unsupported_capability`` before any
request leaves; settings every protocol shares are checked here too, before the driver
translates them (`put_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core import DocumentBlock, ImageBlock, PromptStack, ProviderError, unsupported_setting
from .catalog.model_rules import DEFAULT_WINDOW, known_context_window
from .registry import providers_with_builtin  # named in the error of a driver without a provider-side tool
from .structured import STRATEGIES


@dataclass(frozen=True)
class Capabilities:
    """What a driver (and model) can do; each flag is checked before sending (`check_capabilities`,
    and `reasoning` for a reasoning setting), and a request needing a missing one fails there."""

    tools: bool = True
    vision: bool = False
    structured_output_native: bool = False
    reasoning: bool = False
    #: Takes PDF documents (`DocumentBlock`); text documents go to every model as text.
    documents: bool = False


class CapabilityChecks:
    """The driver template's capability and settings checks (mixed into `BasePromptDriver`)."""

    provider: str
    model: str
    provider_options: dict[str, Any]
    capabilities: ClassVar[Capabilities]
    builtin_tools: ClassVar[frozenset[str]]

    @property
    def supports_tools(self) -> bool:
        return self.capabilities_for(self.model).tools

    def capabilities_for(self, model: str) -> Capabilities:
        """The capabilities for `model` (default: the protocol's)."""
        return self.capabilities

    @property
    def context_window(self) -> int:
        """The input tokens a request to this model may take: the known model's window
        (`model_rules.CONTEXT_WINDOWS`), else `model_rules.DEFAULT_WINDOW` (128,000). The
        memory layer fits a conversation's history to it; ``--context-window`` overrides it."""
        return known_context_window(self.model) or DEFAULT_WINDOW

    def default_output_strategy(self) -> str:
        """How this driver asks for structured output unless told: ``native`` when the
        model has a JSON-schema mode, else ``tool`` when it takes tools, else ``rule``."""
        caps = self.capabilities_for(self.model)
        return "native" if caps.structured_output_native else "tool" if caps.tools else "rule"

    def output_strategy(self, prompt_stack: PromptStack) -> str | None:
        """The structured-output strategy of this request (None without an output schema).

        Raises:
            ProviderError: ``invalid_request`` for a strategy other than native, tool, rule.
        """
        if prompt_stack.output_schema is None:
            return None
        strategy = prompt_stack.output_strategy or self.default_output_strategy()
        if strategy not in STRATEGIES:
            raise ProviderError(
                "invalid_request",
                f"output strategy {strategy!r} is not one of {', '.join(STRATEGIES)}",
                retryable=False,
            )
        return strategy

    def check_capabilities(self, prompt_stack: PromptStack) -> None:
        """Fail before sending anything when the request needs what this driver or model lacks.

        Raises:
            ProviderError: type ``unsupported_capability``, naming provider, model and capability.
        """
        caps = self.capabilities_for(self.model)
        needed = []
        if prompt_stack.tools and not caps.tools:
            needed.append("tools")
        if not caps.vision and any(isinstance(b, ImageBlock) for m in prompt_stack.messages for b in m.content):
            needed.append("vision")
        if not caps.documents and any(
            isinstance(b, DocumentBlock) and b.is_pdf for m in prompt_stack.messages for b in m.content
        ):
            needed.append("pdf")
        strategy = self.output_strategy(prompt_stack)
        if (strategy == "native" and not caps.structured_output_native) or (strategy == "tool" and not caps.tools):
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} does not support structured output with the {strategy} strategy; "
                f"use output_strategy={'tool' if caps.tools else 'rule'!r} or another "
                "model",  # tool fails only without tools
                code="structured_output",
                retryable=False,
            )
        self.check_settings(prompt_stack)
        self.check_builtin_tools(prompt_stack)
        for capability in needed:
            raise ProviderError(
                "unsupported_capability",
                f"{self.provider} model {self.model} does not support {capability}; "
                f"remove it from the request or choose a model that has it",
                code=capability,
                retryable=False,
            )

    def builtin_tools_for(self, model: str) -> frozenset[str]:
        """The provider-side tools `model` can use (default: the protocol's `builtin_tools`)."""
        return self.builtin_tools

    def check_builtin_tools(self, prompt_stack: PromptStack) -> None:
        """Raises `ProviderError` ``unsupported_capability`` for a provider-side tool this protocol
        or model has no counterpart for, naming the providers that have it."""
        have = self.builtin_tools_for(self.model)
        for tool in prompt_stack.builtin_tools:
            if tool.name in have:
                continue
            others = providers_with_builtin(tool.name)
            where = f"; {', '.join(others)} {'have' if len(others) > 1 else 'has'} it" if others else ""
            raise ProviderError("unsupported_capability", f"{self.provider} model {self.model} has no built-in "
                                f"{tool.name} tool{where}", code="builtin_tool", retryable=False)

    # -- settings (ModelSettings): checks shared by every driver's translation -----------

    def unsupported(self, setting: str, why: str = "") -> ProviderError:
        """The ``unsupported_capability`` error for `setting` on this provider and model."""
        return unsupported_setting(self.provider, self.model, setting, why)

    def check_settings(self, prompt_stack: PromptStack) -> None:
        """Checks every protocol shares, before the driver translates the settings.

        Raises:
            ProviderError: ``unsupported_capability`` for reasoning on a model without it;
                ``invalid_request`` for a `tool_choice` that needs tools the request lacks,
                names a tool it does not offer, or contradicts the ``tool`` output strategy.
        """
        settings = prompt_stack.settings
        if settings.reasoning not in (None, 0) and not self.capabilities_for(self.model).reasoning:
            raise self.unsupported("reasoning", "it is not a reasoning model")
        choice = settings.tool_choice
        if choice is None:
            return
        names = {t.name for t in prompt_stack.tools}
        if choice in ("required",) or settings.tool_name:
            if not names:
                raise ProviderError(
                    "invalid_request",
                    f"tool_choice={choice!r} needs tools, and this request offers none "
                    "(--tools NAME, or tools= in Python)",
                    retryable=False,
                )
            if settings.tool_name and settings.tool_name not in names:
                raise ProviderError(
                    "invalid_request",
                    f"tool_choice={choice!r} is not one of the request's tools: {', '.join(sorted(names))}",
                    retryable=False,
                )
        if self.output_strategy(prompt_stack) == "tool":
            raise ProviderError(
                "invalid_request",
                f"tool_choice={choice!r} contradicts the tool output strategy, which forces "
                "a call to its output tool; drop one of them",
                retryable=False,
            )

    def put_settings(
        self, target: dict[str, Any], fields: dict[str, Any], options: dict[str, Any] | None = None
    ) -> None:
        """Put translated settings into `target` (a body or a nested object). A field that
        `options` (default: `provider_options`) also gives with another value is a conflict.

        Raises:
            ProviderError: ``invalid_request`` naming the field set both ways.
        """
        options = self.provider_options if options is None else options
        for key, value in fields.items():
            if key in options and options[key] != value:
                raise ProviderError(
                    "invalid_request",
                    f"{key} is set both by a setting ({value!r}) and by provider_options ({options[key]!r}); keep one",
                    retryable=False,
                )
            target[key] = value
