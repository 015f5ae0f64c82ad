"""The questions of an MCP server asked in terminal IPython: a sampling request to approve (y / N,
or e to edit its last user message), and an elicitation: a prompt per field of its form (a field's
answer is asked again until it fits), or a link to open and confirm. `ask` is ``input`` (a test
gives its own); each runs in a worker thread, so the run's loop goes on meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...core import (
    ElicitationAnswer,
    ElicitationRequest,
    FormField,
    SamplingRequest,
    SamplingVerdict,
    form_fields,
    read_form,
    redact,
    visible_controls,
)

Ask = Callable[[str], str]


def _clean(text: str) -> str:
    return visible_controls(redact(text))


def sampling_prompt(request: SamplingRequest) -> str:
    """What the terminal shows of a sampling request before asking."""
    lines = [f"\nMCP server {request.server} asks the model (at most {request.max_tokens} tokens):"]
    if request.system:
        lines.append(f"  system: {_clean(request.system)}")
    lines += [f"  {m.role}: {_clean(m.text)}" for m in request.messages]
    if request.hints:
        lines.append(f"  model hints: {', '.join(map(_clean, request.hints))}")
    return "\n".join(lines) + "\nsend it? [y]es / [e]dit / [N]o "


def ask_sampling(request: SamplingRequest, ask: Ask | None = None) -> SamplingVerdict:
    """The user's verdict on `request`, asked on the terminal (blocking; `ask`: ``input``)."""
    ask = ask or input
    answer = ask(sampling_prompt(request)).strip().lower()
    if answer in ("e", "edit"):
        return SamplingVerdict(True, ask("the message to send instead: "))
    return SamplingVerdict(answer in ("y", "yes"))


def _field_prompt(f: FormField) -> str:
    about = f" ({_clean(f.description)})" if f.description else ""
    named = [f"{v}={_clean(label)}" if label != v else v for v, label in f.options]
    options = f" [{' / '.join(named)}]" if named else ""
    many = " (comma-separated)" if f.kind == "choices" else ""
    yes_no = " [y/n]" if f.kind == "boolean" else ""
    default = f" (default {f.default})" if f.default is not None else ""
    return f"  {_clean(f.title)}{about}{options}{many}{yes_no}{default}{' *' if f.required else ''}: "


def ask_elicitation(request: ElicitationRequest, ask: Ask | None = None) -> ElicitationAnswer:
    """The user's answer to `request`, asked on the terminal (blocking; `ask`: ``input``): a link
    to open and confirm, or a prompt per field (an empty answer takes the default, or leaves an
    optional field out); each field is asked again until its answer fits."""
    ask = ask or input
    print(f"\nMCP server {request.server} asks: {_clean(request.message)}")
    if request.url is not None:
        print(f"  open {_clean(request.url)} in your browser, then come back")
        answer = ask("done? [y]es / [n]o (decline) / [c]ancel ").strip().lower()
        action = "accept" if answer in ("y", "yes") else "cancel" if answer in ("c", "cancel") else "decline"
        return ElicitationAnswer(action)
    answer = ask("answer it? [y]es / [n]o (decline) / [c]ancel ").strip().lower()
    if answer not in ("y", "yes"):
        return ElicitationAnswer("cancel" if answer in ("c", "cancel") else "decline")
    raw: dict[str, Any] = {}
    for f in form_fields(request.schema):
        while True:
            given = ask(_field_prompt(f)).strip()
            value = given if given else (f.default if f.default is not None else "")
            _, errors = read_form({"properties": {f.name: _schema_of(request, f.name)},
                                   "required": [f.name] if f.required else []}, {f.name: value})
            if f.name not in errors:
                raw[f.name] = value
                break
            print(f"  {errors[f.name]}")
    content, _ = read_form(request.schema, raw)
    return ElicitationAnswer("accept", content)


def _schema_of(request: ElicitationRequest, name: str) -> dict[str, Any]:
    return dict((request.schema or {}).get("properties", {}).get(name) or {})


