"""Lazy package exports (PEP 562): a layer's ``__init__`` names its public API without importing it.

Each layer (DESIGN.md: core, drivers, memory, tools, agent, notebook) is used by the
others only through its package: ``from ..drivers import resolve_alias``, never
``from ..drivers.registry import resolve_alias`` (tests/test_layers.py checks it). A
name listed here loads its module on first access, so a package's API costs nothing
until used and ``%load_ext ipyagent`` stays light (benchmarks/import_load.py).
Stdlib only: the notebook layer's ``__init__`` uses it at ``%load_ext``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `package`: ``exports`` maps a submodule (relative name,
    e.g. ``"registry"``) to the names it provides. A name is imported on first access and
    then kept in the package's namespace; an unknown name raises AttributeError.

    A name must not also be a submodule's name: once that submodule is imported, the
    package attribute is the module (tests/test_layers.py checks there is none)."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    __getattr__.exports = tuple(where)  # type: ignore[attr-defined]
    return __getattr__
