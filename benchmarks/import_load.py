"""Import and load: what a user waits for before the first cell runs.

Each figure is the median over fresh processes (``--runs``, default 7) of the time
measured inside the process around one statement, so the interpreter's own
start-up is not counted (it is reported once, as ``python -c pass``): the wall-clock
time, and the CPU time of the process (``time.process_time``), which a loaded machine
disturbs much less than the wall clock:

* ``import ipyagent``;
* ``%load_ext ipyagent`` in a terminal IPython shell (`TerminalInteractiveShell`,
  what ``ipython`` runs; the shell's own start-up not counted). It only declares the
  magics; the package behind them loads when one is first used, so that is reported
  too: ``%load_ext`` then the first line magic (``%provider openai:m``), and ``%load_ext``
  then the first ``%%agent`` run, streamed from a local server on 127.0.0.1 serving the
  recorded OpenAI stream ``openai-chat/stream-text-include-usage.sse`` (a `ByteServer`);
* the peers a user would otherwise load: ``import litellm``, ``import openai``,
  ``import pydantic_ai``, and the OpenAI SDK's first streamed request to the same server
  (``import openai`` and one ``chat.completions.create(stream=True)`` read to its end); a
  peer that is not installed is skipped with the reason;
* the floor of the first ``%%agent``, what the libraries it is built on take before any of
  ipyagent runs: ``import httpx2``, ``from pydantic import BaseModel`` (``import pydantic``
  alone loads none of its model machinery) and one ``httpx2.AsyncClient()`` (its TLS context);
  and a bare client of the same libraries answering the same first request (the floor, one
  pydantic model built, the reply streamed from the same server, read line by line and decoded).
  The first magics' CPU time is printed as a ratio of the floor and in seconds above the bare
  client: that difference is ipyagent's own.

Each figure is printed beside two baselines measured in the same run (ratios): ``import
ipyagent``, and a bare IPython magic, the first one of IPython's own extension (``%load_ext
autoreload``, then ``%autoreload 2``); the first magics also beside issue 29's 0.243 s (a
quiet machine, before the first magic was made lighter). The processes write and read bytecode caches as a user's do
(``PYTHONDONTWRITEBYTECODE`` is dropped from their environment: without the caches every
process compiles the package again, which a user never waits for).

Target: under 0.15 s for ``import ipyagent``, ``%load_ext`` and each first magic.

Usage: python benchmarks/import_load.py [--quick] [--runs N]
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time

from common import FIXTURES, ByteServer, median, options, print_table, versions, write_json

TARGET_S = 0.15
#: The first magic of a session when issue 29 was filed (a quiet machine), for the record.
ISSUE_29_S = 0.243
#: The recorded stream the local server answers with (its name is the model's).
STREAM = "stream-text-include-usage.sse"

TIMED = """
import time, sys
{setup}
c0, t0 = time.process_time(), time.perf_counter()
{statement}
sys.stdout.write("\\n" + repr((time.perf_counter() - t0, time.process_time() - c0)))
"""
SHELL = ("from IPython.terminal.interactiveshell import TerminalInteractiveShell\n"
         "shell = TerminalInteractiveShell.instance()")

BARE_MAGIC = "a bare IPython magic (%load_ext autoreload, %autoreload 2)"
FLOOR = "floor: import httpx2 and pydantic's BaseModel, make an AsyncClient"
BARE_CLIENT = "floor: a bare httpx2 + pydantic client's first streamed reply (local server)"
#: What any client made of the same libraries pays for the first reply: the imports, a client (its TLS
#: context), one streamed request read line by line and decoded, one pydantic model built (pydantic's
#: one-offs at the first model: its plug-in scan over the installed packages' entry points, and the
#: signature of a ``default_factory=list`` read through `inspect`).
BARE_CLIENT_CODE = (
    "import asyncio, json\n"
    "import httpx2\n"
    "from pydantic import BaseModel, Field\n"
    "class Reply(BaseModel):\n"
    "    text: str = ''\n"
    "    events: list[dict] = Field(default_factory=list)\n"
    "async def first() -> Reply:\n"
    "    reply = Reply()\n"
    "    async with httpx2.AsyncClient() as client:\n"
    "        body = {{'model': '" + STREAM + "', 'stream': True, 'messages': [{{'role': 'user', 'content': 'Hi'}}]}}\n"
    "        async with client.stream('POST', '{url}/v1/chat/completions', json=body) as response:\n"
    "            async for line in response.aiter_lines():\n"
    "                if line.startswith('data: {{'):\n"
    "                    event = json.loads(line[6:])\n"
    "                    reply.events.append(event)\n"
    "                    reply.text += ''.join(c['delta'].get('content') or '' for c in event.get('choices', []))\n"
    "    return reply\n"
    "assert asyncio.run(first()).text\n"
)
FIRST_MAGIC = "%load_ext, then the first magic (%provider openai:m)"
FIRST_RUN = "%load_ext, then the first %%agent run (local server)"
#: name -> (set-up, timed statement); ``{url}`` is the local server's.
CASES: dict[str, tuple[str, str]] = {
    "import ipyagent": ("", "import ipyagent"),
    FLOOR: ("", "import httpx2\nfrom pydantic import BaseModel\nhttpx2.AsyncClient()"),
    BARE_CLIENT: ("", BARE_CLIENT_CODE),
    BARE_MAGIC: (SHELL, "shell.run_line_magic('load_ext', 'autoreload'); shell.run_line_magic('autoreload', '2')"),
    "%load_ext ipyagent (IPython shell)": (SHELL, "shell.run_line_magic('load_ext', 'ipyagent')"),
    FIRST_MAGIC: (SHELL, "shell.run_line_magic('load_ext', 'ipyagent'); shell.run_line_magic('provider', 'openai:m')"),
    FIRST_RUN: (SHELL, "shell.run_line_magic('load_ext', 'ipyagent'); "
                       f"shell.run_line_magic('provider', 'openai:{STREAM} --base-url {{url}}/v1'); "
                       "shell.run_cell_magic('agent', '', 'Say hello.')"),
    "import litellm": ("", "import litellm"),
    "import openai": ("", "import openai"),
    "import pydantic_ai": ("", "import pydantic_ai"),
    "openai SDK: import, first streamed request (local server)": (
        "", "import openai\n"
            "client = openai.OpenAI(base_url='{url}/v1', api_key='none', max_retries=0)\n"
            f"for _ in client.chat.completions.create(model='{STREAM}', stream=True, "
            "messages=[{{'role': 'user', 'content': 'Say hello.'}}]): pass"),
}
OURS = ("import ipyagent", "%load_ext ipyagent (IPython shell)", FIRST_MAGIC, FIRST_RUN)
FIRST = (FIRST_MAGIC, FIRST_RUN)


def once(setup: str, statement: str, url: str) -> tuple[float, float]:
    """(wall, CPU) seconds `statement` took in a fresh process, after `setup`; RuntimeError: it failed."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-benchmark"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = TIMED.format(setup=setup, statement=statement.format(url=url))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(last[:200])
    wall, cpu = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return wall, cpu


def main() -> int:
    args = options(__doc__.splitlines()[0])
    if args.quick:
        args.runs = 1
    bare = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
    results: dict[str, dict[str, object]] = {}
    with ByteServer(FIXTURES / "openai-chat") as server:
        for name, (setup, statement) in CASES.items():
            try:
                once(setup, statement, server.url)  # warm the file-system and bytecode caches
                measured = [once(setup, statement, server.url) for _ in range(args.runs)]
                times, cpu = [m[0] for m in measured], [m[1] for m in measured]
                results[name] = {"times": times, "median_s": median(times), "cpu": cpu, "median_cpu_s": median(cpu)}
            except RuntimeError as exc:
                results[name] = {"skipped": str(exc)}
    print_table(f"Import and load: median of {args.runs} fresh processes, seconds "
                f"(python -c pass: {median(bare):.3f} s; "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
                ["statement", "wall (s)", "CPU (s)", "vs import ipyagent", "vs bare magic", f"vs {ISSUE_29_S} s",
                 f"< {TARGET_S} s", "CPU vs floor", "CPU above bare client (s)"],
                _rows(results))
    write_json(
        args,
        "import_load",
        {
            "python_startup_s": median(bare),
            "results": results,
            "target_s": TARGET_S,
            "issue_29_s": ISSUE_29_S,
            "load_average": os.getloadavg(),
            "floor_cpu_s": results[FLOOR].get("median_cpu_s"),
            "bare_client_cpu_s": results[BARE_CLIENT].get("median_cpu_s"),
            "meets_target": all(results[n].get("median_s", 1e9) < TARGET_S for n in OURS),
            "versions": versions("ipyagent", "ipython", "litellm", "openai", "pydantic-ai-slim"),
        },
    )
    return 0


def _ratio(value: float, base: object) -> str:
    return f"{value / base:.1f}x" if isinstance(base, float) and base > 0 else "—"


def _rows(results: dict[str, dict[str, object]]) -> list[list[object]]:
    """The table: each median (wall and CPU), its ratios to ``import ipyagent`` and to a bare IPython
    magic (wall), and (first magics) to issue 29's figure and the target; for the first magics and
    the floors, the CPU time as a ratio of the floor (`FLOOR`) and above a bare client's first reply
    (`BARE_CLIENT`): the part that is ipyagent's."""
    base = results["import ipyagent"].get("median_s")
    magic = results[BARE_MAGIC].get("median_s")
    floor, client = results[FLOOR].get("median_cpu_s"), results[BARE_CLIENT].get("median_cpu_s")
    rows = []
    for name, entry in results.items():
        value = entry.get("median_s")
        if not isinstance(value, float):
            rows.append([name, None, None, "—", "—", "", f"skipped: {entry['skipped']}", "", ""])
            continue
        target = ("yes" if value < TARGET_S else "NO") if name in OURS else ""
        before = f"{value / ISSUE_29_S:.2f}x" if name in FIRST else ""
        cpu = entry["median_cpu_s"]
        assert isinstance(cpu, float)
        floors = ["", ""]
        if name in FIRST or name.startswith("floor"):
            above = cpu - client if isinstance(client, float) else None
            floors = [_ratio(cpu, floor), f"{above:+.3f}" if above is not None else "—"]
        rows.append([name, value, cpu, _ratio(value, base), _ratio(value, magic), before, target, *floors])
    return rows


if __name__ == "__main__":
    sys.exit(main())
