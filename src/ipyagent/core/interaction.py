"""What a tool asks of the user or the run's model while it runs (DESIGN.md, "tools": ipyagent as an
MCP client): a server's sampling request (``sampling/createMessage``), approved by the user and answered
by the run's model, and an elicitation (``elicitation/create``), a form or a link the user answers.

These are the requests and answers a view draws and a run passes between the tools and the views; the
MCP wire types stay in `tools.mcp`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .messages import Message
from .tool_action import ToolAction


@dataclass(slots=True)
class SamplingRequest:
    """A server asks the run's model for one message (MCP "Sampling", ``sampling/createMessage``).

    `messages` are the conversation it sends (user and assistant text and images); `system` its
    system prompt; `max_tokens` the most the reply may take; `temperature` and `stop` as given.
    `hints` are the server's model preferences' names (advisory: shown, the model stays the run's
    or the server's `provider`). `provider` is the ``PROVIDER:MODEL`` that answers for this server
    (``%mcp add … --sampling``), None for the run's own; `preapproved` skips the user's approval
    (``--approve-sampling``). `action` is the tool call it came during, whose card shows it.
    """

    server: str
    messages: list[Message]
    max_tokens: int
    system: str | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    hints: list[str] = field(default_factory=list)
    provider: str | None = None
    preapproved: bool = False
    action: ToolAction | None = None


@dataclass(slots=True)
class SamplingVerdict:
    """The user's answer to a `SamplingRequest`: approved or not; `text`, when given, replaces the
    text of the request's last user message (the user edited it before sending)."""

    approved: bool
    text: str | None = None


@dataclass(slots=True)
class ElicitationRequest:
    """A server asks the user for input (MCP "Elicitation", ``elicitation/create``).

    Form mode: `schema` is the requested JSON Schema (an object of flat properties: strings, with a
    ``format``; numbers and integers, with bounds; booleans; enums, single or multiple, titled or not;
    ``required``). URL mode: `url` is the page the user opens (``https`` or ``http``), `elicitation_id`
    the server's id of it. `message` says why. `action` is the tool call it came during.
    """

    server: str
    message: str
    schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    action: ToolAction | None = None

    @property
    def mode(self) -> str:
        return "url" if self.url is not None else "form"


@dataclass(slots=True)
class ElicitationAnswer:
    """The user's answer: ``accept`` (with the form's `content`), ``decline`` or ``cancel``;
    `reason`: why it was given without the user (``no answer within 300 s``), None when they gave it."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    reason: str | None = None


@dataclass(slots=True)
class FormField:
    """One field of an elicitation form, read from its requested schema's property.

    `kind` is ``string``, ``number``, ``integer``, ``boolean``, ``choice`` (one of `options`) or
    ``choices`` (several); `options` are (value, label) pairs; `format` a string's format
    (``email``, ``uri``, ``date``, ``date-time``); `minimum` / `maximum` a number's bounds or a
    string's length or a multiple choice's count.
    """

    name: str
    kind: str
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    options: list[tuple[str, str]] = field(default_factory=list)
    format: str | None = None
    minimum: float | None = None
    maximum: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The field as a front end draws it (plain JSON)."""
        return {"name": self.name, "kind": self.kind, "title": self.title, "description": self.description,
                "required": self.required, "default": self.default, "options": [list(o) for o in self.options],
                "format": self.format, "minimum": self.minimum, "maximum": self.maximum}


def _options(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(value, label) of an enum: ``enum`` (labels from ``enumNames``) or ``oneOf`` / ``anyOf`` of ``const``s."""
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else []
        return [(str(v), str(names[n]) if n < len(names) else str(v)) for n, v in enumerate(spec["enum"])]
    listed = spec.get("oneOf") or spec.get("anyOf") or []
    consts = [o for o in listed if isinstance(o, dict) and "const" in o]
    return [(str(o["const"]), str(o.get("title") or o["const"])) for o in consts]


def form_fields(schema: dict[str, Any] | None) -> list[FormField]:
    """The fields of an elicitation's requested schema, in its order (MCP "Elicitation", form mode:
    flat properties of primitive types and enums). A property of another shape is a string field."""
    schema = schema if isinstance(schema, dict) else {}
    required = set(schema.get("required") or [])
    fields = []
    for name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type") if spec.get("type") in ("string", "number", "integer", "boolean") else "string"
        options = _options(spec)
        low, high = spec.get("minimum", spec.get("minLength")), spec.get("maximum", spec.get("maxLength"))
        if spec.get("type") == "array":
            options = _options(spec.get("items") if isinstance(spec.get("items"), dict) else {})
            kind, low, high = "choices", spec.get("minItems"), spec.get("maxItems")
        elif options:
            kind = "choice"
        fields.append(FormField(name=str(name), kind=kind, title=str(spec.get("title") or name),
                                description=str(spec.get("description") or ""), required=name in required,
                                default=spec.get("default"), options=options, format=spec.get("format"),
                                minimum=low, maximum=high))
    return fields


def _one(f: FormField, raw: Any) -> Any:
    """`raw` (text from a form or a prompt, or a value) as `f`'s type. Raises ValueError saying why not."""
    values = [v for v, _ in f.options]
    if f.kind == "boolean":
        if isinstance(raw, bool):
            return raw
        if str(raw).strip().lower() in ("y", "yes", "true", "1", "on"):
            return True
        if str(raw).strip().lower() in ("n", "no", "false", "0", "off"):
            return False
        raise ValueError("answer yes or no")
    if f.kind == "choices":
        picked = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",") if p.strip()]
        if any(str(p) not in values for p in picked):
            raise ValueError(f"pick from {', '.join(values)}")
        _bounds(f, len(picked), "choices")
        return [str(p) for p in picked]
    if f.kind == "choice":
        if str(raw) not in values:
            raise ValueError(f"pick one of {', '.join(values)}")
        return str(raw)
    if f.kind in ("number", "integer"):
        try:
            number = int(str(raw).strip()) if f.kind == "integer" else float(str(raw).strip())
        except ValueError:
            raise ValueError(f"give {'a whole number' if f.kind == 'integer' else 'a number'}") from None
        _bounds(f, number, "")
        return number
    text = str(raw)
    _bounds(f, len(text), "characters")
    return text


def _bounds(f: FormField, value: float, unit: str) -> None:
    what = f" {unit}" if unit else ""
    if f.minimum is not None and value < f.minimum:
        raise ValueError(f"at least {f.minimum:g}{what}")
    if f.maximum is not None and value > f.maximum:
        raise ValueError(f"at most {f.maximum:g}{what}")


def read_form(schema: dict[str, Any] | None, raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the content to send, {field name: what is wrong}) for a form's `raw` answers.

    Each field's answer is converted to its schema type (numbers, booleans, choices); an empty
    answer leaves an optional field out and is an error for a required one.
    """
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in form_fields(schema):
        value = raw.get(f.name)
        if value is None or value == "" or value == []:
            if f.required:
                errors[f.name] = "required"
            continue
        try:
            content[f.name] = _one(f, value)
        except ValueError as exc:
            errors[f.name] = str(exc)
    return content, errors


@dataclass(slots=True)
class SamplingAnswer:
    """The run's model's answer to a `SamplingRequest`: its `text`, the ``provider:model`` that
    answered, and its stop reason in MCP's words (``endTurn``, ``maxTokens``, ``stopSequence``)."""

    text: str
    model: str
    stop_reason: str = "endTurn"
