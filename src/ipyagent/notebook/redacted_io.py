"""What a line magic prints passes the one redactor (`core.redact`) on its way to the cell;
with `plain_output`, its control characters are shown as well, not run (`core.visible_controls`)."""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import Any, TypeVar

from IPython.core.error import UsageError

from ..core import redact, visible_controls

F = TypeVar("F", bound=Callable[..., Any])


class _Collected(io.StringIO):
    """A magic's output, collected; a terminal when the stream it will be written to is one
    (so a magic drawing for a colour terminal still does)."""

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.target = target

    def isatty(self) -> bool:
        isatty = getattr(self.target, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False


def redacted_output(fn: F) -> F:
    """Wrap a magic so that its stdout, stderr and `UsageError` messages are redacted.

    The output is short (listings, one-line answers), so it is collected and written once.
    """
    return _collected(fn, redact)


def plain_output(fn: F) -> F:
    """`redacted_output` for a magic that prints servers' text and never draws colour (``%mcp``):
    control characters and escape sequences in what it prints are shown, not run."""
    return _collected(fn, lambda text: visible_controls(redact(text)))


def _collected(fn: F, clean: Callable[[str], str]) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out, err = _Collected(sys.stdout), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                return fn(*args, **kwargs)
        except UsageError as exc:
            raise UsageError(clean(str(exc))) from None
        finally:
            if out.getvalue():
                sys.stdout.write(clean(out.getvalue()))
            if err.getvalue():
                sys.stderr.write(clean(err.getvalue()))

    return wrapper  # type: ignore[return-value]


@contextmanager
def controls_shown() -> Iterator[None]:
    """Inside: what is printed to stdout (plain listings holding model, tool or server text:
    ``%agent inspect``, ``runs``, ``threads``) has its control characters shown, not run."""
    out = _Collected(sys.stdout)
    try:
        with redirect_stdout(out):
            yield
    finally:
        if out.getvalue():
            sys.stdout.write(visible_controls(out.getvalue()))
