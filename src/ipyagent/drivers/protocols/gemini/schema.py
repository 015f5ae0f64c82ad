"""Tool parameter schemas rewritten to Gemini's `Schema` subset (OpenAPI 3.0 flavoured).

Follows the Gemini API reference, "Schema" and the "Function calling" guide:
``$ref`` inlined (a recursive reference becomes ``{"type": "object"}``),
``type: [T, "null"]`` and null ``anyOf`` members become ``nullable``, ``oneOf``
becomes ``anyOf``, ``allOf`` merges into its parent, ``const`` becomes a
one-value ``enum``; keys Gemini rejects are dropped.
"""

from __future__ import annotations

from typing import Any

#: Keys of Gemini's `Schema` object kept by `to_gemini_schema`; every other key is dropped.
SCHEMA_KEYS = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "items", "properties", "required",
        "minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength",
        "pattern", "minimum", "maximum", "anyOf", "propertyOrdering", "example",
    }
)
#: `format` values Gemini's `Schema` accepts, by type.
_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}

def to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a JSON Schema into the OpenAPI-3.0 subset Gemini's `Schema` accepts.

    * ``$ref`` is inlined from ``$defs`` / ``definitions`` (a recursive reference
      becomes a plain ``{"type": "object"}``), then ``$defs`` / ``definitions`` go;
    * ``type: [T, "null"]`` and an ``anyOf`` member ``{"type": "null"}`` become
      ``nullable: true``; ``oneOf`` becomes ``anyOf``; a one-member ``anyOf`` or
      ``allOf`` is merged into its parent; ``const`` becomes a one-value ``enum``
      (an ``enum`` without a type is a ``string``);
    * dropped: every key outside `SCHEMA_KEYS`, notably ``additionalProperties``,
      ``$schema``, ``$id``, ``title``, ``default``, ``examples``, ``const``,
      ``exclusiveMinimum`` / ``exclusiveMaximum``, ``multipleOf``, ``uniqueItems``,
      ``patternProperties``, ``not``, ``if`` / ``then`` / ``else``; a ``format``
      Gemini does not know for its type (only ``enum`` / ``date-time``, ``int32`` /
      ``int64``, ``float`` / ``double``); a non-string ``enum``; an empty
      ``properties`` (Gemini rejects an OBJECT with empty properties);
      ``required`` names that are not properties.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update({f"#/{key}/{name}": value for name, value in schema[key].items()})
    return _clean(schema, defs, ())


def _clean(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _inline(ref, node, defs, seen)
    node = _merged(node, defs, seen)
    out: dict[str, Any] = {}
    nullable = _put_types(node.get("type"), out) or bool(node.get("nullable"))
    nullable = _put_any_of(node.get("anyOf"), out, defs, seen) or nullable
    for key, value in node.items():
        if key not in ("type", "anyOf", "nullable") and key in SCHEMA_KEYS:
            _put_key(key, value, out, defs, seen)
    _keep_required(out)
    if "enum" in out and "type" not in out:
        out["type"] = "string"  # Gemini's enum is a STRING format
    if nullable:
        out["nullable"] = True
    return out


def _inline(ref: str, node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """``$ref`` replaced by its definition; a recursive or unknown one by ``{"type": "object"}``."""
    if ref in seen or ref not in defs:
        out: dict[str, Any] = {"type": "object"}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out
    # siblings of $ref (a description) win over the referenced schema's own
    merged = {**defs[ref], **{k: v for k, v in node.items() if k != "$ref"}}
    return _clean(merged, defs, seen + (ref,))


def _merged(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """A copy of `node` with ``oneOf`` as ``anyOf``, ``allOf`` members merged in (the
    node's own keys win) and ``const`` as a one-value ``enum``."""
    node = dict(node)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for member in all_of:
            member = _clean(member, defs, seen)
            if isinstance(member, dict):
                node = {**member, **node}
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    return node


def _put_types(types: Any, out: dict[str, Any]) -> bool:
    """``type`` into `out` (a list of several becomes ``anyOf``); True when it allows ``null``."""
    if isinstance(types, list):
        kinds = [t for t in types if t != "null"]
        if len(kinds) == 1:
            out["type"] = kinds[0]
        elif kinds:
            out["anyOf"] = [{"type": t} for t in kinds]
        return len(kinds) < len(types)
    if isinstance(types, str) and types != "null":
        out["type"] = types
    return False


def _put_any_of(any_of: Any, out: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> bool:
    """``anyOf`` into `out` without its ``{"type": "null"}`` member (a single member is
    merged into `out`); True when there was such a member."""
    if not isinstance(any_of, list):
        return False
    nullable = False
    members = []
    for member in any_of:
        if isinstance(member, dict) and member.get("type") == "null" and len(member) == 1:
            nullable = True
            continue
        members.append(_clean(member, defs, seen))
    if len(members) == 1 and isinstance(members[0], dict):
        for key, value in members[0].items():
            out.setdefault(key, value)
    elif members:
        out["anyOf"] = members
    return nullable


def _put_key(key: str, value: Any, out: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> None:
    """One kept keyword into `out`: sub-schemas cleaned, values Gemini rejects dropped."""
    if key == "properties":
        if isinstance(value, dict) and value:
            out["properties"] = {name: _clean(sub, defs, seen) for name, sub in value.items()}
    elif key == "items":
        out["items"] = _clean(value, defs, seen)
    elif key == "enum":
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            out["enum"] = value
    elif key == "format":
        if value in _FORMATS.get(str(out.get("type")), ()):
            out["format"] = value
    else:
        out[key] = value


def _keep_required(out: dict[str, Any]) -> None:
    """``required`` keeps only names that are properties, and goes when none is left."""
    if "required" in out:
        props = out.get("properties") or {}
        required = [name for name in out["required"] if name in props] if isinstance(out["required"], list) else []
        if required:
            out["required"] = required
        else:
            del out["required"]


# -- response parsing ------------------------------------------------------------------
