"""Print the kill rate of the last ``mutmut run`` (``make mutation``).

Reads ``mutmut results --all true`` (one ``name: status`` line per mutant).
Killed and timed-out mutants count as killed; mutants listed in
``.ci/mutation_equivalent.txt`` (one name a line, ``#`` comments: mutants that
change no behaviour, with the reason) are left out of the rate. Exits 1 when
the rate of non-equivalent mutants killed is under ``--target`` (default 90).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

EQUIVALENT = Path(__file__).with_name("mutation_equivalent.txt")
#: Statuses of a mutant a run did not test (a run of other modules lists them so).
NOT_RUN = ("skipped", "not checked")


def statuses(mutmut: str, saved: list[Path]) -> dict[str, str]:
    """name -> status, from ``mutmut results --all true`` or from saved copies of its output."""
    if saved:
        out = "\n".join(path.read_text() for path in saved)
    else:
        out = subprocess.run([mutmut, "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name and (status not in NOT_RUN or name not in found):  # a run's status is kept over "not run"
            found[name] = status
    return found


def per_module(counted: dict[str, str]) -> dict[str, tuple[int, int]]:
    """module -> (killed, counted); a mutant's name is ``module.x_function__mutmut_N`` (methods:
    ``module.xǁClassǁmethod__mutmut_N``)."""
    tally: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name, status in counted.items():
        module = re.split(r"\.x[ǁ_]", name, maxsplit=1)[0]
        tally[module][0] += status in ("killed", "timeout")
        tally[module][1] += 1
    return {module: (k, n) for module, (k, n) in tally.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mutmut", default=str(Path(sys.executable).with_name("mutmut")))
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--results", type=Path, nargs="*", default=[],
                        help="saved `mutmut results --all true` outputs (runs made module by module) instead of the last run")
    args = parser.parse_args()
    found = statuses(args.mutmut, args.results)
    equivalent = {line.split("#")[0].strip() for line in EQUIVALENT.read_text().splitlines()} - {""} if EQUIVALENT.exists() else set()
    unchecked = [name for name, status in found.items() if status in NOT_RUN]
    counted = {name: status for name, status in found.items() if name not in equivalent and name not in unchecked}
    by_status = collections.Counter(counted.values())
    killed = by_status["killed"] + by_status["timeout"]
    rate = 100.0 * killed / len(counted) if counted else 0.0
    print(f"mutants: {len(found)}; equivalent (left out): {len(equivalent & set(found))}; not run (left out): "
          f"{len(unchecked)}; counted: {len(counted)}")
    print("by status: " + ", ".join(f"{status} {n}" for status, n in sorted(by_status.items())))
    for name, status in sorted(counted.items()):
        if status not in ("killed", "timeout"):
            print(f"  {status}: {name}")
    for name in sorted(equivalent):  # a listed name a run has killed, or no longer makes, is stale (renumbered by an edit)
        if found.get(name, "survived") != "survived" or (name not in found and not args.results):
            print(f"  listed as equivalent but {found.get(name, 'not a mutant now')}: {name}")
    for module, (module_killed, module_counted) in sorted(per_module(counted).items()):
        print(f"  {module}: {module_killed}/{module_counted} killed, {100.0 * module_killed / module_counted:.1f}%")
    print(f"kill rate: {rate:.1f}% of non-equivalent mutants (target {args.target:g}%)")
    return 0 if rate >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
