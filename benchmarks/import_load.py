"""Import and load: what a user waits for before the first cell runs.

Each figure is the median over fresh processes (``--runs``, default 7) of the time
measured inside the process around one statement, so the interpreter's own
start-up is not counted (it is reported once, as ``python -c pass``):

* ``import ipyagent``;
* ``%load_ext ipyagent`` in a terminal IPython shell (`TerminalInteractiveShell`,
  what ``ipython`` runs; the shell's own start-up not counted). It only declares the
  magics; the package behind them loads when one is first used, so that is reported
  too (``%load_ext`` and a first ``%provider``: no target, for the record);
* ``import litellm``, ``import openai``, ``import pydantic_ai``, the peers a user
  would otherwise load (a peer that is not installed is skipped with the reason).

Target: under 0.15 s for both of ours.

Usage: python benchmarks/import_load.py [--quick] [--runs N]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from common import median, options, print_table, versions, write_json

TARGET_S = 0.15

TIMED = """
import time, sys
{setup}
t0 = time.perf_counter()
{statement}
sys.stdout.write(repr(time.perf_counter() - t0))
"""

CASES: dict[str, tuple[str, str]] = {
    "import ipyagent": ("", "import ipyagent"),
    "%load_ext ipyagent (IPython shell)": (
        "from IPython.terminal.interactiveshell import TerminalInteractiveShell\n"
        "shell = TerminalInteractiveShell.instance()",
        "shell.run_line_magic('load_ext', 'ipyagent')"),
    "%load_ext, then the first magic (%provider)": (
        "from IPython.terminal.interactiveshell import TerminalInteractiveShell\n"
        "shell = TerminalInteractiveShell.instance()",
        "shell.run_line_magic('load_ext', 'ipyagent'); shell.run_line_magic('provider', '')"),
    "import litellm": ("", "import litellm"),
    "import openai": ("", "import openai"),
    "import pydantic_ai": ("", "import pydantic_ai"),
}
OURS = ("import ipyagent", "%load_ext ipyagent (IPython shell)")


def once(setup: str, statement: str) -> float:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", TIMED.format(setup=setup, statement=statement)], capture_output=True,
                          text=True, env=env, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(last[:200])
    return float(done.stdout.strip().splitlines()[-1])


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
    for name, (setup, statement) in CASES.items():
        try:
            if not args.quick:
                once(setup, statement)  # warm the file-system cache
            times = [once(setup, statement) for _ in range(args.runs)]
            results[name] = {"times": times, "median_s": median(times)}
        except RuntimeError as exc:
            results[name] = {"skipped": str(exc)}
    base = results["import ipyagent"].get("median_s")
    rows = []
    for name, entry in results.items():
        if "median_s" in entry:
            target = ("yes" if entry["median_s"] < TARGET_S else "NO") if name in OURS else ""
            rows.append([name, entry["median_s"], f"{entry['median_s'] / base:.1f}x" if base else "—", target])
        else:
            rows.append([name, None, "—", f"skipped: {entry['skipped']}"])
    print_table(f"Import and load: median of {args.runs} fresh processes, seconds (python -c pass: {median(bare):.3f} s)",
                ["statement", "median (s)", "vs import ipyagent", f"< {TARGET_S} s"], rows)
    write_json(args, "import_load", {"python_startup_s": median(bare), "results": results, "target_s": TARGET_S,
                                      "meets_target": all(results[n].get("median_s", 1e9) < TARGET_S for n in OURS),
                                      "versions": versions("ipyagent", "ipython", "litellm", "openai", "pydantic-ai-slim")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
