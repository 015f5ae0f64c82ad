"""Writes the cassettes the example notebooks replay when no API key is set.

The replies are written by us (not recorded from OpenAI) in the real Chat
Completions streaming format: a role chunk, content (or tool-call argument)
chunks of a few characters, a finish chunk, a usage chunk with empty choices,
``[DONE]``. They go through the real driver, agent loop and tools with a
recording transport, so each cassette holds exactly the requests its notebook
sends. The prompts and tools here must match the notebooks' cells.

Run from the repo root: ``.venv/bin/python notebooks/make_cassettes.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx2

from ipyagent import Agent
from ipyagent.drivers.cassette import RecordingTransport
from ipyagent.drivers.openai_chat import OpenAIChatPromptDriver
from ipyagent.tools import activity
from ipyagent.tools.builtin import Calculator, Clock

MODEL = "gpt-4.1-mini"
HERE = Path(__file__).parent

#: Each run: (prompt, [reply per model turn]); a reply is text, or a list of (tool name, arguments).
QUICKSTART = [
    ("In two sentences, what is a Jupyter kernel?", [
        "A Jupyter kernel is the process that actually runs your code: the notebook sends each cell to it "
        "and shows the results it sends back. Each kernel speaks one language (Python with **ipykernel**) and "
        "keeps your variables in memory between cells."]),
    ("Now say it for a ten-year-old, in one sentence.", [
        "It's the helper hiding behind the notebook that reads your code, does the work, and hands the answer back to you."]),
    ("Give one fun fact about each of these 3 cities: Lisbon, Oslo, Nairobi. Answer as a Markdown list.", [
        "- **Lisbon** is older than Rome: people lived there centuries before Rome was founded.\n"
        "- **Oslo** gives London a Christmas tree every year, as thanks for help during the Second World War.\n"
        "- **Nairobi** has a national park inside the city, where giraffes graze in sight of skyscrapers."]),
]

TOOLS_PROMPT = ("How many days are there from 2026-01-01 to 2026-12-25, and how many hours is that? "
                "Also count the words in: the quick brown fox jumps over the lazy dog")
TOOLS = [
    (TOOLS_PROMPT, [
        [("Clock_days_between", {"start": "2026-01-01", "end": "2026-12-25"}),
         ("word_count", {"text": "the quick brown fox jumps over the lazy dog"})],
        [("Calculator_evaluate", {"expression": "358 * 24"})],
        "From 2026-01-01 to 2026-12-25 there are **358 days**, which is **8,592 hours** (358 × 24).\n\n"
        "The sentence *the quick brown fox jumps over the lazy dog* has **9 words**."]),
]


@activity
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text to count.
    """
    return len(text.split())


def sse_body(reply: str | list[tuple[str, dict[str, Any]]], n: int, prompt_tokens: int) -> bytes:
    base = {"id": f"chatcmpl-ipyagent{n}", "object": "chat.completion.chunk", "created": 1764480000 + n,
            "model": "gpt-4.1-mini-2025-04-14", "system_fingerprint": "fp_ipyagent", "service_tier": "default"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], "usage": None}

    chunks = [chunk({"role": "assistant", "content": "" if isinstance(reply, str) else None, "refusal": None})]
    if isinstance(reply, str):
        pieces = re.findall(r"\s*\S{1,6}|\s+", reply)
        chunks += [chunk({"content": p}) for p in pieces]
        finish = "stop"
    else:
        pieces = []
        for i, (name, arguments) in enumerate(reply):
            text = json.dumps(arguments)
            chunks.append(chunk({"tool_calls": [{"index": i, "id": f"call_ipyagent{n}x{i}", "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            pieces += re.findall(r".{1,8}", text)
            chunks += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in re.findall(r".{1,8}", text)]
        finish = "tool_calls"
    chunks.append(chunk({}, finish))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces), "total_tokens": prompt_tokens + len(pieces),
             "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                           "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
    chunks.append({**base, "choices": [], "usage": usage})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


async def record(path: Path, runs: list[tuple[str, list[Any]]], tools: list[Any] | None = None) -> None:
    path.unlink(missing_ok=True)
    replies = iter([r for _, turn_replies in runs for r in turn_replies])
    counter = iter(range(1000))

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        prompt_tokens = 9 + len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools", []))) // 4
        return httpx2.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"},
                               content=sse_body(next(replies), next(counter), prompt_tokens))

    driver = OpenAIChatPromptDriver(MODEL, api_key="sk-not-a-real-key")
    driver.transport = RecordingTransport(path, provider="openai", model=MODEL, redact=driver.redact,
                                          inner=httpx2.MockTransport(handler), base_url=driver.base_url)
    agent = Agent(driver, tools=tools)
    for prompt, _ in runs:
        result = await agent.arun(prompt)
        assert result.ok, result.error
    await agent.aclose()
    print(f"wrote {path}")


async def main() -> None:
    await record(HERE / "quickstart.cassette.jsonl", QUICKSTART)
    await record(HERE / "tools.cassette.jsonl", TOOLS, tools=[Calculator(), Clock(), word_count])


if __name__ == "__main__":
    asyncio.run(main())
