"""Terminal view: what drawing the answer with rich costs, and that the cost per delta does not
grow with the answer.

Streams a Markdown answer (headings, lists, a table, code) of 2k, 20k and 60k characters in
3-character deltas through `TextView` into (a) a plain stream (a pipe: text only) and (b) a
colour terminal (each completed block erased and drawn again by rich). Reports CPU seconds per
1,000 deltas for both, the colour/plain ratio, and the colour cost at the largest answer over
the smallest (the target: at most 1.5, the cost per delta independent of the answer's length).

Usage: python benchmarks/terminal_render.py [--quick] [--runs N]
"""

from __future__ import annotations

import io
import os
import time

from common import median, options, print_table, versions, write_json


BLOCK = """## Step {n}

Some **bold** prose with `code` and a [link](https://example.com), long enough to wrap once
on a narrow terminal and to show the inline styles.

- first point
- second point, a little longer

| name | value |
|------|-------|
| a    | {n}   |

```python
def step_{n}(x):
    return x + {n}
```

"""


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def answer(chars: int) -> str:
    parts, n = [], 0
    while sum(map(len, parts)) < chars:
        parts.append(BLOCK.format(n=n))
        n += 1
    return "".join(parts)[:chars]


def stream(text: str, out: io.StringIO) -> float:
    from ipyagent.core import Message, ModelCompleted, ModelStarted, StopReason, TextBlock, TextDelta, Usage
    from ipyagent.notebook.views.run_view import TextView

    view = TextView("openai:m", stream=out)
    usage = Usage(input_tokens=1, output_tokens=1)
    start = time.process_time()
    view.feed(ModelStarted(provider="openai", model="m"))
    for i in range(0, len(text), 3):
        view.feed(TextDelta(0, text[i:i + 3]))
    view.feed(
        ModelCompleted(
            message=Message(role="assistant", content=[TextBlock(text=text)], usage=usage),
            usage=usage,
            stop_reason=StopReason(kind="end_turn", raw="stop"),
            metadata={},
        )
    )
    return time.process_time() - start


def main() -> None:
    args = options(__doc__.split("\n", 1)[0], runs=5)
    os.environ.update({"COLUMNS": "100", "LINES": "50"})
    os.environ.pop("NO_COLOR", None)
    sizes = [1_000, 2_000] if args.quick else [2_000, 20_000, 60_000]
    results: dict[str, dict[str, float]] = {}
    rows = []
    for size in sizes:
        text = answer(size)
        deltas = -(-len(text) // 3)
        plain_out = io.StringIO()
        stream(text, plain_out)
        assert plain_out.getvalue().startswith(text), "the plain view must write the answer exactly"
        plain = median([stream(text, io.StringIO()) for _ in range(args.runs)]) / deltas * 1000
        colour = median([stream(text, Tty()) for _ in range(args.runs)]) / deltas * 1000
        results[f"{size}"] = {
            "plain_s_per_1000_deltas": plain,
            "colour_s_per_1000_deltas": colour,
            "ratio": colour / plain,
        }
        rows.append((f"{size:,} chars", plain, colour, colour / plain))
    first, last = results[str(sizes[0])], results[str(sizes[-1])]
    growth = last["colour_s_per_1000_deltas"] / first["colour_s_per_1000_deltas"]
    print_table("Terminal render (CPU s per 1,000 deltas of 3 characters)",
                ["answer", "plain", "colour (rich)", "colour / plain"], rows)
    print(f"colour cost per delta, largest answer / smallest: {growth:.2f} (target <= 1.5)")
    write_json(args, "terminal_render", {"benchmark": "terminal_render", "quick": args.quick, "results": results,
                                         "growth": growth, "versions": versions("rich", "markdown-it-py")})


if __name__ == "__main__":
    main()
