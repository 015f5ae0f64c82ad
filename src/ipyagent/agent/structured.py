"""Structured output in the agent loop: find the answer in a reply, validate it, say what was wrong.

The driver asks for the output (DESIGN.md: native / tool / rule strategies);
here the reply is read back: the output tool's input (tool strategy) or the
reply's JSON text (native, rule, or a model that answered in text anyway),
validated with pydantic into an instance of the output model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from ..core import ActionCallBlock, ActionResultBlock, Message, TextBlock, ToolAction
from ..drivers import OUTPUT_TOOL

_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)


def output_call(message: Message) -> ToolAction | None:
    """The call of the output tool in `message`, if the model made one."""
    return next((a for a in message.tool_calls if a.native_name == OUTPUT_TOOL), None)


def schema_name(schema: Any) -> str:
    if isinstance(schema, type):
        return schema.__name__
    if isinstance(schema, dict) and schema.get("title"):
        return str(schema["title"])
    return "the output schema"


def parse_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced code block, or the span
    from the first ``{``/``[`` to the last ``}``/``]``.

    Raises:
        ValueError: no JSON value found (the message quotes the start of the text).
    """
    text = text.strip()
    if not text:
        raise ValueError("the reply is empty; it must be a JSON value")
    fenced = _FENCE_RE.match(text)
    candidates = [fenced.group(1)] if fenced else [text]
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    end = max(text.rfind("}"), text.rfind("]"))
    if starts and end > min(starts):
        candidates.append(text[min(starts):end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError(f"the reply is not JSON: {text[:120]!r}")


def validate(schema: Any, data: Any) -> Any:
    """`data` as an instance of `schema` (a pydantic model class); a JSON Schema dict
    is not checked beyond being JSON, so `data` comes back as it is.

    Raises:
        ValueError: the data does not fit the model; one line per problem, with its location.
    """
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)
            ]
            raise ValueError(f"the output does not match {schema.__name__}: " + "; ".join(problems)) from None
    return data


def read_output(message: Message, schema: Any) -> tuple[Any, str | None]:
    """(validated output, None), or (None, what was wrong) for the model to fix."""
    call = output_call(message)
    unreadable = next(
        (b.error for b in message.content if isinstance(b, ActionCallBlock) and b.action is call and b.error), None
    )
    if unreadable is not None:  # its arguments are not a JSON object: that is what the model must fix
        return None, unreadable
    try:
        data = call.input if call is not None else parse_json(message.text)
        return validate(schema, data), None
    except ValueError as exc:
        return None, str(exc)


#: The result given to other calls made in the same turn as the output call.
NOT_RUN = "not run: the final result was given in the same turn"


def correction(message: Message, error: str) -> Message:
    """What goes back to the model after an invalid reply: an error result for the
    output call (every call of the turn needs a result), else a user message."""
    if output_call(message) is not None:
        results = [
            ActionResultBlock(
                action=a,
                text=f"{error}. Call {OUTPUT_TOOL} again with corrected input."
                if a.native_name == OUTPUT_TOOL
                else NOT_RUN,
                is_error=True,
            )
            for a in message.tool_calls
        ]
        return Message(role="tool", content=results)
    return Message(
        role="user",
        content=[TextBlock(text=f"Your reply could not be used: {error}. Reply again with only the corrected JSON.")],
    )


def _synthetic(block: ActionResultBlock) -> bool:
    return block.action.native_name == OUTPUT_TOOL or block.text == NOT_RUN


def for_conversation(messages: list[Message]) -> list[Message]:
    """`messages` as they should stay in the conversation: the output tool's calls
    become their JSON text and its results user text; other calls are kept only
    with a real result. Later turns, which declare no output tool, then send a
    valid history."""
    ran = {b.action.tag for m in messages for b in m.content if isinstance(b, ActionResultBlock) and not _synthetic(b)}
    out: list[Message] = []
    for message in messages:
        blocks: list[Any] = []
        for block in message.content:
            if isinstance(block, ActionCallBlock):
                if block.action.native_name == OUTPUT_TOOL:
                    blocks.append(TextBlock(text=json.dumps(block.action.input)))
                elif block.action.tag in ran:
                    blocks.append(block)
            elif isinstance(block, ActionResultBlock) and _synthetic(block):
                if block.action.native_name == OUTPUT_TOOL:
                    blocks.append(TextBlock(text=block.text))
            else:
                blocks.append(block)
        if len(blocks) == len(message.content) and all(a is b for a, b in zip(blocks, message.content)):
            out.append(message)
        elif blocks:
            role = "user" if message.role == "tool" and all(isinstance(b, TextBlock) for b in blocks) else message.role
            out.append(message.model_copy(update={"content": blocks, "role": role}))
    return out
