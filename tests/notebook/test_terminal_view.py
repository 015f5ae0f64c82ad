"""Terminal IPython: the answer streams as text, then shows rendered with rich on a colour
terminal (checked on an emulated VT100 screen, pyte); plain text on a pipe or with NO_COLOR."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pyte
import pytest

from ipyagent.core import (
    ArtifactStored,
    Message,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ProviderError,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolAction,
    ToolCallCompleted,
    ToolCallDelta,
    Usage,
)
from ipyagent.core.artifacts import TextArtifact
from ipyagent.notebook.views.terminal import TerminalOutput, complete_prefix, rows
from ipyagent.notebook.views.run_view import TextView
from ..support.views import Tty

ANSWER = """# Plan

First **bold** step, then a list:

- one
- two

```python
def add(a, b):
    return a + b
```

Done.
"""
COLUMNS, LINES = 80, 60


def screen_of(output: str) -> list[str]:
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.Stream(screen)
    stream.feed(output.replace("\n", "\r\n"))  # a terminal's line discipline maps \n to \r\n
    return [line.rstrip() for line in screen.display]


def completed(text: str) -> ModelCompleted:
    usage = Usage(input_tokens=12, output_tokens=34)
    return ModelCompleted(
        message=Message(role="assistant", content=[TextBlock(text=text)], usage=usage),
        usage=usage,
        stop_reason=StopReason(kind="end_turn", raw="stop"),
        metadata={"ttft_s": 0.1, "latency_s": 0.5},
    )


def run(view: TextView, text: str, size: int = 3) -> None:
    view.feed(ModelStarted(provider="openai", model="m"))
    for i in range(0, len(text), size):
        view.feed(TextDelta(0, text[i:i + size]))
    view.feed(completed(text))


@pytest.fixture(autouse=True)
def terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))  # shutil.get_terminal_size reads these first
    monkeypatch.setenv("LINES", str(LINES))
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_plain_text_on_a_pipe() -> None:
    out = io.StringIO()
    run(TextView("openai:m", stream=out), ANSWER)
    assert out.getvalue() == ANSWER + "\n[openai:m · 12 in / 34 out tokens · first token 0.10 s · total 0.50 s]\n"
    assert "\x1b" not in out.getvalue()


def test_no_color_on_a_terminal_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = Tty()
    view = TextView("openai:m", stream=out)
    view.feed(ReasoningDelta(0, "thinking"))
    run(view, ANSWER)
    assert "\x1b" not in out.getvalue() and out.getvalue().startswith(ANSWER)


def test_a_colour_terminal_shows_the_answer_rendered() -> None:
    out = Tty()
    run(TextView("openai:m", stream=out), ANSWER)
    raw = out.getvalue()
    screen = "\n".join(screen_of(raw)).strip("\n")
    visible = [line for line in screen.splitlines() if line.strip()]
    # rendered: no Markdown syntax left on the screen, each block once
    assert not any(s in screen for s in ("# Plan", "**bold**", "```", "- one"))
    assert visible[0].strip() == "Plan" and "First bold step, then a list:" in screen
    assert [line.strip() for line in visible if line.strip().endswith((" one", " two"))] == ["• one", "• two"]
    assert screen.count("def add(a, b):") == 1 and screen.count("Done.") == 1
    assert visible[-1] == "[openai:m · 12 in / 34 out tokens · first token 0.10 s · total 0.50 s]"
    # the code is highlighted (a foreground colour on `def`), the footer coloured
    assert re.search(r"\x1b\[[0-9;]*m(def)\x1b\[0m", raw) and re.search(r"\x1b\[[0-9;]*m(return)\x1b\[0m", raw)
    assert "\x1b[1;36mopenai:m" in raw
    # it streamed first: the raw text was written before it was erased and drawn again
    assert raw.index("First **bold** step") < raw.index("\x1b[J")


def test_blocks_are_drawn_as_they_complete() -> None:
    out = Tty()
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))

    def shown(piece: str) -> str:
        view.feed(TextDelta(0, piece))
        return "\n".join(screen_of(out.getvalue())).strip("\n")

    assert shown("# Title\n\nSome *text* sti").startswith("# Title")  # the next block's first line is not complete
    screen = shown("ll going\n\nNext ")
    assert screen.startswith("Title".center(COLUMNS).rstrip()) and "# Title" not in screen  # the heading: drawn
    assert "Some *text* still going" in screen  # its paragraph is open until a block starts after it
    screen = shown("block\n")
    assert "Some text still going" in screen and "*text*" not in screen and screen.endswith("Next block")


def test_an_off_prompt_notice_starts_on_a_row_of_its_own() -> None:
    """It read ``[tool call big_tool] {}[stored off-prompt: ...]``, glued to the arguments."""
    for out in (io.StringIO(), Tty()):
        view = TextView("openai:m", stream=out)
        view.feed(ModelStarted(provider="openai", model="m"))
        view.feed(ToolCallDelta(0, call_id="c1", name="big_tool", arguments="{}"))
        view.feed(ArtifactStored(call_id="c1", tool="big_tool", activity=None, memory="TaskMemory", namespace="n1",
                                 artifact=TextArtifact(value="x" * 10), size={"chars": 10}))
        raw = out.getvalue()
        shown = screen_of(raw) if isinstance(out, Tty) else raw.splitlines()
        notice = "[stored off-prompt: ipyagent.memory['n1'], text, 10 chars]"
        assert "[tool call big_tool] {}" in shown and notice in shown


def test_reasoning_is_dimmed_and_tools_coloured() -> None:
    out = Tty()
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(ReasoningDelta(0, "Let me think."))
    view.feed(ToolCallDelta(1, call_id="c1", name="get_weather", arguments='{"city": "SF"}'))
    action = ToolAction(tag="c1", name="get_weather", input={"city": "SF"})
    view.feed(ToolCallCompleted(action=action, result=TextArtifact(value="61 F"), duration_s=0.01))
    view.feed(ModelFailed(error=ProviderError(type="server", message="boom"), partial=Message(role="assistant")))
    raw = out.getvalue()
    assert "\x1b[2mLet me think.\x1b[0m" in raw.replace("\x1b[0m\x1b[2m", "")  # dimmed, piece by piece
    screen = "\n".join(screen_of(raw))
    assert '[tool call get_weather] {"city": "SF"}' in screen and "[result get_weather, 0.01 s] 61 F" in screen
    assert "[error] boom" in screen and "failed" in screen
    assert "\x1b[31m" in raw or "\x1b[1;31m" in raw


def test_a_secret_split_across_deltas_is_redacted_on_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-term-0123456789abcdefXYZ")
    for out in (io.StringIO(), Tty()):
        run(TextView("openai:m", stream=out), "the key is sk-term-0123456789abcdefXYZ ok\n\nnext block\n", size=4)
        assert "sk-term-0123456789abcdefXYZ" not in out.getvalue() and "[redacted]" in out.getvalue()


def test_a_secret_split_across_tool_call_argument_deltas_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool call's arguments stream in fragments; each was redacted alone, so a key cut between two
    fragments reached the screen whole. They go through the stream's redactor as text does."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-term-0123456789abcdefXYZ")
    arguments = '{"note": "use sk-term-0123456789abcdefXYZ or sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234 now"}'
    for out in (io.StringIO(), Tty()):
        view = TextView("openai:m", stream=out)
        view.feed(ModelStarted(provider="openai", model="m"))
        for i in range(0, len(arguments), 7):
            view.feed(ToolCallDelta(0, call_id="c1", name="lookup", arguments=arguments[i:i + 7]))
        view.feed(completed("done"))
        raw = out.getvalue()
        assert "0123456789abcdef" not in raw and "ABCDEFGHIJKLMNOP" not in raw
        shown = "\n".join(screen_of(raw)) if isinstance(out, Tty) else raw
        assert '[tool call lookup] {"note": "use [redacted] or [redacted] now"}' in shown


def test_a_secret_split_across_a_provider_side_call_input_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider-side call's input (a search's query, code as it is written) streams like a tool
    call's arguments, and is redacted across its pieces as they are."""
    from ipyagent.core import ServerToolDelta

    monkeypatch.setenv("OPENAI_API_KEY", "sk-term-0123456789abcdefXYZ")
    given = '{"query": "is sk-term-0123456789abcdefXYZ or sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234 leaked"}'
    for out in (io.StringIO(), Tty()):
        view = TextView("openai:m", stream=out)
        view.feed(ModelStarted(provider="openai", model="m"))
        for i in range(0, len(given), 7):
            view.feed(ServerToolDelta(0, call_id="s1", tool="web_search", name="web_search", arguments=given[i:i + 7]))
        view.feed(completed("done"))
        raw = out.getvalue()
        assert "0123456789abcdef" not in raw and "ABCDEFGHIJKLMNOP" not in raw
        shown = "\n".join(screen_of(raw)) if isinstance(out, Tty) else raw
        assert '{"query": "is [redacted] or [redacted] leaked"}' in shown


def test_a_block_taller_than_the_screen_stays_as_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINES", "5")
    out = Tty()
    long_code = "```\n" + "".join(f"line {n}\n" for n in range(10)) + "```\n\nafter\n"
    run(TextView("openai:m", stream=out), long_code)
    raw = out.getvalue()
    assert raw.count("line 9") == 1  # written once, not erased and drawn again


def test_complete_prefix_and_rows() -> None:
    assert complete_prefix("para") == 0 and complete_prefix("para\n\nnext") == 0  # "next" is not a complete line
    assert complete_prefix("para\n\nnext\n") == 2
    assert complete_prefix("Title\n-") == 0 and complete_prefix("Title\n---\n") == 0  # a setext heading, one block
    assert complete_prefix("```\ncode\n\nmore\n") == 0  # an open fence is one block
    assert rows("abc", 10) == 1 and rows("a" * 25, 10) == 3 and rows("a\n\nb", 10) == 3 and rows("界" * 6, 10) == 2


def test_output_object_without_colour_writes_what_it_gets() -> None:
    out = io.StringIO()
    term = TerminalOutput(out)
    assert term.colour is False
    term.text("a")
    term.part(" [b]", "red")
    term.footer(["x", "y"])
    assert out.getvalue() == "a [b]\n[x · y]\n"


def test_rich_is_not_imported_by_load_ext_or_a_plain_run() -> None:
    code = (
        "from IPython.terminal.interactiveshell import TerminalInteractiveShell\n"
        "import io, sys\nshell = TerminalInteractiveShell.instance()\nshell.run_line_magic('load_ext', 'ipyagent')\n"
        "from ipyagent.notebook.views.run_view import TextView\nfrom ipyagent.core import TextDelta\n"
        "TextView('x', stream=io.StringIO()).feed(TextDelta(0, '# hi\\n\\nthere\\n'))\n"
        "print('rich' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr[-2000:]


def test_a_long_code_block_is_not_parsed_again_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Markdown is parsed when a block may have ended; inside an open fence nothing can, so the
    work for a 2,000-line code block stays one scan of its lines, not 2,000 parses of it."""
    from ipyagent.notebook.views import terminal

    parses: list[int] = []
    real = terminal.complete_prefix
    monkeypatch.setattr(terminal, "complete_prefix", lambda text: parses.append(len(text)) or real(text))
    monkeypatch.setenv("LINES", "5000")
    out = Tty()
    code = "Intro.\n\n```python\n" + "".join(f"x{n} = {n}\n" for n in range(2000)) + "```\n\nAfter.\n"
    run(TextView("openai:m", stream=out), code, size=7)
    assert len(parses) < 10, len(parses)
    assert out.getvalue().count("x1999") == 2  # streamed once, then drawn once (highlighted)


#: What a model may send that a terminal would act on: clear screen, set title (OSC ended by BEL), CR,
#: backspace, a one-byte CSI (C1), concealed text; and what must survive: newlines and tabs.
HOSTILE = ["Hi\x1b[2J", "\x1b]0;pwned\x07 there\r", "\nline\ttab\x08\x9b31m end\x7f\n"]
ACTS = ("\x1b[2J", "\x1b]0;", "\x07", "\x08", "\x9b", "\x7f", "\x1b[8m", "\x1b[5m")


@pytest.mark.parametrize("colour", [False, True], ids=["plain", "colour"])
def test_control_characters_from_the_model_never_reach_the_terminal(colour: bool) -> None:
    out = Tty() if colour else io.StringIO()
    view = TextView("openai:m", stream=out)
    view.feed(ModelStarted(provider="openai", model="m"))
    view.feed(ReasoningDelta(0, "think\x1b[8m"))
    for piece in HOSTILE:
        view.feed(TextDelta(1, piece))
    call = ToolAction(tag="c1", name="lookup", input={"q": "x"})
    view.feed(ToolCallCompleted(call, TextArtifact(value="found\x1b[5m it"), 0.1))
    view.feed(completed("".join(HOSTILE)))
    raw = out.getvalue()
    assert not [seq for seq in ACTS if seq in raw]
    footer = Tty() if colour else io.StringIO()
    TerminalOutput(footer, colour=colour).footer(["openai:m", "stop: odd\x1b[2J\x07"])  # a provider's raw stop reason
    assert "stop: odd␛[2J␇" in footer.getvalue() and not [seq for seq in ACTS if seq in footer.getvalue()]
    if colour:
        assert "Hi␛[2J␛]0;pwned␇ there" in "\n".join(screen_of(raw)) and "line" in "\n".join(screen_of(raw))
    else:  # the text as sent, its control characters shown: newline and tab kept, \r\n (across deltas) read as \n
        assert raw.startswith("Hi␛[2J␛]0;pwned␇ there\nline\ttab␈␛[31m end␡\n") and "found␛[5m it" in raw
        assert "\x1b" not in raw and "\r" not in raw


