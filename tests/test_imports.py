"""How the package's modules import each other (issue 27): no import circle between files, imports
inside functions counted, and no import inside a function but of the heavy libraries loaded on
first use (`LAZY`): an import hidden in a function hid the circles that moved the code around."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ipyagent

PACKAGE = Path(ipyagent.__file__).parent

#: Third-party packages a function may import, each heavy to load and needed only on some paths
#: (``import ipyagent`` and ``%load_ext`` stay light: benchmarks/import_load.py).
LAZY = {
    "ipywidgets": "the live views' widgets, drawn in a kernel only",
    "anywidget": "the live views' widgets, drawn in a kernel only",
    "traitlets": "the live views' widgets, drawn in a kernel only",
    "comm": "the live views' widgets, drawn in a kernel only",
    "jinja2": "templates: a cell or row that holds one",
    "markdown_it": "Markdown rendering: the first answer drawn",
    "nh3": "HTML sanitizing: the first answer drawn",
    "rich": "a colour terminal's output",
    "mcp": "the MCP SDK: a server started",
    "uvicorn": "the HTTP server of %agent serve-mcp (the mcp SDK's), when one is started",
    "jupyter_core": "Jupyter's runtime directory for %agent serve-mcp's token file (present wherever a kernel is)",
    "psutil": "a stdio MCP server's process group (the mcp extra's): a server started or closed",
    "jsonschema": "MCP tool input checks (the SDK's validator)",
    "pandas": "a user's frame, already imported by the user",
    "polars": "a user's frame, already imported by the user",
    "numpy": "arrays and an evaluation's bootstrap intervals",
    "scipy": "statistics",
    "opentelemetry": "tracing, when turned on",
    "psycopg": "the PostgreSQL run store",
    "genai_prices": "price tables: the first priced turn",
    "bm25s": "Task Memory search",
    "regex": "Task Memory's regex search with a time limit",
    "docstring_parser": "a tool's schema from its docstring",
    "simpleeval": "the calculator tool",
    "nbclient": "ipyagent eval: a notebook run headless",
    "nbformat": "ipyagent eval: a notebook read and written",
    "tenacity": "a request's retries: its first try failed (tenacity loads tornado's integration where tornado is)",
    "pyarrow": "an evaluation exported to or read from Parquet (the parquet extra)",
}

#: Modules whose functions import the package's own modules on first use, by design: the public
#: faces that stay light (a package's ``__init__`` exports lazily), the extension loader, which
#: declares the magics and loads them when one is first used, and the drivers' registry, which
#: imports a driver (with httpx2), the cassettes and the entry points when a driver is made, so a
#: first ``%provider`` loads none of them (tests/notebook/test_first_magic.py).
LOADERS = ("__init__.py", "notebook/extension.py", "drivers/registry.py")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def function_imports(root: Path) -> list[str]:
    """``path:line module`` of each import inside a function under `root` that is neither of a
    `LAZY` package nor in a `LOADERS` module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.endswith(LOADERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = set()
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                for name in names:
                    if name.startswith(".") or name.split(".")[0] not in LAZY:
                        lines.add(f"{relative}:{node.lineno} {name}")
        found += sorted(lines)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports when run (at the top or in a function;
    ``TYPE_CHECKING`` imports left out, and a module's own packages, which are always imported
    before it). ``from package import name`` is an edge to the submodule when `name` is one."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = name.split(".") if is_package else name.split(".")[:-1]
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + [node.module]) if node.level and node.module else (
                    ".".join(base) if node.level else node.module or "")
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                targets = subs if len(subs) == len(node.names) else [target, *subs]
            for target in targets:
                if target in modules and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_between_modules() -> None:
    assert circles(import_graph(PACKAGE)) == []


def test_no_import_inside_a_function_but_the_lazy_heavy_ones() -> None:
    hidden = function_imports(PACKAGE)
    assert not hidden, "import these at the top of their module (or add a heavy package to LAZY, with why): " + \
        ", ".join(hidden)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_checks_see_a_circle_through_a_function_and_a_hidden_import(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from .a import f\n",
        "a.py": "from .b import g\n\ndef f():\n    return g()\n",
        "b.py": "def g():\n    from .a import f\n    import json\n    import numpy\n    return f\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
        "sub/__init__.py": "", "sub/d.py": "from .. import a\nfrom . import e\n", "sub/e.py": "from ..sub import d\n",
    })
    assert circles(import_graph(root)) == [["pkg.a", "pkg.b"], ["pkg.sub.d", "pkg.sub.e"]]
    assert function_imports(root) == ["b.py:2 .a", "b.py:3 json"]  # numpy is lazy; __init__ may load lazily
