"""Print the kill rate of the mutation runs kept in the repository (``make mutation``).

Reads ``.ci/mutation-results/<module>.txt`` (written by ``.ci/mutation_run.py``): a first line
``# sha256 <hex> <path>``, the hash of the module's source the run was made on, then one ``name: status``
line per mutant (``mutmut results --all true``). A module whose source no longer has that hash is **stale**:
its mutants are named and left out (not counted as killed) until it is run again. Killed and timed-out
mutants count as killed; mutants listed in ``.ci/mutation_equivalent.txt`` (one name a line, ``#``
comments: mutants that change no behaviour, with the reason) are left out of the rate. Exits 1 when the
rate of non-equivalent mutants killed is under ``--target`` (default 90).

The report covers `SCOPE` (issue 27: ``core/`` and ``agent/evaluation/``): a module there without a saved
result is named **NOT RUN**, and the last line says how many of the scope's modules have results.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = Path(__file__).with_name("mutation_equivalent.txt")
RESULTS = Path(__file__).with_name("mutation-results")
#: Statuses of a mutant a run did not test (a run of other modules lists them so).
NOT_RUN = ("skipped", "not checked")
STAMP = re.compile(r"# sha256 ([0-9a-f]{64}) (\S+)$")
#: The packages the report covers (under ``src/``): every module there should have a saved result.
SCOPE = ("ipyagent/core", "ipyagent/agent/evaluation")


def stamp(source: Path) -> str:
    """The sha256 a result is stamped with: of the module's source bytes."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def module_of(name: str) -> str:
    """A mutant's module: its name is ``module.x_function__mutmut_N`` (a method's:
    ``module.xǁClassǁmethod__mutmut_N``)."""
    return re.split(r"\.x[ǁ_]", name, maxsplit=1)[0]


def source_of(module: str, root: Path = ROOT) -> str:
    """The source path (relative to `root`) of a module mutmut names (a package's ``__init__`` by the package)."""
    path = Path("src", *module.split("."))
    return str(path.with_suffix(".py") if (root / path.with_suffix(".py")).exists() else path / "__init__.py")


def read_result(saved: Path, root: Path = ROOT) -> tuple[dict[str, str], str | None]:
    """(name -> status, None) from a saved result, or (those, the reason it is stale): no stamp, or the
    stamped source now has another hash or is gone."""
    lines = saved.read_text().splitlines()
    found = {}
    for line in lines:
        name, sep, status = line.strip().rpartition(": ")
        if sep and name and not name.startswith("#"):
            found[name] = status
    match = STAMP.match(lines[0].strip()) if lines else None
    if match is None:
        return found, "no sha256 stamp"
    source = root / match.group(2)
    if not source.exists():
        return found, f"{match.group(2)} is gone"
    if stamp(source) != match.group(1):
        return found, f"{match.group(2)} changed since its run"
    return found, None


def per_module(counted: dict[str, str]) -> dict[str, tuple[int, int]]:
    """module -> (killed, counted)."""
    tally: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name, status in counted.items():
        tally[module_of(name)][0] += status in ("killed", "timeout")
        tally[module_of(name)][1] += 1
    return {module: (k, n) for module, (k, n) in tally.items()}


def equivalents(path: Path = EQUIVALENT) -> set[str]:
    return {line.split("#")[0].strip() for line in path.read_text().splitlines()} - {""} if path.exists() else set()


def scope_modules(root: Path = ROOT, scope: tuple[str, ...] = SCOPE) -> list[str]:
    """The modules under `scope` mutmut makes mutants of: every ``.py`` file, a package's ``__init__`` only
    when it defines a function (re-exports give no mutant)."""
    found = []
    for package in scope:
        for path in sorted((root / "src" / package).rglob("*.py")):
            if path.name == "__init__.py" and not re.search(r"^\s*(async )?def ", path.read_text(), re.MULTILINE):
                continue
            parts = path.relative_to(root / "src").with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def report(saved: list[Path], equivalent: set[str], target: float, root: Path = ROOT) -> tuple[float, list[str]]:
    """The rate of fresh, non-equivalent, run mutants killed, and the report's lines."""
    out: list[str] = []
    found: dict[str, str] = {}
    stale: dict[str, str] = {}
    for path in saved:
        statuses, why = read_result(path, root)
        if why:
            stale.update(statuses)
            out.append(f"  STALE (not counted as killed): {path.stem}: {why}; run it again")
        else:
            found.update(statuses)
    unchecked = [name for name, status in found.items() if status in NOT_RUN]
    counted = {name: status for name, status in found.items() if name not in equivalent and name not in unchecked}
    by_status = collections.Counter(counted.values())
    killed = by_status["killed"] + by_status["timeout"]
    rate = 100.0 * killed / len(counted) if counted else 0.0
    out.insert(0, f"mutants: {len(found) + len(stale)}; stale (left out): {len(stale)}; equivalent (left out): "
                  f"{len(equivalent & set(found))}; not run (left out): {len(unchecked)}; counted: {len(counted)}")
    out.insert(1, "by status: " + ", ".join(f"{status} {n}" for status, n in sorted(by_status.items())))
    out += [f"  {status}: {name}" for name, status in sorted(counted.items()) if status not in ("killed", "timeout")]
    # A listed name a run has killed is stale (renumbered by an edit); so is one of a fresh module it no longer makes.
    # ("no tests": a Protocol's stub, say, that nothing runs: still no behaviour to change.)
    fresh = {module_of(name) for name in found}
    out += [f"  listed as equivalent but {found.get(name, 'not a mutant now')}: {name}" for name in sorted(equivalent)
            if found.get(name) in ("killed", "timeout") or (name not in found and module_of(name) in fresh)]
    out += [f"  {module}: {k}/{n} killed, {100.0 * k / n:.1f}%"
            for module, (k, n) in sorted(per_module(counted).items())]
    scope = scope_modules(root)
    kept = {path.stem for path in saved}
    out += [f"  NOT RUN (no saved result): {module}" for module in scope if module not in kept]
    out.append(f"kill rate: {rate:.1f}% of non-equivalent mutants (target {target:g}%); "
               f"{sum(module in kept for module in scope)} of the scope's {len(scope)} modules run")
    return rate, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--results", type=Path, nargs="*", help="saved results (default: .ci/mutation-results/*.txt)")
    args = parser.parse_args()
    rate, lines = report(args.results or sorted(RESULTS.glob("*.txt")), equivalents(), args.target)
    print("\n".join(lines))
    return 0 if rate >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
