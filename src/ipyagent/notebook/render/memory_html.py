"""HTML for Task Memory artifacts and thread notices in the live view and ``%agent memory``.

Each artifact is a collapsed entry (namespace, type, size, producing tool)
that opens to its content drawn by type: text as sanitized Markdown, a table
as an HTML table (first rows, then "show more"), JSON as a collapsible tree,
an image inline. Everything shown comes from a tool, so it is untrusted:
values are escaped and the whole fragment passes the sanitizer; only the
image's ``data:`` URL is added after, built from the bytes and an allowlisted
image type (never SVG).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ...core import (
    Transcript,
    BlobArtifact,
    HistoryTrimmed,
    ImageArtifact,
    JsonArtifact,
    ListArtifact,
    TableArtifact,
)
from ...memory import describe_size, size_of
from .html import escape, markdown_to_html, sanitize

#: Most characters of text drawn; the rest is a note pointing at ipyagent.memory[...].
TEXT_LIMIT = 20_000
#: Table rows shown at first, and at most in all (behind "show more").
TABLE_FIRST, TABLE_MAX = 10, 200
CELL_CHARS = 200
#: Most nodes of a JSON tree drawn.
JSON_NODES = 500
#: Largest image inlined, bytes.
IMAGE_BYTES = 2_000_000
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}

STYLE = """<style>
.ipyagent-artifact{border:1px dashed var(--jp-border-color1,#bbb);border-radius:4px;margin:4px 0;padding:2px 8px}
.ipyagent-artifact-body{max-height:24em;overflow:auto}
.ipyagent-artifact table{border-collapse:collapse;font-size:var(--jp-ui-font-size0,11px)}
.ipyagent-artifact td,.ipyagent-artifact th{border:1px solid var(--jp-border-color2,#ddd);padding:1px 4px}
.ipyagent-json ul{list-style:none;margin:0;padding-left:1.2em}
</style>"""


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return escape(text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…")


def _rows(columns: list[str], rows: list[dict[str, Any]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{_cell(r.get(c, ''))}</td>" for c in columns) + "</tr>" for r in rows)


def table_html(artifact: TableArtifact, where: str) -> str:
    columns, rows = artifact.columns, artifact.value
    head = "<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr></thead>"
    html = f"<table>{head}<tbody>{_rows(columns, rows[:TABLE_FIRST])}</tbody></table>"
    more = rows[TABLE_FIRST:TABLE_MAX]
    if more:
        html += (f"<details><summary>show {len(more)} more rows</summary>"
                 f"<table>{head}<tbody>{_rows(columns, more)}</tbody></table></details>")
    if len(rows) > TABLE_MAX:
        html += f"<p>{len(rows) - TABLE_MAX:,} more rows are in {escape(where)}</p>"
    return html


def json_html(value: Any) -> str:
    budget = [JSON_NODES]

    def node(key: str | None, v: Any, depth: int) -> str:
        budget[0] -= 1
        label = f"<b>{escape(key)}</b>: " if key is not None else ""
        if budget[0] < 0:
            return "<li>…</li>"
        if isinstance(v, (dict, list)) and v:
            items = list(v.items()) if isinstance(v, dict) else [(str(i), x) for i, x in enumerate(v)]
            brackets = f"{{…}} {len(v)} keys" if isinstance(v, dict) else f"[…] {len(v)} items"
            inner = "".join(node(k, x, depth + 1) for k, x in items)
            opened = " open" if depth == 0 else ""
            return f"<li><details{opened}><summary>{label}{brackets}</summary><ul>{inner}</ul></details></li>"
        return f"<li>{label}<code>{escape(json.dumps(v, ensure_ascii=False, default=str))}</code></li>"

    return f'<div class="ipyagent-json"><ul>{node(None, value, 0)}</ul></div>'


def _content_html(artifact: Any, where: str) -> tuple[str, str]:
    """(sanitizable HTML, trusted image HTML added after sanitizing)."""
    if isinstance(artifact, TableArtifact):
        return table_html(artifact, where), ""
    if isinstance(artifact, JsonArtifact):
        return json_html(artifact.value), ""
    if isinstance(artifact, ImageArtifact):
        if artifact.mime_type not in IMAGE_TYPES:
            return f"<p>an image of type {escape(artifact.mime_type)}, not shown inline</p>", ""
        if len(artifact.value) > IMAGE_BYTES:
            return f"<p>{len(artifact.value):,} bytes: too large to show here; it is in {escape(where)}</p>", ""
        return "", (f'<img src="data:{artifact.mime_type};base64,{base64.b64encode(artifact.value).decode()}" '
                    f'alt="{escape(where)}" style="max-width:100%">')
    if isinstance(artifact, BlobArtifact):
        try:
            text = artifact.value[:TEXT_LIMIT].decode("utf-8")
        except UnicodeDecodeError:
            return (
                f"<p>{len(artifact.value):,} bytes of {escape(artifact.mime_type)}; the bytes are in "
                f"{escape(where)}.value</p>",
                "",
            )
        return f"<pre>{escape(text)}</pre>", ""
    if isinstance(artifact, ListArtifact):
        parts = [_content_html(a, where) for a in artifact.value]
        return "".join(f"<div>{html}</div>" for html, _ in parts), "".join(img for _, img in parts)
    text = artifact.to_text() if hasattr(artifact, "to_text") else str(artifact)
    html = markdown_to_html(text[:TEXT_LIMIT])
    if len(text) > TEXT_LIMIT:
        html += f"<p>showing the first {TEXT_LIMIT:,} of {len(text):,} characters; all of it is in {escape(where)}</p>"
    return html, ""


def artifact_entry_html(
    namespace: str, artifact: Any, *, tool: str, activity: str | None = None, size: dict[str, int] | None = None
) -> str:
    """A collapsed ``<details class="ipyagent-artifact">`` entry for one stored artifact."""
    where = f'ipyagent.memory["{namespace}"]'
    kind = getattr(artifact, "type", "artifact")
    producer = f"{tool}.{activity}" if activity and activity != tool else tool
    size_text = describe_size(size or size_of(artifact))
    summary = (
        f'<summary><b>{escape(namespace)}</b> <span class="ipyagent-footer">{escape(kind)} · '
        f"{escape(size_text)} · from {escape(producer)} · off-prompt</span></summary>"
    )
    body, image = _content_html(artifact, where)
    body = sanitize(f'{summary}<div class="ipyagent-artifact-body">{body}')
    return f'<details class="ipyagent-artifact">{body.removesuffix("</div>")}{image}</div></details>'


def stored_event_html(event: Any) -> str:
    """`artifact_entry_html` for an `ArtifactStored` event."""
    return artifact_entry_html(
        event.namespace, event.artifact, tool=event.tool, activity=event.activity, size=event.size
    )


def trimmed_text(event: HistoryTrimmed) -> str:
    """One line saying which turns of a thread were left out of the request, and why."""
    turns = "turn" if event.dropped_turns == 1 else "turns"
    if event.reason == "max_history":
        why = f"--max-history {event.kept_turns}"
    else:
        why = (f"the model's context window: the history kept is ≈{event.estimated_tokens:,} tokens "
               f"(our estimate) of a {event.budget_tokens:,}-token budget")
    return f"thread {event.thread!r}: the {event.dropped_turns} oldest {turns} left out of this request ({why})"


def draw_artifacts(transcript: Transcript, events: list[Any]) -> None:
    """Give `transcript`'s artifacts the HTML ``%agent memory`` draws for them (from the
    ``artifact_stored`` events, in order), so the saved run shows them as the live one did."""
    stored = [e for e in events if getattr(e, "type", None) == "artifact_stored"]
    for summary, event in zip(transcript.artifacts, stored):
        summary.html = stored_event_html(event)
