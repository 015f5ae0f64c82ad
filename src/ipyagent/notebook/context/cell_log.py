"""What each cell printed and displayed, and the last exception, recorded as cells run.

IPython keeps a cell's source (``In``) and its result (``Out``) but not what it
printed, displayed or raised. `CellLog` hooks ``pre_run_cell`` / ``post_run_cell``:
while a cell runs, ``sys.stdout`` / ``sys.stderr`` write through a tee and
``display()`` through a recorder, each cell's text kept up to `CELL_CHARS`
(images are noted, not kept). It is installed by ``%load_ext ipyagent``, so
cells run before that have only ``In`` and ``Out``. Stdlib only: loading stays light.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

#: Exceptions that are not "the last error" to explain: a magic's usage message, an interrupt.
NOT_ERRORS = frozenset({"UsageError", "KeyboardInterrupt", "CancelledError", "RunStopped"})
#: Characters of output kept per cell; cells kept.
CELL_CHARS = 20_000
KEEP_CELLS = 200


#: Saved run records (core/transcript.py): a transcript, a comparison of transcripts.
RECORD_TYPES = ("application/vnd.ipyagent.transcript+json", "application/vnd.ipyagent.comparison+json")


def answers(record: dict[str, Any]) -> str:
    """The assistant text of a saved run record (a comparison's runs one after another)."""
    runs = [e.get("transcript") or {} for e in record.get("entries") or []] if "entries" in record else [record]
    return "\n\n".join("".join(p.get("text", "") for m in run.get("messages") or [] if m.get("role") == "assistant"
                                 for p in m.get("parts") or [] if p.get("type") == "text") for run in runs)


class _Tee:
    """A text stream that writes through to `stream` and records into `log`."""

    def __init__(self, stream: Any, log: "CellLog") -> None:
        self._stream, self._log = stream, log

    def write(self, text: str) -> Any:
        self._log.record(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class CellLog:
    """Per execution count: the text a cell printed or displayed; and the last exception
    with the count and source of the cell that raised it."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.outputs: OrderedDict[int, list[str]] = OrderedDict()
        self.error: tuple[BaseException, int | None, str] | None = None
        self._current: list[str] | None = None  # the running cell's output
        self._size = 0
        self._saved: tuple[Any, Any] | None = None

    # -- hooks --------------------------------------------------------------------------

    def install(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def uninstall(self) -> None:
        self._restore()
        for name, hook in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                self.shell.events.unregister(name, hook)
            except ValueError:
                pass

    def pre_run_cell(self, info: Any) -> None:
        # Keyed by execution count once the cell ends: IPython 9 counts up before a cell runs, 8 after.
        self._current, self._size = [], 0
        if self._saved is None:
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = _Tee(sys.stdout, self), _Tee(sys.stderr, self)
            pub = getattr(self.shell, "display_pub", None)
            if pub is not None and "publish" not in vars(pub):
                original = pub.publish

                def publish(data: Any = None, *args: Any, **kwargs: Any) -> Any:
                    self.record_display(data or kwargs.get("data") or {})
                    return original(data, *args, **kwargs)

                pub.publish = publish

    def post_run_cell(self, result: Any) -> None:
        self._restore()
        if self._current is not None and result.execution_count is not None:
            self.outputs[result.execution_count] = self._current
            while len(self.outputs) > KEEP_CELLS:
                self.outputs.popitem(last=False)
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is not None and type(error).__name__ not in NOT_ERRORS:
            info = getattr(result, "info", None)
            self.error = (error, result.execution_count, getattr(info, "raw_cell", None) or "")
        self._current = None

    def _restore(self) -> None:
        if self._saved is not None:
            if isinstance(sys.stdout, _Tee):
                sys.stdout = self._saved[0]
            if isinstance(sys.stderr, _Tee):
                sys.stderr = self._saved[1]
            self._saved = None
        pub = getattr(self.shell, "display_pub", None)
        if pub is not None and "publish" in vars(pub):
            del pub.publish

    # -- recording ------------------------------------------------------------------------

    def record(self, text: str) -> None:
        chunks = self._current
        if chunks is None or not isinstance(text, str):
            return
        if self._size < CELL_CHARS:
            chunks.append(text[:CELL_CHARS - self._size])
            self._size += len(chunks[-1])

    def record_display(self, data: dict[str, Any]) -> None:
        kinds = [k for k in data if k.startswith(("image/", "video/", "audio/"))]
        if "application/vnd.jupyter.widget-view+json" in data:
            return  # a live widget: its text/plain is the widget's repr
        record = next((data[k] for k in RECORD_TYPES if isinstance(data.get(k), dict)), None)
        if record is not None:  # a run: its text/plain is cut short, the record holds the answers
            footer = data.get("text/plain", "").rpartition("\n")[2] if isinstance(data.get("text/plain"), str) else ""
            self.record(answers(record) + "\n" + footer + "\n")
        elif kinds:
            self.record(f"[{kinds[0]} output left out]\n")
        elif isinstance(data.get("text/plain"), str):
            self.record(data["text/plain"] + "\n")

    def text(self, count: int) -> str | None:
        """What cell `count` printed and displayed (None: not recorded)."""
        chunks = self.outputs.get(count)
        return None if chunks is None else "".join(chunks)


_logs: dict[int, CellLog] = {}


def install(shell: Any) -> CellLog:
    """The shell's `CellLog`, installed on first call."""
    log = _logs.get(id(shell))
    if log is None:
        log = _logs[id(shell)] = CellLog(shell)
        log.install()
    return log


def uninstall(shell: Any) -> None:
    log = _logs.pop(id(shell), None)
    if log is not None:
        log.uninstall()


def get(shell: Any) -> CellLog | None:
    return _logs.get(id(shell))
