"""Templates: the one Jinja2 environment and its one `TemplateError`, for an evaluation's prompt and
check templates and for ``%%agent`` / ``%%compare`` cells, and the rows an evaluation reads.

`render_template` renders one template for one row; `render_cell` a cell body with a namespace
(text that does not parse as a template passes through as it is); `normalize_rows` turns a
DataFrame or a list into rows; `row_fields` gives a row's fields as columns.

What a cell template (or an evaluation's prompt template) puts in the prompt is context for a
model, so with ``redacting`` (the session's ``redact_context``) each value passes the one redactor's context rule
(`core.redact_context`): a variable, attribute or item under a secret-looking name
(``{{ api_key }}``, ``{{ cfg.password }}``, ``{{ os.environ["GITHUB_TOKEN"] }}``) is the mask;
a mapping's secret-named entries are masked (``{{ cfg }}``, ``{{ os.environ }}``); and the text
of every value has its secrets masked (``{{ error }}``). `render_cell` says how many values were
masked.
"""

from __future__ import annotations

import math
import re
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from ...core import MASK, mask_named, redact, redact_context, secret_name
from ...memory import DEFAULT_BUDGET, summarize


class TemplateError(ValueError):
    """A template that cannot be rendered: a syntax error (an evaluation's), an undefined name or
    field, a failing expression, a missing ``Out[n]``; the message says which."""


class _Masked(str):
    """The mask standing for a value under a secret-looking name (counted once where it is shown)."""


_MASKED = _Masked(MASK)
#: The values masked by the render under way (a one-item list), None when values are not redacted.
_masked_count: ContextVar[list[int] | None] = ContextVar("ipyagent_template_masked", default=None)


def _named(name: Any, value: Any) -> Any:
    """`value`, or the mask when `name` looks secret and `value` is non-blank text."""
    if isinstance(name, str) and isinstance(value, (str, bytes)) and value.strip() and secret_name(name):
        return _MASKED
    return value


def _finalize(value: Any) -> Any:
    """What a ``{{ }}`` puts in the prompt, masked by the context rule; the count goes to `_masked_count`."""
    counter = _masked_count.get()
    if counter is None:
        return value
    if type(value) is _Masked:
        counter[0] += 1
        return MASK
    value, named = mask_named(value)
    text, masked = redact_context(value if isinstance(value, str) else str(value))
    counter[0] += named + masked
    return text


@lru_cache(maxsize=2)
def environment(redacting: bool = False) -> Any:
    """The one Jinja2 environment: undefined names are errors (`StrictUndefined`), nothing is
    HTML-escaped (the text goes to a model), trailing newlines are kept, and the ``context``
    filter summarizes a value for a model (`context_filter`). `redacting`: the same, with each
    value, and each attribute or item under a secret-looking name, through the context rule."""
    import jinja2

    class ContextEnvironment(jinja2.Environment):
        """Attributes and items under a secret-looking name read as the mask (`_named`)."""

        def getattr(self, obj: Any, attribute: str) -> Any:
            return _named(attribute, super().getattr(obj, attribute))

        def getitem(self, obj: Any, argument: Any) -> Any:
            return _named(argument, super().getitem(obj, argument))

    kind = ContextEnvironment if redacting else jinja2.Environment
    env = kind(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
               finalize=_finalize if redacting else None)
    env.filters["context"] = context_filter
    return env


def context_filter(value: Any, budget: int | None = None) -> str:
    """``{{ df | context }}`` / ``{{ df | context(500) }}``: `value` summarized for a model
    (`memory.summarize`) within `budget` tokens (default `memory.DEFAULT_BUDGET`); while values
    are redacted, a mapping's secret-named entries are masked first (and counted)."""
    counter = _masked_count.get()
    if counter is not None:
        value, named = mask_named(value)
        counter[0] += named
    return summarize(value, budget_tokens=budget or DEFAULT_BUDGET).text


@lru_cache(maxsize=32)
def _compiled(template: str, redacting: bool = False) -> Any:
    return environment(redacting).from_string(template)


@lru_cache(maxsize=32)
def _names_used(template: str) -> frozenset[str] | None:
    """The names `template` reads from its namespace (Jinja2's undeclared variables); None when it
    does not parse (the render says why). A matrix renders one template per row against a whole
    notebook namespace: only these are masked and passed, once per name, not every name per row."""
    import jinja2
    from jinja2 import meta

    try:
        return frozenset(meta.find_undeclared_variables(environment().parse(template)))
    except jinja2.TemplateSyntaxError:
        return None


def render_cell(body: str, namespace: dict[str, Any], *, redacting: bool = False) -> tuple[str, int]:
    """(a cell's body rendered with `namespace`, how many values were masked). A body that does
    not parse as a template (code, JSON) is returned as it is. With `redacting`, every value
    passes the context rule (module docstring); without, values go in as they are (0).

    Raises:
        TemplateError: the template refers to an undefined name or its expression fails; the
            message says which and how to send the text raw.
    """
    if "{{" not in body and "{%" not in body and "{#" not in body:
        return body, 0
    import jinja2

    try:
        template = _compiled(body, redacting)
    except jinja2.TemplateSyntaxError:
        return body, 0
    counter = [0]
    token = _masked_count.set(counter if redacting else None)
    try:
        if redacting:  # variables under secret-looking names (`api_key`, `GITHUB_TOKEN`) read as the mask
            namespace = {name: _named(name, value) for name, value in namespace.items()}
        return template.render(namespace), counter[0]
    except TemplateError:  # a clear message already (the notebook's context: no error yet, a missing Out[n])
        raise
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"cell template: {exc.message}; define it first, or use --raw to send the text as it is"
        ) from None
    except Exception as exc:  # an expression in the template raised
        raise TemplateError(
            redact(f"cell template: {type(exc).__name__}: {exc}; use --raw to send the text as it is")
        ) from None
    finally:
        _masked_count.reset(token)


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

    token = _masked_count.set([0] if redacting else None)  # `_finalize` masks while a count is kept
    try:
        parts = _fields_only(template)
        text = _render_fields(parts, row, redacting) if parts is not None else None
        if text is not None:
            return text
        compiled = _compiled(template, redacting)
        used = _names_used(template) if namespace else None
        if used is not None:
            namespace = {name: namespace[name] for name in used if name in namespace}  # type: ignore[index]
        names = {name: _named(name, value) for name, value in (namespace or {}).items()} if redacting else namespace
        return compiled.render({**(names or {}), "row": _present(row)})
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"the template does not parse: {exc.message} (line {exc.lineno})") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"the template: {exc.message}") from None
    except Exception as exc:  # an expression in the template raised
        raise TemplateError(f"the template: {type(exc).__name__}: {exc}") from None
    finally:
        _masked_count.reset(token)



#: ``{{ row.NAME }}``, as Jinja2's lexer reads it (whitespace, newlines too, inside the braces).
_ROW_FIELD = re.compile(r"\{\{\s*row\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_DICT_NAMES = frozenset(dir(dict))


@lru_cache(maxsize=32)
def _fields_only(template: str) -> tuple[str, ...] | None:
    """(text, NAME, text, NAME, ..., text) when `template` is only text and ``{{ row.NAME }}``s, the
    text as Jinja2 gives it back (no ``{{``, ``{%``, ``{#``, no ``{`` before a field, no ``\\r``: its
    lexer would read those otherwise); else None. A matrix renders such a template per row."""
    parts = tuple(_ROW_FIELD.split(template))
    texts = parts[0::2]
    if any("{{" in t or "{%" in t or "{#" in t or "\r" in t for t in texts) or any(t.endswith("{") for t in texts[:-1]):
        return None
    return parts


def _render_fields(parts: tuple[str, ...], row: Any, redacting: bool) -> str | None:
    """What Jinja2 renders for `parts` (`_fields_only`) and `row`, without its per-render context: each
    field read as its ``Environment.getattr`` does (an attribute, else an item), through `_finalize`
    when `redacting`, then ``str``. None when a field is undefined or a read raises: the render says why."""
    from jinja2 import Undefined

    env, plain = environment(redacting), type(row) is dict
    out = [parts[0]]
    try:
        for n in range(1, len(parts), 2):
            name = parts[n]
            if plain and name not in _DICT_NAMES:  # a dict has no such attribute: Jinja2 reads the item
                value = row.get(name, Undefined)
                value = _named(name, value) if redacting else value
            else:
                value = env.getattr(row, name)
            if value is Undefined or value is None or isinstance(value, Undefined):  # None: `_present`
                return None
            out.append(str(_finalize(value)) if redacting else str(value))
            out.append(parts[n + 1])
    except Exception:  # noqa: BLE001 - the render raises it again, as a TemplateError
        return None
    return "".join(out)


def normalize_rows(rows: Any) -> list[Any]:
    """The rows as a list: a pandas or polars DataFrame gives one dict per row; a list (or
    any iterable that is not text) of dicts or strings is kept as it is. A field without a
    value (NaN, pandas' NA or NaT) is None in its row (`_plain_missing`): JSON can hold it, and a
    template that reads a None field fails (`render_template`), never rendering "nan".

    Raises:
        TypeError: text, a mapping, something that is not a sequence of rows, or a DataFrame
            whose column names repeat (one of each pair would be dropped without a word).
    """
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "iloc"):  # pandas
        names = [str(name) for name in rows.columns]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise TypeError(f"--over: the DataFrame's columns {', '.join(map(repr, twice))} appear more than once; "
                            "rename them (df.columns = [...]) so each row field has one value")
        listed = rows.to_dict("records")
    elif hasattr(rows, "to_dicts") and hasattr(rows, "columns"):  # polars
        listed = rows.to_dicts()
    elif isinstance(rows, (str, bytes, dict)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"--over needs a DataFrame, a list of dicts or a list of strings, not {type(rows).__name__}")
    else:
        listed = list(rows)
    return [_plain_missing(row) if type(row) is dict else row for row in listed]


#: The types of pandas' missing values (``pd.NA``, ``pd.NaT``), known by name: pandas is not imported here.
_MISSING_TYPES = frozenset({"NAType", "NaTType"})


def _missing(value: Any) -> bool:
    """Whether a row's field has no value: None, a float NaN (numpy's too), ``pd.NA`` or ``pd.NaT``."""
    return value is None or isinstance(value, float) and math.isnan(value) or type(value).__name__ in _MISSING_TYPES


def _plain_missing(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with None for each field that has no value (`_missing`); `row` itself when all have one."""
    if not any(value is not None and _missing(value) for value in row.values()):
        return row
    return {name: None if _missing(value) else value for name, value in row.items()}


def _present(row: Any) -> Any:
    """What a template reads as ``row``: a dict without its None fields (so reading one is undefined,
    the row's template error, and ``| default(...)`` applies), any other row as it is."""
    if type(row) is not dict or not any(value is None for value in row.values()):
        return row
    return {name: value for name, value in row.items() if value is not None}


def row_fields(row: Any) -> dict[str, Any]:
    """A row's fields as columns: a dict's items, else ``{"value": row}``."""
    return dict(row) if isinstance(row, dict) else {"value": row}
