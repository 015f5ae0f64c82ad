"""Evaluation: a prompt template over rows × columns, each cell a fresh run, with checks.

`templates` renders the prompt and check templates for each row; `plan` renders them all (and
prepares every check) before the first request; `checks` parses and runs the checks (`limits`:
their time limits); `runner` schedules the runs (`scheduler`: a lane per provider, one budget)
and caches them in the run store (`cache`); `results` holds what came back (`Evaluation`,
`EvalResult`).
"""

from .checks import parse_assertion
from .results import EvalResult, Evaluation
from .runner import aevaluate, evaluate, make_variants
from .templates import TemplateError, normalize_rows, render_cell, render_template, row_fields

__all__ = ["EvalResult", "Evaluation", "TemplateError", "aevaluate", "evaluate", "make_variants", "normalize_rows",
           "parse_assertion", "render_cell", "render_template", "row_fields"]
