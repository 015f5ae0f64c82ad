"""An evaluation's templates: the prompt and check templates (Jinja2, strict), and the rows they read.

`render_template` renders one template for one row; `normalize_rows` turns a DataFrame or a
list into rows; `row_fields` gives a row's fields as columns.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ...core import MASK, mask_named, redact_context, secret_name


class TemplateError(ValueError):
    """The prompt template cannot be rendered for a row (an undefined field, a failing expression)."""


def _named(name: Any, value: Any) -> Any:
    """`value`, or the mask when `name` looks secret (`core.secret_name`) and `value` is non-blank text."""
    if isinstance(name, str) and isinstance(value, (str, bytes)) and value.strip() and secret_name(name):
        return MASK
    return value


def _context_value(value: Any) -> str:
    """What a ``{{ }}`` puts in a prompt under the context rule: a mapping's secret-named entries
    and the secrets in its text masked (`core.mask_named`, `core.redact_context`)."""
    value, _ = mask_named(value)
    return redact_context(value if isinstance(value, str) else str(value))[0]


@lru_cache(maxsize=32)
def _compiled(template: str, redacting: bool = False) -> Any:
    import jinja2

    class ContextEnvironment(jinja2.Environment):
        """Fields, attributes and items under a secret-looking name read as the mask (`_named`)."""

        def getattr(self, obj: Any, attribute: str) -> Any:
            return _named(attribute, super().getattr(obj, attribute))

        def getitem(self, obj: Any, argument: Any) -> Any:
            return _named(argument, super().getitem(obj, argument))

    kind = ContextEnvironment if redacting else jinja2.Environment
    environment = kind(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
                       finalize=_context_value if redacting else None)
    return environment.from_string(template)


def render_template(template: str, row: Any, namespace: dict[str, Any] | None = None, *,
                    redacting: bool = False) -> str:
    """`template` (Jinja2) rendered with `row` as ``row`` (and `namespace`'s names). With
    `redacting`, what it puts in the prompt is context for a model and passes the context rule,
    as a ``%%agent`` cell's values do: a name, field or key that looks secret (``{{ api_key }}``,
    ``{{ row.password }}``) is the mask, and each value's secrets are masked (``sk-...`` keys).

    Raises:
        TemplateError: a syntax error, an undefined name or field, or a failing expression.
    """
    import jinja2

    try:
        compiled = _compiled(template, redacting)
        names = {name: _named(name, value) for name, value in (namespace or {}).items()} if redacting else namespace
        return compiled.render({**(names or {}), "row": row})
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
