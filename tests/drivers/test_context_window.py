"""A model's context window is the driver's knowledge; the memory layer asks the driver for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ipyagent.core import TextArtifact
from ipyagent.drivers.catalog.model_rules import DEFAULT_WINDOW
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.memory import TaskMemory
from ipyagent.memory.query import ask

from ..support.stub_server import StubServer, openai_text_reply


@pytest.mark.parametrize(("model", "window"), [
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4o-mini", 128_000),
    ("gpt-4", 8_192),
    ("openai/gpt-4o", 128_000),  # OpenRouter's vendor/model: the bare name counts
    ("mistral-large-latest", 131_072),  # the longest prefix wins over "mistral"
    ("mistral-small", 32_000),
    ("llama3.2", 131_072),  # through an OpenAI-compatible server, the model's own window
    ("my-fine-tune", DEFAULT_WINDOW),
])
def test_a_driver_knows_its_models_window(model: str, window: int) -> None:
    assert OpenAIChatPromptDriver(model, api_key="sk-test").context_window == window


def test_ollama_cuts_prompts_at_num_ctx_whatever_the_model_could_take() -> None:
    assert OllamaPromptDriver("llama3.2").context_window == 4_096
    assert OllamaPromptDriver("llama3.2", provider_options={"options": {"num_ctx": 32_768}}).context_window == 32_768
    assert OllamaPromptDriver("llama3.2", provider_options={"options": {"temperature": 0}}).context_window == 4_096


class SmallWindow(OpenAIChatPromptDriver):
    context_window = 600  # tokens


def test_task_memory_questions_fit_the_window_the_driver_gives() -> None:
    """No window passed: the query is cut into parts that fit the driver's window."""
    entry = TaskMemory().store(TextArtifact(value="word " * 3_000), tool="probe")
    with StubServer(*[openai_text_reply(f"fact {n}") for n in range(40)]) as server:
        async def main() -> Any:
            async with SmallWindow("m", api_key="sk-test", base_url=server.url) as driver:  # closed on this loop
                return await ask(driver, entry, "how many words?")

        answer = asyncio.run(main())
        sent = len(server.requests)
    assert answer.chunks > 3 and sent == answer.requests == answer.chunks + 1  # one per part, then the combining one
