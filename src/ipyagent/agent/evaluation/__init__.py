"""Evaluation: a prompt template over rows × columns, each cell a fresh run, with checks.

`templates` renders the prompt and check templates for each row; `plan` renders them all (and
prepares every check) before the first request; `checks` parses and runs the checks (with
their time limits); `runner` checks the arguments and starts the matrix; `matrix` schedules the
runs (`scheduler`: a lane per provider, one budget), `cells` runs and checks one, `cache` keys
and claims them in the run store, or `batch` sends them through the providers' batch APIs;
`results` holds what came back (`Evaluation`, `EvalResult`); `export` writes it to a file and
`archive` gives it back (`load_evaluation`).
"""


from ..._lazy import lazy_exports

#: Lazy (each module loads on first use): a cell's template needs `templates` alone, not the runner.
__getattr__ = lazy_exports(__name__, {
    "archive": ("load_evaluation", "stored_evaluations"),
    "checks": ("parse_assertion", "build_judges"),
    "results": ("EvalResult", "Evaluation"),
    "runner": ("aevaluate", "evaluate", "evaluation_run", "make_variants"),
    "background": ("Progress",),
    "batch": ("BatchProgress", "leave_or_cancel"),
    "statistics": ("percentile",),
    "templates": ("TemplateError", "normalize_rows", "render_cell", "render_template", "row_fields"),
})

__all__ = [*__getattr__.exports]
