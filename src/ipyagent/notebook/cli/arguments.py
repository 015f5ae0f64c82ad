"""The command line of ``ipyagent eval`` (argparse): what it takes, and the one line it says when an
argument is wrong (exit code 2, no traceback, no usage block)."""

from __future__ import annotations

import argparse
import ast
import math
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from .gates import METRICS, Gate, parse_gate

#: Exit codes: every gate passed; a gate failed; the notebook could not run (or a bad argument).
OK, GATE_FAILED, NOT_RUN = 0, 1, 2

DESCRIPTION = """Run a notebook headless (nbclient), collect every evaluation (%%compare --over) and comparison
it made, print a summary per evaluation, write reports, and exit 1 when a gate fails (2: the notebook
could not run)."""


class UsageFailure(Exception):
    """A bad argument: its one line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage and exits; we say one line
        raise UsageFailure(f"{message} (ipyagent eval --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ipyagent eval", description=DESCRIPTION)
    p.add_argument("notebook", type=Path, help="the notebook to run (.ipynb)")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="set NAME in a cell after the one tagged 'parameters' (else at the top), papermill-style; "
                   "VALUE a Python literal (1, 0.5, 'x', [1, 2], True), else a string (repeatable)")
    p.add_argument("--gate", action="append", default=[], metavar="[WHERE:]METRIC OP VALUE",
                   help="fail (exit 1) unless every column meets it, e.g. 'pass_rate>=0.9' (repeatable); WHERE: "
                   "only a column (name, alias or glob), an evaluation (its -o name or 'cell N'), or EVAL:COLUMN; "
                   f"METRIC one of {', '.join(METRICS)}")
    p.add_argument("--replay", action="store_true",
                   help="run with no provider API key in the kernel, so a notebook replays its cassettes")
    p.add_argument("--store", metavar="PATH",
                   help="the run store (SQLite file, or off): a re-run sends only the runs not in it "
                   "(default: $IPYAGENT_RUN_STORE, else .ipyagent/runs.sqlite beside the notebook)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the evaluations, comparisons and gates as JSON")
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="write JUnit XML: one test case per row x column, failures with their reasons")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="write a Markdown summary (for $GITHUB_STEP_SUMMARY)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="save the executed notebook")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="seconds a cell may run (default 600)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel (default: the notebook's, else python3)")
    return p


def literal(text: str) -> Any:
    """A parameter's value: a Python literal (``0.5``, ``'x'``, ``[1, 2]``, ``True``), else `text` itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parameters(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` items as a dict (`literal` values).

    Raises:
        UsageFailure: an item without ``=``, or a NAME that is not a Python identifier.
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageFailure(f"-p {item!r}: write NAME=VALUE, NAME a Python identifier")
        out[name] = literal(value)
    return out


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any], list[Gate]]:
    """(the arguments, the parameters, the gates), every one checked before anything runs.

    Raises:
        UsageFailure: a bad argument, a missing notebook, a gate that does not parse (one line each).
    """
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not args.notebook.is_file():
        raise UsageFailure(f"{args.notebook}: no such notebook")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise UsageFailure(f"--timeout must be a number of seconds more than 0, not {args.timeout:g}")
    try:
        gates = [parse_gate(text) for text in args.gate]
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    for option, path in (("--json", args.json), ("--junit", args.junit), ("--markdown", args.markdown),
                         ("-o", args.output)):
        if path is not None:
            writable(option, path)
    return args, parameters(args.parameter), gates


def writable(option: str, path: Path) -> None:
    """Check, before the notebook runs (and is paid for), that `option`'s file `path` can be written when
    it ends: its folder is made now when missing (as the write would), and neither it nor `path` is in
    the way.

    Raises:
        UsageFailure: `path` is a folder, its folder cannot be made (a file in the way, a read-only
            place) or written in, or `path` cannot be written.
    """
    if path.is_dir():
        raise UsageFailure(f"{option} {path}: is a folder; give a file in it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageFailure(f"{option} {path}: its folder cannot be made ({exc.strerror or exc}); "
                           "give a file in a folder you can write") from None
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageFailure(f"{option} {path}: cannot be written here; give a file in a folder you can write")
