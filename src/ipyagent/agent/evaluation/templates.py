"""An evaluation's templates: the prompt and check templates (Jinja2, strict), and the rows they read.

`render_template` renders one template for one row; `normalize_rows` turns a DataFrame or a
list into rows; `row_fields` gives a row's fields as columns.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


class TemplateError(ValueError):
    """The prompt template cannot be rendered for a row (an undefined field, a failing expression)."""


@lru_cache(maxsize=32)
def _compiled(template: str) -> Any:
    import jinja2

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    return environment.from_string(template)


def render_template(template: str, row: Any, namespace: dict[str, Any] | None = None) -> str:
    """`template` (Jinja2) rendered with `row` as ``row`` (and `namespace`'s names).

    Raises:
        TemplateError: a syntax error, an undefined name or field, or a failing expression.
    """
    import jinja2

    try:
        compiled = _compiled(template)
        return compiled.render({**(namespace or {}), "row": row})
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"the template does not parse: {exc.message} (line {exc.lineno})") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"the template: {exc.message}") from None
    except Exception as exc:  # an expression in the template raised
        raise TemplateError(f"the template: {type(exc).__name__}: {exc}") from None


def normalize_rows(rows: Any) -> list[Any]:
    """The rows as a list: a pandas or polars DataFrame gives one dict per row; a list (or
    any iterable that is not text) of dicts or strings is kept as it is.

    Raises:
        TypeError: text, a mapping, or something that is not a sequence of rows.
    """
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "iloc"):  # pandas
        return rows.to_dict("records")
    if hasattr(rows, "to_dicts") and hasattr(rows, "columns"):  # polars
        return rows.to_dicts()
    if isinstance(rows, (str, bytes, dict)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"--over needs a DataFrame, a list of dicts or a list of strings, not {type(rows).__name__}")
    return list(rows)


def row_fields(row: Any) -> dict[str, Any]:
    """A row's fields as columns: a dict's items, else ``{"value": row}``."""
    return dict(row) if isinstance(row, dict) else {"value": row}
