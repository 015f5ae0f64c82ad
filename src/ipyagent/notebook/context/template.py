"""Cell bodies are Jinja2 templates rendered with the user namespace (the one environment and its
`TemplateError` are the agent layer's: `agent.evaluation.templates`); here, what only a kernel
needs: a render that a kernel interrupt can stop.

``{{ df.shape }}`` is replaced; text that is not Jinja syntax (code, JSON)
passes through untouched: a body that does not parse as a template is sent
as it is.

What a template puts in the prompt is context for a model, so each value passes
the one redactor's context rule (`core.redact_context`, unless the session's
``redact_context`` is off): a variable, attribute or item under a secret-looking
name (``{{ api_key }}``, ``{{ cfg.password }}``, ``{{ os.environ["GITHUB_TOKEN"] }}``)
is the mask; a mapping's secret-named entries are masked (``{{ cfg }}``,
``{{ os.environ }}``); and the text of every value has its secrets masked
(``{{ error }}``). `render_template` says how many values were masked.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...agent import TemplateError
from ...agent import render_cell as render_text

__all__ = ["TemplateError", "interruptible", "render_cell", "render_template"]


@contextmanager
def interruptible() -> Iterator[None]:
    """Let a kernel interrupt raise `KeyboardInterrupt` here, in the main thread.

    An ``%%agent`` cell awaits in the kernel, and while a cell awaits ipykernel turns
    SIGINT into a callback on its event loop, which a long synchronous render (a
    ``{% for %}`` over a huge range, a slow ``__str__``) would never let run. Python's
    own handler raises at the next bytecode instead.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def render_cell(body: str, namespace: dict[str, Any]) -> str:
    """`render_template`'s text, values redacted."""
    return render_template(body, namespace)[0]


def render_template(body: str, namespace: dict[str, Any], *, redacting: bool = True) -> tuple[str, int]:
    """(`body` rendered with `namespace`, how many values were masked), a kernel interrupt stopping
    it (`agent.evaluation.templates.render_cell`). With `redacting` (the session's
    ``redact_context``), every value passes the context rule (module docstring); without, values
    go in as they are (0).

    Raises:
        TemplateError: an undefined name, a failing expression, or an interrupt while rendering.
    """
    try:
        with interruptible():
            return render_text(body, namespace, redacting=redacting)
    except KeyboardInterrupt:
        raise TemplateError("cell template: interrupted while rendering; nothing was sent") from None
