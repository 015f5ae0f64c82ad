"""The code's shape: a function in the driver and agent layers fits on a screen (BRIEF: "a function
fits on a screen"; issue 12: none over 60 lines in ``drivers/`` and ``agent/``)."""

from __future__ import annotations

import ast
from pathlib import Path

import ipyagent

PACKAGE = Path(ipyagent.__file__).parent
#: The layers held to the limit.
LAYERS = ("drivers", "agent")
#: Lines from ``def`` to the function's last line, docstring included (decorators not).
MAX_LINES = 60


def long_functions(root: Path, layers: tuple[str, ...], limit: int) -> dict[str, int]:
    """``layer/module.py::name`` -> length in lines of every function (nested ones and methods
    included) longer than `limit` in the given layers of the package at `root`."""
    found = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if length > limit:
                        found[f"{path.relative_to(root).as_posix()}::{node.name}"] = length
    return found


def test_no_function_in_drivers_or_agent_is_over_60_lines() -> None:
    too_long = long_functions(PACKAGE, LAYERS, MAX_LINES)
    assert not too_long, f"functions over {MAX_LINES} lines (split them along their seams): {too_long}"


def test_the_check_sees_a_long_function_and_a_method(tmp_path: Path) -> None:
    layer = tmp_path / "drivers"
    layer.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (layer / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n\n\nclass C:\n"
                                f"    async def method(self):\n" + body.replace("    ", "        ") + "\n")
    assert long_functions(tmp_path, ("drivers",), 60) == {"drivers/m.py::long": 61, "drivers/m.py::method": 61}
    assert long_functions(tmp_path, ("drivers",), 61) == {}
