"""Writes quickstart.cassette.jsonl: the replies the quickstart replays when no API key is set.

The replies are written by us (not recorded from OpenAI) in the real Chat
Completions streaming format: a role chunk, content chunks of a few
characters, a finish chunk, a usage chunk with empty choices, ``[DONE]``.
They are passed through the real driver with a recording transport, so the
cassette holds exactly the requests the quickstart sends.

Run from the repo root: ``.venv/bin/python notebooks/make_quickstart_cassette.py``.
The prompts here must match the notebook's ``%%agent`` cells.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx2

from ipyagent import Agent
from ipyagent.drivers.cassette import RecordingTransport
from ipyagent.drivers.openai_chat import OpenAIChatPromptDriver

MODEL = "gpt-4.1-mini"
TURNS = [
    (
        "In two sentences, what is a Jupyter kernel?",
        "A Jupyter kernel is the process that actually runs your code: the notebook sends each cell to it "
        "and shows the results it sends back. Each kernel speaks one language (Python with **ipykernel**) and "
        "keeps your variables in memory between cells.",
    ),
    (
        "Now say it for a ten-year-old, in one sentence.",
        "It's the helper hiding behind the notebook that reads your code, does the work, and hands the answer back to you.",
    ),
    (
        "Give one fun fact about each of these 3 cities: Lisbon, Oslo, Nairobi. Answer as a Markdown list.",
        "- **Lisbon** is older than Rome: people lived there centuries before Rome was founded.\n"
        "- **Oslo** gives London a Christmas tree every year, as thanks for help during the Second World War.\n"
        "- **Nairobi** has a national park inside the city, where giraffes graze in sight of skyscrapers.",
    ),
]


def sse_body(text: str, n: int, prompt_tokens: int) -> bytes:
    base = {"id": f"chatcmpl-quickstart{n}", "object": "chat.completion.chunk", "created": 1764480000 + n,
            "model": "gpt-4.1-mini-2025-04-14", "system_fingerprint": "fp_quickstart", "service_tier": "default"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": None},
                                    "logprobs": None, "finish_reason": None}], "usage": None}]
    pieces = re.findall(r"\s*\S{1,6}|\s+", text)
    for piece in pieces:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}], "usage": None})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}], "usage": None})
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces), "total_tokens": prompt_tokens + len(pieces),
             "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                           "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
    chunks.append({**base, "choices": [], "usage": usage})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


async def main() -> None:
    out = Path(__file__).with_name("quickstart.cassette.jsonl")
    out.unlink(missing_ok=True)
    replies = iter(enumerate(TURNS))

    def handler(request: httpx2.Request) -> httpx2.Response:
        n, (_, reply) = next(replies)
        prompt_tokens = 9 + len(json.loads(request.content)["messages"]) * 14
        return httpx2.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"},
                               content=sse_body(reply, n, prompt_tokens))

    driver = OpenAIChatPromptDriver(MODEL, api_key="sk-not-a-real-key")
    driver.transport = RecordingTransport(out, provider="openai", model=MODEL, redact=driver.redact,
                                          inner=httpx2.MockTransport(handler))
    agent = Agent(driver)
    for prompt, _ in TURNS:
        result = await agent.arun(prompt)
        assert result.ok, result.error
    await agent.aclose()
    print(f"wrote {out} ({len(TURNS)} exchanges)")


if __name__ == "__main__":
    asyncio.run(main())
