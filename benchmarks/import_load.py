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
  peer that is not installed is skipped with the reason.

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
FIRST_MAGIC = "%load_ext, then the first magic (%provider openai:m)"
FIRST_RUN = "%load_ext, then the first %%agent run (local server)"
#: name -> (set-up, timed statement); ``{url}`` is the local server's.
CASES: dict[str, tuple[str, str]] = {
    "import ipyagent": ("", "import ipyagent"),
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
                 f"< {TARGET_S} s"],
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
            "meets_target": all(results[n].get("median_s", 1e9) < TARGET_S for n in OURS),
            "versions": versions("ipyagent", "ipython", "litellm", "openai", "pydantic-ai-slim"),
        },
    )
    return 0


def _ratio(value: float, base: object) -> str:
    return f"{value / base:.1f}x" if isinstance(base, float) and base > 0 else "—"


def _rows(results: dict[str, dict[str, object]]) -> list[list[object]]:
    """The table: each median (wall and CPU), its ratios to ``import ipyagent`` and to a bare IPython
    magic (wall), and (first magics) to issue 29's figure and the target."""
    base = results["import ipyagent"].get("median_s")
    magic = results[BARE_MAGIC].get("median_s")
    rows = []
    for name, entry in results.items():
        value = entry.get("median_s")
        if not isinstance(value, float):
            rows.append([name, None, None, "—", "—", "", f"skipped: {entry['skipped']}"])
            continue
        target = ("yes" if value < TARGET_S else "NO") if name in OURS else ""
        before = f"{value / ISSUE_29_S:.2f}x" if name in FIRST else ""
        rows.append([name, value, entry["median_cpu_s"], _ratio(value, base), _ratio(value, magic), before, target])
    return rows


if __name__ == "__main__":
    sys.exit(main())
