"""The kernel's side of `evaluate_matrix`: one evaluation through the Python API and the same one
through ``%%compare --over`` in one IPython kernel (nbclient), its CPU, wall time and saved output.

Both evaluations run in the same kernel, one after the other, against the same server, each with a
run store of its own (nothing served from a cache), and with the same settings: the API's run
passes the row values through the context rule (``redact_context=True``) as the magic does by
default (``%agent settings redact_context``), so both do the same work per run; the API's evaluation
is let go before the magic's runs, so neither's garbage collector walks the other's results. The kernel reads
its own CPU (``os.times``, every thread: the loop that sends, the kernel's I/O threads that carry
the view's frames) and wall time around each cell; the magic's cell is then saved as nbformat
writes it (its display output and widget state).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The cell's checks, as the API and the magic take them.
CHECKS = ("contains:{{ row.id }}", "icontains:the")
TEMPLATE = "Answer briefly. {{ row.question }}"
#: The round: the local server's 0.05 s, 8 runs in flight per provider (its ideal: rows / 8 x 0.05 s).
WAIT_S, CONCURRENCY = 0.05, 8
#: The round runs this many times in one kernel, the API and the magic in turn (A/B/A/B), and the verdict reads
#: each figure's median: one round of the same code read the API's CPU per run 1.87 and 2.30 ms, and magic / API
#: 0.86-1.21. Five rounds of 2,000 rows take about the time one of 10,000 did (the saved output is capped near
#: 1 MB at either size).
REPEATS, ROWS_SHARE = 5, 0.2
#: The fewest rows a round takes unless the run has fewer: the magic's end (its saved output, 0.14-0.24 s of the
#: kernel's main thread, about the same at 100 rows as at 1,000) would weigh on its CPU per run in short rounds.
ROUND_ROWS_LEAST = 1_000

_SETUP = """\
import gc, json, os, time
os.environ["OPENAI_API_KEY"] = "sk-bench"
os.environ["OPENAI_BASE_URL"] = {base!r}
os.environ["IPYAGENT_RUN_STORE"] = {magic_store!r}
%load_ext ipyagent
import ipyagent
rows = [{{"id": n, "question": f"What is {{n}} + {{n}}?"}} for n in range({rows})]
warm = rows[:2]
ipyagent.evaluate({ids!r}, "warm-up {{{{ row }}}}", ["a"], store={warm_store!r})
ok_api, ok_magic = [], []
"""
#: What the kernel reads around each evaluation, beside its CPU (`os.times`) and wall time: the ipyagent loop
#: thread's time on a core and waiting for one (Linux's schedstat; None elsewhere: the machine's load, which a
#: wall time measured on a busy machine includes), the garbage collector's time and collections, the server's
#: CPU, and the machine's busy and stolen CPU (``/proc/stat``: what other processes and the host took); and the
#: machine's speed: a thread times a fixed piece of pure Python every 0.25 s (its CPU is taken off the kernel's).
#: On this two-core VM that piece's CPU swung 1.76-3.04 ms between 5 s windows under others' load, so CPU time is
#: read against it too.
_PROBE = """\
import threading
_gc = {{"s": 0.0, "t": 0.0, "n": [0, 0, 0]}}
def _gc_timed(phase, info):
    if phase == "start":
        _gc["t"] = time.perf_counter()
    else:
        _gc["s"] += time.perf_counter() - _gc["t"]
        _gc["n"][info["generation"]] += 1
gc.callbacks.append(_gc_timed)
_speed = {{"s": 0.0, "n": 0}}
def _calibrate():
    while True:
        start, x = time.thread_time(), 0
        for i in range(20_000):
            x += i * i
        _speed["s"] += time.thread_time() - start
        _speed["n"] += 1
        time.sleep(0.25)
threading.Thread(target=_calibrate, daemon=True, name="bench-speed").start()
def _ticks(path, first, last):
    try:
        with open(path) as stat:
            return [int(v) for v in stat.read().rsplit(")", 1)[-1].split()[first:last]]
    except (OSError, ValueError):
        return None
def _probe():
    loop = next((t for t in threading.enumerate() if t.name == "ipyagent-loop"), None)
    sched = None if loop is None else _ticks(f"/proc/self/task/{{loop.native_id}}/schedstat", 0, 2)
    machine, server = _ticks("/proc/stat", 1, 9), _ticks("/proc/{server_pid}/stat", 11, 13)
    tick, t = os.sysconf("SC_CLK_TCK"), os.times()
    return {{"cpu_s": t.user + t.system, "wall_s": time.perf_counter(), "gc_s": _gc["s"], "gc_n": list(_gc["n"]),
            "loop_cpu_s": sched and sched[0] / 1e9, "core_wait_s": sched and sched[1] / 1e9,
            "server_cpu_s": server and sum(server) / tick, "steal_s": machine and machine[7] / tick,
            "machine_busy_s": machine and (sum(machine) - machine[3] - machine[4]) / tick,
            "speed_s": _speed["s"], "speed_n": _speed["n"]}}
def _read(name, before):
    after = _probe()
    found = {{k: None if v is None or before[k] is None else v - before[k] for k, v in after.items() if k != "gc_n"}}
    found["gc_n"] = [a - b for a, b in zip(after["gc_n"], before["gc_n"])]
    found["cpu_s"] -= found["speed_s"]
    print(json.dumps({{"name": name, "objects": _objects, **found}}))
"""
#: The heap's objects before each evaluation (outside its times): does the heap grow from round to round?
_MARK = "_objects = len(gc.get_objects())\n_before = _probe()"
#: Each evaluation is counted, then let go before the next one: otherwise the next one's garbage collections
#: walk its 30,000 results too (8-13 % of either path's CPU is the collector's).
_FREE = "{ok}.append(sum(r.ok for r in {ev}.results))\ndel {ev}\ngc.collect()"
#: A path's reading: its CPU, wall time and the probe's other figures over the evaluation.
_READ = "_read({name!r}, _before)"


def _magic(ids: list[str], over: str, concurrency: int, out: str) -> str:
    checks = " ".join(f"--assert '{c}'" for c in CHECKS)
    return f"%%compare {' '.join(ids)} --over {over} --concurrency {concurrency} {checks} -o {out}\n{TEMPLATE}"


def cells(base: str, folder: Path, ids: list[str], rows: int, small: int, concurrency: int, repeats: int = 1,
          server_pid: int = 0) -> list[str]:
    """The notebook's code cells: set-up (a warm-up through both paths), then `repeats` rounds, each the API's
    evaluation then the magic's (A/B/A/B: a slow stretch of the machine falls on both), each with a run store of
    its own (nothing served from a cache), marked, read and let go; the magic once more over the first `small`
    rows (bytes per row)."""
    def api(n: int) -> str:
        return (f"ev_api = ipyagent.evaluate({ids!r}, {TEMPLATE!r}, rows, concurrency={concurrency}, "
                f"store={str(folder / f'api-{n}.sqlite')!r}, assertions={list(CHECKS)!r}, redact_context=True)")

    rounds = []
    for n in range(repeats):
        magic_store = f"%agent store {folder / f'magic-{n}.sqlite'}"
        rounds += [_MARK, api(n), _READ.format(name="api"), _FREE.format(ok="ok_api", ev="ev_api"),
                   magic_store, _MARK, _magic(ids, "rows", concurrency, "ev_magic"), _READ.format(name="magic"),
                   _FREE.format(ok="ok_magic", ev="ev_magic")]
    return [
        _SETUP.format(base=base, magic_store=str(folder / "magic.sqlite"), rows=rows, ids=ids,
                      warm_store=str(folder / "warm.sqlite")),
        _PROBE.format(server_pid=server_pid),
        _magic(ids, "warm", concurrency, "ev_warm"),
        f"small = rows[:{small}]",
        *rounds,
        _MARK, _magic(ids, "small", concurrency, "ev_small"), _READ.format(name="magic_small"),
        "print(json.dumps({'ok': [ok_api, ok_magic, sum(r.ok for r in ev_small.results)]}))",
    ]


def run_in_kernel(base: str, folder: Path, ids: list[str], rows: int, small: int, concurrency: int,
                  repeats: int = 1, server_pid: int = 0) -> dict[str, Any]:
    """Execute the cells in a fresh ``python3`` kernel (nbclient, widget state stored as a front end
    would keep it); returns each path's readings in order (``api``, ``magic``: a list of `repeats`, each with
    ``cpu_s``, ``wall_s``, ``core_wait_s``: the time the loop thread waited for a core, None where it cannot be
    read, and the probe's other figures), the runs that succeeded, and the saved bytes of the first magic cell
    over all the rows and of the one over `small` rows (``saved_bytes``, ``saved_small_bytes``)."""
    import nbformat
    from nbclient import NotebookClient

    sources = cells(base, folder, ids, rows, small, concurrency, repeats, server_pid)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, timeout=3600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    found: dict[str, Any] = {"api": [], "magic": []}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                for line in output["text"].splitlines():
                    if line.startswith("{"):
                        reading = json.loads(line)
                        name = reading.pop("name", "runs")
                        if name in ("api", "magic"):
                            found[name].append(reading)
                        else:
                            found[name] = reading
    magic = [i for i, s in enumerate(sources) if s.startswith("%%compare") and " -o ev_warm" not in s]

    empty = len(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("")])).encode())

    def saved(index: int) -> int:  # the cell's bytes in the saved notebook, its source aside
        cell = nbformat.v4.new_code_cell("", outputs=nb.cells[index].outputs)
        return len(nbformat.writes(nbformat.v4.new_notebook(cells=[cell])).encode()) - empty

    found["saved_bytes"], found["saved_small_bytes"] = saved(magic[0]), saved(magic[-1])
    found["widget_state_bytes"] = len(json.dumps(nb.metadata.get("widgets", {})).encode())
    return found


def round_rows(rows: int) -> int:
    """The rows of each round of a run over `rows`: a fifth (`ROWS_SHARE`), but `ROUND_ROWS_LEAST` at least, and
    never more than `rows` (10,000: 2,000; ``--medium``'s 1,000: 1,000; ``--quick``'s 48: 48)."""
    return min(rows, max(ROUND_ROWS_LEAST, int(rows * ROWS_SHARE)))


def spread(values: Sequence[float | None]) -> dict[str, float] | None:
    """A figure over the rounds: its median (what the verdict reads), its least and its most; None when a
    round could not read it."""
    if not values or any(value is None for value in values):
        return None
    ordered = sorted(values)  # type: ignore[type-var]
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1]}


def _path_figures(found: dict, runs: int, ideal: float, slots: int) -> dict[str, float | None]:
    """One path's figures from one reading (`run_in_kernel`): its wall time against the ideal, against
    max(ideal, its CPU), and against the floor its CPU allows; a lane's runs follow one another, and a run's
    own CPU (on the one loop) cannot overlap its own wait, so each lane needs rows / concurrency x (wait +
    CPU a run), and the loop needs all the CPU. A run's wait beyond the server's and its own CPU: waiting for
    the loop (the other lanes' CPU, the garbage collector, the commits), for a core, for the server (ms)."""
    cpu, wall, waited = found["cpu_s"], found["wall_s"], found.get("core_wait_s")
    floor = max(ideal * (1 + cpu / runs / WAIT_S), cpu)
    busy, server = found.get("machine_busy_s"), found.get("server_cpu_s")
    speed = found["speed_s"] / found["speed_n"] * 1000 if found.get("speed_n") else None
    return {
        "wall_s": wall, "vs_ideal": wall / ideal, "vs_floor": wall / max(ideal, cpu), "run_floor_s": floor,
        "vs_run_floor": wall / floor, "waited_ms_per_run": (wall * slots / runs - WAIT_S - cpu / runs) * 1000,
        # while the loop waits for a core (the machine's other load) every lane waiting on it waits: at most
        # this much of a run's wait is the machine's (a lane in its server wait is not delayed by it)
        "core_wait_s": waited, "core_wait_ms_per_run": None if waited is None else waited * slots / runs * 1000,
        "cpu_ms_per_run": cpu / runs * 1000,
        "loop_cpu_ms_per_run": None if found.get("loop_cpu_s") is None else found["loop_cpu_s"] / runs * 1000,
        "gc_s": found.get("gc_s"), "server_cpu_ms_per_run": None if server is None else server / runs * 1000,
        # the CPU the machine spent on anything but the kernel and the server: other engineers, the host
        "others_cpu_s": None if busy is None or server is None else busy - cpu - server,
        "steal_s": found.get("steal_s"),
        # a run's CPU in pieces of the fixed calibration's CPU meanwhile: the work, less the machine's speed
        "speed_ms": speed, "cpu_pieces_per_run": None if speed is None else cpu / runs * 1000 / speed,
    }


def kernel_figures(kernel: dict, rows_n: int, columns: int) -> dict[str, Any]:
    """Issue 33's figures from the kernel's rounds (`run_in_kernel`): each round's (``rounds``: the API's
    figures as ``api_*``, the magic's as ``magic_*``, and ``magic_vs_api_cpu`` of the pair), their spread over
    the rounds (``spread``: median, min, max), and each figure's median, which the verdict reads."""
    runs, small = rows_n * columns, rows_n // 10
    ideal = rows_n * WAIT_S / CONCURRENCY
    repeats = len(kernel["api"])
    assert kernel["runs"]["ok"] == [[runs] * repeats, [runs] * repeats, small * columns], kernel["runs"]
    slots = columns * CONCURRENCY  # runs in flight on the kernel's one loop
    rounds = []
    for api, magic in zip(kernel["api"], kernel["magic"]):
        figures = {f"api_{k}": v for k, v in _path_figures(api, runs, ideal, slots).items()}
        figures.update({f"magic_{k}": v for k, v in _path_figures(magic, runs, ideal, slots).items()})
        pieces = (figures["api_cpu_pieces_per_run"], figures["magic_cpu_pieces_per_run"])
        rounds.append({**figures, "magic_vs_api_cpu": magic["cpu_s"] / api["cpu_s"],
                       "magic_vs_api_pieces": None if None in pieces else pieces[1] / pieces[0]})
    spreads = {key: spread([figures[key] for figures in rounds]) for key in rounds[0]}
    return {
        "rows": rows_n, "small_rows": small, "ideal_s": ideal, "repeats": repeats, "rounds": rounds,
        "spread": spreads, **{key: None if found is None else found["median"] for key, found in spreads.items()},
        "saved_mb": kernel["saved_bytes"] / 1e6, "saved_bytes_per_row": kernel["saved_bytes"] / rows_n,
        "saved_small_bytes": kernel["saved_small_bytes"],
        "saved_small_bytes_per_row": kernel["saved_small_bytes"] / small,
        "widget_state_bytes": kernel["widget_state_bytes"],
    }


def kernel_verdict(figures: dict[str, Any], targets: dict[str, float]) -> dict[str, bool]:
    """Each target met or not, by the figure's median over the rounds (one round cannot decide a line that
    swings more than its margin from one run of the same code to the next)."""
    return {name: figures[name] <= target for name, target in targets.items()}
