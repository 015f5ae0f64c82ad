"""The generation-settings options shared by ``%%agent``, ``%%compare`` and ``%provider``.

    -t/--temperature T   --top-p P   --max-tokens N   --reasoning low|medium|high|TOKENS
    --tool-choice auto|required|none|TOOL   --seed N   --stop TEXT (repeatable)

`settings_arguments` adds them to a magic; `settings_from_args` reads them into a
`ModelSettings` (only the options given), so a cell's options go over the
session's defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument

from ...core import ModelSettings

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
    from pydantic import ValidationError

    values = {field: getattr(args, option[2:].replace("-", "_"), None) for option, field in OPTIONS}
    values = {k: v for k, v in values.items() if v is not None}
    if "stop" in values:  # IPython keeps quotes; "\\n" is a newline, as a user types it
        values["stop"] = [_unquote(v).replace("\\n", "\n").replace("\\t", "\t") for v in values["stop"]]
    try:
        return ModelSettings(**values)
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
