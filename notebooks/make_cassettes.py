"""Writes the cassettes the example notebooks replay when no API key is set.

The replies are written by us (not recorded from the providers) in their real
streaming formats. Chat Completions: a role chunk, content (or tool-call
argument) chunks of a few characters, a finish chunk, a usage chunk with empty
choices, ``[DONE]``. Anthropic Messages and Gemini (the compare notebook), OpenAI
Responses and Ollama NDJSON (the providers notebook): the event shapes of the
recordings in ``shared/fixtures/providers``. They go through the real driver, agent loop and tools with a
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
from ipyagent.agent import RunOptions
from ipyagent.core import ElicitationAnswer
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers import current_model
from ipyagent.drivers.base import BasePromptDriver
from ipyagent.drivers.cassette import RecordingTransport
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.registry import BUILTIN
from ipyagent.tools import activity
from ipyagent.tools.builtin import Calculator, Clock

#: The models the notebooks name: each provider's current model in ipyagent's lifecycle table.
MODEL = current_model("openai")
HERE = Path(__file__).parent

#: Each run: (prompt, [reply per model turn]); a reply is text, or a list of (tool name, arguments).
QUICKSTART = [
    (
        "In two sentences, what is a Jupyter kernel?",
        [
            "A Jupyter kernel is the process that actually runs your code: the notebook sends each cell to it "
            "and shows the results it sends back. Each kernel speaks one language (Python with **ipykernel**) and "
            "keeps your variables in memory between cells."
        ],
    ),
    (
        "Now say it for a ten-year-old, in one sentence.",
        [
            "It's the helper hiding behind the notebook that reads your code, does the work, "
            "and hands the answer back to you."
        ],
    ),
    (
        "Give one fun fact about each of these 3 cities: Lisbon, Oslo, Nairobi. Answer as a Markdown list.",
        [
            "- **Lisbon** is older than Rome: people lived there centuries before Rome was founded.\n"
            "- **Oslo** gives London a Christmas tree every year, as thanks for help during the Second World War.\n"
            "- **Nairobi** has a national park inside the city, where giraffes graze in sight of skyscrapers."
        ],
    ),
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


#: notebooks/compare.ipynb: one prompt, three providers, each answering in its own words and pace.
#: (provider, model, seconds between replayed events, reply).
COMPARE_PROMPT = "In two sentences, what is a Jupyter kernel?"
COMPARE = [
    ("openai", MODEL, 0.01,
     "A Jupyter kernel is the process that runs the code of a notebook: the front end sends it each cell "
     "and displays what it sends back. It keeps your variables in memory between cells, and each kernel "
     "speaks one language, such as Python with **ipykernel**."),
    ("anthropic", current_model("anthropic"), 0.015,
     "A Jupyter kernel is a separate process that executes the code you write in a notebook and returns "
     "outputs, errors and rich displays to the interface over a messaging protocol. Because it holds the "
     "session's state, variables defined in one cell remain available to every later cell until the kernel "
     "is restarted."),
    ("gemini", current_model("gemini"), 0.04,
     "A Jupyter kernel is the computational engine behind a notebook: it runs your code and sends the "
     "results back. There are kernels for many languages, not just Python."),
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
            "model": MODEL, "system_fingerprint": "fp_ipyagent", "service_tier": "default"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }

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
            chunks += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in re.findall(r".{1,8}", text)
            ]
        finish = "tool_calls"
    chunks.append(chunk({}, finish))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": len(pieces),
        "total_tokens": prompt_tokens + len(pieces),
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    chunks.append({**base, "choices": [], "usage": usage})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _tokens(text: str) -> int:
    """A plausible output token count for `text` (about four characters a token)."""
    return max(1, round(len(text) / 4))


def _text_pieces(text: str) -> list[str]:
    return re.findall(r"\s*\S{1,6}|\s+", text)


def anthropic_sse_body(reply: str, n: int, input_tokens: int, model: str) -> bytes:
    """A Messages stream saying `reply`, in the shape of the recorded ``anthropic/stream-text.sse``."""
    pieces = _text_pieces(reply)
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_ipyagent{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                        "service_tier": "standard",
                    },
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        *(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            )
            for p in pieces
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": _tokens(reply)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def gemini_sse_body(reply: str, n: int, prompt_tokens: int, model: str) -> bytes:
    """A streamGenerateContent stream saying `reply`, in the shape of the recorded ``gemini/stream-text.sse``
    (usage on every chunk, the output count and ``finishReason`` on the last)."""
    pieces = re.findall(r"(?:\s*\S+){1,4}\s*", reply)
    chunks = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        candidate: dict[str, Any] = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
        usage: dict[str, Any] = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}
        if last:
            candidate["finishReason"] = "STOP"
            usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": _tokens(reply),
                     "totalTokenCount": prompt_tokens + _tokens(reply)}
        chunks.append({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
                       "responseId": f"ipyagent{n}"})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def responses_sse_body(reply: str, n: int, input_tokens: int, model: str) -> bytes:
    """A Responses stream saying `reply`, in the shape of the recorded ``openai-responses/stream-text.sse``
    (typed events, no ``[DONE]``, usage in ``response.completed``). Every event validates against the
    openai SDK's own event models (tests/drivers/test_cassettes.py): a ``sequence_number``, ``logprobs`` on
    text events, and the response's ``tools``, ``tool_choice``, ``parallel_tool_calls`` and cache fields."""
    resp_id, item_id = f"resp_ipyagent{n}", f"msg_ipyagent{n}"
    response = {
        "id": resp_id,
        "object": "response",
        "created_at": 1764480000 + n,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }
    part = {"type": "output_text", "text": reply, "annotations": [], "logprobs": []}
    item = {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [part]}
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "output_tokens": _tokens(reply),
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input_tokens + _tokens(reply)}
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
        *({"type": "response.output_text.delta", **where, "delta": p, "logprobs": []} for p in _text_pieces(reply)),
        {"type": "response.output_text.done", **where, "text": reply, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [item], "usage": usage},
        },
    ]
    events = [{**e, "sequence_number": seq} for seq, e in enumerate(events)]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def ollama_ndjson_body(reply: str, n: int, prompt_tokens: int, model: str) -> bytes:
    """An /api/chat NDJSON stream saying `reply`, in the shape of the recorded ``ollama/chat-stream-text.ndjson``."""
    stamp = f"2025-12-01T00:00:{n:02d}.000000Z"
    lines = [{"model": model, "created_at": stamp, "message": {"role": "assistant", "content": p}, "done": False}
             for p in _text_pieces(reply)]
    lines.append(
        {
            "model": model,
            "created_at": stamp,
            "message": {"role": "assistant", "content": ""},
            "done_reason": "stop",
            "done": True,
            "total_duration": 171946792,
            "load_duration": 38473250,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": 27608250,
            "eval_count": _tokens(reply),
            "eval_duration": 105611917,
        }
    )
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


#: protocol -> (stream writer, Content-Type) for the drivers other than OpenAI Chat.
WRITERS = {
    "anthropic": (anthropic_sse_body, "text/event-stream; charset=utf-8"),
    "gemini": (gemini_sse_body, "text/event-stream; charset=utf-8"),
    "openai-responses": (responses_sse_body, "text/event-stream; charset=utf-8"),
    "ollama": (ollama_ndjson_body, "application/x-ndjson"),
}

#: notebooks/providers.ipynb: the same cell against each provider (the notebook renders {{ QUESTION }} to this).
PROVIDERS_PROMPT = "In one sentence, what is a Jupyter kernel?"
PROVIDERS = [
    ("openai", MODEL,
     "A Jupyter kernel is the process that runs a notebook's code and sends the results back to the page."),
    ("openai-responses", MODEL,
     "A Jupyter kernel is the separate process that executes your notebook cells and keeps their variables in memory."),
    ("anthropic", current_model("anthropic"),
     "A Jupyter kernel is the language-specific process that executes the code from your notebook cells and "
     "returns outputs, errors and rich displays over Jupyter's messaging protocol."),
    ("gemini", current_model("gemini"),
     "A Jupyter kernel is the computational engine that runs the code in a notebook and returns its results."),
    ("ollama", "llama3.2",
     "A Jupyter kernel is a program that runs your notebook's code, such as **ipykernel** for Python."),
]


async def record(path: Path, runs: list[tuple[str, list[Any]]], tools: list[Any] | None = None, *,
                 driver: BasePromptDriver | None = None, chunk_delay: float | None = None, settings: Any = None,
                 options: Any = None) -> None:
    """Run `runs` through `driver` (default: OpenAI Chat) against a mock server and write the cassette;
    `chunk_delay` (seconds between events when replayed) is written on every line; `options`: the
    runs' `RunOptions` (an `elicit` callback playing the user)."""
    path.unlink(missing_ok=True)
    replies = iter([r for _, turn_replies in runs for r in turn_replies])
    counter = iter(range(1000))
    driver = driver or OpenAIChatPromptDriver(MODEL, api_key="sk-not-a-real-key")

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if isinstance(driver, OpenAIChatPromptDriver):
            prompt_tokens = 9 + len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools", []))) // 4
            content = sse_body(next(replies), next(counter), prompt_tokens)
        else:
            writer, content_type = WRITERS[driver.protocol]
            content = writer(next(replies), next(counter), 9 + len(json.dumps(body)) // 5, driver.model)
            return httpx2.Response(200, headers={"content-type": content_type}, content=content)
        return httpx2.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, content=content)

    driver.transport = RecordingTransport(path, provider=driver.provider, model=driver.model,
                                          inner=httpx2.MockTransport(handler), base_url=driver.base_url)
    agent = Agent(driver, tools=tools, settings=settings)
    for prompt, _ in runs:
        result = await agent.arun(prompt, options)
        assert result.ok, result.error
    await agent.aclose()
    if chunk_delay is not None:
        lines = [
            {**json.loads(line), "chunk_delay": chunk_delay} for line in path.read_text().splitlines() if line.strip()
        ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    print(f"wrote {path}")


def create_driver_class(provider: str) -> type[BasePromptDriver]:
    """The driver class the registry uses for `provider`."""
    return BUILTIN[provider].driver_class()


def compare_driver(provider: str, model: str) -> BasePromptDriver:
    cls = {"openai": OpenAIChatPromptDriver, "anthropic": AnthropicPromptDriver, "gemini": GeminiPromptDriver}[provider]
    return cls(model, api_key="not-a-real-key", provider=provider)


def memory_runs() -> tuple[list[tuple[str, list[Any]]], list[Any]]:
    """notebooks/memory.ipynb: (runs, tools). Its tools cell is executed here, so the tools'
    outputs (and so the references and slices sent) match the notebook's byte for byte; its
    prompts are its ``%%agent`` cells. The model asks for all three outputs, searches the report,
    asks a question over the table (a sub-prompt, answered by the third reply), then answers."""
    cells = [
        "".join(c["source"])
        for c in json.loads((HERE / "memory.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    scope: dict[str, Any] = {}
    exec(next(c for c in cells if c.startswith("# The tools")), scope)  # noqa: S102 - our own notebook
    prompts = [c.split("\n", 1)[1].strip() for c in cells if c.startswith("%%agent")]
    rows = scope["sales"].table(2025)
    totals = {r: sum(x["units"] for x in rows if x["region"] == r) for r in scope["REGIONS"]}
    top = max(totals, key=totals.get)
    others = ", ".join(f"{r} {totals[r]:,}" for r in sorted(totals, key=totals.get, reverse=True) if r != top)
    url = re.search(r"https://\S+", prompts[0]).group(0)
    runs = [
        (
            prompts[0],
            [
                [("Docs_fetch_page", {"url": url}), ("Sales_table", {"year": 2025}), ("Sales_chart", {"year": 2025})],
                [
                    ("TaskMemory_search", {"query": "main risk next year", "namespace": "fetch_page-1", "limit": 1}),
                    (
                        "TaskMemory_query",
                        {"namespace": "table-2", "question": "What are the total units sold per region?"},
                    ),
                ],
                "Total units sold in 2025: "
                + ", ".join(f"{r} {t:,}" for r, t in totals.items())
                + f". {top} sold the most.",
                f"**Main risk:** the {top} region's supply contracts expire in March, and renewing them may raise "
                f"costs by 12 percent (the report's *Outlook and risks* section).\n\n**Top region:** {top}, with "
                f"{totals[top]:,} units in 2025 (then {others}).\n\nThe report, the table and the chart stay in "
                "Task Memory: open them below.",
            ],
        ),
        (
            prompts[1],
            [
                f"Start renegotiating the {top} region's supply contracts now, before they expire in March, "
                "to avoid the 12 percent cost increase."
            ],
        ),
    ]
    return runs, [scope["docs"], scope["sales"]]


async def memory_cassette() -> None:
    from ipyagent.memory import task_memory

    task_memory._counter = __import__("itertools").count(1)  # namespaces as in a fresh kernel: fetch_page-1, ...
    runs, tools = memory_runs()
    await record(HERE / "memory.cassette.jsonl", runs, tools=tools)


#: The replies of notebooks/context.ipynb: %agent fix --code, --with df, --cells 2 (in that order).
CONTEXT = [
    "The loop divides each price by its count, and `counts[1]` is `0`, so `15.5 / 0` raises `ZeroDivisionError` "
    '("float division by zero"). A product with no units sold has no unit price: '
    "record it as missing instead of dividing.\n\n"
    "```python\nprices = [12.0, 15.5, 9.25]\ncounts = [3, 0, 4]\nper_unit = []\nfor p, c in zip(prices, counts):\n"
    '    per_unit.append(p / c if c else float("nan"))\n```\n',
    "Only `price` has missing values: 40 of the 1,000 rows. "
    "`region` is categorical, `units` integer and `returned` boolean, "
    'so revenue per region is:\n\n```python\nkept = df[~df["returned"]]\n'
    'revenue = (kept["units"] * kept["price"]).groupby(kept["region"], observed=True).sum()\nrevenue\n```\n\n'
    "`sum` skips the missing prices, so those rows add no revenue; "
    'drop them first (`kept.dropna(subset=["price"])`) to make that explicit.',
    "The first cell stores the units sold per month and prints the best month, March (143 units).\n"
    "The second computes the average per month: 358 / 3 ≈ 119.3 units.",
]


def context_cassette() -> None:
    """Execute notebooks/context.ipynb against a local server that answers with `CONTEXT`, and
    write the requests the kernel sent (context blocks included) with those answers."""
    import os
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import nbformat
    from nbclient import NotebookClient

    exchanges: list[dict[str, Any]] = []
    replies = iter(CONTEXT)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = len(exchanges)
            content = sse_body(next(replies), n, 9 + len(json.dumps(body["messages"])) // 4)
            headers = {"content-type": "text/event-stream; charset=utf-8"}
            exchanges.append(
                {
                    "provider": "openai",
                    "model": MODEL,
                    "base_url": "https://api.openai.com/v1",
                    "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "body": body},
                    "response": {"status": 200, "headers": headers, "body": content.decode()},
                }
            )
            self.send_response(200)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "IPYAGENT_RUN_STORE")}
    os.environ.update(OPENAI_API_KEY="sk-not-a-real-key", OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}/v1",
                      IPYAGENT_RUN_STORE="off")
    try:
        nb = nbformat.read(HERE / "context.ipynb", as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    finally:
        server.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert len(exchanges) == len(CONTEXT), f"{len(exchanges)} requests for {len(CONTEXT)} replies"
    path = HERE / "context.cassette.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in exchanges))
    print(f"wrote {path}")


#: notebooks/mcp.ipynb: the model mixes two colours with the notebook's MCP server, then asks for a swatch.
MCP_REPLIES = [
    [("palette_mix_colors", {"a": "#ff0000", "b": "#0000ff"})],
    [("palette_swatch", {"color": "#800080"})],
    "Half red and half blue make **#800080**, a purple. Here is a swatch of it (48 × 48 pixels).",
]
#: Then it blends with progress, and names the middle colour: the server's sampling request (its
#: reply, the third here) is answered by the same model.
MCP_BLEND_REPLIES = [
    [("palette_blend", {"a": "#ff0000", "b": "#0000ff", "steps": 4})],
    [("palette_name_color", {"color": "#800080"})],
    "Twilight Plum",
    "Red into blue in 4 steps: #bf0040, #800080, #4000bf, #0000ff. The middle one, **#800080**, "
    "is called *Twilight Plum*.",
]

#: Then it orders paint: the server asks the user which finish (elicitation). Each answer the user
#: can give in the card (either finish, Decline, Cancel; a run no browser shows declines) is
#: recorded, so the replay goes on whichever they pick.
MCP_ORDER = [("palette_order_paint", {"color": "#800080"})]
MCP_ORDER_ANSWERS = {
    ("accept", "matte"): "Ordered: one tin of **#800080** (*Twilight Plum*) paint, matte finish.",
    ("accept", "gloss"): "Ordered: one tin of **#800080** (*Twilight Plum*) paint, gloss finish.",
    ("decline", None): "No paint was ordered: the order form was declined.",
    ("cancel", None): "No paint was ordered: the order was cancelled.",
}


async def mcp_cassette() -> None:
    """The notebook's own server (its ``%%writefile`` cell) really runs, so the tool list and the
    tool results sent in each request match the notebook's byte for byte."""
    import sys
    import tempfile

    from ipyagent.tools.mcp import MCPServer

    cells = [
        "".join(c["source"]) for c in json.loads((HERE / "mcp.ipynb").read_text())["cells"] if c["cell_type"] == "code"
    ]
    source = next(c for c in cells if c.startswith("%%writefile"))
    prompt, blend, order = [c.split("\n", 1)[1].strip() for c in cells if c.startswith("%%agent")]
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "mcp_demo_server.py"
        script.write_text(source.split("\n", 1)[1] + "\n")
        for (action, finish), reply in MCP_ORDER_ANSWERS.items():
            answer = ElicitationAnswer(action, {"finish": finish} if finish else None)

            async def elicit(request: Any, answer: ElicitationAnswer = answer) -> ElicitationAnswer:
                return answer

            server = MCPServer("palette", [sys.executable, str(script)], approve_sampling=True)
            part = Path(folder) / f"{action}-{finish}.jsonl"
            try:
                await record(part, [(prompt, MCP_REPLIES), (blend, MCP_BLEND_REPLIES), (order, [MCP_ORDER, reply])],
                             tools=[server], options=RunOptions(elicit=elicit))
            finally:
                await server.aclose()
            lines += [line for line in part.read_text().splitlines() if line not in lines]
    (HERE / "mcp.cassette.jsonl").write_text("".join(line + "\n" for line in lines))


async def main() -> None:
    await record(HERE / "quickstart.cassette.jsonl", QUICKSTART)
    await record(HERE / "tools.cassette.jsonl", TOOLS, tools=[Calculator(), Clock(), word_count])
    for provider, model, delay, reply in COMPARE:
        await record(HERE / f"compare-{provider}.cassette.jsonl", [(COMPARE_PROMPT, [reply])],
                     driver=compare_driver(provider, model), chunk_delay=delay)
    for provider, model, reply in PROVIDERS:
        cls = create_driver_class(provider)
        await record(HERE / f"providers-{provider}.cassette.jsonl", [(PROVIDERS_PROMPT, [reply])],
                     driver=cls(model, api_key=None if provider == "ollama" else "not-a-real-key", provider=provider),
                     settings={"max_output_tokens": 300})  # the notebook runs each at --max-tokens 300
    await memory_cassette()
    context_cassette()
    await mcp_cassette()


if __name__ == "__main__":
    import sys

    # ``make_cassettes.py mcp`` writes only the MCP notebook's cassette
    asyncio.run(mcp_cassette() if sys.argv[1:] == ["mcp"] else main())
