"""The layer rules of DESIGN.md, checked on the source: every import points down, a layer is used by the
others only through its package ``__init__`` (its public names, never a module or a private name), and
IPython, widgets and HTTP stay in the layers that own them (core imports pydantic only)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ipyagent"
#: Bottom to top (DESIGN.md): a module may import only the layers before its own.
LAYERS = ("core", "drivers", "memory", "tools", "agent", "notebook")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names) for one import statement, relative imports resolved."""
    if isinstance(node, ast.Import):
        return [(alias.name, []) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        return [(node.module or "", [alias.name for alias in node.names])]
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return [(".".join(base + ([node.module] if node.module else [])), [alias.name for alias in node.names])]


def _layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "ipyagent" and parts[1] in LAYERS else None


def _is_submodule(layer: str, name: str) -> bool:
    return (SRC / layer / f"{name}.py").exists() or (SRC / layer / name / "__init__.py").exists()


def _is_module_import(layer: str, name: str) -> bool:
    """`name` imported from a layer's package is one of its modules (the package binds no other value to it)."""
    if not _is_submodule(layer, name):
        return False
    value = getattr(importlib.import_module(f"ipyagent.{layer}"), name, None)
    return value is None or isinstance(value, ModuleType)


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Each import in `source` (the text of `module`) that breaks a layer rule, as one line."""
    mine = _layer(module)
    found = []
    for node in ast.walk(ast.parse(source)):
        for target, names in _targets(node, module, is_package):
            theirs = _layer(target)
            if mine is None or theirs is None or theirs == mine:
                continue
            where = f"{module}:{node.lineno} imports {target}"
            if LAYERS.index(theirs) > LAYERS.index(mine):
                found.append(f"{where}: points up ({mine} is below {theirs})")
            if target != f"ipyagent.{theirs}":
                found.append(f"{where}: skips the package __init__ (import from ipyagent.{theirs})")
            for name in names:
                if name.startswith("_"):
                    found.append(f"{where}: {name} is private to {theirs}")
                elif _is_module_import(theirs, name):
                    found.append(f"{where}: {name} is a module of {theirs}; import its public names")
    return found


def test_every_import_points_down_and_goes_through_the_layer_package() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        found += violations(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("source", "module", "says"), [
    ("from ..drivers.registry import resolve_alias", "ipyagent.agent.defaults", "skips the package __init__"),
    ("import ipyagent.drivers.registry", "ipyagent.agent.defaults", "skips the package __init__"),
    ("from ..drivers import registry", "ipyagent.agent.defaults", "is a module of drivers"),
    ("from ..drivers import _turn", "ipyagent.agent.defaults", "private to drivers"),
    ("from ...core import _artifacts", "ipyagent.notebook.views.run_view", "private to core"),
    ("def f():\n    from ..notebook import ApprovalButtons", "ipyagent.agent.loop", "points up"),
    ("from ipyagent.agent import Agent", "ipyagent.memory.recorder", "points up"),
    ("from ...agent import Agent", "ipyagent.tools.builtin.task_memory", "points up"),
])
def test_the_check_finds_each_kind_of_breach(source: str, module: str, says: str) -> None:
    assert any(says in line for line in violations(source, module)), violations(source, module)


@pytest.mark.parametrize(
    "source",
    [
        "from ..core import Message",
        "from .base import X",
        "from ..drivers import resolve_alias",
        "from . import loop_thread",
        "import json",
    ],
)
def test_the_check_allows_what_the_rules_allow(source: str) -> None:
    assert violations(source, "ipyagent.agent.loop") == []


@pytest.mark.parametrize("layer", LAYERS)
def test_each_lazy_export_resolves_and_is_no_module_name(layer: str) -> None:
    """A lazily exported name loads (no typo in the table), and is not also a submodule's name: once that
    submodule were imported, the package attribute would be the module, not the name."""
    package = importlib.import_module(f"ipyagent.{layer}")
    exports = getattr(getattr(package, "__getattr__", None), "exports", ())
    for name in exports:
        assert not _is_submodule(layer, name), name
        assert getattr(package, name) is not None, name


def test_an_unknown_name_of_a_layer_is_an_attribute_error() -> None:
    import ipyagent.drivers

    with pytest.raises(AttributeError, match="'ipyagent.drivers' has no attribute 'no_such_name'"):
        ipyagent.drivers.no_such_name  # noqa: B018
    assert (
        ipyagent.drivers.RateGate is importlib.import_module("ipyagent.drivers.rate_gate").RateGate
    )  # loaded on first use


#: Third-party packages only some layers may import (DESIGN.md): IPython and widgets in the notebook layer
#: alone; HTTP in the drivers (and tools/mcp_connection.py, which hands the MCP SDK its HTTP client); core
#: takes pydantic only.
ONLY_IN = {"IPython": {"notebook"}, "ipywidgets": {"notebook"}, "anywidget": {"notebook"}, "ipykernel": {"notebook"},
           "traitlets": {"notebook"}, "httpx2": {"drivers", "tools.mcp_connection"},
           "httpx": {"drivers", "tools.mcp_connection"}}
CORE_MAY_IMPORT = {"pydantic", "pydantic_core", "typing_extensions"}


def third_party_violations(source: str, module: str) -> list[str]:
    """Each import in `source` (the text of `module`) of a third-party package its layer may not import."""
    mine = _layer(module)
    if mine is None:
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "ipyagent":
                continue
            allowed = ONLY_IN.get(top)
            if allowed is not None and mine not in allowed and module.removeprefix("ipyagent.") not in allowed:
                found.append(f"{module}:{node.lineno} imports {name}: only {', '.join(sorted(allowed))} may")
            elif mine == "core" and top not in CORE_MAY_IMPORT:
                found.append(f"{module}:{node.lineno} imports {name}: core imports pydantic only")
    return found


def test_third_party_packages_stay_in_their_layer() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        found += third_party_violations(path.read_text(encoding="utf-8"), _module_name(path))
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("source", "module"), [
    ("def f():\n    from IPython.display import display", "ipyagent.agent.loop"),
    ("import ipywidgets", "ipyagent.memory.recorder"),
    ("import httpx2", "ipyagent.agent.agent"),
    ("import httpx2", "ipyagent.tools.toolbox"),
    ("import jinja2", "ipyagent.core.prompt_stack"),
])
def test_the_check_finds_a_package_out_of_its_layer(source: str, module: str) -> None:
    assert third_party_violations(source, module)


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import httpx2", "ipyagent.drivers.base"),
        ("import httpx2", "ipyagent.tools.mcp_connection"),
        ("from IPython.display import display", "ipyagent.notebook.views.run_view"),
        ("from pydantic import BaseModel", "ipyagent.core.content"),
        ("import json", "ipyagent.core.content"),
    ],
)
def test_the_check_allows_a_package_in_its_layer(source: str, module: str) -> None:
    assert third_party_violations(source, module) == []
