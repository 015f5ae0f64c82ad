"""The ReAct text protocol: tool calling for models without native tool calls.

Tools are described in the system prompt; the model writes each call as a
tagged block holding one JSON object, and gets each result back in a block
with the same id::

    <tool_call id="c1">
    {"name": "Calculator_evaluate", "input": {"expression": "2 + 2"}}
    </tool_call>

    <tool_result id="c1">4</tool_result>

Parsing is robust by construction: only the text between the tags is read,
with `json.JSONDecoder.raw_decode` from the first ``{``, so prose or a code
fence before the object and ``]`` or JSON after it cannot confuse it. A block that does not parse becomes an
observation for the model (never the end of the run), and every result is
tied to its call by id, not by position.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..core import ToolAction, ToolDefinition

_BLOCK = re.compile(r"<tool_call(?:\s+id\s*=\s*[\"']?([\w.\-]+)[\"']?)?\s*>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


@dataclass
class ReactCall:
    """A call parsed from model text: a valid `action`, or an `error` to send back for `tag`."""

    tag: str
    action: ToolAction | None = None
    error: str | None = None


def system_prompt(tools: list[ToolDefinition]) -> str:
    """The tool protocol and the tool list, to append to the system prompt."""
    lines = [
        "You can use tools. To call one, write a block like this, with one JSON object inside:",
        "",
        '<tool_call id="c1">',
        '{"name": "TOOL_NAME", "input": {"argument": "value"}}',
        "</tool_call>",
        "",
        "Give each call a new id. You may write several blocks for independent calls, then stop and wait:",
        'each result comes back as <tool_result id="c1">...</tool_result>. When you have the answer,',
        "reply without any tool_call block.",
        "",
        "Tools (name: description; input JSON Schema):",
    ]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description or 'no description'}; input: {json.dumps(tool.parameters)}")
    return "\n".join(lines)


def parse_calls(text: str) -> list[ReactCall]:
    """Every ``<tool_call>`` block of `text`, in order. An unterminated last block is read too."""
    calls: list[ReactCall] = []
    decoder = json.JSONDecoder()
    for n, match in enumerate(_BLOCK.finditer(text), 1):
        tag = match.group(1) or f"react-{n}"
        body = match.group(2)
        start = body.find("{")  # past any prose or code fence; raw_decode stops at the object's end
        if start < 0:
            calls.append(
                ReactCall(tag, error='the tool_call block holds no JSON object; write {"name": ..., "input": {...}}')
            )
            continue
        try:
            value, _ = decoder.raw_decode(body, start)
        except json.JSONDecodeError as exc:
            where = f"at character {exc.pos - start} of the object"  # counted from its "{"
            calls.append(
                ReactCall(tag, error=f"the tool_call block is not valid JSON ({exc.msg} {where}); nothing was run")
            )
            continue
        name = value.get("name")  # a JSON value that starts with "{" is an object
        arguments = value.get("input", value.get("arguments", {}))
        if not isinstance(name, str) or not name:
            calls.append(ReactCall(tag, error='the tool_call JSON needs a "name" string'))
        elif not isinstance(arguments, dict):
            calls.append(ReactCall(tag, error='the tool_call "input" must be a JSON object'))
        else:
            calls.append(ReactCall(tag, ToolAction.from_native(tag, name, arguments)))
    return calls


def result_block(tag: str, text: str, *, is_error: bool = False) -> str:
    """One observation for the model."""
    error = ' error="true"' if is_error else ""
    return f'<tool_result id="{tag}"{error}>\n{text}\n</tool_result>'
