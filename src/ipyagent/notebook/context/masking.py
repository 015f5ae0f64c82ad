"""What a cell's context lost to the redactor, said once: counts by block, and the warning.

A cell's template values and its context blocks pass the one redactor's context rule
(`core.redact_context`); each says how many values it masked. The counts go to the
run's metadata (``%agent inspect``) and transcript (its footer), and a cell that
masked any prints one line naming the opt-out.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from ...core import masked_figure

#: The name the template's count goes under.
TEMPLATE = "cell template"
#: The setting that turns it off, as the warning and ``%agent settings`` name it.
OPT_OUT = "%agent settings redact_context=false"


def masked_counts(template: int, blocks: Iterable[Any]) -> dict[str, int]:
    """{where: values masked} for the cell template and each context block that masked any."""
    counts = {TEMPLATE: template} if template else {}
    for block in blocks:
        if block.masked:
            counts[block.name] = counts.get(block.name, 0) + block.masked
    return counts


def describe(counts: dict[str, int]) -> str:
    """``3 values masked (cell template 1, error 2)`` (the transcript footer's figure); empty for none."""
    return masked_figure(counts) if counts else ""


def warn_masked(counts: dict[str, int]) -> None:
    """One line on stderr when the cell's context had values masked, naming the opt-out."""
    said = describe(counts)
    if said:
        print(f"ipyagent: {said} in what this cell sends: secret-looking values never reach the model; "
              f"{OPT_OUT} sends them as they are", file=sys.stderr)
