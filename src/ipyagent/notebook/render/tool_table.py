"""``%tools``: the tools a cell may use, as a table with their JSON Schemas collapsed.

One row per tool the model would see (its native name, description and
parameters: name, type, required or not, description), grouped by where the tool
comes from (a function, a `BaseTool`, an MCP server). The display bundle has
sanitized ``text/html`` (the schema pretty-printed in a ``<details>``, never
wrapped mid-word), ``text/markdown`` and ``text/plain`` (terminal IPython).

Descriptions come from docstrings and MCP servers, so they are untrusted:
escaped, and the whole fragment passes the sanitizer; in the plain text a
terminal prints, control characters are shown, not run (`core.visible_controls`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...core import redact, visible_controls
from .html import escape, sanitize
from .transcript import _fenced, inert

#: Selectors outrank JupyterLab's ``.jp-ThemedContainer .jp-RenderedHTMLCommon pre / td`` (pre-wrap,
#: right-aligned cells). nh3 keeps classes on div, span and details only.
STYLE = """<style>
.ipyagent-tools div.ipyagent-tool-table table{border-collapse:collapse;margin:2px 0 10px}
.ipyagent-tools div.ipyagent-tool-table td,.ipyagent-tools div.ipyagent-tool-table th{border:1px solid
var(--jp-border-color2,#ddd);padding:3px 6px;text-align:left;vertical-align:top}
.ipyagent-tools div.ipyagent-tool-table td{white-space:pre-line;overflow-wrap:normal;word-break:normal}
.ipyagent-tools ul{margin:0;padding-left:1.1em}
.ipyagent-tools details.ipyagent-schema pre{white-space:pre;overflow-x:auto;word-break:normal;overflow-wrap:normal;
max-height:24em;margin:2px 0}
.ipyagent-tools .ipyagent-type{color:var(--jp-mirror-editor-variable-2-color,#05a)}
.ipyagent-tools .ipyagent-required{color:var(--jp-warn-color1,#a60);font-size:var(--jp-ui-font-size0,11px)}
.ipyagent-tools .ipyagent-meta{color:var(--jp-ui-font-color2,#777)}
</style>"""


@dataclass
class ToolSource:
    """Where tools come from: `name` in the namespace, `kind` (``function``, a `BaseTool`
    class name, ``MCP server: TARGET``), its tool definitions, or the `error` that kept it out."""

    name: str
    kind: str
    definitions: list[Any] = field(default_factory=list)
    error: str | None = None


@dataclass
class Parameter:
    name: str
    type: str
    required: bool
    description: str = ""


def type_of(schema: Any, defs: dict[str, Any] | None = None) -> str:
    """A JSON Schema as a short type: ``string``, ``integer | null``, ``array of string``,
    ``"a" | "b"`` (an enum), ``City`` (a ``$ref``), ``object``; ``any`` when it says nothing."""
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(dict.fromkeys(type_of(s, defs) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {type_of(schema['items'], defs)}" if "items" in schema else "array"
    return str(kind) if kind else "any"


def parameters(schema: dict[str, Any]) -> list[Parameter]:
    """The top-level properties of a tool's input schema, in order."""
    required = set(schema.get("required") or [])
    props = schema.get("properties") or {}
    return [
        Parameter(
            name, type_of(s), name in required, str((s or {}).get("description") or "") if isinstance(s, dict) else ""
        )
        for name, s in props.items()
    ]


def _schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False)


def _title(source: ToolSource) -> str:
    return f"{source.name}  ({source.kind})"


# -- HTML ------------------------------------------------------------------------------


def _params_html(params: list[Parameter]) -> str:
    if not params:
        return '<span class="ipyagent-meta">none</span>'
    items = []
    for p in params:
        mark = ' <span class="ipyagent-required">required</span>' if p.required else ""
        about = f" — {escape(p.description)}" if p.description else ""
        items.append(
            f'<li><code>{escape(p.name)}</code> <span class="ipyagent-type">{escape(p.type)}</span>{mark}{about}</li>'
        )
    return f"<ul>{''.join(items)}</ul>"


def _source_html(source: ToolSource) -> str:
    head = f'<div><b>{escape(source.name)}</b> <span class="ipyagent-meta">({escape(source.kind)})</span></div>'
    if source.error is not None:
        return head + f'<div class="ipyagent-meta">cannot be used as a tool: {escape(source.error)}</div>'
    rows = []
    for d in source.definitions:
        schema = (
            f'<details class="ipyagent-schema"><summary>JSON Schema</summary>'
            f"<pre><code>{escape(_schema_text(d.parameters))}</code></pre></details>"
        )
        rows.append(
            f"<tr><td><code>{escape(d.name)}</code></td><td>{escape(d.description)}</td>"
            f"<td>{_params_html(parameters(d.parameters))}{schema}</td></tr>"
        )
    table = "<table><thead><tr><th>tool</th><th>description</th><th>parameters</th></tr></thead>"
    return head + f'<div class="ipyagent-tool-table">{table}<tbody>{"".join(rows)}</tbody></table></div>'


def to_html(sources: list[ToolSource]) -> str:
    """Sanitized HTML: per source a heading and a table (tool, description, parameters with the schema collapsed)."""
    body = sanitize("".join(_source_html(s) for s in sources))
    return f'<div class="ipyagent-tools">{STYLE}{body}</div>'


# -- Markdown and plain text -------------------------------------------------------------


def _md(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]<>()#+!|~])", r"\\\1", text).replace("\n", " ")


def to_markdown(sources: list[ToolSource]) -> str:
    blocks = []
    for source in sources:
        blocks.append(f"**{_md(source.name)}** ({_md(source.kind)})")
        if source.error is not None:
            blocks.append(f"cannot be used as a tool: {_md(source.error)}")
            continue
        lines = ["| tool | description | parameters |", "|---|---|---|"]
        for d in source.definitions:
            params = "; ".join(
                f"`{p.name}` {_md(p.type)}{' (required)' if p.required else ''}" for p in parameters(d.parameters)
            )
            lines.append(f"| `{d.name}` | {_md(d.description)} | {params or 'none'} |")
        blocks.append("\n".join(lines))
        blocks += [
            f"`{d.name}` JSON Schema:\n\n{_fenced(_schema_text(d.parameters), 'json')}" for d in source.definitions
        ]
    return inert("\n\n".join(blocks) + "\n")


def to_text(sources: list[ToolSource]) -> str:
    """Plain text: a heading per source, the tools with their parameters one a line, then the schema."""
    lines: list[str] = []
    for source in sources:
        lines.append(_title(source))
        if source.error is not None:
            lines.append(f"  cannot be used as a tool: {source.error}")
            continue
        for d in source.definitions:
            lines.append(f"  {d.name}: {d.description}".rstrip())
            for p in parameters(d.parameters):
                about = f" — {p.description}" if p.description else ""
                lines.append(f"      {p.name}: {p.type}{', required' if p.required else ''}{about}")
            lines += ["      " + line for line in ("JSON Schema: " + _schema_text(d.parameters)).split("\n")]
    return "\n".join(lines)


def tools_bundle(sources: list[ToolSource]) -> dict[str, str]:
    """The display bundle of ``%tools`` (every type redacted; the plain text's control characters shown)."""
    return {
        "text/html": redact(to_html(sources)),
        "text/markdown": redact(to_markdown(sources)),
        "text/plain": visible_controls(redact(to_text(sources))),
    }
