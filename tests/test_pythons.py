"""The Pythons ipyagent says it supports are the ones its tests run on."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_classifiers_name_the_pythons_make_test_pythons_runs_from_the_floor_up() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    (tested,) = re.findall(r"^PYTHONS \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert listed == tested.split() and project["requires-python"] == f">={listed[0]}"


def test_a_warning_raised_in_ipyagent_code_fails_the_test() -> None:
    """pyproject's ``filterwarnings``, applied as pytest applies them (the last listed first; a
    ``-W`` on the command line would override them, so they are applied here): what ipyagent's own
    code warns about (a deprecated call on a newer Python, a coroutine never awaited) is an error,
    so the next one is seen; another package's warning is shown, not raised."""
    import builtins
    import warnings

    import pytest

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    with warnings.catch_warnings(record=True) as shown:
        for entry in listed:
            action, message, category, module = (entry.split(":") + [""] * 3)[:4]
            kind = getattr(builtins, category or "Warning")
            warnings.filterwarnings(action, message, kind, module)  # type: ignore[arg-type]
        with pytest.raises(DeprecationWarning, match="seen"):
            warnings.warn_explicit("seen", DeprecationWarning, "core.py", 1, module="ipyagent.core.messages")
        warnings.warn_explicit("not ours", DeprecationWarning, "x.py", 1, module="numpy.core")
    assert [str(w.message) for w in shown] == ["not ours"]
