"""``%agent settings [NAME=VALUE ...]``: the session's limits and its redaction of context.

* ``redact_context`` (true): context sent to a model (cell templates' values, ``--with``,
  ``--cells``, ``%agent fix``, tool results) passes the one redactor's context rule;
  false sends it as it is (said with a warning).
* ``max_tool_calls`` (128): tool calls a run may make (``--max-tool-calls`` for one cell).
* ``store_max_size`` (2 GB): the run store's size past which one warning says to prune it
  (``%agent store --prune``); 0 never warns.
* ``eval_output_max`` (1 MB): the bytes an evaluation's saved output (``%%compare --over``: its
  JSON, HTML, Markdown and text together) takes at most in the notebook
  (`render.evaluation_saved`); the summary and statistics are always whole, the matrix keeps the
  rows that fit, failing ones first.

The first two are the session default's (`ipyagent.set_default`, shared with Python); the
store's cap and the saved output's are the notebook session's.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from IPython.core.error import UsageError

from ...agent import MAX_TOOL_CALLS_CEILING, check_max_tool_calls, current_default, set_default
from ...memory import DEFAULT_STORE_MAX_SIZE, human_size
from ..render.evaluation_saved import MIN_OUTPUT_MAX

NAMES = ("redact_context", "max_tool_calls", "store_max_size", "eval_output_max")
#: The sizes among `NAMES`: the notebook session's own.
SIZES = ("store_max_size", "eval_output_max")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*$", re.I)


def parse_size(text: str, what: str) -> int:
    """Bytes of ``500MB``, ``2 GB``, ``1.5GiB``, ``4096`` (kB, MB, GB, TB decimal; KiB ... binary).

    Raises:
        UsageError: not a size.
    """
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{what} takes a size such as 500MB or 2GB, not {text!r}")
    number, prefix, binary = match.groups()
    return int(float(number) * (1024 if binary else 1000) ** "_kmgt".index(prefix.lower() or "_"))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.I)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds of ``30d``, ``12h``, ``90m``, ``3600s`` or ``2w`` (a bare number: seconds).

    Raises:
        UsageError: not a duration.
    """
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"--older-than takes a duration such as 30d, 12h or 90m, not {text!r}")
    return float(match.group(1)) * _SECONDS[match.group(2).lower()]


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise UsageError(f"redact_context takes true or false, not {text!r}")


def _count(text: str) -> int:
    try:
        return check_max_tool_calls(int(text))
    except ValueError:
        raise UsageError(f"max_tool_calls takes a whole number from 0 to {MAX_TOOL_CALLS_CEILING:,}, "
                         f"not {text!r}") from None


def current(session: Any) -> str:
    """The settings as one line: ``redact_context=true  max_tool_calls=128  store_max_size=2 GB``."""
    default = current_default()
    size = human_size(session.store_max_size) if session.store_max_size else "0 (no warning)"
    return f"redact_context={str(default.redact_context).lower()}  max_tool_calls={default.max_tool_calls}  " \
           f"store_max_size={size}  eval_output_max={human_size(session.eval_output_max)}"


def apply(session: Any, words: list[str]) -> None:
    """Set each ``NAME=VALUE`` of `words` (all checked first, then set), then print the settings.

    Raises:
        UsageError: an unknown name, a word without ``=``, a bad value.
    """
    changes: dict[str, Any] = {}
    for word in words:
        name, sep, value = word.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in NAMES:
            raise UsageError(f"%agent settings: give NAME=VALUE with NAME one of {', '.join(NAMES)}, not {word!r}")
        changes[name] = (_flag if name == "redact_context" else _count if name == "max_tool_calls"
                         else lambda v, n=name: parse_size(v, n))(value)
    if changes.get("eval_output_max", MIN_OUTPUT_MAX) < MIN_OUTPUT_MAX:
        raise UsageError(f"eval_output_max takes {human_size(MIN_OUTPUT_MAX)} or more (the summary and statistics "
                         f"are always saved whole), not {human_size(changes['eval_output_max'])}")
    if "store_max_size" in changes:
        session.store_max_size = changes.pop("store_max_size")
        session.size_warned = False
    if "eval_output_max" in changes:
        session.eval_output_max = changes.pop("eval_output_max")
    if changes:
        set_default(**changes)
    if changes.get("redact_context") is False:
        print("ipyagent: redact_context is off: what cells send as context (templates' values, --with, --cells, "
              "%agent fix, tool results) is no longer masked, secrets included; "
              "%agent settings redact_context=true turns it back on", file=sys.stderr)
    print(current(session))


__all__ = ["DEFAULT_STORE_MAX_SIZE", "NAMES", "apply", "current", "parse_duration", "parse_size"]
