"""Cell bodies are Jinja2 templates rendered with the user namespace.

``{{ df.shape }}`` is replaced; text that is not Jinja syntax (code, JSON)
passes through untouched: a body that does not parse as a template is sent
as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any


class TemplateError(ValueError):
    """A template that parses but cannot render (an undefined name, a failing expression, a missing ``Out[n]``)."""


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["context"] = context_filter
    return env


def context_filter(value: Any, budget: int | None = None) -> str:
    """``{{ df | context }}`` / ``{{ df | context(500) }}``: `value` summarized for a model
    (memory/summarize.py) within `budget` tokens (default `summarize.DEFAULT_BUDGET`)."""
    from ...memory import DEFAULT_BUDGET, summarize

    return summarize(value, budget_tokens=budget or DEFAULT_BUDGET).text


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
    """Render `body` with `namespace`.

    Raises:
        TemplateError: the template refers to an undefined name or its
            expression fails; the message says which and how to send the text raw.
    """
    if "{{" not in body and "{%" not in body and "{#" not in body:
        return body
    import jinja2

    try:
        template = _environment().from_string(body)
    except jinja2.TemplateSyntaxError:
        return body
    try:
        with interruptible():
            return template.render(namespace)
    except KeyboardInterrupt:
        raise TemplateError("cell template: interrupted while rendering; nothing was sent") from None
    except TemplateError:  # a clear message already (notebook_context: no error yet, a missing Out[n])
        raise
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"cell template: {exc.message}; define it first, or use --raw to send the text as it is"
        ) from None
    except Exception as exc:  # an expression in the template raised
        raise TemplateError(
            f"cell template: {type(exc).__name__}: {exc}; use --raw to send the text as it is"
        ) from None
