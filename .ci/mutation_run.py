"""Run mutmut over some modules and keep each module's results in the repository (``make mutation``).

    python .ci/mutation_run.py [--tests tests/core/ ...] 'ipyagent.core.messages*' ...

The arguments are mutmut's mutant-name globs. ``--tests`` replaces ``[tool.mutmut]``'s test selection for
this run (mutmut reads one selection from pyproject.toml; a core mutant would otherwise run every wide test that
reaches it). Afterwards each module the globs named gets ``.ci/mutation-results/<module>.txt``: a first line
``# sha256 <hex> <path>`` stamping the source the run was made on, then mutmut's ``name: status`` lines of that
module. ``.ci/mutation_report.py`` reads them and names a module whose source changed since as stale.
"""

from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutation_report import NOT_RUN, RESULTS, ROOT, module_of, read_result, source_of, stamp


def save(listing: str, globs: list[str], stamps: dict[str, str], out: Path = RESULTS, root: Path = ROOT) -> list[Path]:
    """Write the results in `listing` (``mutmut results --all true``) of each module a mutant `globs` name
    belongs to (all without globs): every mutant of the module, those run before too (a run of a module's
    survivors alone keeps its killed ones), stamped with its source's hash from `stamps` (path -> sha256,
    taken before the run)."""
    by_module: dict[str, list[str]] = {}
    named: set[str] = set()
    for line in listing.splitlines():
        name, sep, _ = line.strip().rpartition(": ")
        if sep:
            by_module.setdefault(module_of(name), []).append(line.strip())
            if not globs or any(fnmatch.fnmatch(name, glob) for glob in globs):
                named.add(module_of(name))
    by_module = {module: lines for module, lines in by_module.items() if module in named}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for module, lines in sorted(by_module.items()):
        path = source_of(module, root)
        target = out / f"{module}.txt"
        kept = _earlier(target, stamps[path], root)
        lines = [f"{name}: {kept[name]}" if status in NOT_RUN and name in kept else line
                 for line in lines for name, _, status in [line.rpartition(": ")]]
        target.write_text(f"# sha256 {stamps[path]} {path}\n" + "\n".join(sorted(lines)) + "\n")
        written.append(target)
    return written


def _earlier(saved: Path, digest: str, root: Path) -> dict[str, str]:
    """The run statuses of `saved` when it was made on the source hashing to `digest`, else none: mutmut
    forgets its results when the test selection changes, and a run of a few mutants then lists the rest
    as not checked."""
    if not saved.exists():
        return {}
    found, stale = read_result(saved, root)
    first = saved.read_text().split("\n", 1)[0]
    if stale or digest not in first:
        return {}
    return {name: status for name, status in found.items() if status not in NOT_RUN}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", action="append", default=[], help="a test path of this run's selection, "
                        "one per --tests (default: pyproject's selection)")
    parser.add_argument("--max-children", default="2")
    parser.add_argument("globs", nargs="*")
    args = parser.parse_args()
    from mutmut.__main__ import cli
    from mutmut.configuration import config

    if args.tests:
        config().pytest_add_cli_args_test_selection = list(args.tests)
    # Stamped before the run: mutmut copies the sources as they are when it starts.
    stamps = {str(p.relative_to(ROOT)): stamp(p) for p in (ROOT / "src").rglob("*.py")}
    cli(["run", "--max-children", args.max_children, *args.globs], standalone_mode=False)
    listing = subprocess.run([str(Path(sys.executable).with_name("mutmut")), "results", "--all", "true"],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout
    for path in save(listing, args.globs, stamps):
        print(f"saved {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
