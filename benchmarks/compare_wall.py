"""Compare: a ``%%compare`` of four providers takes as long as the slowest, not the sum.

Four simulated OpenAI-compatible providers on 127.0.0.1 (one server process) stream
the same reply with fixed, different latencies (events 10, 20, 30 and 40 ms apart).
In a terminal IPython shell, each is first run alone (``%%compare ID``), then all four
in one ``%%compare`` cell. Reported per round, median of ``--runs`` (5): each wall
time, the slowest single run, their sum, and ``compare / slowest`` (target <= 1.1).

Usage: python benchmarks/compare_wall.py [--quick] [--runs N]
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

from common import ByteServer, median, options, print_table, versions, write_json
from payloads import openai_text

DELAYS = (0.010, 0.020, 0.030, 0.040)  # seconds between events, one per provider
TARGET = 1.1


def main() -> int:
    args = options(__doc__.splitlines()[0], runs=5)
    events = 8 if args.quick else 25
    payload = openai_text(events - 4)  # head + deltas + finish + usage + [DONE]
    from IPython.terminal.interactiveshell import TerminalInteractiveShell

    shell = TerminalInteractiveShell.instance()
    shell.run_line_magic("load_ext", "ipyagent")
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        for n, delay in enumerate(DELAYS):
            Path(folder, f"p{n}").write_bytes(payload.body)
            Path(folder, f"p{n}.delay").write_text(str(delay))
        with ByteServer(Path(folder)) as server:
            os.environ["OPENAI_API_KEY"] = "sk-bench"
            os.environ["OPENAI_BASE_URL"] = f"{server.url}/v1"  # the model name picks the slow provider
            ids = [f"openai:p{n}" for n in range(len(DELAYS))]

            def cell(providers: list[str]) -> float:
                with contextlib.redirect_stdout(io.StringIO()):
                    t0 = time.perf_counter()
                    shell.run_cell_magic("compare", " ".join(providers) + " -o cmp", "Say something.")
                    comparison = shell.user_ns["cmp"]
                    wall = time.perf_counter() - t0
                assert all(f.ok for f in comparison.figures), [f.error for f in comparison.figures]
                assert all(f.result.text == payload.text for f in comparison.figures)
                return wall

            cell(ids)  # warm-up: imports, connections
            for _ in range(args.runs):
                alone = [cell([i]) for i in ids]
                together = cell(ids)
                rounds.append({"alone_s": alone, "compare_s": together, "slowest_s": max(alone), "sum_s": sum(alone),
                               "ratio": together / max(alone)})
    shell.run_line_magic("unload_ext", "ipyagent")
    result = {k: median([r[k] for r in rounds]) for k in ("compare_s", "slowest_s", "sum_s", "ratio")}
    alone = [median([r["alone_s"][n] for r in rounds]) for n in range(len(DELAYS))]
    rows = [[f"provider {n} alone ({int(d * 1000)} ms/event)", a, ""] for n, (d, a) in enumerate(zip(DELAYS, alone))]
    rows += [["sum of the four alone", result["sum_s"], f"{result['sum_s'] / result['slowest_s']:.2f}x"],
             ["%%compare of the four", result["compare_s"], f"{result['ratio']:.2f}x"]]
    print_table(f"Compare: wall time in seconds, median of {args.runs} rounds ({events} events per reply)",
                ["cell", "wall (s)", "vs slowest alone"], rows)
    print(f"\n%%compare / slowest single run = {result['ratio']:.3f} (target <= {TARGET})")
    write_json(args, "compare_wall", {"delays_s": DELAYS, "events": events, "rounds": rounds, "median": result,
                                       "target": TARGET, "meets_target": result["ratio"] <= TARGET,
                                       "versions": versions("ipyagent", "ipython")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
