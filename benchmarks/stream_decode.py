"""Stream decode: time to the final message, on the same bytes, for each client.

A server on 127.0.0.1 (its own process) serves prepared streams as fast as it can:
an OpenAI Chat text stream of 5,000 and of 20,000 chunks, one tool call in 2,000
fragments, an Anthropic text stream of 5,000 deltas (`payloads.py`, stretched from
real recordings). Clients, each ending with the whole message:

* floor — raw httpx2 `EventSource` + `json.loads`, text joined at the end;
* ipyagent — our driver's `run()` (events, aggregation, the final `Message`);
* openai / anthropic SDK — `...stream(...)` with the SDK's accumulation (`get_final_*`);
  and, for reference, the same SDK's typed chunks from ``create(stream=True)`` joined by hand;
* litellm — `acompletion(stream=True)`, then `stream_chunk_builder`;
* pydantic-ai — `pydantic_ai.direct.model_request_stream` (one model request, no agent loop).

Runs are interleaved (round r times every client once), after one warm-up each;
the median of ``--runs`` (7) is reported with its ratio to the floor. Every client's
final text or arguments are checked against the prepared ones. A second table gives
the CPU time this process spent per run (the server is another process): on a machine
other work is using, wall time includes waiting for a core, CPU time does not, so its
ratios hold under load (the verdict still reads the wall-time ones).

``--instructions`` adds a third table: the instructions one run of the floor and of our
driver takes, counted by valgrind's callgrind in a process of its own (the count for
``1 + K`` runs less the count for one, over K), a figure other work on the machine does
not move; slow (valgrind runs the client some 50 times slower), so not run by default.

Usage: python benchmarks/stream_decode.py [--quick] [--runs N] [--instructions]
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from common import ByteServer, median, options, print_table, versions, write_json
from payloads import Payload, all_payloads

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price list at import
warnings.filterwarnings("ignore")

MODEL_OPENAI, MODEL_ANTHROPIC = "gpt-4o", "claude-3-opus-20240229"
MESSAGES = [{"role": "user", "content": "Say a lot."}]

Client = Callable[[], Awaitable[Any]]


def _final(payload: Payload, text: str | None, arguments: str | dict[str, Any] | None) -> None:
    if payload.arguments is not None:
        got = json.loads(arguments) if isinstance(arguments, str) else arguments
        assert got == payload.arguments, "tool arguments differ"
    else:
        assert text == payload.text, f"text differs ({len(text or '')} vs {len(payload.text)} chars)"


# -- clients: each returns an async function that does one full request -------------------------


async def floor(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    import httpx2

    client = httpx2.AsyncClient(timeout=60, trust_env=False)
    path = "/v1/chat/completions" if payload.protocol == "openai" else "/v1/messages"
    body = {"model": "m", "messages": MESSAGES, "stream": True}

    async def run() -> None:
        parts: list[str] = []
        arguments: list[str] = []
        async with client.stream("POST", url + path, json=body) as response:
            async for sse in httpx2.EventSource(response):
                data = sse.data
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if payload.protocol == "openai":
                    for choice in chunk["choices"]:
                        delta = choice["delta"]
                        if delta.get("content"):
                            parts.append(delta["content"])
                        for call in delta.get("tool_calls") or ():
                            arguments.append(call["function"].get("arguments") or "")
                elif chunk["type"] == "content_block_delta":
                    parts.append(chunk["delta"]["text"])
        _final(payload, "".join(parts), "".join(arguments) if arguments else None)

    return run, client.aclose


async def ipyagent(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    from ipyagent.core import PromptStack

    if payload.protocol == "openai":
        from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver as Driver

        driver = Driver(MODEL_OPENAI, base_url=url + "/v1", api_key="sk-bench", max_attempts=1)
    else:
        from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver as Driver  # type: ignore[assignment]

        driver = Driver(MODEL_ANTHROPIC, base_url=url + "/v1", api_key="sk-bench", max_attempts=1)
    stack = PromptStack()
    stack.add_user_message(MESSAGES[0]["content"])

    async def run() -> None:
        done = await driver.run(stack)
        calls = done.message.tool_calls
        _final(payload, done.message.text, calls[0].input if calls else None)

    return run, driver.close


async def sdk(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    if payload.protocol == "openai":
        import openai

        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        async def run() -> None:
            async with client.chat.completions.stream(model=MODEL_OPENAI, messages=MESSAGES) as stream:
                final = await stream.get_final_completion()
            message = final.choices[0].message
            _final(payload, message.content, message.tool_calls[0].function.arguments if message.tool_calls else None)

        return run, client.close
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-bench", max_retries=0)

    async def run_anthropic() -> None:
        async with client.messages.stream(model=MODEL_ANTHROPIC, max_tokens=1024, messages=MESSAGES) as stream:
            final = await stream.get_final_message()
        _final(payload, "".join(b.text for b in final.content if b.type == "text"), None)

    return run_anthropic, client.close


async def sdk_raw(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    """The SDK's typed chunks without its accumulator: ``create(stream=True)``, pieces joined here."""
    if payload.protocol == "openai":
        import openai

        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        async def run() -> None:
            parts, arguments = [], []
            async for chunk in await client.chat.completions.create(model=MODEL_OPENAI, messages=MESSAGES, stream=True):
                for choice in chunk.choices:
                    if choice.delta.content:
                        parts.append(choice.delta.content)
                    for call in choice.delta.tool_calls or ():
                        arguments.append(call.function.arguments or "")
            _final(payload, "".join(parts), "".join(arguments) if arguments else None)

        return run, client.close
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-bench", max_retries=0)

    async def run_anthropic() -> None:
        parts = []
        async for event in await client.messages.create(
            model=MODEL_ANTHROPIC, max_tokens=1024, messages=MESSAGES, stream=True
        ):
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                parts.append(event.delta.text)
        _final(payload, "".join(parts), None)

    return run_anthropic, client.close


async def litellm_client(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    if payload.protocol == "openai":
        target = {"model": f"openai/{MODEL_OPENAI}", "api_base": url + "/v1"}
    else:
        target = {"model": f"anthropic/{MODEL_ANTHROPIC}", "api_base": url, "max_tokens": 1024}

    async def run() -> None:
        response = await litellm.acompletion(messages=MESSAGES, stream=True, api_key="sk-bench", **target)
        chunks = [chunk async for chunk in response]
        message = litellm.stream_chunk_builder(chunks, messages=MESSAGES).choices[0].message
        _final(payload, message.content, message.tool_calls[0].function.arguments if message.tool_calls else None)

    async def close() -> None:
        pass

    return run, close


async def pydantic_ai(url: str, payload: Payload) -> tuple[Client, Callable[[], Awaitable[None]]]:
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart

    if payload.protocol == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model: Any = OpenAIChatModel(MODEL_OPENAI, provider=OpenAIProvider(base_url=url + "/v1", api_key="sk-bench"))
    else:
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        model = AnthropicModel(MODEL_ANTHROPIC, provider=AnthropicProvider(base_url=url, api_key="sk-bench"))

    async def run() -> None:
        async with model_request_stream(model, [ModelRequest.user_text_prompt(MESSAGES[0]["content"])]) as stream:
            async for _ in stream:
                pass
            response = stream.get()
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        _final(payload, text, calls[0].args if calls else None)

    async def close() -> None:
        pass

    return run, close


CLIENTS: dict[str, tuple[Callable[..., Awaitable[Any]], str | None]] = {
    "floor (httpx2 EventSource + json.loads)": (floor, None),
    "ipyagent driver run()": (ipyagent, None),
    "official SDK (openai / anthropic)": (sdk, "openai"),
    "  same SDK, typed chunks, no accumulator": (sdk_raw, "openai"),
    "litellm acompletion(stream=True)": (litellm_client, "litellm"),
    "pydantic-ai model_request_stream": (pydantic_ai, "pydantic_ai"),
}


async def measure(url: str, payload: Payload, runs: int) -> dict[str, dict[str, Any]]:
    ready: dict[str, tuple[Client, Any]] = {}
    results: dict[str, dict[str, Any]] = {}
    for name, (make, module) in CLIENTS.items():
        try:
            if module:
                __import__(module)
            run, close = await make(f"{url}/{payload.name}", payload)
            await run()  # warm-up: imports, connection, caches; also checks the final message
            ready[name] = (run, close)
            results[name] = {"times": [], "cpu": []}
        except ImportError as exc:
            results[name] = {"skipped": f"not installed ({exc.name}); make bench installs the bench extra"}
        except Exception as exc:  # noqa: BLE001 - one peer failing must not stop the benchmark
            results[name] = {"skipped": f"{type(exc).__name__}: {str(exc)[:160]}"}
    for _ in range(runs):
        for name, (run, _) in ready.items():
            t0, c0 = time.perf_counter(), time.process_time()
            await run()
            results[name]["times"].append(time.perf_counter() - t0)
            results[name]["cpu"].append(time.process_time() - c0)
    for run, close in ready.values():
        await close()
    floor = results[next(iter(CLIENTS))]
    base, base_cpu = median(floor["times"]), median(floor["cpu"])
    for entry in results.values():
        if "times" in entry:
            entry["median_s"] = median(entry["times"])
            entry["ratio"] = entry["median_s"] / base
            entry["median_cpu_s"] = median(entry["cpu"])
            entry["cpu_ratio"] = entry["median_cpu_s"] / base_cpu
    return results


#: The clients `--instructions` counts.
COUNTED: dict[str, Callable[..., Awaitable[Any]]] = {"floor": floor, "ipyagent": ipyagent}
#: Runs counted past the first (the first, with the warm-up, start-up and imports, is subtracted).
COUNTED_RUNS = 4


def _child(client: str, pickled: str, reps: int) -> None:
    """One client's warm-up and `reps` runs on the payload pickled at `pickled` (run under
    callgrind by `_count`; the server is a process of its own, not counted)."""
    payload: Payload = pickle.loads(Path(pickled).read_bytes())
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, payload.name).write_bytes(payload.body)
        with ByteServer(Path(folder)) as server:
            async def main() -> None:
                run, close = await COUNTED[client](f"{server.url}/{payload.name}", payload)
                for _ in range(1 + reps):
                    await run()
                await close()

            asyncio.run(main())


def _count(client: str, pickled: Path, reps: int) -> int:
    """Instructions of a process that runs `client` 1 + `reps` times, counted by callgrind."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
                           "--child", client, str(pickled), str(reps)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise RuntimeError(f"callgrind run of {client} failed: {done.stderr[-500:]}")
    return int(found.group(1))


def instructions(payloads: list[Payload]) -> dict[str, dict[str, float]]:
    """Per payload: the instructions one run of each `COUNTED` client takes, and ours over the floor's."""
    table: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for payload in payloads:
            pickled = Path(folder, payload.name)
            pickled.write_bytes(pickle.dumps(payload))
            per_run = {
                c: (_count(c, pickled, 1 + COUNTED_RUNS) - _count(c, pickled, 1)) / COUNTED_RUNS for c in COUNTED
            }
            table[payload.name] = {**per_run, "ratio": per_run["ipyagent"] / per_run["floor"]}
    return table


def main() -> int:
    args = options(
        __doc__.splitlines()[0], flags=[("--instructions", "also count instructions per run with callgrind (slow)")]
    )
    if args.instructions and not shutil.which("valgrind"):
        print("--instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    payloads = all_payloads(args.quick)
    table: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for p in payloads:
            Path(folder, p.name).write_bytes(p.body)
        with ByteServer(Path(folder)) as server:
            for payload in payloads:
                table[payload.name] = asyncio.run(measure(server.url, payload, args.runs))
    for kind, (value, ratio), title in [
        (
            "wall",
            ("median_s", "ratio"),
            f"Stream decode: median of {args.runs} runs to the final message, and ratio to the floor",
        ),
        ("cpu", ("median_cpu_s", "cpu_ratio"), "CPU time of this process per run (median), and ratio to the floor's"),
    ]:
        rows = []
        for name in CLIENTS:
            row: list[Any] = [name]
            for payload in payloads:
                entry = table[payload.name][name]
                row.append(f"{entry[value] * 1000:.1f} ms  {entry[ratio]:.2f}x" if "times" in entry else "skipped")
            rows.append(row)
        print_table(title, ["client", *(p.name for p in payloads)], rows)
        print()
    for name in CLIENTS:
        skipped = {p.name: table[p.name][name]["skipped"] for p in payloads if "skipped" in table[p.name][name]}
        for payload_name, reason in skipped.items():
            print(f"  {name} on {payload_name}: skipped: {reason}")
    ours = [table[p.name]["ipyagent driver run()"]["ratio"] for p in payloads]
    peers = [table[p.name][n]["ratio"] for p in payloads for n in list(CLIENTS)[2:] if "ratio" in table[p.name][n]]
    verdict = {"max_ratio_ipyagent": max(ours), "target_ratio": 1.3, "meets_target": max(ours) <= 1.3,
               "max_cpu_ratio_ipyagent": max(table[p.name]["ipyagent driver run()"]["cpu_ratio"] for p in payloads),
               "below_every_peer": all(
                   table[p.name]["ipyagent driver run()"]["median_s"] < table[p.name][n]["median_s"]
                   for p in payloads for n in list(CLIENTS)[2:] if "median_s" in table[p.name][n])}
    print(
        f"ipyagent: at most {max(ours):.2f}x the floor (target 1.3x), {verdict['max_cpu_ratio_ipyagent']:.2f}x its "
        "CPU time; "
        f"below every peer: {verdict['below_every_peer']}" + (f"; fastest peer {min(peers):.2f}x" if peers else "")
    )
    counted = instructions(payloads) if args.instructions else None
    if counted is not None:
        print_table(
            f"Instructions per run (callgrind, {COUNTED_RUNS} runs counted past the first), and ratio to the floor's",
            ["client", *(p.name for p in payloads)],
            [
                [
                    name,
                    *(
                        f"{counted[p.name][name] / 1e6:.1f} M"
                        + (f"  {counted[p.name]['ratio']:.3f}x" if name != "floor" else "")
                        for p in payloads
                    ),
                ]
                for name in COUNTED
            ],
        )
        verdict["max_instruction_ratio_ipyagent"] = max(entry["ratio"] for entry in counted.values())
        print(f"ipyagent: at most {verdict['max_instruction_ratio_ipyagent']:.3f}x the floor's instructions")
    write_json(
        args,
        "stream_decode",
        {
            "payloads": {p.name: {"deltas": p.deltas, "bytes": len(p.body)} for p in payloads},
            "results": table,
            "verdict": verdict,
            "instructions": counted,
            "versions": versions("ipyagent", "httpx2", "openai", "anthropic", "litellm", "pydantic-ai-slim"),
        },
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
