"""Writes the cassettes notebooks/workspace.ipynb replays when no API key is set.

The notebook runs in a kernel against a local server on 127.0.0.1 that answers each request with
a stream written to the provider's documented shape (the builders in
``tests/support/server_tool_streams.py``, which the driver tests check against the openai SDK's
event models): an OpenAI Responses web search with ``url_citation`` annotations, and a Gemini code
execution that draws a chart, and an OpenAI Chat agent given the notebook's tools (``%%agent
--notebook``): it lists the cells, adds one at the end, runs it (both pre-approved: no one clicks
Approve in a run without a browser), and answers with what the cell printed, read from the tool
result in its request. The requests the kernel really sent are written with those answers, so a
replay matches them byte for byte.

Run from the repo root: ``.venv/bin/python notebooks/make_workspace_cassettes.py``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # the stream builders the tests check

from tests.support.server_tool_streams import gemini_code_execution, responses_web_search, sse  # noqa: E402
from tests.support.stub_server import openai_text_reply, openai_tool_call_reply  # noqa: E402

SEARCH_PIECES = ["Spain won Euro 2024", ", beating England 2–1 in the final. ",
                 "The final was played at the Olympiastadion in Berlin on 14 July 2024."]
_TEXT = "".join(SEARCH_PIECES)
_FINAL = "The final was played at the Olympiastadion in Berlin on 14 July 2024."
#: (start, end, url, title) of each cited span of the answer (``url_citation``: character offsets).
SEARCH_CITED = [
    (0, len("Spain won Euro 2024"), "https://www.uefa.com/euro2024/news/spain-england-final-report",
     "Spain 2-1 England: final report"),
    (_TEXT.index(_FINAL), _TEXT.index(_FINAL) + len(_FINAL),
     "https://en.wikipedia.org/wiki/UEFA_Euro_2024_final", "UEFA Euro 2024 final - Wikipedia"),
]
CODE = ("import matplotlib.pyplot as plt\n\nsquares = [n * n for n in range(1, 11)]\n"
        "plt.bar(range(1, 11), squares)\nplt.title('The first ten squares')\nplt.show()\nprint(sum(squares))")
CODE_ANSWER = ["The first ten square numbers are 1, 4, 9, …, 100; ",
               "their sum is **385**. The chart shows them as bars."]


def chart() -> str:
    """The chart the code draws, as base64 PNG: matplotlib runs it here (the same bytes every time)."""
    import base64
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(4, 2.4), dpi=72)
    axes.bar(range(1, 11), [n * n for n in range(1, 11)], color="#4c72b0")
    axes.set_title("The first ten squares")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None}, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


#: The cell the agent adds and runs: what the search answer above cited, read from its result.
NEW_CELL = ('sites = sorted({c.url.split("/")[2] for c in found.citations})\n'
            'print(len(found.citations), "sources:", ", ".join(sites))')


def agent_reply(body: dict[str, Any]) -> bytes:
    """The agent's next step (OpenAI Chat stream, the recorded fixture's chunk shape), from the
    tool results its request holds: list the cells, add one at the end, run it, then answer."""
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if not results:
        reply = openai_tool_call_reply("notebook_list_cells", {}, call_id="call_list")
    elif len(results) == 1:  # "N cells (...):" -> the end is index N
        end = int(results[0].split(" ", 1)[0])
        reply = openai_tool_call_reply("notebook_insert_cell", {"index": end, "source": NEW_CELL}, call_id="call_add")
    elif len(results) == 2:  # "inserted cell N (code)"
        added = int(results[1].split()[2])
        reply = openai_tool_call_reply("notebook_run_cell", {"index": added}, call_id="call_run")
    else:
        head, printed = results[2].split("\n", 1)[0], results[2].split("outputs:\n", 1)[1].strip()
        reply = openai_text_reply(f"I added {head.split(' (')[0]} at the end of the notebook and ran it. It printed "
                                  f"`{printed}`: the web search answer above rests on those pages.", piece=16)
    raw = b"".join(reply.pieces)
    return raw.replace(b'"model": "gpt-4o-2024-08-06"', b'"model": "gpt-6-luna"')


def replies(path: str, body: dict[str, Any]) -> bytes:
    if path.endswith("/chat/completions"):
        return agent_reply(body)
    if path.endswith("/responses"):
        events = responses_web_search("gpt-6-luna", "Euro 2024 final winner venue", [c[2] for c in SEARCH_CITED],
                                      SEARCH_PIECES, SEARCH_CITED)
        return sse(events)
    chunks = gemini_code_execution(CODE, "385\n", CODE_ANSWER, chart=chart())
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def main() -> None:
    import nbformat
    from nbclient import NotebookClient

    exchanges: dict[str, list[dict[str, Any]]] = {"search": [], "code": [], "agent": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            content = replies(self.path, body)
            gemini = "streamGenerateContent" in self.path
            part = "code" if gemini else "agent" if self.path.endswith("/chat/completions") else "search"
            base = "https://generativelanguage.googleapis.com/v1beta" if gemini else "https://api.openai.com/v1"
            real = base + self.path.removeprefix("/v1beta").removeprefix("/v1")  # the provider's own URL
            provider = {"code": "gemini", "agent": "openai", "search": "openai-responses"}[part]
            entry = {"provider": provider, "model": "gemini-3.8-flash" if gemini else "gpt-6-luna", "base_url": base,
                     "request": {"method": "POST", "url": real, "body": body},
                     "response": {"status": 200, "headers": {"content-type": "text/event-stream; charset=utf-8"},
                                  "body": content.decode()}, "chunk_delay": 0.02}
            exchanges[part].append(entry)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GEMINI_BASE_URL",
                                            "IPYAGENT_RUN_STORE")}
    os.environ.update(OPENAI_API_KEY="sk-not-a-real-key", OPENAI_BASE_URL=f"{url}/v1", GEMINI_API_KEY="not-a-real-key",
                      GEMINI_BASE_URL=f"{url}/v1beta", IPYAGENT_RUN_STORE="off")
    try:
        nb = nbformat.read(HERE / "workspace.ipynb", as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    finally:
        server.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    for name, entries in exchanges.items():
        assert len(entries) == (4 if name == "agent" else 1), f"{name}: {len(entries)} requests"
        path = HERE / f"workspace-{name}.cassette.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in entries))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
