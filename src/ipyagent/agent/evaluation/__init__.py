"""Evaluation: a prompt template over rows × columns, each cell a fresh run, with checks.

`templates` renders the prompt and check templates for each row; `checks` parses and runs the
checks; `runner` schedules the runs (`scheduler`: a lane per provider, one budget) and caches
them in the run store (`cache`); `results` holds what came back (`Evaluation`, `EvalResult`).
"""

from .checks import parse_assertion
from .results import EvalResult, Evaluation
from .runner import aevaluate, evaluate
from .templates import TemplateError, normalize_rows, render_template, row_fields

__all__ = ["EvalResult", "Evaluation", "TemplateError", "aevaluate", "evaluate", "normalize_rows", "parse_assertion",
           "render_template", "row_fields"]
