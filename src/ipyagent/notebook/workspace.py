"""The notebook the agent works in (``%%agent --notebook``, `notebook_tools()`): the `NotebookAccess`
of each front end behind `tools.NotebookTools`.

* `FrontEndNotebook` (JupyterLab, Notebook 7 with the ipyagent labextension): the kernel opens a
  comm on target `TARGET`; the labextension's plugin (``labextension/src/workspace.ts``) answers
  for the notebook panel of that kernel. Each message is ``{"request": ID, "op": OP, ...}``, each
  answer ``{"request": ID, "cells" | "cell": ..., "error"?: TEXT}``; ops: ``cells``, ``insert``
  ``{index, source, cell_type}``, ``edit`` ``{index, source}``, ``set_outputs`` ``{index, outputs,
  execution_count}`` (outputs in nbformat's shapes). A cell is ``{cell_type, source, outputs,
  execution_count, id}``.
* Running a cell: the kernel runs the cell's source itself, on its own thread, its output captured
  (`run_here`), and the plugin puts the outputs under the cell. The front end cannot run it: the
  ``%%agent`` cell that asks holds the kernel, and an execute request waits behind it (TOOLCHAIN.md
  §3d: comm messages go through while a cell awaits, execute requests do not).
* `HistoryNotebook` (terminal IPython): reading is the session's history (``In``, the cell log's
  text outputs, ``Out``); a new cell can only be the next input (``set_next_input``, at the end);
  editing and running say so.
* `KernelNotebook` (a kernel no front end with the labextension answers for: nbclient, papermill,
  ``jupyter nbconvert --execute``, a front end without the plugin): the history, then the cells the
  agent added, kept in the kernel (no front end is there to hold them) and offered as the next input
  too; a run runs the source in the kernel (`run_here`), as with JupyterLab. The saved notebook shows
  such cells only in the calls' cards.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from IPython import get_ipython
from IPython.core.displayhook import CapturingDisplayHook
from IPython.core.displaypub import CapturingDisplayPublisher

from ..core import ToolAction
from ..tools import NotebookAccess, NotebookCell, NotebookTools, NotebookUnsupported
from .context import cell_log
from .views.asks import FRONT_END_GRACE_S

#: The comm target the labextension registers for the notebook operations.
TARGET = "ipyagent.notebook"

#: Seconds an operation waits for the front end's answer once it said hello.
OP_TIMEOUT_S = 60.0

#: What the tools say where only reading and the next input exist.
READ_ONLY = ("{kind} can only read the history and put a new cell at the prompt (insert at index {end}); "
             "it cannot {what}: give the code in your answer instead")


def output_texts(outputs: list[dict[str, Any]]) -> list[str]:
    """The text of nbformat outputs: stream text, ``text/plain`` of results and displays (an image
    or other media as ``[image/png]``), an error as ``ENAME: EVALUE``."""
    texts = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            text = out.get("text", "")
            texts.append("".join(text) if isinstance(text, list) else str(text))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data") or {}
            plain = data.get("text/plain")
            if plain is not None:
                texts.append("".join(plain) if isinstance(plain, list) else str(plain))
            texts += [f"[{mime}]" for mime in data if mime != "text/plain" and not mime.startswith("text/")]
        elif kind == "error":
            texts.append(f"{out.get('ename', 'Error')}: {out.get('evalue', '')}")
    return texts


def cell_from(index: int, data: dict[str, Any]) -> NotebookCell:
    """A front end's cell (``{cell_type, source, outputs, execution_count, id}``) as the tools see it."""
    source = data.get("source", "")
    return NotebookCell(index=index, cell_type=str(data.get("cell_type", "code")),
                        source="".join(source) if isinstance(source, list) else str(source),
                        outputs=output_texts(list(data.get("outputs") or [])),
                        execution_count=data.get("execution_count"), id=data.get("id"))


class HistoryNotebook(NotebookAccess):
    """The session's history as cells (terminal IPython, a kernel without the labextension)."""

    def __init__(self, shell: Any, kind: str = "terminal IPython") -> None:
        self.shell = shell
        self.kind = kind

    def cells(self) -> list[NotebookCell]:
        raw = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        sources = list(raw or self.shell.user_ns.get("In") or [""])[1:]  # as typed: a magic, not its call
        results = self.shell.user_ns.get("Out") or {}
        log = cell_log.get(self.shell)
        cells = []
        for n, source in enumerate(sources, start=1):
            logged = log.text(n) if log is not None else None  # what it printed and displayed (its result too)
            outputs = [logged] if logged else [repr(results[n])] if n in results else []
            cells.append(NotebookCell(index=n - 1, source=source, outputs=outputs, execution_count=n))
        return cells

    def insert(self, index: int, source: str, cell_type: str) -> NotebookCell:
        end = len(self.cells())
        if index != end or cell_type != "code":
            what = "insert a Markdown cell" if cell_type != "code" else f"insert at index {index}"
            raise NotebookUnsupported(READ_ONLY.format(kind=self.kind, end=end, what=what))
        self.shell.set_next_input(source, replace=False)
        return NotebookCell(index=end, source=source)

    def edit(self, index: int, source: str) -> NotebookCell:
        raise NotebookUnsupported(READ_ONLY.format(kind=self.kind, end=len(self.cells()), what="edit cells"))

    def run(self, index: int) -> NotebookCell:
        raise NotebookUnsupported(READ_ONLY.format(kind=self.kind, end=len(self.cells()), what="run cells"))


class KernelNotebook(HistoryNotebook):
    """A kernel's notebook when no front end with the labextension answers (see the module doc): the
    history, then the cells the agent added in this session (kept here, their outputs with them).
    `on_kernel(work)` calls ``work()`` on the kernel's thread (`FrontEndNotebook._on_kernel`)."""

    def __init__(self, shell: Any, on_kernel: Callable[[Callable[[], Any]], Any]) -> None:
        super().__init__(shell, kind="this kernel, which no notebook front end with ipyagent answers for "
                         "(cells added stay in the kernel)")
        self.on_kernel = on_kernel
        self.added: list[NotebookCell] = []

    def cells(self) -> list[NotebookCell]:
        history = super().cells()
        return history + [replace(c, index=len(history) + n) for n, c in enumerate(self.added)]

    def _added(self, index: int) -> int | None:
        """The position in `added` of cell `index`, None for a cell of the history."""
        at = index - (len(self.cells()) - len(self.added))
        return at if 0 <= at < len(self.added) else None

    def insert(self, index: int, source: str, cell_type: str) -> NotebookCell:
        end = len(self.cells())
        if index != end:
            raise NotebookUnsupported(f"{self.kind} can only add a cell at the end (index {end})")
        self.added.append(NotebookCell(index=end, cell_type=cell_type, source=source))
        if cell_type == "code":  # a front end that takes the next input (classic Notebook) shows it below
            self.shell.set_next_input(source, replace=False)
        return self.cell(end)

    def edit(self, index: int, source: str) -> NotebookCell:
        at = self._added(index)
        if at is None:
            raise NotebookUnsupported(f"{self.kind} cannot change the history: only the cells added can be edited")
        self.added[at] = replace(self.added[at], source=source, outputs=[], execution_count=None)
        return self.cell(index)

    def run(self, index: int) -> NotebookCell:
        cell = self.cell(index)
        outputs = output_texts(self.on_kernel(lambda: run_here(self.shell, cell.source)))
        at = self._added(index)
        if at is not None:
            self.added[at] = replace(self.added[at], outputs=outputs)
        return replace(cell, outputs=outputs, execution_count=None)


def run_here(shell: Any, source: str) -> list[dict[str, Any]]:
    """Run `source` as a cell in `shell` (on the kernel's thread), its output captured instead of
    shown in the cell that asked: its nbformat outputs. A cell that raises gives an ``error``
    output. It takes no execution count and no history entry: it runs inside the ``%%agent`` cell,
    whose number it would take (and whose ``In`` entry it would overwrite)."""
    outputs: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []  # display() calls
    results: list[dict[str, Any]] = []  # the last expression's value
    saved = (sys.stdout, sys.stderr, shell.display_pub, shell.display_trap.hook, shell._showtraceback)
    out, err = _Stream(outputs, "stdout"), _Stream(outputs, "stderr")
    shell.display_pub = CapturingDisplayPublisher()
    shell.display_pub.outputs = shown
    shell.display_trap.hook = CapturingDisplayHook(shell=shell, outputs=results)
    shell._showtraceback = lambda etype, evalue, stb: outputs.append(
        {"output_type": "error", "ename": getattr(etype, "__name__", str(etype)), "evalue": str(evalue),
         "traceback": list(stb or [])})
    try:
        sys.stdout, sys.stderr = out, err
        result = shell.run_cell(source, store_history=False)
    finally:
        sys.stdout, sys.stderr, shell.display_pub, shell.display_trap.hook, shell._showtraceback = saved
    # displays, then the result, after the text (their order among prints is not kept)
    outputs += [{"output_type": "display_data", "data": dict(d["data"] or {}), "metadata": dict(d["metadata"] or {})}
                for d in shown]
    outputs += [{"output_type": "execute_result", "data": dict(r["data"] or {}), "metadata": dict(r["metadata"] or {}),
                 "execution_count": None} for r in results]
    if result.error_before_exec is not None and not any(o["output_type"] == "error" for o in outputs):
        exc = result.error_before_exec
        outputs.append({"output_type": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": []})
    return outputs


class _Stream:
    """A text stream whose writes become nbformat ``stream`` outputs (one per run of writes)."""

    def __init__(self, outputs: list[dict[str, Any]], name: str) -> None:
        self.outputs, self.name = outputs, name

    def write(self, text: str) -> int:
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last.get("output_type") == "stream" and last.get("name") == self.name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


class FrontEndNotebook(NotebookAccess):
    """The notebook a front end shows, through the labextension's comm (see the module doc); the
    kernel's own (`KernelNotebook`) when no such front end answers in `FRONT_END_GRACE_S`.

    Made on the kernel's thread (a magic, a cell): the comm opens and the kernel's loop is noted,
    to run cells on. The operations are called from tool threads and wait for the answers.
    """

    kind = "notebook"

    def __init__(self, shell: Any, *, grace: float = FRONT_END_GRACE_S, timeout: float = OP_TIMEOUT_S) -> None:
        from comm import create_comm

        self.shell = shell
        self.history = KernelNotebook(shell, self._on_kernel)
        self.grace, self.timeout = grace, timeout
        self._ids = itertools.count(1)
        self._pending: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}
        self._hello: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._loop = asyncio.get_event_loop()
        self._thread = threading.get_ident()
        self.comm = create_comm(target_name=TARGET, data={"hello": 1})
        self.comm.on_msg(self._on_msg)
        self.comm.on_close(self._on_close)

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        if "hello" in data:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # too late: the kernel's own is in use
                self._hello.set_result(data["hello"] if isinstance(data["hello"], dict) else {})
            return
        future = self._pending.pop(str(data.get("request")), None)
        if future is not None and not future.done():
            future.set_result(data)

    def _on_close(self, _msg: Any) -> None:
        if not self._hello.done():
            self._hello.set_result({"closed": True})
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(NotebookUnsupported("the notebook front end went away"))
        self._pending.clear()

    def front_end(self) -> bool:
        """Whether a front end with the labextension answered (waits up to `grace` seconds once)."""
        try:
            hello = self._hello.result(self.grace)
        except concurrent.futures.TimeoutError:  # none: the kernel's own from now on (a late hello is not waited for)
            try:
                self._hello.set_result({"closed": True})
            except concurrent.futures.InvalidStateError:  # the hello came just now
                pass
            hello = self._hello.result()
        if hello.get("closed"):
            self.kind = self.history.kind
        elif hello.get("kind"):
            self.kind = str(hello["kind"])
        return not hello.get("closed")

    def _call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send `op` to the front end and wait for its answer. Raises `NotebookUnsupported` for an
        answer that is an error, or none within `timeout`."""
        key = str(next(self._ids))
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._pending[key] = future
        self.comm.send({"request": key, "op": op, **args})
        try:
            answer = future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            raise NotebookUnsupported(f"the notebook front end did not answer {op!r} in {self.timeout:g} s") from None
        finally:
            self._pending.pop(key, None)
        if answer.get("error"):
            raise NotebookUnsupported(str(answer["error"]))
        return answer

    def cells(self) -> list[NotebookCell]:
        if not self.front_end():
            return self.history.cells()
        return [cell_from(n, c) for n, c in enumerate(self._call("cells").get("cells") or [])]

    def insert(self, index: int, source: str, cell_type: str) -> NotebookCell:
        if not self.front_end():
            return self.history.insert(index, source, cell_type)
        return cell_from(index, self._call("insert", index=index, source=source, cell_type=cell_type)["cell"])

    def edit(self, index: int, source: str) -> NotebookCell:
        if not self.front_end():
            return self.history.edit(index, source)
        return cell_from(index, self._call("edit", index=index, source=source)["cell"])

    def run(self, index: int) -> NotebookCell:
        if not self.front_end():
            return self.history.run(index)
        source = self.cell(index).source
        outputs = self._on_kernel(lambda: run_here(self.shell, source))
        return cell_from(index, self._call("set_outputs", index=index, outputs=outputs, execution_count=None)["cell"])

    def _on_kernel(self, work: Any) -> Any:
        """`work()` on the kernel's thread (its loop runs callbacks while a cell awaits or between cells)."""
        if threading.get_ident() == self._thread:
            return work()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting tool thread
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(call)
        return done.result()

    def close(self) -> None:
        self.comm.close()


def notebook_access(shell: Any) -> NotebookAccess:
    """The notebook of `shell`: the front end's in a kernel, the history in terminal IPython."""
    if getattr(shell, "kernel", None) is None:
        return HistoryNotebook(shell)
    return FrontEndNotebook(shell)


def notebook_tools(*, approve_edits: bool = False, approve_runs: bool = False, shell: Any = None) -> NotebookTools:
    """The notebook tools for an agent (``Agent(..., tools=[notebook_tools()])``): list, read, insert,
    edit and run cells of the notebook this kernel's front end shows (terminal IPython: read the
    history and offer the next input). Inserts, edits and runs wait for approval unless
    `approve_edits` / `approve_runs`. Call it in a cell (the kernel's thread).

    Raises:
        RuntimeError: outside IPython.
    """
    if shell is None:
        shell = get_ipython()
        if shell is None:
            raise RuntimeError("notebook_tools() works in IPython or a Jupyter kernel")
    return NotebookTools(notebook_access(shell), approve_edits=approve_edits, approve_runs=approve_runs)


def approval_with_preview(approve: Any, tools: NotebookTools) -> Any:
    """`approve` (a view's ``request_approval(action, preview=...)``), given each notebook call's preview."""

    def asking(action: ToolAction) -> Any:
        return approve(action, preview=tools.preview(action))

    return asking
