"""A template that is only text and ``{{ row.NAME }}`` fields is rendered without Jinja2's per-render
context (`templates._fields_only`): a matrix renders its prompt and each templated check once a row,
and a cached re-run does little else. It must give Jinja2's string, or Jinja2's error, every time."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest

from ipyagent.agent.evaluation import templates
from ipyagent.agent.evaluation.templates import TemplateError, render_template

KEY = "sk-abcdefghijklmnopqrstuvwxyz0123456789"


class _Raises:
    @property
    def boom(self) -> str:
        raise RuntimeError("no")


class _Items(dict):
    """A dict subclass: Jinja2 reads its attribute first."""

    question = "an attribute"


ROWS: list[Any] = [
    {"question": "What is 2 + 2?", "id": 7, "none": None, "items": "shadowed", "password": KEY, "note": f"key {KEY}"},
    {"question": "Ça va ?\r\n", "id": 0.5, "none": "", "items": 1, "password": "", "note": ""},
    {"id": True},
    _Items(question="an item", id=3),
    SimpleNamespace(question="from an attribute", id=[1, 2], note=None, password=KEY),
    _Raises(),
    "a string row",
    None,
]
TEMPLATES = [
    "Answer briefly. {{ row.question }}",
    "{{ row.id }}",
    "{{row.id}}-{{\n row.question\t}}\n",
    "{{ row.none }}|{{ row.items }}",
    "{{ row.keys }}",
    "{{ row.password }} {{ row.note }}",
    "{{ row.missing }}",
    "{{ row.boom }}",
    "{{ row.upper }}",
    "{{{ row.id }}",
    "{ {{ row.id }} }",
    "text }} {{ row.id }} }}}",
    "a\r\nb {{ row.id }}",
    "{{ row.id -}} x",
    "{{ row.id }}{% if row.id %}!{% endif %}",
    "{# note #}{{ row.id }}",
    "{{ row.id }}{{ row }}",
    "{{ row .id }} {{ row['id'] }}",
]


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _jinja(template: str, row: Any, redacting: bool) -> tuple[str, Any]:
    """What Jinja2 itself renders for the row as a template reads it (`templates._present`: a None field
    is missing), or the type of what it raises."""
    try:
        with_count = templates._masked_count.set([0] if redacting else None)
        try:
            return "text", templates.environment(redacting).from_string(template).render(row=templates._present(row))
        finally:
            templates._masked_count.reset(with_count)
    except Exception as exc:  # noqa: BLE001 - compared as a kind
        return "error", type(exc)


def _ours(template: str, row: Any, redacting: bool) -> tuple[str, Any]:
    try:
        return "text", render_template(template, row, redacting=redacting)
    except TemplateError:
        return "error", TemplateError


@pytest.mark.parametrize("redacting", [False, True])
@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_of_row_fields_renders_as_jinja2_does(template: str, redacting: bool) -> None:
    for row in ROWS:
        kind, value = _jinja(template, row, redacting)
        ours = _ours(template, row, redacting)
        if kind == "text" and ours[0] == "text":  # `_present` copies a row with a None field: another address
            value, ours = _ADDRESS.sub("", value), ("text", _ADDRESS.sub("", ours[1]))
        assert ours == (kind, value if kind == "text" else TemplateError), (template, row)
        assert ours[0] == "error" or type(ours[1]) is str


@pytest.mark.parametrize(("template", "plain"), [
    ("Answer briefly. {{ row.question }}", True), ("{{ row.id }}", True), ("{{row.a}}{{ row.b }}\n", True),
    ("{{ row.id }} {{ x }}", False), ("a\r\n{{ row.id }}", False), ("{{ row.id -}}", False), ("{{ row['id'] }}", False),
    ("{{ row.id }}{% if x %}{% endif %}", False), ("{{ row.id }}{# c #}", False), ("{{ question }}", False),
])
def test_only_text_and_row_fields_skip_jinja2s_render(template: str, plain: bool, monkeypatch: Any) -> None:
    row = {"id": 1, "question": "q", "a": "x", "b": "y"}
    wanted = _jinja(template, row, False)
    rendered = []
    render = jinja2.Template.render
    monkeypatch.setattr(jinja2.Template, "render", lambda self, *a, **k: rendered.append(1) or render(self, *a, **k))
    got = _ours(template, row, False)
    assert got == (wanted if wanted[0] == "text" else ("error", TemplateError))
    assert (not rendered) is plain
