"""What known models can take, where a protocol's own rules are not enough.

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 but not gpt-5-chat, gpt-6) reject
sampling settings (``temperature``, ``top_p``, ``stop``: "Unsupported parameter",
OpenAI reasoning guide), and its other chat models reject ``reasoning_effort``.
A model ipyagent does not know (a local server's) is given every setting its
protocol has: the server decides.

Context windows (input tokens) of known models, by model-name prefix, feed each
driver's `context_window`: the memory layer asks the driver, never a provider name.
"""

from __future__ import annotations

import re

#: Thinking budgets (tokens) standing for an effort, for APIs that take only a budget
#: (Anthropic ``thinking.budget_tokens``, Gemini 2.5 ``thinkingBudget``). Anthropic's
#: minimum is 1024; Gemini 2.5 Flash's maximum is 24576.
EFFORT_BUDGETS: dict[str, int] = {"low": 2048, "medium": 8192, "high": 24576}

_OPENAI_REASONING = re.compile(r"^(o\d+|gpt-[56])")
_OPENAI_NON_REASONING = re.compile(r"^(gpt-4|gpt-3\.5|chatgpt-|gpt-5[\w.]*-chat)")


#: Context windows (tokens) by model-name prefix; the longest matching prefix wins.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5": 16_385,
    "gpt-5": 400_000,
    "gpt-6": 922_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "claude-sonnet-5": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-fable": 1_000_000,
    "gemini": 1_048_576,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "mistral": 32_000,
    "mistral-large": 131_072,
    "deepseek": 65_536,
}
#: The window assumed for a model the table does not know.
DEFAULT_WINDOW = 128_000


def known_context_window(model: str) -> int | None:
    """`model`'s context window in tokens from `CONTEXT_WINDOWS` (longest prefix of its bare
    name, ``openai/gpt-4o`` read as ``gpt-4o``); None for a model the table does not know."""
    name = _bare(model)
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best is not None else None


def _bare(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()  # "openai/gpt-5" (OpenRouter) -> "gpt-5"


def openai_reasoning_model(model: str) -> bool:
    """True for an OpenAI reasoning model (no sampling settings, takes an effort)."""
    name = _bare(model)
    return bool(_OPENAI_REASONING.match(name)) and not _OPENAI_NON_REASONING.match(name)


def openai_non_reasoning_model(model: str) -> bool:
    """True for an OpenAI chat model known to take no reasoning effort (gpt-4.1, gpt-4o...)."""
    return bool(_OPENAI_NON_REASONING.match(_bare(model)))
