"""The package's layout (issue 27, item 2): a folder is read in one look, so none holds more than 16
modules, and `notebook/` keeps at most 12 at its top (the rest live in its sub-packages). A module
here is a ``.py`` file other than the package's ``__init__.py``. The tests mirror the layers (item 5),
and no test module imports another."""

from __future__ import annotations

import ast
from pathlib import Path

import ipyagent

PACKAGE = Path(ipyagent.__file__).parent
MAX_MODULES = 16
MAX_NOTEBOOK_TOP = 12


def module_counts(root: Path) -> dict[str, int]:
    """``folder`` (relative to `root`, ``.`` for the top) -> the number of modules in it, for every
    package folder under `root`."""
    return {folder.relative_to(root).as_posix(): sum(p.name != "__init__.py" for p in folder.glob("*.py"))
            for folder in [root, *sorted(p.parent for p in root.rglob("*/__init__.py"))]}


def test_no_folder_holds_more_than_16_modules() -> None:
    crowded = {k: n for k, n in module_counts(PACKAGE).items() if n > MAX_MODULES}
    assert not crowded, f"folders over {MAX_MODULES} modules (make a sub-package along a seam): {crowded}"


def test_the_notebook_layer_keeps_at_most_12_modules_at_its_top() -> None:
    assert module_counts(PACKAGE)["notebook"] <= MAX_NOTEBOOK_TOP


def test_the_count_sees_every_package_and_leaves_out_init(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ["__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py"]:
        (tmp_path / "pkg" / name).write_text("")
    (tmp_path / "pkg" / "notes.txt").write_text("")
    assert module_counts(tmp_path / "pkg") == {".": 2, "sub": 1}
    assert {"core", "drivers", "drivers/protocols", "notebook/views"} <= module_counts(PACKAGE).keys()


TESTS = Path(__file__).parent
LAYERS = ("core", "drivers", "memory", "tools", "agent", "notebook")


def imported_test_modules(source: str) -> list[str]:
    """The ``test_*`` modules that `source` (a test file's text) imports, by the name it uses."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module or ''}.{a.name}" for a in node.names]
        found += [n for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def test_tests_mirror_the_layers_and_no_test_imports_another() -> None:
    """`tests/<layer>/` for each layer of `src/ipyagent`; what tests share lives in a folder's
    ``conftest.py`` or in `tests/support/`, never in another test module."""
    assert all((TESTS / layer / "__init__.py").exists() for layer in LAYERS)
    importing = {p.relative_to(TESTS).as_posix(): found for p in TESTS.rglob("test_*.py")
                 if (found := imported_test_modules(p.read_text()))}
    assert not importing, f"tests importing test modules (move the shared part to a conftest or support/): {importing}"


def test_the_import_check_sees_each_form() -> None:
    source = "from ..agent.test_evaluate import store\nimport tests.core.test_core\n"
    assert imported_test_modules(source) == ["agent.test_evaluate.store", "tests.core.test_core"]
    assert imported_test_modules("from ..support.shell import ip\nimport pytest\n") == []
