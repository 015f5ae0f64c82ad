"""Cell bodies are Jinja2 templates rendered with the user namespace.

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
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from ...core import MASK, mask_named, redact, redact_context, secret_name


class TemplateError(ValueError):
    """A template that parses but cannot render (an undefined name, a failing expression, a missing ``Out[n]``)."""


class _Masked(str):
    """The mask standing for a value under a secret-looking name (counted once where it is shown)."""


_MASKED = _Masked(MASK)
#: The values masked by the render under way (a one-item list), None when values are not redacted.
_masked_count: ContextVar[list[int] | None] = ContextVar("ipyagent_template_masked", default=None)


def _named(name: Any, value: Any) -> Any:
    """`value`, or the mask when `name` looks secret and `value` is non-blank text."""
    if isinstance(name, str) and isinstance(value, (str, bytes)) and value.strip() and secret_name(name):
        return _MASKED
    return value


def _finalize(value: Any) -> Any:
    """What a ``{{ }}`` puts in the prompt, masked by the context rule; the count goes to `_masked_count`."""
    counter = _masked_count.get()
    if counter is None:
        return value
    if type(value) is _Masked:
        counter[0] += 1
        return MASK
    value, named = mask_named(value)
    text, masked = redact_context(value if isinstance(value, str) else str(value))
    counter[0] += named + masked
    return text


@lru_cache(maxsize=2)
def _environment(redacting: bool = False) -> Any:
    import jinja2

    class ContextEnvironment(jinja2.Environment):
        """Attributes and items under a secret-looking name read as the mask (`_named`)."""

        def getattr(self, obj: Any, attribute: str) -> Any:
            return _named(attribute, super().getattr(obj, attribute))

        def getitem(self, obj: Any, argument: Any) -> Any:
            return _named(argument, super().getitem(obj, argument))

    kind = ContextEnvironment if redacting else jinja2.Environment
    env = kind(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
               finalize=_finalize if redacting else None)
    env.filters["context"] = context_filter
    return env


def context_filter(value: Any, budget: int | None = None) -> str:
    """``{{ df | context }}`` / ``{{ df | context(500) }}``: `value` summarized for a model
    (memory/summarize.py) within `budget` tokens (default `summarize.DEFAULT_BUDGET`); while
    values are redacted, a mapping's secret-named entries are masked first (and counted)."""
    from ...memory import DEFAULT_BUDGET, summarize

    counter = _masked_count.get()
    if counter is not None:
        value, named = mask_named(value)
        counter[0] += named
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
    """`render_template`'s text, values redacted."""
    return render_template(body, namespace)[0]


def render_template(body: str, namespace: dict[str, Any], *, redacting: bool = True) -> tuple[str, int]:
    """(`body` rendered with `namespace`, how many values were masked). With `redacting` (the
    session's ``redact_context``), every value passes the context rule (module docstring);
    without, values go in as they are (0).

    Raises:
        TemplateError: the template refers to an undefined name or its
            expression fails; the message says which and how to send the text raw.
    """
    if "{{" not in body and "{%" not in body and "{#" not in body:
        return body, 0
    import jinja2

    try:
        template = _environment(redacting).from_string(body)
    except jinja2.TemplateSyntaxError:
        return body, 0
    counter = [0]
    token = _masked_count.set(counter if redacting else None)
    try:
        if redacting:  # variables under secret-looking names (`api_key`, `GITHUB_TOKEN`) read as the mask
            namespace = {name: _named(name, value) for name, value in namespace.items()}
        with interruptible():
            return template.render(namespace), counter[0]
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
            redact(f"cell template: {type(exc).__name__}: {exc}; use --raw to send the text as it is")
        ) from None
    finally:
        _masked_count.reset(token)
