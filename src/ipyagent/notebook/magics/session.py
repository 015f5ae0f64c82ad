"""``%agent SUBCOMMAND``: the line magic beside the ``%%agent`` cell magic.

    %agent threads                 the conversation threads, with their turns
    %agent history [NAME]          a thread's messages, tool calls and results included
    %agent reset [NAME]            forget a thread (default: the default thread)
    %agent memory                  the artifacts stored off-prompt (ipyagent.memory["NAMESPACE"])
    %agent runs [THREAD]           the latest runs in the run store
    %agent inspect [RUN_ID]        a stored run node by node: request (secrets masked), response metadata
    %agent replay [RUN_ID]         draw a stored run's view again, without calling the model
    %agent store [PATH|off]        show or choose the run store
    %agent cost                    what this session spent, by provider (known prices), and the budget
    %agent fix [OPTIONS] [QUESTION]  explain and fix the last exception (%%agent options: --code, -p, --with, ...)
    %agent grade ROW COLUMN pass|fail|clear [NOTE] [--repeat N] [--eval VAR]
                                   grade a run of the last evaluation by hand (Evaluation.grade)
    %agent trace [otlp [URL] [--content] | off]
                                   OpenTelemetry spans of every run (GenAI semantic conventions)
    %agent serve-mcp [--approve-notebook] | stop
                                   this notebook's tools for an outside agent: an MCP server on 127.0.0.1

RUN_ID may be the first characters of the id; without one, the session's last run.
"""

from __future__ import annotations

import asyncio
import inspect
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from ...agent import DEFAULT_THREAD, session_default
from ...core import Transcript, redact
from ...drivers import format_usd
from ...memory import describe_size
from ..context.code_blocks import KNOWN_LANGUAGES
from ..grading import grade_command
from ..outcomes import RunStopped
from ..redacted_io import controls_shown, redacted_output
from ..render.html import escape
from ..render.memory_html import STYLE, artifact_entry_html
from ..render.text.session import short
from ..render.text.records import clean, print_rendered, transcript_renderables
from ..session import Session
from ..views.terminal import colour_enabled
from ..views.transcript_output import bundle
from .runs import RunStoreCommands
from .serve_mcp import serve_command
from .options import split_words
from .settings import apply, current
from .tracing import trace_command

SUBCOMMANDS = ("last", "threads", "history", "reset", "memory", "runs", "evals", "inspect", "replay", "store", "fix",
               "cost", "settings", "grade", "trace", "serve-mcp")
#: The subcommands that take no argument: one given is refused, not ignored (``%agent cost --bogus``).
NO_ARGUMENT = ("last", "threads", "memory", "evals", "cost")


def turn_transcript(turn: Any, number: int) -> Transcript:
    """A thread's turn as a transcript with its prompt (``%agent history``): the cell's renderer
    and fallbacks draw it. A failed or interrupted turn says it is skipped in the next prompt."""
    status = {"ok": "completed", "failed": "failed"}.get(turn.status, "interrupted")
    title = f"turn {number}" + (f" · run {turn.run_id}" if turn.run_id else "")
    if not turn.ok:
        title += " · kept for the record, skipped in the next prompt"
    return Transcript.from_messages(
        turn.messages, provider=turn.provider or "?", status=status, error=turn.error, title=title
    )


async def _quietly(result: Any) -> None:
    """Await `result` when it is awaitable (a run); the line then shows nothing more (no ``Out[n]``).
    An interrupt ends it quietly: the view already says "interrupted" and keeps the partial text."""
    if inspect.isawaitable(result):
        try:
            await result
        except (asyncio.CancelledError, RunStopped):
            return None


@magics_class
class SessionMagics(RunStoreCommands, Magics):
    """``%agent``; shares the `Session` (threads, memory, run store) with `AgentMagics`."""

    def __init__(self, shell: Any, agent_magics: Any) -> None:
        super().__init__(shell)
        self.agent_magics = agent_magics

    @property
    def session(self) -> Session:
        return self.agent_magics.session

    @line_magic("agent")
    @redacted_output
    def agent_line(self, line: str) -> Any:
        """``%agent last | fix [OPTIONS] [QUESTION] | threads | history [NAME] | reset [NAME] | memory |
        runs [THREAD] | evals | inspect [RUN_ID] | replay [RUN_ID] | store [PATH|off|--prune ...] |
        settings [NAME=VALUE ...] | grade ROW COLUMN pass|fail [NOTE] | trace [otlp [URL] [--content] | off] |
        serve-mcp [--approve-notebook] | stop``
        (``%%agent`` is the cell magic)."""
        words = split_words(line, "%agent")
        if not words or words[0] not in SUBCOMMANDS:
            given = f"unknown subcommand {words[0]!r}; " if words else ""
            raise UsageError(f"%agent: {given}use one of: {', '.join(SUBCOMMANDS)} (the prompt goes in a %%agent cell)")
        sub, rest = words[0], words[1:]
        if sub in ("fix", "settings", "store"):  # several words
            return getattr(self, f"_{sub}")(rest)
        if sub == "grade":
            return grade_command(self.shell, rest)
        if sub == "trace":
            return trace_command(rest)
        if sub == "serve-mcp":  # the notebook's tools for an outside agent (serve_mcp.py)
            return serve_command(self.shell, self.agent_magics, rest)
        if rest and sub in NO_ARGUMENT:
            given = rest[0] if len(rest[0]) <= 40 else f"{rest[0][:40]}…"
            raise UsageError(f"%agent {sub} takes no argument (given {given!r}): type %agent {sub}")
        if len(rest) > 1:
            raise UsageError(f"%agent {sub} takes at most one argument, not {len(rest)}")
        arg = rest[0] if rest else None
        # plain listings of model and tool text: controls shown, not run
        if sub in ("inspect", "runs", "evals", "threads"):
            with controls_shown():
                return getattr(self, f"_{sub}")(arg)
        return getattr(self, f"_{sub}")(arg)

    # -- fix ---------------------------------------------------------------------------------

    def _fix(self, words: list[str]) -> Any:
        """``%agent fix [OPTIONS] [QUESTION]``: ``%%agent --error`` with the question as the cell.

        OPTIONS are ``%%agent``'s (``--code [LANG]``, ``-p``, ``--with``, ``--cells``, ...), before
        the question; ``--code`` takes the next word as its language only when it names one.
        The result is bound by ``-o VAR``, not echoed. In a kernel the line awaits, as a
        ``%%agent`` cell does, so an interrupt stops the run cleanly.
        """
        parser = self.agent_magics.agent.parser
        options: list[str] = []
        n = 0
        while n < len(words) and words[n].startswith("-") and words[n] != "--":
            word = words[n].split("=", 1)[0]
            action = parser._option_string_actions.get(word)
            if action is None:
                raise UsageError(
                    f"%agent fix: unknown option {word!r}; the options are %%agent's (--code, -p, --with, --cells, ...)"
                )
            options.append(words[n])
            takes = action.nargs is None or (
                action.nargs == "?" and n + 1 < len(words) and words[n + 1].lower() in KNOWN_LANGUAGES
            )
            if "=" not in words[n] and takes and n + 1 < len(words):
                options.append(words[n + 1])
                n += 1
            n += 1
        question = " ".join(words[n + 1 :] if n < len(words) and words[n] == "--" else words[n:])
        result = self.agent_magics.agent(" ".join(shlex.quote(o) for o in [*options, "--error"]), question)
        if "--await-in-kernel" in options:  # the line awaits (extension.await_agent_cells): always an awaitable
            return _quietly(result)
        return None

    # -- last --------------------------------------------------------------------------

    def _last(self, _: str | None) -> Any:
        """The last ``%%agent`` cell's `AgentResult` (cells print none: ``-o VAR`` binds it too)."""
        if self.agent_magics.last_result is None:
            raise UsageError("%agent last: no %%agent cell has finished yet")
        return self.agent_magics.last_result

    # -- threads -----------------------------------------------------------------------

    def _threads(self, _: str | None) -> None:
        names = [
            n
            for n in self.session.threads.names()
            if self.session.threads.get(n).turns or self.session.threads.get(n).system
        ]
        if not names:
            print("no threads yet: a %%agent cell starts the default one (--thread NAME for others)")
            return
        for name in names:
            thread = self.session.threads.get(name)
            ok = sum(t.ok for t in thread.turns)
            failed = len(thread.turns) - ok
            tokens = sum(t.tokens for t in thread.turns if t.ok)
            extra = f", {failed} failed or interrupted (kept, not sent)" if failed else ""
            system = f", system: {short(thread.system, 60)!r}" if thread.system else ""
            print(f"{name}: {ok} turn{'s' if ok != 1 else ''}{extra}, ≈{tokens:,} tokens of history (estimate){system}")

    def _history(self, name: str | None) -> None:
        name = name or DEFAULT_THREAD
        if name not in self.session.threads:
            raise UsageError(
                f"%agent history: no thread {name!r}; threads: {', '.join(self.session.threads.names()) or 'none yet'}"
            )
        thread = self.session.threads.get(name)

        turns = len(thread.turns)
        header = f"thread {name!r}: {turns} turn{'s' if turns != 1 else ''}" + (
            f"; system: {short(thread.system, 200)}" if thread.system else ""
        )
        if self._colour_terminal():
            from rich.text import Text


            turns_drawn = [
                r for n, turn in enumerate(thread.turns, 1) for r in transcript_renderables(turn_transcript(turn, n))
            ]
            return print_rendered(sys.stdout, [Text(clean(header), style="bold"), *turns_drawn])
        display(
            {"text/plain": redact(header), "text/html": f'<div class="ipyagent-footer">{escape(redact(header))}</div>'},
            raw=True,
        )
        for n, turn in enumerate(thread.turns, 1):
            data, metadata = bundle(turn_transcript(turn, n), plain_limit=None)  # a terminal shows each turn whole
            display(data, raw=True, metadata=metadata)

    def _colour_terminal(self) -> bool:
        """True in terminal IPython on a TTY without NO_COLOR: records are drawn with rich."""

        return not self.agent_magics._widgets() and colour_enabled(sys.stdout)

    def _reset(self, name: str | None) -> None:
        name = name or DEFAULT_THREAD
        if self.session.threads.remove(name):
            print(f"thread {name!r} reset")
        else:
            print(f"no thread {name!r}; threads: {', '.join(self.session.threads.names()) or 'none yet'}")

    # -- memory ------------------------------------------------------------------------

    def _memory(self, _: str | None) -> None:
        entries = self.session.memory.entries()
        if not entries:
            print("Task Memory is empty: outputs of off-prompt tools are stored here (BaseTool(off_prompt=True))")
            return
        lines = [f"{len(entries)} artifacts in {self.session.memory.name} (ipyagent.memory[NAMESPACE] returns one):"]
        for e in entries:
            s = e.summary()
            lines.append(
                f"  {e.namespace}  {e.kind}  {describe_size(e.size)}  from {s['tool']}  call {e.call_id or '-'}"
            )
        html = STYLE + "".join(
            artifact_entry_html(e.namespace, e.artifact, tool=e.tool, activity=e.activity, size=e.size) for e in entries
        )
        display({"text/plain": redact("\n".join(lines)), "text/html": redact(html)}, raw=True)

    # -- the run store -----------------------------------------------------------------

    def _cost(self, _: str | None) -> None:
        """The session's spending by provider: turns, tokens, USD at known prices, turns without one."""
        ledger = session_default().ledger
        rows = ledger.by_provider()
        if not rows:
            print("nothing spent yet in this session (replayed runs cost nothing)")
        else:
            width = max(len(p) for p in rows)
            for provider, row in sorted(rows.items()):
                unknown = (
                    f" + {row['unknown']} turn{'s' if row['unknown'] != 1 else ''} at an unknown price"
                    if row["unknown"]
                    else ""
                )
                print(
                    f"{provider:<{width}}  {row['turns']} turn{'s' if row['turns'] != 1 else ''}  "
                    f"{row['input_tokens']:,} in / {row['output_tokens']:,} out tokens  "
                    f"{format_usd(row['usd'])}{unknown}"
                )
            print(
                f"total: {format_usd(ledger.total)}"
                + (" (known prices only)" if any(r["unknown"] for r in rows.values()) else "")
            )
        if ledger.budget is not None:
            left = max(0.0, ledger.budget - ledger.total)
            print(
                f"budget: {format_usd(ledger.budget)}, {format_usd(left)} left"
                + ("; new runs are refused" if not left else "")
            )

    def _settings(self, words: list[str]) -> None:
        """``%agent settings [NAME=VALUE ...]``: show or set the session's settings (`settings`)."""
        if words:
            apply(self.session, words)
        else:
            print(current(self.session))
