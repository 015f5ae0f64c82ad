"""What an executed notebook produced, read from its saved outputs: each evaluation (``%%compare --over``,
its output `render.evaluation.MIME_TYPE`: `Evaluation.to_json()`, the cell's own ``--gate`` in the output's
metadata) and each comparison (``%%compare``, `core.COMPARISON_MIME_TYPE`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...core import COMPARISON_MIME_TYPE
from ..render.evaluation import MIME_TYPE
from .gates import Gate, parse_gate

#: ``-o NAME`` / ``--out NAME`` on a magic's line: the name an evaluation is reported under.
_OUT = re.compile(r"(?:^|\s)(?:-o|--out)\s+([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Found:
    """One evaluation or comparison: `name` (the cell's ``-o`` variable, else ``cell N``), `cell` (its
    number in the notebook file), `doc` (its saved JSON), `gates` (the cell's own ``--gate``)."""

    kind: str
    name: str
    cell: Any
    doc: dict[str, Any]
    gates: list[Gate] = field(default_factory=list)


def _name(source: str, cell: Any, taken: set[str]) -> str:
    match = _OUT.search(source.splitlines()[0] if source else "")
    name = match.group(1) if match else f"cell {cell}"
    base, n = name, 1
    while name in taken:  # a cell that made two: cell 6, cell 6 #2
        n += 1
        name = f"{base} #{n}"
    taken.add(name)
    return name


def _gates(metadata: dict[str, Any]) -> list[Gate]:
    """The cell's own ``--gate`` options, kept in the output's metadata (checked when the cell ran)."""
    texts = ((metadata.get("ipyagent") or {}).get("evaluation") or {}).get("gates") or []
    return [parse_gate(text) for text in texts]


def collect(nb: Any, number: Any) -> list[Found]:
    """Every evaluation and comparison in `nb`'s outputs, in cell order (`number`: a cell's index in `nb` to
    its number in the notebook file)."""
    found: list[Found] = []
    taken: set[str] = set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", ()):
            data = output.get("data") or {}
            for kind, mime in (("evaluation", MIME_TYPE), ("comparison", COMPARISON_MIME_TYPE)):
                if mime in data:
                    cell_number = number(index)
                    gates = _gates(output.get("metadata") or {}) if kind == "evaluation" else []
                    found.append(Found(kind, _name(cell.source, cell_number, taken), cell_number, data[mime], gates))
    return found


def _live(output: Any) -> bool:
    return bool(((output.get("metadata") or {}).get("ipyagent") or {}).get("live"))


def uncollected(nb: Any, number: Any) -> list[str]:
    """One line per cell of `nb` whose output is still a live view (marked `saved_outputs.live_metadata`)
    with no saved evaluation or comparison: a ``--background`` one that had not ended when the notebook did
    (one that ends while a later cell runs is collected: `run.client_class`) (`number`: as `collect`)."""
    lines = []
    for index, cell in enumerate(nb.cells):
        outputs = cell.get("outputs", ()) if cell.cell_type == "code" else ()
        saved = any(mime in (o.get("data") or {}) for o in outputs for mime in (MIME_TYPE, COMPARISON_MIME_TYPE))
        if not saved and any(map(_live, outputs)):
            lines.append(f"cell {number(index)} ran in the background (--background) and had not ended when the "
                         "notebook did: ipyagent eval collects it only when a later cell waits for it (VAR.wait())")
    return lines
