"""The mutation report reads the results kept in the repository, each stamped with its module's source."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[1] / ".ci"


def load(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CI / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with one module, ``ipyagent.m``, and a result of it stamped with its source."""
    (tmp_path / "src" / "ipyagent").mkdir(parents=True)
    (tmp_path / "src" / "ipyagent" / "m.py").write_text("def f(x):\n    return x + 1\n")
    return tmp_path


def saved(tree: Path, lines: list[str], digest: str | None = None) -> Path:
    report = load("mutation_report")
    digest = digest or report.stamp(tree / "src" / "ipyagent" / "m.py")
    path = tree / "ipyagent.m.txt"
    path.write_text(f"# sha256 {digest} src/ipyagent/m.py\n" + "\n".join(lines) + "\n")
    return path


def test_a_result_stamped_with_its_source_s_hash_is_read_and_counted(tree: Path) -> None:
    report = load("mutation_report")
    path = saved(tree, ["    ipyagent.m.x_f__mutmut_1: killed", "    ipyagent.m.x_f__mutmut_2: survived"])
    assert report.read_result(path, tree) == ({"ipyagent.m.x_f__mutmut_1": "killed",
                                               "ipyagent.m.x_f__mutmut_2": "survived"}, None)
    rate, lines = report.report([path], set(), 90.0, tree)
    assert rate == 50.0 and "  ipyagent.m: 1/2 killed, 50.0%" in lines and not any("STALE" in line for line in lines)
    assert report.report([path], {"ipyagent.m.x_f__mutmut_2"}, 90.0, tree)[0] == 100.0  # an equivalent is left out


def test_a_result_whose_source_changed_is_stale_and_not_counted_as_killed(tree: Path) -> None:
    report = load("mutation_report")
    path = saved(tree, ["    ipyagent.m.x_f__mutmut_1: killed"])
    (tree / "src" / "ipyagent" / "m.py").write_text("def f(x):\n    return x + 2\n")
    assert report.read_result(path, tree)[1] == "src/ipyagent/m.py changed since its run"
    rate, lines = report.report([path], set(), 90.0, tree)
    assert rate == 0.0 and lines[0].startswith("mutants: 1; stale (left out): 1;")
    assert "  STALE (not counted as killed): ipyagent.m: src/ipyagent/m.py changed since its run; run it again" in lines
    (tree / "src" / "ipyagent" / "m.py").unlink()
    assert report.read_result(path, tree)[1] == "src/ipyagent/m.py is gone"


def test_a_result_without_a_stamp_is_stale(tree: Path) -> None:
    report = load("mutation_report")
    path = tree / "ipyagent.m.txt"
    path.write_text("    ipyagent.m.x_f__mutmut_1: killed\n    ipyagent.m.x_f__mutmut_2: killed\n")
    both = {"ipyagent.m.x_f__mutmut_1": "killed", "ipyagent.m.x_f__mutmut_2": "killed"}
    assert report.read_result(path, tree) == (both, "no sha256 stamp")
    assert report.read_result(saved(tree, [], digest="0" * 64), tree)[1] == "src/ipyagent/m.py changed since its run"


def test_a_run_is_saved_a_module_a_file_stamped_with_the_hash_taken_before_it(tree: Path) -> None:
    """A glob naming one function's mutants saves its whole module (the others as mutmut last had them),
    and no module it does not name."""
    run = load("mutation_run")
    listing = ("    ipyagent.m.x_f__mutmut_1: killed\n    ipyagent.m.xǁCǁg__mutmut_1: survived\n"
               "    ipyagent.other.x_h__mutmut_1: not checked\n")
    before = load("mutation_report").stamp(tree / "src" / "ipyagent" / "m.py")
    (written,) = run.save(listing, ["ipyagent.m.x_f*"], {"src/ipyagent/m.py": before}, tree / "out", tree)
    assert written.name == "ipyagent.m.txt"
    assert written.read_text().splitlines() == [f"# sha256 {before} src/ipyagent/m.py",
                                                "ipyagent.m.x_f__mutmut_1: killed",
                                                "ipyagent.m.xǁCǁg__mutmut_1: survived"]


def test_a_later_run_of_a_few_mutants_keeps_the_module_s_earlier_results_on_the_same_source(tree: Path) -> None:
    """mutmut forgets its results when the test selection changes: the saved file's statuses stand for
    the mutants it now lists as not checked, while the source is the one they were found on."""
    run, report = load("mutation_run"), load("mutation_report")
    digest = report.stamp(tree / "src" / "ipyagent" / "m.py")
    first = "ipyagent.m.x_f__mutmut_1: killed\nipyagent.m.x_f__mutmut_2: survived\n"
    (saved,) = run.save(first, [], {"src/ipyagent/m.py": digest}, tree / "out", tree)
    later = "ipyagent.m.x_f__mutmut_1: not checked\nipyagent.m.x_f__mutmut_2: killed\n"
    run.save(later, ["ipyagent.m.x_f__mutmut_2"], {"src/ipyagent/m.py": digest}, tree / "out", tree)
    assert report.read_result(saved, tree) == ({"ipyagent.m.x_f__mutmut_1": "killed",
                                                "ipyagent.m.x_f__mutmut_2": "killed"}, None)
    run.save(later, ["ipyagent.m.x_f__mutmut_2"], {"src/ipyagent/m.py": "0" * 64}, tree / "out", tree)
    assert report.read_result(saved, tree)[0]["ipyagent.m.x_f__mutmut_1"] == "not checked"  # another source


def test_a_module_of_the_scope_without_a_saved_result_is_named_not_run(tree: Path) -> None:
    report = load("mutation_report")
    core = tree / "src" / "ipyagent" / "core"
    (core / "sub").mkdir(parents=True)
    (core / "__init__.py").write_text("from .a import f\n")  # re-exports only: no mutant
    (core / "sub" / "__init__.py").write_text("def g():\n    return 1\n")
    (core / "a.py").write_text("def f():\n    return 2\n")
    (core / "b.py").write_text("def h():\n    return 3\n")
    assert report.scope_modules(tree) == ["ipyagent.core.a", "ipyagent.core.b", "ipyagent.core.sub"]
    path = tree / "ipyagent.core.a.txt"
    path.write_text(f"# sha256 {report.stamp(core / 'a.py')} src/ipyagent/core/a.py\n"
                    "    ipyagent.core.a.x_f__mutmut_1: killed\n")
    rate, lines = report.report([path], set(), 90.0, tree)
    assert rate == 100.0 and lines[-3:] == [
        "  NOT RUN (no saved result): ipyagent.core.b", "  NOT RUN (no saved result): ipyagent.core.sub",
        "kill rate: 100.0% of non-equivalent mutants (target 90%); 1 of the scope's 3 modules run"]
