"""The evaluation cache: each run keyed by its exact request, kept in the run store.

The key is a SHA-256 of the request the driver would send first (provider,
model, base URL, path and JSON body: messages, tools, output schema, settings),
plus what shapes the rest of the run (``max_steps``, the ReAct mode). Within an
evaluation only the prompt changes from cell to cell, so the request is built
once per provider around `PLACEHOLDER` (`request_key`), and each cell's key
hashes that digest with its prompt (`prompt_key`): as exact, and a cached
re-run of a thousand rows does not build a thousand requests. A run
that ended ``ok`` is a row of the store's ``runs`` table with that key, its
answer text and structured output in its metadata, so serving it needs one
indexed read and no request. The store is a file: the cache outlives the kernel.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ...core import PromptStack
from ...drivers import with_rule_instruction
from ...memory import RunStore, message_json

#: Finished runs written per transaction.
BATCH = 64
#: The user prompt of the request a provider's digest is built from.
PLACEHOLDER = "\x00ipyagent:prompt\x00"


def request_key(driver: Any, stack: PromptStack, extra: dict[str, Any]) -> str | None:
    """The cache key of a run whose first request is `stack` on `driver`; None when the
    driver refuses the request before sending (that run fails, and is not cached)."""
    try:
        driver.check_capabilities(stack)
        if driver.output_strategy(stack) == "rule":
            stack = with_rule_instruction(stack)
        path, body = driver.build_request(stack)
    except Exception:  # noqa: BLE001 - the run itself reports it
        return None
    doc = {"v": 1, "provider": driver.provider, "model": driver.model, "base_url": driver.base_url,
           "path": path, "body": body, **extra}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str, separators=(",", ":")).encode()).hexdigest()


def prompt_key(digest: str | None, prompt: str, repeat: int = 0) -> str | None:
    """The cache key of the `repeat`-th run (0-based) of the request `digest` stands for, with
    `prompt` as its user prompt (None when there is no digest: the driver refuses the request).
    Each repeat has its own key; the first's is the key of a run without repeats."""
    if digest is None:
        return None
    tail = f"\x00{repeat}" if repeat else ""
    return hashlib.sha256(f"{digest}\x00{prompt}{tail}".encode()).hexdigest()


def json_output(output: Any) -> Any:
    """A structured output as JSON data (a pydantic instance dumped)."""
    return output.model_dump(mode="json") if hasattr(output, "model_dump") else output


class CacheWriter:
    """Buffers finished runs and writes them to `store` `BATCH` at a time (and on `flush`).

    Never raises: a store that fails stops the writing and keeps the reason in `error`.
    """

    def __init__(self, store: RunStore | None, *, session: str | None = None) -> None:
        self.store, self.session = store, session
        self.pending: list[dict[str, Any]] = []
        self.error: str | None = None
        self.written = 0

    def add(self, *, key: str | None, provider: str, prompt: str, status: str, result: Any, figures: dict[str, Any],
            metadata: dict[str, Any]) -> None:
        """Queue one run: `result` an `AgentResult` (None: the run never started); `figures`
        duration_s, usage, cost, error; `metadata` what the cache serves back (text, output, ...)."""
        if self.store is None or self.error is not None:
            return
        name, _, model = provider.partition(":")
        nodes: list[dict[str, Any]] = []
        if result is not None:
            for message in result.messages:
                nodes.append({"kind": "message", "role": message.role, "data": message_json(message),
                              "provider": name if message.role == "assistant" else None})
        self.pending.append({"run": {"thread": "evaluation", "session": self.session, "provider": name, "model": model,
                                     "status": status, "prompt": prompt, "cache_key": key if status == "ok" else None,
                                     "metadata": metadata, **figures},
                             "nodes": nodes})
        if len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.pending or self.store is None or self.error is not None:
            return
        batch, self.pending = self.pending, []
        try:
            self.store.add_finished_runs(batch)
            self.written += len(batch)
        except Exception as exc:  # noqa: BLE001 - the store must never break the evaluation
            self.error = f"the run store stopped recording the evaluation: {type(exc).__name__}: {exc}"
