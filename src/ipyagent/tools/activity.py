"""`@activity`: marks a method (or a plain function) as something a model may call.

The input schema is a pydantic model given in the config, or derived from the
function's type hints and docstring (Google, NumPy or Sphinx style, parsed by
docstring-parser), with one description per parameter.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

ACTIVITY_ATTR = "__ipyagent_activity__"


@dataclass
class ActivityConfig:
    """What `@activity` records on a function.

    Attributes:
        description: a Jinja template rendered with the tool instance (``tool``)
            and its attributes; defaults to the docstring's description.
        schema: a pydantic model class for the input, or None to derive it.
        off_prompt: None to follow the tool, or True/False for this activity.
        requires_approval: None to follow the tool, or True/False for this activity.
    """

    description: str | None = None
    schema: type[BaseModel] | None = None
    off_prompt: bool | None = None
    requires_approval: bool | None = None


def activity(fn: Callable[..., Any] | None = None, *, config: dict[str, Any] | None = None) -> Any:
    """Mark `fn` as an activity. Use bare (``@activity``) or with a config
    (``@activity(config={"description": ..., "schema": Model})``).

    Raises:
        TypeError: the config has unknown keys or a schema that is not a pydantic model.
    """
    config = dict(config or {})
    known = {"description", "schema", "off_prompt", "requires_approval"}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown @activity config keys {sorted(unknown)}; known: {', '.join(sorted(known))}")
    schema = config.get("schema")
    if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError("@activity schema must be a pydantic model class (or left out to derive it from type hints)")

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, ACTIVITY_ATTR, ActivityConfig(config.get("description"), schema, config.get("off_prompt"),
                                                 config.get("requires_approval")))
        return f

    return mark(fn) if fn is not None else mark


def parse_docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from `fn`'s docstring, any common style."""
    doc = inspect.getdoc(fn) or ""
    if not doc:
        return "", {}
    from docstring_parser import parse

    parsed = parse(doc)
    description = "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p)
    return description, {p.arg_name: p.description or "" for p in parsed.params}


def input_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of `fn`'s parameters (``self`` and ``*args``/``**kwargs`` left out).

    Parameters without a type hint accept any JSON value; defaults are kept;
    unknown keys are ignored when validating.
    """
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    _, descriptions = parse_docstring(fn)
    fields: dict[str, Any] = {}
    for pname, param in signature.parameters.items():
        if pname in ("self", "cls") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=descriptions.get(pname) or None))
    return create_model(name, __config__=ConfigDict(extra="ignore"), **fields)


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """Plain JSON Schema of an input model, without the pydantic title noise."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema
