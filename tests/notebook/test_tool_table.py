"""``%tools`` as a table: name, description, parameters (type, required), the JSON Schema
collapsed; sanitized HTML with Markdown and plain-text fallbacks."""

from __future__ import annotations

import json

from IPython.utils.capture import capture_output
from markdown_it import MarkdownIt

from ipyagent.core import ToolDefinition
from ipyagent.notebook.render.tool_table import (
    ToolSource,
    parameters,
    to_html,
    to_markdown,
    to_text,
    tools_bundle,
    type_of,
)
from ..support.views import parse

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "the city's name"},
        "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "units": {"enum": ["metric", "imperial"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "place": {"$ref": "#/$defs/Place"},
    },
    "required": ["city", "units"],
}
HOSTILE = 'Gets <img src=x onerror="alert(1)"> the weather <script>alert(2)</script> [x](javascript:alert(3))'


def _sources(
    description: str = "Weather now, in a long sentence that a narrow output wraps at word ends.",
) -> list[ToolSource]:
    return [
        ToolSource(
            "get_weather",
            "FunctionTool",
            [ToolDefinition(name="get_weather", description=description, parameters=SCHEMA)],
        ),
        ToolSource("broken", "int", error="not a function or BaseTool"),
    ]


def test_types_of_json_schemas() -> None:
    assert [(p.name, p.type, p.required) for p in parameters(SCHEMA)] == [
        ("city", "string", True), ("days", "integer | null", False), ("units", '"metric" | "imperial"', True),
        ("tags", "array of string", False), ("place", "Place", False)]
    assert parameters(SCHEMA)[0].description == "the city's name"
    assert type_of({"type": ["string", "null"]}) == "string | null" and type_of({}) == "any" and type_of(None) == "any"
    assert parameters({"type": "object"}) == []


def test_html_is_a_table_with_the_schema_collapsed_and_unwrapped() -> None:
    page = to_html(_sources())
    body = page.split("</style>", 1)[1]
    doc = parse(body)
    tags = [t for t, _ in doc.tags]
    assert tags.count("tr") == 2 and [t for t in tags if t == "th"] == ["th"] * 3  # header + one tool
    assert "get_weather" in doc.text and "Weather now" in doc.text
    # parameters: name, type, and the required mark only on required ones
    assert "city string required — the city's name" in " ".join(doc.text.split())
    assert "days integer | null" in doc.text and "days integer | null required" not in doc.text
    # the schema: pretty-printed inside <details>, in a <pre> that scrolls instead of wrapping mid-word
    assert tags.index("details") < tags.index("summary") < tags.index("pre")
    schema_text = body.split("<pre><code>", 1)[1].split("</code></pre>", 1)[0]
    assert json.loads(schema_text.replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&")) == SCHEMA
    assert "\n" in schema_text
    assert "details.ipyagent-schema pre{white-space:pre;overflow-x:auto;word-break:normal" in page
    assert "cannot be used as a tool: not a function or BaseTool" in doc.text


def test_hostile_descriptions_are_text() -> None:
    sources = _sources(HOSTILE)
    body = to_html(sources).split("</style>", 1)[1]
    doc = parse(body)
    assert not [t for t, _ in doc.tags if t in ("script", "img", "a", "iframe")]
    assert not [k for _, attrs in doc.tags for k in attrs if k.startswith("on")]
    assert "<script>alert(2)</script>" in doc.text  # shown, not run
    rendered = parse(MarkdownIt("commonmark", {"html": True}).enable("table").render(to_markdown(sources)))
    assert not [t for t, _ in rendered.tags if t in ("script", "img", "iframe")]
    assert not [a for t, a in rendered.tags if t == "a" and "javascript" in (a.get("href") or "")]


def test_markdown_and_plain_text() -> None:
    md = to_markdown(_sources())
    assert "| tool | description | parameters |" in md and "`city` string (required)" in md and "```json" in md
    text = to_text(_sources())
    assert text.splitlines()[:3] == [
        "get_weather  (FunctionTool)",
        "  get_weather: Weather now, in a long sentence that a narrow output wraps at word ends.",
        "      city: string, required — the city's name",
    ]
    assert '      JSON Schema: {\n        "type": "object",' in text
    assert "broken  (int)\n  cannot be used as a tool: not a function or BaseTool" in text


def test_bundle_is_redacted(monkeypatch) -> None:
    monkeypatch.setenv("WEATHER_API_KEY", "sk-weather-0123456789abcdef")
    bundle = tools_bundle(_sources("uses key sk-weather-0123456789abcdef"))
    assert set(bundle) == {"text/html", "text/markdown", "text/plain"}
    assert all("sk-weather-0123456789abcdef" not in v and "[redacted]" in v for v in bundle.values())


def test_tools_magic_displays_the_bundle(ip) -> None:
    ip.run_cell('''
from typing import Literal
from ipyagent.tools import activity
@activity
def get_weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Weather now.

    Args:
        city: the city's name
    """
    return "sunny"
''')
    with capture_output() as captured:
        ip.run_line_magic("tools", "")
    [shown] = captured.outputs
    assert set(shown.data) == {"text/html", "text/markdown", "text/plain"}
    text = shown.data["text/plain"]
    assert "get_weather  (FunctionTool)" in text and "  get_weather: Weather now." in text
    assert "      city: string, required — the city's name" in text
    assert '      units: "metric" | "imperial"' in text and "units: \"metric\" | \"imperial\", required" not in text
    assert "<details" in shown.data["text/html"]
