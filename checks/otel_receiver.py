"""Check ``%agent trace otlp`` against a real OTLP/HTTP receiver (not part of ``make test``).

A ``%%agent`` cell with a tool call runs against a local OpenAI-compatible stub server
(tests/support), traced to the receiver; ``%agent trace off`` flushes; then the script reads back
what the receiver stored and checks the GenAI semantic conventions' spans: ``invoke_agent`` with a
``chat`` child per model turn and an ``execute_tool`` child, their attributes, and an evaluation's
``evaluate`` spans with their ``gen_ai.evaluation.result`` events.

Receivers:

* Arize Phoenix (reads OTLP/HTTP at ``/v1/traces``, stores spans, serves them at
  ``/v1/projects/{project}/spans``). In a separate environment::

      python -m venv /tmp/phoenix && /tmp/phoenix/bin/pip install arize-phoenix
      PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=6006 PHOENIX_WORKING_DIR=/tmp/phoenix-data \\
          PHOENIX_TELEMETRY_ENABLED=false /tmp/phoenix/bin/phoenix serve

  then, from the repository root: ``.venv/bin/python checks/otel_receiver.py --phoenix http://127.0.0.1:6006``
  (the spans go to the project named by ``--project``, default ``ipyagent-check``).
* The minimal receiver of the test suite (protobuf decoded with ``opentelemetry-proto``):
  ``.venv/bin/python checks/otel_receiver.py``.

Exits 0 when every check holds, 1 naming the first that does not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from IPython.testing.globalipapp import start_ipython  # noqa: E402

import ipyagent  # noqa: E402
from tests.support.evaluation import answering, capital_of  # noqa: E402
from tests.support.otlp_receiver import OTLPReceiver  # noqa: E402
from tests.support.stub_server import StubServer, openai_text_reply, openai_tool_call_reply  # noqa: E402


def word_count(text: str) -> int:
    """Number of words in text."""
    return len(text.split())


def run_cells(endpoint: str, content: bool = False) -> None:
    """A traced ``%%agent`` cell with a tool call, and a traced 2 × 2 evaluation, then tracing off."""
    shell = start_ipython()
    shell.run_line_magic("load_ext", "ipyagent")
    shell.run_line_magic("agent", f"trace otlp {endpoint}" + (" --content" if content else ""))
    replies = [openai_tool_call_reply("word_count", {"text": "the quick brown fox"}, call_id="call_check"),
               openai_text_reply("It has 4 words.")]
    with StubServer(*replies) as server, StubServer(responder=answering(capital_of)) as capitals:
        shell.run_line_magic("provider", f"openai:check-model --base-url {server.url}/v1 --temperature 0.3")
        shell.user_ns["word_count"] = word_count
        shell.run_cell_magic("agent", "--tools word_count", "Count the words of: the quick brown fox")
        rows = [{"country": "France", "capital": "Paris"}, {"country": "Japan", "capital": "Tokyo"}]
        ipyagent.evaluate([ipyagent.Agent("openai:m1", base_url=capitals.url),
                           ipyagent.Agent("openai:m2", base_url=capitals.url)],
                          "Capital of {{ row.country }}?", rows, assertions=["contains:{{ row.capital }}"], store=False)
    shell.run_line_magic("agent", "trace off")  # flushes


def phoenix_spans(base: str, project: str, expected: int, wait_s: float = 30.0) -> list[dict[str, Any]]:
    """The spans Phoenix stored in `project` (its REST API), waiting up to `wait_s` for `expected` of them
    (Phoenix writes what it received in batches)."""
    deadline, spans = time.monotonic() + wait_s, []
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/v1/projects/{project}/spans?limit=1000") as reply:
                spans = json.load(reply)["data"]
        except urllib.error.HTTPError as exc:  # 404: the project is made when its first spans are written
            if exc.code != 404:
                raise
        if len(spans) >= expected:
            break
        time.sleep(0.5)
    return [{"name": s["name"], "id": s["context"]["span_id"], "parent": s.get("parent_id"),
             "attributes": _flat(s.get("attributes") or {}), "status": s.get("status_code"),
             "events": [{"name": e["name"], "attributes": _flat(e.get("attributes") or {})}
                        for e in s.get("events", [])]}
            for s in spans]


def _flat(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix nests dotted keys (``{"gen_ai": {"usage": ...}}``); the dotted names back."""
    flat: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def receiver_spans(receiver: OTLPReceiver) -> list[dict[str, Any]]:
    return [{"name": s["name"], "id": s["spanId"], "parent": s.get("parentSpanId"), "attributes": s["attributes"],
             "status": s.get("status", {}).get("code", "STATUS_CODE_UNSET"),
             "events": [{"name": e["name"], "attributes": _event_attributes(e)} for e in s.get("events", [])]}
            for s in receiver.spans]


def _event_attributes(event: dict[str, Any]) -> dict[str, Any]:
    from tests.support.otlp_receiver import attributes

    return attributes(event.get("attributes", []))


def check(spans: list[dict[str, Any]], content: bool = False) -> list[str]:
    """What does not hold of the stored spans (empty: all of it does)."""
    problems: list[str] = []

    def expect(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    names = sorted(s["name"] for s in spans)
    print(f"{len(spans)} spans: " + ", ".join(f"{n} ×{names.count(n)}" for n in sorted(set(names))))
    root = next((s for s in spans if s["name"] == "invoke_agent default"
                 and s["attributes"].get("gen_ai.request.model") == "check-model"), None)
    expect(root is not None, "an invoke_agent span of the %%agent cell")
    if root is None:
        return problems
    children = [s for s in spans if s["parent"] == root["id"]]
    expect(sorted(c["name"] for c in children) == ["chat check-model", "chat check-model", "execute_tool word_count"],
           f"invoke_agent's children are two chat spans and execute_tool: {[c['name'] for c in children]}")
    for span in [root, *children]:
        print(f"  {span['name']}: " + json.dumps(span["attributes"], sort_keys=True, default=str))
    chat = next((c for c in children if c["name"].startswith("chat")), {"attributes": {}})["attributes"]
    for key, value in {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                       "gen_ai.request.model": "check-model", "gen_ai.request.temperature": 0.3,
                       "server.address": "127.0.0.1"}.items():
        expect(chat.get(key) == value, f"chat {key} = {value!r} (stored: {chat.get(key)!r})")
    for key in ("gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                "gen_ai.response.finish_reasons", "server.port"):
        expect(key in chat, f"chat has {key}")
    tool = next((c for c in children if c["name"].startswith("execute_tool")), {"attributes": {}})["attributes"]
    expect(tool.get("gen_ai.tool.call.id") == "call_check" and tool.get("gen_ai.tool.name") == "word_count",
           f"execute_tool names the tool and its call id: {tool}")
    shown = any("quick brown" in json.dumps(s["attributes"], default=str) for s in spans)
    expect(shown if content else not shown, "message text with --content only")
    cells = [s for s in spans if s["name"].startswith("evaluate ")]
    expect(len(cells) == 4, f"one evaluate span per row × column: {len(cells)}")
    for cell in cells:
        events = [e for e in cell["events"] if e["name"] == "gen_ai.evaluation.result"]
        expect(len(events) == 1 and events[0]["attributes"].get("gen_ai.evaluation.score.label") == "pass",
               f"{cell['name']} has its check's result: {cell['events']}")
        expect(any(s["parent"] == cell["id"] and s["name"].startswith("invoke_agent") for s in spans),
               f"{cell['name']} has its run as a child")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phoenix", metavar="URL", help="a running Arize Phoenix (else the minimal receiver)")
    parser.add_argument("--project", default="ipyagent-check", help="Phoenix project the spans go to")
    parser.add_argument("--content", action="store_true", help="trace with --content (message text on spans)")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-check-not-a-real-key-0000")
    if args.phoenix:
        os.environ["OTEL_RESOURCE_ATTRIBUTES"] = f"openinference.project.name={args.project}"
        run_cells(args.phoenix.rstrip("/"), args.content)
        spans = phoenix_spans(args.phoenix.rstrip("/"), args.project, expected=17)
    else:
        with OTLPReceiver() as receiver:
            run_cells(receiver.url, args.content)
        spans = receiver_spans(receiver)
    problems = check(spans, args.content)
    for problem in problems:
        print(f"FAILED: {problem}")
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
