"""`ModelSettings` on every driver: the body a local server receives for each setting,
and the settings a model cannot take refused before anything is sent.

Wire names follow each provider's API reference: OpenAI "Create chat completion"
and "Create a model response"; Anthropic "Messages", "Extended thinking", "Tool
use", "Prompt caching"; Gemini "GenerationConfig", "ThinkingConfig", "ToolConfig";
Ollama "Generate a chat completion" (docs/api.md) and "Thinking".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from ipyagent.core import ModelSettings, PromptStack, ProviderError, ToolDefinition
from ipyagent.drivers import create_driver

from ..support.stub_server import StubServer
from ..support.replies import MODELS, PROTOCOLS, REPLIES

#: A model of each protocol that takes every setting its protocol has.
#: Providers served by another provider's protocol.
TOOL = ToolDefinition(name="lookup", description="Look a word up.",
                      parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})


def send(provider: str, settings: dict[str, Any], *, tools: bool = False, model: str | None = None,
         system: str | None = None, **driver_options: Any) -> tuple[dict[str, Any] | None, ProviderError | None]:
    """Stream one request with `settings` to a local server: (the body it received or None, the
    error raised before sending)."""
    stack = PromptStack(settings=ModelSettings(**settings), tools=[TOOL] if tools else [])
    if system:
        stack.add_system_message(system)
    stack.add_user_message("Hello")
    with StubServer(REPLIES[PROTOCOLS.get(provider, provider)]()) as server:
        driver = create_driver(f"{provider}:{model or MODELS[provider]}", base_url=server.url, **driver_options)

        async def main() -> list[Any]:
            try:
                return [e async for e in driver.stream(stack)]
            finally:
                await driver.close()

        try:
            events = asyncio.run(main())
        except ProviderError as exc:
            assert server.requests == [], "refused settings must not reach the server"
            return None, exc
        assert type(events[-1]).__name__ == "ModelCompleted", events[-1]
        assert len(server.requests) == 1
        return server.requests[0]["body"], None


def ok(provider: str, settings: dict[str, Any], **kw: Any) -> dict[str, Any]:
    body, error = send(provider, settings, **kw)
    assert error is None, error
    return body  # type: ignore[return-value]


def refused(provider: str, settings: dict[str, Any], setting: str, **kw: Any) -> ProviderError:
    body, error = send(provider, settings, **kw)
    assert body is None and error is not None
    assert error.type == "unsupported_capability" and error.code == setting
    model = kw.get("model") or MODELS[provider]
    assert provider in error.message and model in error.message and setting in error.message
    return error


# -- the neutral object ----------------------------------------------------------------------------


def test_settings_validate_merge_and_describe():
    base = ModelSettings(temperature=0.5, stop="END")
    assert base.stop == ("END",)
    merged = base.merged(ModelSettings(temperature=0), {"max_output_tokens": 64})
    assert merged.as_dict() == {"temperature": 0.0, "max_output_tokens": 64, "stop": ["END"]}
    assert merged.describe() == "temperature 0 · max tokens 64 · stop 'END'"
    assert base.merged(None, ModelSettings(), {}) is base  # nothing set on top: no new object (every run merges)
    assert not ModelSettings() and ModelSettings(seed=1)
    assert ModelSettings(reasoning="2048").budget == 2048 and ModelSettings(reasoning="low").effort == "low"
    assert (
        ModelSettings(tool_choice="lookup").tool_name == "lookup"
        and ModelSettings(tool_choice="none").tool_name is None
    )
    for bad in ({"temperature": 3}, {"top_p": 1.5}, {"max_output_tokens": 0}, {"reasoning": "extreme"},
                {"reasoning": True}, {"reasoning": -1}, {"tool_choice": " "}, {"stop": [""]}, {"temp": 1}):
        with pytest.raises(ValidationError):
            ModelSettings(**bad)


# -- every setting, every driver: the body the server receives ------------------------------------

SAMPLING = {"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64, "stop": ["END", "STOP"], "seed": 7}


def test_openai_chat_wire_names():
    body = ok("openai", {**SAMPLING, "reasoning": "high"})
    assert {
        k: body[k] for k in ("temperature", "top_p", "max_completion_tokens", "stop", "seed", "reasoning_effort")
    } == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_completion_tokens": 64,
        "stop": ["END", "STOP"],
        "seed": 7,
        "reasoning_effort": "high",
    }
    assert "max_tokens" not in body


def test_openai_compatible_providers_use_their_own_names():
    body = ok("mistral", {"max_output_tokens": 64, "seed": 3}, model="mistral-small-latest")
    assert body["max_tokens"] == 64 and body["random_seed"] == 3  # Mistral API reference, "Chat Completion"
    assert "seed" not in body and "max_completion_tokens" not in body
    assert ok("groq", {"max_output_tokens": 64}, model="llama-3.3-70b-versatile")["max_completion_tokens"] == 64


def test_openai_chat_tool_settings_only_with_tools():
    body = ok("openai", {"tool_choice": "required", "parallel_tool_calls": False}, tools=True)
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    body = ok("openai", {"tool_choice": "lookup"}, tools=True)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    body = ok("openai", {"tool_choice": "none", "parallel_tool_calls": True})  # no tools: nothing to choose among
    assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_responses_wire_names():
    body = ok("openai-responses", {"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64, "reasoning": "low",
                                   "tool_choice": "lookup", "parallel_tool_calls": False}, tools=True,
              provider_options={"reasoning": {"summary": "auto"}})
    assert body["max_output_tokens"] == 64 and body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["reasoning"] == {"summary": "auto", "effort": "low"}
    assert body["tool_choice"] == {"type": "function", "name": "lookup"} and body["parallel_tool_calls"] is False


def test_anthropic_wire_names():
    body = ok("anthropic", {"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64, "stop": ["END"],
                            "tool_choice": "required", "parallel_tool_calls": False}, tools=True)
    assert body["max_tokens"] == 64 and body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["stop_sequences"] == ["END"]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert ok("anthropic", {"tool_choice": "lookup"}, tools=True)["tool_choice"] == {"type": "tool", "name": "lookup"}
    assert ok("anthropic", {"tool_choice": "none"}, tools=True)["tool_choice"] == {"type": "none"}


def test_anthropic_thinking_budget_and_effort():
    body = ok("anthropic", {"reasoning": 2000})
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000} and body["max_tokens"] == 2000 + 4096
    body = ok("anthropic", {"reasoning": "medium", "max_output_tokens": 20000})
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192} and body["max_tokens"] == 20000
    assert "thinking" not in ok("anthropic", {"reasoning": 0})


def test_anthropic_cache_marks_the_stable_prefix():
    body = ok("anthropic", {"cache": True}, tools=True, system="You are terse.")
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    plain = ok("anthropic", {"cache": False}, tools=True, system="You are terse.")
    assert "cache_control" not in str(plain)


def test_gemini_wire_names():
    body = ok("gemini", {**SAMPLING, "reasoning": 512, "tool_choice": "lookup"}, tools=True)
    assert body["generationConfig"] == {"temperature": 0.2, "topP": 0.9, "maxOutputTokens": 64, "seed": 7,
                                        "stopSequences": ["END", "STOP"], "thinkingConfig": {"thinkingBudget": 512}}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}}
    assert ok("gemini", {"tool_choice": "none"}, tools=True)["toolConfig"] == {
        "functionCallingConfig": {"mode": "NONE"}
    }
    effort = ok("gemini", {"reasoning": "high"}, provider_options={"thinkingConfig": {"includeThoughts": True}})
    assert effort["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 24576}
    level = ok("gemini", {"reasoning": "low"}, model="gemini-3-pro-preview")
    assert level["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "low"}


def test_ollama_wire_names():
    body = ok("ollama", {**SAMPLING, "reasoning": "medium", "tool_choice": "auto"}, tools=True,
              provider_options={"options": {"num_ctx": 8192}})
    assert body["options"] == {
        "num_ctx": 8192,
        "temperature": 0.2,
        "top_p": 0.9,
        "num_predict": 64,
        "seed": 7,
        "stop": ["END", "STOP"],
    }
    assert body["think"] == "medium"
    assert ok("ollama", {"reasoning": 0})["think"] is False


# -- what a model cannot take fails before sending -------------------------------------------------


@pytest.mark.parametrize("provider, settings, setting, kw", [
    ("openai", {"reasoning": 1024}, "reasoning", {}),
    ("openai", {"cache": False}, "cache", {}),
    ("openai", {"stop": ["a", "b", "c", "d", "e"]}, "stop", {}),
    ("openai", {"temperature": 0}, "temperature", {"model": "o3-mini"}),
    ("openai", {"reasoning": "low"}, "reasoning", {"model": "gpt-4.1-mini"}),
    ("openai-responses", {"stop": ["END"]}, "stop", {}),
    ("openai-responses", {"seed": 1}, "seed", {}),
    ("openai-responses", {"top_p": 0.5}, "top_p", {"model": "gpt-5"}),
    ("anthropic", {"seed": 1}, "seed", {}),
    ("anthropic", {"reasoning": 500}, "reasoning", {}),
    ("anthropic", {"reasoning": "low", "temperature": 0}, "temperature", {}),
    ("anthropic", {"reasoning": "low", "top_p": 0.5}, "top_p", {}),
    ("anthropic", {"reasoning": 4000, "max_output_tokens": 1000}, "max_output_tokens", {}),
    ("anthropic", {"reasoning": "high"}, "reasoning", {"model": "claude-3-5-haiku-latest"}),
    ("gemini", {"parallel_tool_calls": False}, "parallel_tool_calls", {"tools": True}),
    ("gemini", {"cache": False}, "cache", {}),
    ("gemini", {"reasoning": "low"}, "reasoning", {"model": "gemini-2.0-flash"}),
    ("gemini", {"reasoning": "low"}, "reasoning", {"model": "gemma-3-27b-it"}),
    ("ollama", {"tool_choice": "required"}, "tool_choice", {"tools": True}),
    ("ollama", {"parallel_tool_calls": False}, "parallel_tool_calls", {"tools": True}),
    ("ollama", {"reasoning": 2048}, "reasoning", {}),
    ("ollama", {"cache": False}, "cache", {}),
])
def test_unsupported_settings_fail_before_sending(provider, settings, setting, kw):
    refused(provider, settings, setting, **kw)


@pytest.mark.parametrize("provider", list(REPLIES))
def test_tool_choice_needs_the_tools_it_names(provider):
    for settings in ({"tool_choice": "required"}, {"tool_choice": "missing"}):
        body, error = send(provider, settings, tools=settings["tool_choice"] == "missing")
        assert body is None and error.type == "invalid_request"


@pytest.mark.parametrize("provider, options", [
    ("openai", {"temperature": 1.0}), ("openai-responses", {"temperature": 1.0}), ("anthropic", {"temperature": 1.0}),
    ("gemini", {"temperature": 1.0}), ("ollama", {"options": {"temperature": 1.0}}),
])
def test_a_setting_and_a_provider_option_that_disagree_fail(provider, options):
    body, error = send(provider, {"temperature": 0.0}, provider_options=options)
    assert body is None and error.type == "invalid_request" and "temperature" in error.message
    assert ok(provider, {"temperature": 1.0}, provider_options=options)  # the same value is no conflict
