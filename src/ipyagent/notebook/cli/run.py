"""Running a notebook for ``ipyagent eval``: parameters injected papermill-style, the kernel's environment
(``--replay``: no provider key; ``--store``: the run store), nbclient executing every cell with a progress
line per cell on stderr (rich), and a failed cell named by its number and its error's one line.

nbclient, nbformat and rich are imported when a notebook runs, never by ``import ipyagent``.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, TextIO

from ...core import redact, redact_data
from ...drivers import BUILTIN, KEY_FALLBACKS
from ...memory import STORE_ENV, STORE_ENV_ALIAS, RunStore, is_url
from ..render.text.records import clean

#: The run store a kernel opens with no ``$IPYAGENT_RUN_STORE``, in its working folder (the notebook's).
KERNEL_DEFAULT_STORE = Path(".ipyagent") / "runs.sqlite"
#: The tag of the cell whose variables ``-p`` overrides (papermill's), and of the cell we add after it.
PARAMETERS_TAG, INJECTED_TAG = "parameters", "injected-parameters"


class NotebookFailed(Exception):
    """The notebook did not run to its end: `cell` (1-based, as in the notebook file; None before any cell)
    and the error's one line (as the cell's exception says it: redacted where it is shown)."""

    def __init__(self, cell: int | None, line: str) -> None:
        super().__init__(f"cell {cell}: {line}" if cell is not None else line)
        self.cell, self.line = cell, line


def read(path: Path) -> Any:
    """The notebook at `path` (nbformat 4).

    Raises:
        NotebookFailed: it is not a notebook nbformat can read, or a cell is not one nbclient can run (its
            source not text, its metadata not an object): the reason, one line.
    """
    import nbformat

    try:
        with warnings.catch_warnings():  # nbformat warns (a missing cell id...) on stderr, then goes on
            warnings.simplefilter("ignore")
            nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises JSON, validation and OS errors alike
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise NotebookFailed(None, f"{path} is not a notebook nbformat can read: {first}") from None
    for number, cell in enumerate(nb.cells, 1):  # nbformat only warns about an invalid cell
        source, metadata = (cell.get("source"), cell.get("metadata", {})) if isinstance(cell, dict) else (0, {})
        if not isinstance(source, str) or not isinstance(metadata, dict):
            what = ("its source is not text (a string or a list of strings)" if not isinstance(source, str)
                    else "its metadata is not an object")
            raise NotebookFailed(None, f"{path}: cell {number} cannot run: {what}")
    return nb


def redact_outputs(nb: Any) -> None:
    """Every output of `nb`'s cells through the one redactor, in place (a traceback, a printed key): what
    the command shows, reports and saves (``-o``) is read from them. The cells' sources are kept."""
    import nbformat

    for cell in nb.cells:
        if cell.get("outputs"):
            cell.outputs = nbformat.from_dict(redact_data(list(cell.outputs)))


def inject_parameters(nb: Any, values: dict[str, Any]) -> int | None:
    """Add a code cell setting `values` (``name = repr(value)``) after the cell tagged ``parameters``, else at
    the top, replacing one injected before (papermill's ``injected-parameters``); its index, None when
    `values` is empty."""
    import nbformat

    if not values:
        return None
    tags = [set(cell.get("metadata", {}).get("tags", ())) for cell in nb.cells]
    old = next((i for i, t in enumerate(tags) if INJECTED_TAG in t), None)
    if old is not None:
        del nb.cells[old]
        del tags[old]
    anchor = next((i for i, t in enumerate(tags) if PARAMETERS_TAG in t), None)
    cell = nbformat.v4.new_code_cell("# Parameters (ipyagent eval -p)\n" +
                                     "".join(f"{name} = {value!r}\n" for name, value in values.items()))
    cell.metadata["tags"] = [INJECTED_TAG]
    at = 0 if anchor is None else anchor + 1
    nb.cells.insert(at, cell)
    return at


def kernel_env(*, replay: bool, store: str | None) -> dict[str, str]:
    """The kernel's environment: ours, without any provider's key variable when `replay` (the notebooks of
    ipyagent replay their cassettes when they find no key), with ``$IPYAGENT_RUN_STORE`` = `store` when given."""
    env = dict(os.environ)
    if replay:
        for name in {s.api_key_env for s in BUILTIN.values() if s.api_key_env} | set(KEY_FALLBACKS.values()):
            env.pop(name, None)
    if store is not None:
        env[STORE_ENV] = store if store.lower() in ("off", "none") or is_url(store) \
            else str(Path(store).expanduser().resolve())
    return env


def check_store(env: dict[str, str], folder: Path) -> None:
    """Open the run store the kernel will open, once, and close it: ``$IPYAGENT_RUN_STORE`` (or
    ``$IPYAGENT_STORE``) of `env`, else `KERNEL_DEFAULT_STORE`, relative to `folder` (the kernel's working
    folder). A store the kernel cannot open (a file that is not SQLite, a truncated or corrupt one) is
    otherwise turned off for the whole run, with a line only in a cell's output: every run sent again,
    none recorded. ``off`` is no store; a ``postgresql://`` URL is checked when the kernel connects.

    Raises:
        StoreError: the store cannot be opened (`RunStore`'s one line).
    """
    configured = (env.get(STORE_ENV) or env.get(STORE_ENV_ALIAS) or "").strip()
    if configured.lower() in ("off", "none", "0", "false") or is_url(configured):
        return
    RunStore(folder / (Path(configured).expanduser() if configured else KERNEL_DEFAULT_STORE)).close()


def _first_line(source: str) -> str:
    return next((line.strip() for line in source.splitlines() if line.strip()), "")


class Progress:
    """A bar over the code cells on a terminal, and one line per cell run (its number, first line, seconds)
    on `stream` (stderr), through rich; `number` maps a cell's index in the executed notebook to the file's."""

    def __init__(self, nb: Any, stream: TextIO, number: Any) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self.number, self.started, self.current = number, 0.0, None
        console = Console(file=stream, highlight=False, soft_wrap=False)
        self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=console, transient=True)
        total = sum(c.cell_type == "code" and bool(c.source.strip()) for c in nb.cells)
        self.task = self.bar.add_task("running", total=total)

    def start(self, cell: Any, cell_index: int, **_: Any) -> None:
        self.current, self.started = cell_index, time.monotonic()
        shown = clean(_first_line(cell.source))[:40]
        self.bar.update(self.task, description=f"cell {self.number(cell_index)}: {shown}")

    def done(self, cell: Any, cell_index: int, **_: Any) -> None:
        from rich.text import Text

        seconds = time.monotonic() - self.started
        line = Text.assemble((f"cell {self.number(cell_index)}", "bold"), " ",
                             (clean(_first_line(cell.source))[:60], ""), (f"  {seconds:.1f} s", "dim"))
        self.bar.console.print(line, no_wrap=True, overflow="ellipsis")
        self.bar.advance(self.task)


def _error_line(exc: BaseException) -> str:
    """A cell's error in one line: ``ZeroDivisionError: division by zero``, a timeout, a dead kernel."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    if isinstance(exc, CellExecutionError):
        return f"{exc.ename}: {(exc.evalue.strip().splitlines() or [''])[0]}".rstrip(": ")
    if isinstance(exc, CellTimeoutError):
        return "the cell timed out (--timeout SECONDS allows more)"
    if isinstance(exc, DeadKernelError):
        return "the kernel died"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def execute(nb: Any, path: Path, *, env: dict[str, str], timeout: float, kernel: str | None, stream: TextIO,
            number: Any) -> None:
    """Run every cell of `nb` (read from `path`; in its folder, so relative files resolve) in a fresh kernel
    with `env`, drawing `Progress` on `stream`.

    The kernel's own stderr (a library's log, a traceback it prints itself) reaches `stream` through
    `KernelStderr`, redacted.

    Raises:
        NotebookFailed: a cell raised, timed out or the kernel died (the cell's number by `number`), or the
            kernel did not start.
    """
    kernel = kernel or nb.metadata.get("kernelspec", {}).get("name") or "python3"
    progress = Progress(nb, stream, number)
    client = client_class()(nb, timeout=int(timeout), kernel_name=kernel, store_widget_state=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}},
                            on_cell_execute=progress.start, on_cell_executed=progress.done)
    relay = KernelStderr(stream)
    try:
        with progress.bar:
            client.execute(env=env, cwd=str(path.parent.resolve()), stderr=relay.write_fd)
    except Exception as exc:  # a cell's error, a timeout, a dead kernel, no such kernel
        cell = number(progress.current) if progress.current is not None else None
        raise NotebookFailed(cell, _error_line(exc)) from None
    finally:
        relay.close()


def client_class() -> Any:
    """nbclient's `NotebookClient`, which also applies a display update sent for a cell that already
    ended: a ``--background`` evaluation replaces its live view with its saved output when it finishes,
    addressed to its own cell while a later one (``ev.wait()``) runs, and nbclient reads only the
    running cell's messages (jupyter messaging: ``update_display_data`` with ``transient.display_id``)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionComplete
    from nbclient.util import ensure_async

    class Client(NotebookClient):
        async def _async_poll_output_msg(self, parent_msg_id: str, cell: Any, cell_index: int) -> None:
            while True:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=None))
                if msg["parent_header"].get("msg_id") == parent_msg_id:
                    try:
                        self.process_message(msg, cell, cell_index)
                    except CellExecutionComplete:
                        return
                elif msg["header"]["msg_type"] == "update_display_data":  # an ended cell's output, replaced
                    display_id = (msg["content"].get("transient") or {}).get("display_id")
                    if display_id:
                        self._update_display_id(display_id, msg)

    return Client


class KernelStderr:
    """A pipe the kernel gets as its stderr (`write_fd`; any process it starts inherits it), read on a
    thread: each line goes to `stream` through the one redactor, until every writer closed it."""

    #: Seconds `close` waits for the last lines (a process the kernel started may keep the pipe open).
    WAIT = 5.0

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        read_fd, self.write_fd = os.pipe()
        self.thread = threading.Thread(target=self._relay, args=(read_fd,), daemon=True,
                                       name="ipyagent-eval-kernel-stderr")
        self.thread.start()

    def _relay(self, read_fd: int) -> None:
        with open(read_fd, "rb") as pipe:
            for raw in pipe:
                self.stream.write(redact(raw.decode("utf-8", "replace")))
                self.stream.flush()

    def close(self) -> None:
        """Close our end of the pipe; wait (at most `WAIT` seconds) for the lines still in it."""
        os.close(self.write_fd)
        self.thread.join(self.WAIT)
