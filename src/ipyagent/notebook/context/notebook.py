"""The notebook as context: the last exception, other cells, ``In`` / ``Out`` in templates.

* `last_error` finds the session's last exception (recorded by `cell_log`, else
  ``sys.last_value``) and `error_block` describes it: type and message, the
  source of the cell that raised it, and IPython's traceback with colour codes
  stripped and ipyagent's own frames dropped.
* `cell_blocks` gives the previous cells' sources and text outputs.
* `template_namespace` adds ``error`` and clear-message ``In`` / ``Out`` to the
  names a cell template sees.
"""

from __future__ import annotations

import re
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from IPython import get_ipython

from ...memory import CHARS_PER_TOKEN, DEFAULT_BUDGET, ContextBlock, context_block, keep_ends, summarize
from . import cell_log
from .template import TemplateError

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_PACKAGE = str(Path(__file__).resolve().parents[2])


def _ipython_dir() -> str | None:
    module = sys.modules.get("IPython")
    return str(Path(module.__file__).resolve().parent) if module is not None and module.__file__ else None

#: The instruction sent with the last error (``%agent fix``, ``%%agent --error``).
FIX_INSTRUCTION = (
    "The cell below raised an exception in my Jupyter notebook. Explain the cause briefly, then give the "
    "corrected code of the whole failing cell in one fenced Python code block."
)


class NotebookContextError(TemplateError):
    """Context that cannot be had (no exception yet, a missing ``Out[n]``); the message says why and what to do."""


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# -- the last exception -------------------------------------------------------------------


def last_error(shell: Any) -> tuple[BaseException, int | None, str] | None:
    """(exception, execution count, cell source) of the session's last exception; None if none yet.

    Cells run while ipyagent is loaded are recorded exactly; before that, IPython's
    ``sys.last_value`` is used and the cell found from its traceback.
    """
    log = cell_log.get(shell)
    if log is not None and log.error is not None:
        return log.error
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is None or type(exc).__name__ in cell_log.NOT_ERRORS:
        return None
    count = _cell_of(shell, exc)
    source = _input(shell, count) if count is not None else ""
    return exc, count, source or ""


def _cell_of(shell: Any, exc: BaseException) -> int | None:
    """The execution count of the outermost notebook cell in `exc`'s traceback."""
    names = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    filename = getattr(exc, "filename", None) if isinstance(exc, SyntaxError) else None
    if filename in names:
        return names[filename]
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in names:
            return names[name]
        tb = tb.tb_next
    return None


def _inputs(shell: Any) -> list[str]:
    """The cells' sources as typed (``%%agent`` lines included), else ``In`` (as run)."""
    raw = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    return raw if isinstance(raw, list) and raw else (shell.user_ns.get("In") or [])


def _input(shell: Any, count: int) -> str | None:
    history = _inputs(shell)
    return history[count] if 0 < count < len(history) else None


def _own_frames_dropped(tb: types.TracebackType | None) -> types.TracebackType | None:
    """`tb` without ipyagent's and IPython's own frames (``run_cell``, the parser of a cell
    with a syntax error), and without anything before the first notebook cell."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    own = tuple(p for p in (_PACKAGE, _ipython_dir()) if p)
    kept = [t for t in frames if not t.tb_frame.f_code.co_filename.startswith(own)]
    cells = [n for n, t in enumerate(kept) if _is_cell(t.tb_frame.f_code.co_filename)]
    if cells:
        kept = kept[cells[0]:]
    head = None
    for t in reversed(kept):
        head = types.TracebackType(head, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return head


def _is_cell(filename: str) -> bool:
    shell = _shell()
    names = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    return filename in names or filename.startswith("<ipython-input-")


def _shell() -> Any:
    return get_ipython()


def traceback_lines(shell: Any, exc: BaseException) -> list[str]:
    """IPython's traceback of `exc` (its ``Cell In[n], line m`` headers and context lines),
    colour codes stripped and ipyagent's frames dropped; the standard one without IPython."""
    tb = _own_frames_dropped(exc.__traceback__)
    formatter = getattr(shell, "InteractiveTB", None)
    try:
        if isinstance(exc, SyntaxError) and getattr(shell, "SyntaxTB", None) is not None:
            lines = shell.SyntaxTB.structured_traceback(type(exc), exc, tb)
        elif formatter is not None:
            lines = formatter.structured_traceback(type(exc), exc, tb)
        else:
            raise TypeError
    except Exception:  # no shell, or a formatter that failed: the standard traceback
        lines = traceback.format_exception(type(exc), exc, tb)
    return strip_ansi("\n".join(lines)).splitlines()


def error_block(shell: Any, budget_tokens: int = DEFAULT_BUDGET, *, redacting: bool = True) -> ContextBlock:
    """The last exception as a context block, its text through the context rule while `redacting`
    (`memory.context_block`).

    Raises:
        NotebookContextError: no exception in this session yet.
    """
    found = last_error(shell)
    if found is None:
        raise NotebookContextError("no exception in this session yet: run the failing cell first")
    exc, count, source = found
    where = f"In[{count}]" if count is not None else "an unknown cell"
    header = f"{type(exc).__name__}: {exc}".rstrip(": ")
    chars = budget_tokens * CHARS_PER_TOKEN
    cell, cell_cut = keep_ends(source.splitlines(), chars // 2) if source else ("(source not available)", False)
    tb, tb_cut = keep_ends(traceback_lines(shell, exc), chars - len(cell) - len(header) - 100)
    text = f"{header}\nraised by cell {where}:\n```python\n{cell}\n```\ntraceback:\n{tb}"
    return context_block("error", "error", type(exc).__name__, text, cell_cut or tb_cut, redacting=redacting)


class LastError:
    """``{{ error }}`` in a cell template: the last exception as text (`error_block`).

    Raises `NotebookContextError` when rendered with no exception yet.
    """

    def __init__(self, shell: Any) -> None:
        self._shell = shell

    def __str__(self) -> str:  # the template's own rule masks what it renders (`template.render_template`)
        return error_block(self._shell, redacting=False).text

    def __html__(self) -> str:  # Jinja's markup protocol; no autoescape here, but keep it text
        return str(self)


# -- other cells ----------------------------------------------------------------------------


def cell_blocks(
    shell: Any, n: int, budget_tokens: int = DEFAULT_BUDGET, *, current: int | None = None, redacting: bool = True
) -> list[ContextBlock]:
    """The `n` cells before cell `current` (default: the running one, the last input): each one's source and its
    text output — what it printed and displayed (recorded since ``%load_ext``), its result
    (``Out[k]``, summarized) and its exception — within `budget_tokens` each, images left out;
    through the context rule while `redacting` (`memory.context_block`)."""
    history = _inputs(shell)
    current = len(history) - 1 if current is None else current  # the running cell is the last input
    outputs = shell.user_ns.get("Out") or {}
    log = cell_log.get(shell)
    chars = budget_tokens * CHARS_PER_TOKEN
    blocks = []
    for count in range(max(1, current - n), current):
        source = history[count] if count < len(history) else ""
        pieces = [f"```python\n{keep_ends(source.splitlines(), chars // 2)[0]}\n```"]
        printed = log.text(count) if log is not None else None
        if printed and count in outputs:  # a terminal prints the result too; it is sent as Out[n] below
            printed = printed.split(f"Out[{count}]: ")[0]
        if printed:
            pieces.append("output:\n" + keep_ends(printed.rstrip("\n").splitlines(), chars // 4)[0])
        if count in outputs:
            pieces.append(f"Out[{count}]:\n" + summarize(outputs[count], budget_tokens=budget_tokens // 4).text)
        if log is not None and log.error is not None and log.error[1] == count:
            pieces.append(f"raised {type(log.error[0]).__name__}: {log.error[0]}")
        text, truncated = keep_ends("\n".join(pieces).splitlines(), chars)
        cut = truncated or len(source) > chars // 2
        blocks.append(context_block(f"In[{count}]", "cell", "cell", text, cut, redacting=redacting))
    return blocks


# -- templates --------------------------------------------------------------------------------


class _Cells:
    """``In`` / ``Out`` for templates: indexing a cell that does not exist (or has no
    output) raises `NotebookContextError` naming the cell, instead of Jinja's undefined."""

    def __init__(self, name: str, data: Any, last: int) -> None:
        self._name, self._data, self._last = name, data, last

    def __getitem__(self, index: Any) -> Any:
        try:
            return self._data[index]
        except (KeyError, IndexError, TypeError):
            pass
        if not isinstance(index, int):
            raise NotebookContextError(f"{self._name}[{index!r}]: cells are numbered: {self._name}[3]")
        if index >= self._last or index < 1:
            raise NotebookContextError(
                f"{self._name}[{index}] does not exist: the cells run so far are 1 to {self._last - 1}"
            )
        raise NotebookContextError(
            f"Out[{index}] does not exist: cell In[{index}] produced no result "
            "(it returned None or ended with ';'); use {{ In[" + str(index) + "] }} for its source"
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._data, name)

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __str__(self) -> str:
        return str(self._data)


def template_namespace(shell: Any) -> dict[str, Any]:
    """The names a cell template sees: the user namespace, plus ``error`` (the last exception,
    unless the user defined an ``error``) and ``In`` / ``Out`` that name a missing cell clearly."""
    ns = shell.user_ns
    extra: dict[str, Any] = {}
    if "error" not in ns:
        extra["error"] = LastError(shell)
    count = len(_inputs(shell)) - 1  # the running cell
    if isinstance(ns.get("In"), list):
        extra["In"] = _Cells("In", ns["In"], count)
    if isinstance(ns.get("Out"), dict):
        extra["Out"] = _Cells("Out", ns["Out"], count)
    return {**ns, **extra}  # Jinja copies the namespace anyway
