"""Grading an evaluation's runs by hand: a click in the matrix (JupyterLab), ``ev.grade(...)``
and ``%agent grade``.

The kernel keeps the evaluations it showed (`shown`; the last `KEEP`, by id). A grade goes
through `Evaluation.grade`: kept in the run store against the run, and every view showing the
evaluation redraws its saved output (`views.evaluation_view`: a display update, so the saved
notebook holds the grade and a reopened one draws it without a kernel).

The matrix's renderer (labextension/src/grading.ts) asks the kernel on comm target `TARGET`:
a page opens a comm with ``{"evaluation", "row", "column", "repeat", "passed", "note",
"run_id"}`` (``passed``: true, false, or null to take a grade back) and gets one message,
``{"ok": true, "output": OUTPUT}`` (the evaluation's new nbformat output, which the page puts
in place of the old) or ``{"ok": false, "message": WHY}``. An evaluation this kernel did not
show (it was restarted) is graded in the run store by its ``run_id``; the answer says to run
the cell again to draw it.
"""

from __future__ import annotations

import argparse
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

from ..agent import Evaluation
from .render.evaluation import saved_output

#: The comm target a page opens to grade a run.
TARGET = "ipyagent.grade"
#: Evaluations kept for grading, the newest last.
KEEP = 50

_shown: OrderedDict[str, Evaluation] = OrderedDict()
_saved: dict[str, dict[str, Any]] = {}  # evaluation id -> how its saved output is drawn (`saved_output`'s options)
_lock = threading.Lock()


def shown(ev: Evaluation, **saved: Any) -> None:
    """`ev` was shown: it can be graded from its matrix and is ``%agent grade``'s default;
    `saved`: `render.evaluation.saved_output`'s options (its size limit, the ``-o`` name)."""
    with _lock:
        _shown[ev.id] = ev
        _saved[ev.id] = saved
        _shown.move_to_end(ev.id)
        while len(_shown) > KEEP:
            _saved.pop(_shown.popitem(last=False)[0], None)


def find(evaluation_id: str | None = None) -> Evaluation | None:
    """The evaluation shown under `evaluation_id` (None: the last one shown)."""
    with _lock:
        if evaluation_id is None:
            return next(reversed(_shown.values()), None)
        return _shown.get(evaluation_id)


def _verdict(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"passed is true, false or null, not {value!r}")


def grade_request(data: dict[str, Any], store: Callable[[], Any]) -> dict[str, Any]:
    """The answer to a page's grade (see the module doc); `store` gives the session's run store."""
    try:
        passed, note = _verdict(data.get("passed")), str(data.get("note") or "")
        row, repeat = int(data["row"]), int(data.get("repeat") or 0)
        ev = find(str(data.get("evaluation")))
        if ev is None:
            run_id, opened = data.get("run_id"), store()
            if not run_id or opened is None:
                return {"ok": False, "message": "this kernel did not run that evaluation and has no run store to keep "
                                               "the grade in: run the cell again, then grade"}
            opened.set_grade(str(run_id), passed, note)
            return {"ok": True, "output": None, "message": "kept in the run store; run the cell again to draw it"}
        ev.grade(row, str(data["column"]), passed, note, repeat=repeat)
        return {"ok": True, "output": saved_output(ev, **_saved.get(ev.id, {}))}
    except (KeyError, LookupError, ValueError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        return {"ok": False, "message": f"not graded: {message}"}


def register(ipython: Any, store: Callable[[], Any]) -> None:
    """Answer pages on `TARGET` in a kernel (`%load_ext`); nothing in a terminal."""
    if getattr(ipython, "kernel", None) is None:
        return
    from comm import get_comm_manager

    def open_comm(comm: Any, message: dict[str, Any]) -> None:
        data = (message.get("content") or {}).get("data") or {}
        comm.send(grade_request(data if isinstance(data, dict) else {}, store))

    get_comm_manager().register_target(TARGET, open_comm)


def unregister(ipython: Any) -> None:
    if getattr(ipython, "kernel", None) is None:
        return
    from comm import get_comm_manager

    get_comm_manager().targets.pop(TARGET, None)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, not argparse's exit
        raise UsageError(f"%agent grade: {message}; {USAGE}")


USAGE = "use %agent grade ROW COLUMN pass|fail|clear [NOTE ...] [--repeat N] [--eval VAR]"


def _parser() -> _Parser:
    parser = _Parser(prog="%agent grade", add_help=False)
    parser.add_argument("row", type=int)
    parser.add_argument("column")
    parser.add_argument("verdict", choices=("pass", "fail", "clear"))
    parser.add_argument("note", nargs="*")
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--eval", dest="name")
    return parser


def grade_command(shell: Any, words: list[str]) -> None:
    """``%agent grade ROW COLUMN pass|fail|clear [NOTE ...] [--repeat N] [--eval VAR]``: grade a run
    of the last evaluation shown (or of the `Evaluation` in VAR), as `Evaluation.grade`."""
    args = _parser().parse_args(words)
    if args.name is not None:
        ev = shell.user_ns.get(args.name)
        if not isinstance(ev, Evaluation):
            raise UsageError(f"%agent grade: {args.name!r} is not an Evaluation (bind one with %%compare ... -o VAR)")
    else:
        ev = find()
        if ev is None:
            raise UsageError("%agent grade: no evaluation yet; run %%compare ID ... --over ROWS first")
    passed = {"pass": True, "fail": False, "clear": None}[args.verdict]
    note = " ".join(args.note)
    try:
        cell = ev.grade(args.row, args.column, passed, note, repeat=args.repeat)
    except KeyError as exc:
        raise UsageError(f"%agent grade: {exc.args[0]}") from None
    except LookupError as exc:
        raise UsageError(f"%agent grade: {exc}") from None
    what = "grade taken back" if passed is None else ("pass" if passed else "fail") + (f" — {note}" if note else "")
    kept = "" if ev.store_path and cell.run_id else " (no run store: kept in this evaluation only)"
    print(f"row {args.row} on {cell.column} (repeat {args.repeat}): {what}{kept}")
