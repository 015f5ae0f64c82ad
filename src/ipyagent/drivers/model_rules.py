"""What known models can take, where a protocol's own rules are not enough.

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 but not gpt-5-chat) reject
sampling settings (``temperature``, ``top_p``, ``stop``: "Unsupported parameter",
OpenAI reasoning guide), and its other chat models reject ``reasoning_effort``.
A model ipyagent does not know (a local server's) is given every setting its
protocol has: the server decides.
"""

from __future__ import annotations

import re

#: Thinking budgets (tokens) standing for an effort, for APIs that take only a budget
#: (Anthropic ``thinking.budget_tokens``, Gemini 2.5 ``thinkingBudget``). Anthropic's
#: minimum is 1024; Gemini 2.5 Flash's maximum is 24576.
EFFORT_BUDGETS: dict[str, int] = {"low": 2048, "medium": 8192, "high": 24576}

_OPENAI_REASONING = re.compile(r"^(o\d+|gpt-5)")
_OPENAI_NON_REASONING = re.compile(r"^(gpt-4|gpt-3\.5|chatgpt-|gpt-5[\w.]*-chat)")


def _bare(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()  # "openai/gpt-5" (OpenRouter) -> "gpt-5"


def openai_reasoning_model(model: str) -> bool:
    """True for an OpenAI reasoning model (no sampling settings, takes an effort)."""
    name = _bare(model)
    return bool(_OPENAI_REASONING.match(name)) and not _OPENAI_NON_REASONING.match(name)


def openai_non_reasoning_model(model: str) -> bool:
    """True for an OpenAI chat model known to take no reasoning effort (gpt-4.1, gpt-4o...)."""
    return bool(_OPENAI_NON_REASONING.match(_bare(model)))
