"""``%agent evals``'s table (`render/text/evaluations.py`): aligned columns under a header, the cell
named as read (the notebook's file and the start of the cell id, or the ``-o`` variable), the size as
rows × columns × repeats, an interrupted evaluation marked, and each column's pass rate on a line of
its own (so a line does not grow with the columns)."""

from __future__ import annotations

import time

from ipyagent.notebook.render.text.evaluations import cell_text, evaluations_lines


def listed(**changes):
    e = {"id": "c4324b1a7c20", "name": "/tmp/ux/nb/ux.ipynb#7387ff02-bdd2-4a97-ad69-9d594e544111",
         "created_at": time.mktime((2026, 12, 7, 21, 51, 20, 0, 0, -1)), "columns": ["openai:a/full", "openai:b"],
         "providers": ["openai:a", "openai:b"], "aliases": {}, "rows": 1200, "repeat": 2, "runs": 4800,
         "pass_rates": {"openai:a/full": 0.875, "openai:b": None}, "interrupted": False}
    return {**e, **changes}


def test_the_cell_is_named_as_read() -> None:
    assert cell_text("/tmp/ux/nb/ux.ipynb#7387ff02-bdd2-4a97") == "ux.ipynb · cell 7387ff02"
    assert cell_text("#-o ev") == "-o ev" and cell_text("#--over rows") == "--over rows"
    assert cell_text("nb.ipynb#-o ev") == "nb.ipynb · -o ev"
    assert cell_text(None) == "-" and cell_text("") == "-" and cell_text("#") == "-"


def test_one_aligned_line_per_evaluation_and_its_pass_rates_under_it() -> None:
    stopped = listed(id="f0a499572614", name="#-o ev", rows=30, repeat=None, runs=25, interrupted=True,
                     columns=["good"], pass_rates={"good": 1.0}, aliases={"openai:m": "good"})
    lines = evaluations_lines([listed(), stopped])
    assert lines == [
        "id            when                 cell                      rows × columns × repeats      runs",
        "c4324b1a7c20  2026-12-07 21:51:20  ux.ipynb · cell 7387ff02  1,200 × 2 × 2                4,800",
        "    pass  openai:a/full   88%",
        "    pass  openai:b          -",
        "f0a499572614  2026-12-07 21:51:20  -o ev                     30 × 1 × 1                25 of 30"
        "  interrupted",
        "    pass  good  100%",
    ]


def test_fewer_runs_than_the_matrix_holds_read_as_so_many_of_all() -> None:
    lines = evaluations_lines([listed(runs=4799), listed(runs=4801)])  # more: a run the store kept twice
    assert lines[1].endswith("  4,799 of 4,800") and lines[4].endswith("  4,801")
