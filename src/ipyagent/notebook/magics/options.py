"""What the magics share: their options and how a magic line is read.

The generation-settings options of ``%%agent``, ``%%compare`` and ``%provider``:

    -t/--temperature T   --top-p P   --max-tokens N   --reasoning low|medium|high|TOKENS
    --tool-choice auto|required|none|TOOL   --seed N   --stop TEXT (repeatable)

`settings_arguments` adds them to a magic; `settings_from_args` reads them into a
`ModelSettings` (only the options given), so a cell's options go over the
session's defaults. `run_arguments` adds the options of a run that ``%%agent`` and
``%%compare`` share (``--tools``, ``--schema``, ``--image``, ``-o``...); `parse_line` reads
a magic line, `check_out_name` a ``-o`` name, `print_error` says what went wrong in one line.
"""

from __future__ import annotations

import argparse
import builtins
import keyword
import shlex
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, parse_argstring
from pydantic import ValidationError

from ...core import BUILTIN_TOOLS, ModelSettings, coerce_settings, redact, visible_controls

#: (option, `ModelSettings` field) for each settings option.
OPTIONS: tuple[tuple[str, str], ...] = (
    ("--temperature", "temperature"), ("--top-p", "top_p"), ("--max-tokens", "max_output_tokens"),
    ("--reasoning", "reasoning"), ("--tool-choice", "tool_choice"), ("--seed", "seed"), ("--stop", "stop"),
)

_ARGUMENTS = (
    argument("-t", "--temperature", type=float, metavar="T", help="sampling temperature, 0 to 2"),
    argument("--top-p", type=float, metavar="P", help="nucleus sampling, 0 to 1"),
    argument("--max-tokens", type=int, metavar="N", help="the most output tokens of the reply"),
    argument(
        "--reasoning",
        metavar="EFFORT|TOKENS",
        help="reasoning effort (low, medium, high) or a thinking budget in tokens",
    ),
    argument("--tool-choice", metavar="auto|required|none|TOOL", help="whether (and which) tool the model must call"),
    argument("--seed", type=int, metavar="N", help="a seed for reproducible sampling, where the provider has one"),
    argument("--stop", action="append", metavar="TEXT", help="a sequence that ends the reply (repeatable)"),
)


def settings_arguments(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the settings options to a magic (place it among its ``@argument`` lines)."""
    for add in reversed(_ARGUMENTS):
        func = add(func)
    return func


def settings_from_args(args: Any) -> ModelSettings:
    """A `ModelSettings` holding the settings options that were given.

    Raises:
        UsageError: a value out of range (``--temperature 5``), in one line naming the option.
    """

    values = {field: getattr(args, option[2:].replace("-", "_"), None) for option, field in OPTIONS}
    values = {k: v for k, v in values.items() if v is not None}
    if "stop" in values:  # IPython keeps quotes; "\\n" is a newline, as a user types it
        values["stop"] = [_unquote(v).replace("\\n", "\n").replace("\\t", "\t") for v in values["stop"]]
    try:
        return coerce_settings(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error.get("loc") else ""
        option = next((o for o, f in OPTIONS if f == field), field)
        why = "use low, medium, high or a number of tokens" if field == "reasoning" else error["msg"]
        raise UsageError(f"{option} {values.get(field)!r}: {why}") from None


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


#: ``--timeout SECONDS``: the deadline of a run (every model turn and tool), on the same three magics.
timeout_argument = argument(
    "--timeout",
    type=float,
    metavar="SECONDS",
    help="end the run after this many seconds, every model turn and tool included, keeping the text so far "
    "(%%provider: the session's default; otherwise 600)",
)


def timeout_from_args(args: Any) -> float | None:
    """The ``--timeout`` given (None when not given).

    Raises:
        UsageError: zero or negative.
    """
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    return args.timeout


def print_error(message: str) -> None:
    """An expected failure (a missing key, an unknown provider) as one line on stderr, redacted."""
    print(f"ipyagent: {visible_controls(redact(message))}", file=sys.stderr)


def check_out_name(name: str | None) -> None:
    """``-o VAR``: a variable name that is not a Python keyword; a warning (stderr) before
    shadowing a builtin such as ``print``.

    Raises:
        UsageError: not an identifier, or a keyword.
    """
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(
            f"-o/--out needs a variable name, not {name!r}" + (" (a Python keyword)" if keyword.iskeyword(name) else "")
        )
    if hasattr(builtins, name):
        print(f"ipyagent: -o {name} hides the builtin {name}(); `del {name}` brings it back", file=sys.stderr)


def split_words(line: str, magic: str) -> list[str]:
    """A line magic's words, split as a shell splits them (quotes group words).

    Raises:
        UsageError: an unclosed quote (``%agent grade 1 a fail it's wrong``), saying how to quote.
    """
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{magic}: {str(exc).lower()} in {visible_controls(redact(line))!r}; put text that holds "
                         "a ' in double quotes (\"it's wrong\") and text that holds a \" in single quotes") from None


def parse_line(magic: Any, line: str) -> Any:
    """`parse_argstring`, with the magic's usage line added to a bad-arguments error.

    IPython splits magic lines without removing quotes, so ``--system "Be brief."``
    would arrive as ``"Be brief."``; one pair of surrounding quotes is removed.
    """
    try:
        args = parse_argstring(magic, line)
    except UsageError as exc:
        usage = " ".join(magic.parser.format_usage().replace("::", "", 1).split())
        raise UsageError(f"{exc}\nusage: {usage}") from None
    for key, value in vars(args).items():  # repeatable options (--assert, --image) are lists
        setattr(args, key, [_unquote_any(v) for v in value] if isinstance(value, list) else _unquote_any(value))
    return args


def _unquote_any(value: Any) -> Any:
    return _unquote(value) if isinstance(value, str) else value


#: ``--builtin``'s help line.
BUILTIN_HELP = ("provider-side tools the model may use: " + ", ".join(BUILTIN_TOOLS)
                + " (the provider runs them; Python: builtin_tools= with options)")


def builtin_names(value: str | None) -> list[str] | None:
    """``--builtin web_search,code_execution`` as names; None when not given.

    Raises:
        UsageError: a name that is no built-in tool, saying which are.
    """
    if not value:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BUILTIN_TOOLS]
    if unknown:
        raise UsageError(f"--builtin: {', '.join(unknown)} is not a built-in tool; the built-in tools are "
                         f"{', '.join(BUILTIN_TOOLS)}")
    return names


def run_arguments(*, out: str, system: str, tools: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of a run that ``%%agent`` and ``%%compare`` share, with the help of the three
    that differ (`out`: what ``-o VAR`` binds; `system`: what ``--system`` is; `tools`: who calls
    ``--tools``): ``--system``, ``-o``, ``--raw``, ``--tools``, ``--builtin``, ``--max-steps``, ``--schema``,
    ``--strategy``, ``--image``, ``--file``, the settings and ``--timeout``."""
    added = (
        argument("--system", help=system),
        argument("-o", "--out", metavar="VAR", help=f"bind {out} to VAR"),
        argument("--raw", action="store_true", help="send the cell as it is, without Jinja rendering"),
        argument("--tools", metavar="NAME[,NAME]",
                 help=f"tools {tools} may call: names of functions or BaseTool objects in your namespace"),
        argument("--builtin", metavar="NAME[,NAME]", help=BUILTIN_HELP),
        argument("--max-steps", type=int, default=10, help="model turns per run at most (default 10)"),
        argument("--schema", metavar="MODEL", help="a pydantic model class (or JSON Schema dict) in your "
                 "namespace: the reply is validated into an instance (VAR.output with -o)"),
        argument("--strategy", choices=("native", "tool", "rule"),
                 help="how --schema is asked for (default: the provider's best)"),
        argument("--image", metavar="PATH_OR_VAR", action="append",
                 help="add an image: a file path, URL, or a variable holding bytes, a PIL image or a matplotlib "
                 "figure (repeatable)"),
        argument("--file", metavar="PATH_OR_VAR", action="append",
                 help="attach a PDF or text document: a file path, or a variable holding one or its bytes "
                 "(repeatable)"),
        argument("--await-in-kernel", action="store_true", help=argparse.SUPPRESS),
    )

    def add(func: Callable[..., Any]) -> Callable[..., Any]:
        for each in (*reversed(added), settings_arguments, timeout_argument):
            func = each(func)
        return func

    return add
