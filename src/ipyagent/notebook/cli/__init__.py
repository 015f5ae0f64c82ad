"""``ipyagent eval NOTEBOOK.ipynb`` (the ``ipyagent`` console script, and ``python -m ipyagent eval``): run a
notebook headless, collect its evaluations and comparisons, report them and gate on them.

One module per job: `arguments` (the command line), `run` (nbclient), `collect` (the saved outputs),
`gates`, `reports` (terminal, JSON, JUnit, Markdown). Exit codes (`arguments`): 0 every gate passed, 1 a
gate failed (each named with its figure), 2 the notebook could not run (the cell and its error's one line)
or an argument is wrong. Everything it prints or writes (stdout, stderr, the reports, the executed notebook's
outputs) passes the one redactor (`core.redact`) first. nbclient and rich are imported when the command runs,
never by ``import ipyagent``.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ...core import redact
from .arguments import GATE_FAILED, NOT_RUN, OK, UsageFailure, parse

USAGE = "usage: ipyagent eval NOTEBOOK.ipynb [options] (ipyagent eval --help)"


def main(argv: list[str] | None = None) -> int:
    """The ``ipyagent`` command: ``ipyagent eval ...``; the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]) or not argv:
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return NOT_RUN if not argv else OK
    if argv[0] != "eval":
        print(f"ipyagent: unknown command {argv[0]!r}; {USAGE}", file=sys.stderr)
        return NOT_RUN
    try:
        return evaluate(argv[1:])
    except UsageFailure as exc:
        print(f"ipyagent eval: {redact(str(exc))}", file=sys.stderr)
        return NOT_RUN
    except KeyboardInterrupt:
        print("ipyagent eval: interrupted", file=sys.stderr)
        return NOT_RUN


def _missing_dependency() -> str | None:
    import importlib.util

    missing = [name for name in ("nbclient", "nbformat", "ipykernel") if importlib.util.find_spec(name) is None]
    return f"{', '.join(missing)} not installed: pip install 'ipyagent[cli]'" if missing else None


def evaluate(argv: list[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``ipyagent eval`` with `argv` (its arguments): run, collect, report, gate; the exit code.

    Raises:
        UsageFailure: a bad argument (one line; the caller prints it and exits 2).
    """
    from .collect import collect, uncollected
    from .gates import check_all, not_checked
    from .reports import junit, print_summary, report_json, report_markdown, write
    from ...memory import StoreError
    from .run import NotebookFailed, check_store, execute, inject_parameters, kernel_env, read, redact_outputs

    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    args, values, gates = parse(argv)
    missing = _missing_dependency()
    if missing:
        raise UsageFailure(missing)
    try:
        nb = read(args.notebook)
    except NotebookFailed as exc:
        raise UsageFailure(str(exc)) from None
    number = _numbering(inject_parameters(nb, values))
    env = kernel_env(replay=args.replay, store=args.store)
    try:  # a store the kernel cannot open would be turned off there, silently: every run paid again
        check_store(env, args.notebook.parent.resolve())
    except StoreError as exc:
        raise UsageFailure(f"{exc}; give --store another file (or off: no store)") from None
    failure = None
    try:
        execute(nb, args.notebook, env=env, timeout=args.timeout, kernel=args.kernel, stream=stderr, number=number)
    except NotebookFailed as exc:
        failure = exc
    redact_outputs(nb)
    if args.output:
        import nbformat

        args.output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, args.output)
    found = collect(nb, number)
    evaluations = [(f.name, f.doc, f.gates, f.cell) for f in found if f.kind == "evaluation"]
    results = check_all(gates, evaluations) if failure is None else not_checked(
        gates, "the notebook did not run to its end")
    code, outcome = _outcome(failure, results, args.notebook.name)
    print_summary(found, results, stdout)
    for line in uncollected(nb, number):  # else "the notebook ran no evaluation", with no reason
        print(f"ipyagent eval: {line}", file=stderr)
    if args.json:
        write(args.json, report_json(found, results, notebook=str(args.notebook), exit_code=code))
    if args.junit:
        write(args.junit, junit(found, args.notebook.name, failure=None if failure is None else str(failure)))
    if args.markdown:
        write(args.markdown, report_markdown(found, results, notebook=args.notebook.name, outcome=outcome))
    print(f"ipyagent eval: {redact(outcome)}", file=stderr)  # the last line, whatever the code
    return code


def _numbering(injected: int | None) -> Any:
    """A cell's index in the executed notebook -> its number (1-based) in the notebook file; the cell
    `injected` for ``-p`` is ``parameters``."""
    def number(index: int) -> int | str:
        if injected is None or index < injected:
            return index + 1
        return "-p parameters" if index == injected else index
    return number


def _outcome(failure: Any, results: list[Any], notebook: str) -> tuple[int, str]:
    """(exit code, the one line that says it)."""
    if failure is not None:
        return NOT_RUN, f"{notebook} did not run to its end: {failure}"
    failed = [r for r in results if not r.passed]
    if failed:
        more = f" (and {len(failed) - 1} more, listed above)" if len(failed) > 1 else ""
        return GATE_FAILED, f"{len(failed)} of {len(results)} gate checks failed: {failed[0].line()}{more}"
    return OK, f"{len(results)} gate checks passed" if results else "ran (no gate)"
