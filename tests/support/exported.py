"""An evaluation with everything an export must keep (issue 33): 2 models x 2 prompt variants x 2
repeats over rows of several field types, two checks, a failed run, a human grade; run in a test
and in a fresh process (tests/agent/test_evaluation_export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ipyagent import Agent, Evaluation, evaluate

from .evaluation import CAPITALS, last_user_text
from .stub_server import Reply, openai_text_reply

#: The rows: a field named like a record's own column (``status``), whole numbers, numbers, text
#: with a comma, quotes and a new line, a missing value; the second model fails on Peru's.
ROWS = [{**row, "status": "sovereign", "population": pop, "ratio": ratio, "note": note}
        for row, pop, ratio, note in zip(CAPITALS, (68, 125, 34), (0.5, 1.25, -3.0),
                                         ("a, \"quoted\"\nline", None, "plain"))]
#: What CSV cannot keep (JSONL and Parquet do): a field of several types, "" beside None.
MIXED = [{**row, "mixed": mixed, "empty": empty} for row, mixed, empty in zip(ROWS, (1, "x", 2.5), ("", None, "y"))]
PROMPTS = {"plain": "Capital of {{ row.country }}?", "terse": "Capital of {{ row.country }}? One word."}
CHECKS = ["contains:{{ row.capital }}", "regex:\\."]


def capital(body: dict[str, Any]) -> Reply:
    question = last_user_text(body)
    row = next(r for r in CAPITALS if r["country"] in question)
    return openai_text_reply(f"It is {row['capital']}" + ("." if "One word" not in question else ""), usage=(12, 4))


def failing_on_peru(body: dict[str, Any]) -> Reply:
    if "Peru" in last_user_text(body):
        return Reply(status=400, headers={"Content-Type": "application/json"},
                     pieces=[b'{"error": {"message": "bad row", "type": "invalid_request_error"}}'])
    return openai_text_reply("No idea", usage=(10, 2))


def run_matrix(store: Path | str, a: str, b: str, rows: list[dict[str, Any]] = ROWS) -> Evaluation:
    """2 models x 2 prompt variants x 2 repeats over `ROWS`, two checks, a human grade."""
    ev = evaluate([Agent("openai:m1", base_url=a), Agent("openai:m2", base_url=b)], None, rows, prompts=PROMPTS,
                  repeat=2, assertions=CHECKS, store=store, baseline="openai:m1/plain", name="cell-1")
    ev.grade(0, "openai:m1/terse", False, "one word, no full stop", repeat=1)
    return ev
