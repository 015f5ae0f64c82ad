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
from pathlib import Path
from typing import Any

#: The cell's checks, as the API and the magic take them.
CHECKS = ("contains:{{ row.id }}", "icontains:the")
TEMPLATE = "Answer briefly. {{ row.question }}"

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
"""
#: The ipyagent loop thread's time waiting for a core so far (Linux's schedstat; None elsewhere): the machine's
#: load, which a wall time measured on a busy machine includes.
_CORE_WAIT = """\
import threading
def _core_wait():
    for thread in threading.enumerate():
        if thread.name == "ipyagent-loop":
            try:
                with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
                    return int(stat.read().split()[1]) / 1e9
            except (OSError, IndexError, ValueError):
                return None
    return None
"""
_MARK = "_times, _wall, _waited = os.times(), time.perf_counter(), _core_wait()"
#: The API's evaluation is counted, then let go before the magic's run: otherwise the magic's garbage
#: collections walk its 30,000 results too (8-13 % of either path's CPU is the collector's).
_FREE = "ok_api = sum(r.ok for r in ev_api.results)\ndel ev_api\ngc.collect()"
_READ = ("_t = os.times(); print(json.dumps({{'name': {name!r}, 'cpu_s': _t.user + _t.system - _times.user "
         "- _times.system, 'wall_s': time.perf_counter() - _wall, "
         "'core_wait_s': None if _waited is None else _core_wait() - _waited}}))")


def _magic(ids: list[str], over: str, concurrency: int, out: str) -> str:
    checks = " ".join(f"--assert '{c}'" for c in CHECKS)
    return f"%%compare {' '.join(ids)} --over {over} --concurrency {concurrency} {checks} -o {out}\n{TEMPLATE}"


def cells(base: str, folder: Path, ids: list[str], rows: int, small: int, concurrency: int) -> list[str]:
    """The notebook's code cells: set-up (a warm-up through both paths), then for each path a mark,
    the evaluation, a reading; the magic once more over the first `small` rows (bytes per row)."""
    api = (f"ev_api = ipyagent.evaluate({ids!r}, {TEMPLATE!r}, rows, concurrency={concurrency}, "
           f"store={str(folder / 'api.sqlite')!r}, assertions={list(CHECKS)!r}, redact_context=True)")
    return [
        _SETUP.format(base=base, magic_store=str(folder / "magic.sqlite"), rows=rows, ids=ids,
                      warm_store=str(folder / "warm.sqlite")),
        _CORE_WAIT,
        _magic(ids, "warm", concurrency, "ev_warm"),
        f"small = rows[:{small}]",
        _MARK, api, _READ.format(name="api"),
        _FREE,
        _MARK, _magic(ids, "rows", concurrency, "ev_magic"), _READ.format(name="magic"),
        _MARK, _magic(ids, "small", concurrency, "ev_small"), _READ.format(name="magic_small"),
        "print(json.dumps({'ok': [ok_api, *(sum(r.ok for r in e.results) for e in (ev_magic, ev_small))]}))",
    ]


def run_in_kernel(base: str, folder: Path, ids: list[str], rows: int, small: int, concurrency: int) -> dict[str, Any]:
    """Execute the cells in a fresh ``python3`` kernel (nbclient, widget state stored as a front end
    would keep it); returns each reading (``cpu_s``, ``wall_s``, ``core_wait_s``: the time the loop
    thread waited for a core, None where it cannot be read), the runs that succeeded, and the
    saved bytes of the two magic cells (``saved_bytes``, ``saved_small_bytes``)."""
    import nbformat
    from nbclient import NotebookClient

    sources = cells(base, folder, ids, rows, small, concurrency)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, timeout=3600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    found: dict[str, Any] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                for line in output["text"].splitlines():
                    if line.startswith("{"):
                        reading = json.loads(line)
                        found[reading.pop("name", "runs")] = reading
    magic = [i for i, s in enumerate(sources) if s.startswith("%%compare") and " -o ev_warm" not in s]

    empty = len(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("")])).encode())

    def saved(index: int) -> int:  # the cell's bytes in the saved notebook, its source aside
        cell = nbformat.v4.new_code_cell("", outputs=nb.cells[index].outputs)
        return len(nbformat.writes(nbformat.v4.new_notebook(cells=[cell])).encode()) - empty

    found["saved_bytes"], found["saved_small_bytes"] = saved(magic[0]), saved(magic[1])
    found["widget_state_bytes"] = len(json.dumps(nb.metadata.get("widgets", {})).encode())
    return found
