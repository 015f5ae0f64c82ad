"""The code's shape: every function in the package fits on a screen (BRIEF: "a function fits on
a screen"; issue 12: none over 60 lines)."""

from __future__ import annotations

import ast
from pathlib import Path

import ipyagent

PACKAGE = Path(ipyagent.__file__).parent
#: Lines from ``def`` to the function's last line, docstring included (decorators not).
MAX_LINES = 60


def long_functions(root: Path, limit: int) -> dict[str, int]:
    """``module/path.py::name`` -> length in lines of every function (nested ones and methods
    included) longer than `limit` in any module under `root`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > limit:
                    found[f"{path.relative_to(root).as_posix()}::{node.name}"] = length
    return found


def test_no_function_in_the_package_is_over_60_lines() -> None:
    too_long = long_functions(PACKAGE, MAX_LINES)
    assert not too_long, f"functions over {MAX_LINES} lines (split them along their seams): {too_long}"


def test_the_check_covers_every_layer_and_the_top_level() -> None:
    layers = {path.parent.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    assert {".", "core", "drivers", "memory", "tools", "agent", "notebook"} <= layers


def test_the_check_sees_a_long_function_and_a_method_anywhere(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "notebook").mkdir()
    (tmp_path / "notebook" / "m.py").write_text(
        f"def short():\n    pass\n\n\ndef long():\n{body}\n\n\nclass C:\n"
        f"    async def method(self):\n" + body.replace("    ", "        ") + "\n"
    )
    (tmp_path / "top.py").write_text(f"def long():\n{body}\n")
    assert long_functions(tmp_path, 60) == {"notebook/m.py::long": 61, "notebook/m.py::method": 61, "top.py::long": 61}
    assert long_functions(tmp_path, 61) == {}
