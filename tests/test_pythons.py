"""The Pythons ipyagent says it supports are the ones its tests run on."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_classifiers_name_the_pythons_make_test_pythons_runs_from_the_floor_up() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    (tested,) = re.findall(r"^PYTHONS \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert listed == tested.split() and project["requires-python"] == f">={listed[0]}"
