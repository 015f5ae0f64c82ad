"""Structured output on the wire (DESIGN.md, "drivers": native / tool / rule).

* ``native``: the provider's own JSON-schema mode (each driver's request building);
* ``tool``: a synthetic tool `OUTPUT_TOOL` whose input is the output, with a forced
  tool choice; the agent takes the call as the answer and never runs it;
* ``rule``: the schema as a system instruction (`with_rule_instruction`).

`to_strict_json_schema` rewrites a schema for OpenAI's strict mode.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..core import Message, PromptStack, TextBlock, ToolDefinition

#: The synthetic tool of the ``tool`` strategy.
OUTPUT_TOOL = "final_result"
STRATEGIES = ("native", "tool", "rule")
OUTPUT_TOOL_DESCRIPTION = "Give the final result, in exactly this structure."


def schema_name(schema: dict[str, Any]) -> str:
    """The name a JSON-schema response format is sent under: the schema's title with every
    character other than letters, digits, ``_`` and ``-`` made ``_``, cut to 64 (OpenAI's limit)."""
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(schema.get("title") or "output"))
    return name[:64] or "output"



class NotStrictError(ValueError):
    """The schema has something OpenAI's strict mode cannot express (a free-form dict)."""


def output_tool(schema: dict[str, Any], parameters: dict[str, Any] | None = None) -> ToolDefinition:
    """The ``tool`` strategy's tool: its input schema is the output schema (or `parameters`)."""
    return ToolDefinition(
        name=OUTPUT_TOOL,
        description=str(schema.get("description") or OUTPUT_TOOL_DESCRIPTION),
        parameters=parameters if parameters is not None else schema,
    )


def rule_instruction(schema: dict[str, Any]) -> str:
    """The ``rule`` strategy's system instruction for `schema`."""
    return (
        "Reply with only a JSON value that conforms to this JSON Schema: no other text, "
        f"no Markdown code fence.\n\nJSON Schema:\n{json.dumps(schema)}"
    )


def with_rule_instruction(prompt_stack: PromptStack) -> PromptStack:
    """A copy of `prompt_stack` with the rule instruction as a system message after
    the leading ones (drivers join system messages; chat protocols keep order)."""
    schema = prompt_stack.to_output_json_schema()
    if schema is None:
        return prompt_stack
    messages = list(prompt_stack.messages)
    at = 0
    while at < len(messages) and messages[at].role == "system":
        at += 1
    messages.insert(at, Message(role="system", content=[TextBlock(text=rule_instruction(schema))]))
    return prompt_stack.model_copy(update={"messages": messages})


def to_strict_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` rewritten for OpenAI's strict mode (a copy; the input is not changed).

    Every object gets ``additionalProperties: false`` and lists all its
    properties as required (optional ones stay nullable if they were); ``default``
    goes; a one-member ``allOf`` merges into its parent; ``oneOf`` becomes ``anyOf``;
    a ``$ref`` with sibling keywords becomes ``anyOf: [{$ref}]`` beside them; a
    root that is only a ``$ref`` (a self-referencing pydantic model) is inlined
    once. References are never followed further, so recursive models terminate.

    Raises:
        NotStrictError: the root is not an object, or an object allows extra
            properties (``additionalProperties`` true or a schema, ``patternProperties``,
            no ``properties`` at all): strict mode cannot express a free-form dict.
    """
    root = copy.deepcopy(schema)
    ref = root.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        root = {**target, **{k: v for k, v in root.items() if k != "$ref"}}
    if root.get("type") != "object":
        raise NotStrictError(f"the root of a strict schema must be an object, not {root.get('type')!r}")
    _strict(root, "#")
    return root


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    prefix, _, name = ref.rpartition("/")
    defs = root.get(prefix.removeprefix("#/")) if prefix in ("#/$defs", "#/definitions") else None
    if not isinstance(defs, dict) or not isinstance(defs.get(name), dict):
        raise NotStrictError(f"cannot resolve {ref!r} inside the schema")
    return defs[name]


def _strict(node: Any, where: str) -> None:
    if not isinstance(node, dict):
        if node is True:
            raise NotStrictError(f"{where} accepts anything")
        return
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                _strict(sub, f"{where}/{key}/{name}")
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        del node["allOf"]
        for key, value in all_of[0].items():
            node.setdefault(key, value)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
        node.pop("discriminator", None)
    node.pop("default", None)
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties", False) is not False or "patternProperties" in node:
            raise NotStrictError(f"{where} allows extra properties (a free-form dict)")
        properties = node.get("properties")
        if not isinstance(properties, dict):
            raise NotStrictError(f"{where} is an object without properties (a free-form dict)")
        node["additionalProperties"] = False
        node["required"] = list(properties)
        for name, sub in properties.items():
            _strict(sub, f"{where}/properties/{name}")
    for key in ("items", "not"):
        if isinstance(node.get(key), dict):
            _strict(node[key], f"{where}/{key}")
    for key in ("anyOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            for n, sub in enumerate(node[key]):
                _strict(sub, f"{where}/{key}/{n}")
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        if "anyOf" in node:
            raise NotStrictError(f"{where} has both $ref and anyOf")
        del node["$ref"]
        node["anyOf"] = [{"$ref": ref}]


def strict_or_none(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`to_strict_json_schema(schema)`, or None when strict mode cannot express it."""
    try:
        return to_strict_json_schema(schema)
    except NotStrictError:
        return None
