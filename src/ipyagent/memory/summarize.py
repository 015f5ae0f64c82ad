"""Values summarized for a model: what a variable is, within a token budget.

`summarize(value, budget_tokens=...)` returns a `Summary`: a DataFrame as its
shape, columns with dtypes and null counts and its first rows as a Markdown
table; an array as shape, dtype and a few values; a dict or list as JSON; an
exception as its traceback; a function or class as its source; anything else
as its ``repr`` — each cut to the budget (our estimate, `tokens.estimate_text`),
saying so when it was cut.

pandas, polars and numpy are never imported here: a value is one of theirs only
if its library is already in ``sys.modules`` (frames.py does the rest).
"""

from __future__ import annotations

import inspect
import json
import reprlib
import traceback
from typing import Any

from . import frames
from .summary_writer import CELL_CHARS, Summary, cut
from .tokens import CHARS_PER_TOKEN

#: Tokens one summary may take unless told otherwise (``--context-budget``).
DEFAULT_BUDGET = 2000
def type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__.split(".")[0]
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def summarize(value: Any, *, budget_tokens: int = DEFAULT_BUDGET) -> Summary:
    """Describe `value` for a model in at most `budget_tokens` tokens (our estimate).

    Never raises for a value whose ``repr`` or source cannot be had: the summary says so.
    """
    special = frames.summarize_frame(value, budget_tokens)
    if special is not None:
        return special
    if isinstance(value, BaseException):
        return summarize_exception(value, budget_tokens)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        return summarize_json(value, budget_tokens)
    if isinstance(value, str):
        text, truncated = cut(value, budget_tokens * CHARS_PER_TOKEN)
        return Summary("str", f"str of {len(value):,} characters:\n{text}", truncated)
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return summarize_source(value, budget_tokens)
    return summarize_repr(value, budget_tokens)


def summarize_repr(value: Any, budget_tokens: int) -> Summary:
    kind = type_name(value)
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break the prompt
        text = f"<{kind} whose repr failed: {type(exc).__name__}: {exc}>"
    text, truncated = cut(text, budget_tokens * CHARS_PER_TOKEN - len(kind) - 4)
    return Summary(kind, f"{kind}: {text}", truncated)


def summarize_source(value: Any, budget_tokens: int) -> Summary:
    """A function's or class's source (cells defined in IPython have it too); else its signature and docstring."""
    kind = "class" if inspect.isclass(value) else "function"
    try:
        text = inspect.getsource(value)
    except (OSError, TypeError):
        try:
            signature = str(inspect.signature(value))
        except (TypeError, ValueError):
            signature = "(...)"
        doc = inspect.getdoc(value) or ""
        text = f"{getattr(value, '__qualname__', repr(value))}{signature}  (source not available)\n{doc}".rstrip()
    text, truncated = cut(text, budget_tokens * CHARS_PER_TOKEN)
    return Summary(kind, text, truncated)


def exception_lines(exc: BaseException) -> list[str]:
    """The standard traceback of `exc` (chained causes included), as lines."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()


def summarize_exception(exc: BaseException, budget_tokens: int, lines: list[str] | None = None) -> Summary:
    """An exception's traceback within the budget: its head and its tail (the failing
    line and the message) are kept, middle frames left out first."""
    lines = exception_lines(exc) if lines is None else lines
    return Summary(type_name(exc), *keep_ends(lines, budget_tokens * CHARS_PER_TOKEN))


def keep_ends(lines: list[str], chars: int) -> tuple[str, bool]:
    """`lines` joined, or, over `chars`, the first few and as many of the last as fit
    with a note between. A single overlong line is cut at its end."""
    text = "\n".join(lines)
    if len(text) <= chars:
        return text, False
    head = lines[:3]
    budget = chars - sum(len(x) + 1 for x in head) - 60
    tail: list[str] = []
    for line in reversed(lines[3:]):
        if len(line) + 1 > budget:
            break
        tail.insert(0, line)
        budget -= len(line) + 1
    left = len(lines) - len(head) - len(tail)
    text = "\n".join([*head, f"… {left:,} lines left out (budget) …", *tail])
    return cut(text, chars)[0], True


def summarize_json(value: Any, budget_tokens: int) -> Summary:
    """A dict, list, tuple or set as JSON (non-JSON values as their repr), cut to the budget
    without serializing more than the budget: a list of 10⁸ items costs what 100 do."""
    limit = budget_tokens * CHARS_PER_TOKEN
    kind = type_name(value)
    size = f"{len(value):,} {'keys' if isinstance(value, dict) else 'items'}"
    out = _BoundedJSON(limit - len(kind) - len(size) - 60)
    out.write(value, 0)
    text = cut("".join(out.parts), out.limit)[0]
    note = "\n… (cut to the budget)" if out.truncated else ""
    return Summary(kind, f"{kind} with {size}:\n{text}{note}", out.truncated)


def _first(value: Any, n: int) -> list[Any]:
    out = []
    for item in value:
        if len(out) >= n:
            break
        out.append(item)
    return out


class _BoundedJSON:
    """Indented JSON written until `limit` characters; containers past it end with a count of what was left."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False
        self._repr = reprlib.Repr()
        self._repr.maxstring = self._repr.maxother = CELL_CHARS

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def full(self, depth: int) -> bool:
        """No room for another item: room is kept for the notes and closers of `depth` + 1 open containers."""
        return self.size >= self.limit - 40 * (depth + 1)

    def write(self, value: Any, depth: int) -> None:
        pad = "\n" + "  " * (depth + 1)
        if isinstance(value, dict):
            items: Any = value.items()
            opener, closer, total = "{", "}", len(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = ((None, v) for v in value)
            opener, closer, total = "[", "]", len(value)
        else:
            self.put(self.scalar(value))
            return
        if total == 0:
            self.put(opener + closer)
            return
        if depth >= 6:
            self.put(f"{opener}… {total:,} items{closer}")
            return
        flat = opener == "[" and not isinstance(value, (set, frozenset)) and all(
            not isinstance(v, (dict, list, tuple, set, frozenset)) for v in _first(value, 50))
        self.put(opener)
        for n, (key, item) in enumerate(items):
            sep = ("" if n == 0 else " ") if flat else pad
            if self.full(depth):
                self.truncated = True
                self.put(f"{sep}… {total - n:,} more left out")
                break
            self.put(sep + (f"{self.scalar(str(key))}: " if key is not None else ""))
            self.write(item, depth + 1)
            if n < total - 1:
                self.put(",")
        self.put(closer if flat else "\n" + "  " * depth + closer)

    def scalar(self, value: Any) -> str:
        if value is None or isinstance(value, (bool, int, float)):
            return json.dumps(value)
        if isinstance(value, str):
            text, cut_ = cut(value, CELL_CHARS * 4)
            self.truncated |= cut_
            return json.dumps(text, ensure_ascii=False)
        try:
            return self._repr.repr(value)
        except Exception as exc:
            return f"<{type_name(value)}: repr failed: {type(exc).__name__}>"
