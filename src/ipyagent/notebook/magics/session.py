"""``%agent SUBCOMMAND``: the line magic beside the ``%%agent`` cell magic.

    %agent threads                 the conversation threads, with their turns
    %agent history [NAME]          a thread's messages, tool calls and results included
    %agent reset [NAME]            forget a thread (default: the default thread)
    %agent memory                  the artifacts stored off-prompt (ipyagent.memory["NAMESPACE"])
    %agent runs [THREAD]           the latest runs in the run store
    %agent inspect [RUN_ID]        a stored run node by node: raw request, response metadata
    %agent replay [RUN_ID]         draw a stored run's view again, without calling the model
    %agent store [PATH|off]        show or choose the run store
    %agent cost                    what this session spent, by provider (known prices), and the budget
    %agent fix [OPTIONS] [QUESTION]  explain and fix the last exception (%%agent options: --code, -p, --with, ...)
    %agent grade ROW COLUMN pass|fail|clear [NOTE] [--repeat N] [--eval VAR]
                                   grade a run of the last evaluation by hand (Evaluation.grade)

RUN_ID may be the first characters of the id; without one, the session's last run.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ...agent import DEFAULT_THREAD, AgentResult, session_default, transcript_of
from ...drivers import format_usd
from ...core import (
    MESSAGE_FIELDS,
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    ImageBlock,
    Message,
    ModelCompleted,
    ModelStarted,
    ReasoningBlock,
    TextBlock,
    Transcript,
    Usage,
    redact,
    redact_data,
)
from ...memory import (
    RunStore,
    StoreError,
    check_store_path,
    describe_size,
    prune,
    replay_events,
    stored_transcript,
    summary,
)
from ..context.code_blocks import KNOWN_LANGUAGES
from ..redacted_io import controls_shown, redacted_output
from ..render.html import escape
from ..render.memory_html import STYLE, artifact_entry_html
from ..session import Session
from ..views.run_view import make_view
from ..views.transcript_output import bundle, draw_artifacts

SUBCOMMANDS = ("last", "threads", "history", "reset", "memory", "runs", "inspect", "replay", "store", "fix", "cost",
               "settings", "grade")
#: Characters of one message block shown by history and inspect.
SHOWN_CHARS = 600


def _json_short(value: Any, limit: int) -> str:
    """`value` as JSON (non-ASCII kept, anything else as text), cut to `limit` characters by `_short`."""
    return _short(json.dumps(value, ensure_ascii=False, default=str), limit)


def _short(text: str, limit: int = SHOWN_CHARS) -> str:
    text = text.replace("\r", "")
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more chars)"


def message_lines(message: Message) -> list[str]:
    """A message as readable lines: text, reasoning, tool calls and results, flags."""
    flags = {"complete": "", "partial": "partial"}.get(message.status, f"partial, {message.status}")
    tag = f" [{flags}]" if flags else ""
    lines = []
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.append(f"{message.role}{tag}: {_short(block.text)}")
        elif isinstance(block, ReasoningBlock):
            lines.append(f"{message.role}{tag} (reasoning): {_short(block.text)}")
        elif isinstance(block, ActionCallBlock):
            lines.append(
                f"{message.role}{tag} → "
                f"{block.action.native_name}({_short(json.dumps(block.action.input), 300)})  [{block.action.tag}]"
            )
        elif isinstance(block, ActionResultBlock):
            label = "error" if block.is_error else "result"
            media = "".join(f" [{m.type} {m.mime_type}]" for m in block.media)
            lines.append(
                f"tool ← {label} of {block.action.native_name} [{block.action.tag}]: {_short(block.text, 300)}{media}"
            )
        elif isinstance(block, (ImageBlock, AudioBlock)):
            lines.append(f"{message.role}{tag}: [{block.type} {block.mime_type}]")
        else:
            lines.append(f"{message.role}{tag}: [{block.type}]")
    if not message.content:
        lines.append(f"{message.role}{tag}: (nothing had arrived)")
    for call in message.metadata.get("partial_tool_calls") or []:
        lines.append(
            f"{message.role}{tag} → {call.get('name')}({_short(call.get('raw_arguments') or '', 300)}  (cut off)"
        )
    if message.error is not None:
        lines.append(f"  error: {message.error.type}: {message.error.message}")
    return lines


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


#: What a new run store's file name ends with (an existing SQLite file may be called anything).
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def _check_new_store_name(path: str) -> None:
    """A word that names no existing file is a new store only when it ends like one: a mistyped
    subcommand (``%agent store prune``, ``on``) would otherwise move the session's runs, grades and
    cache to a new empty file of that name.

    Raises:
        UsageError: a new file not ending in `STORE_SUFFIXES`, saying what to give instead.
    """
    given = Path(path).expanduser()
    if given.exists() or given.suffix.lower() in STORE_SUFFIXES:
        return
    raise UsageError(f"%agent store: there is no file {path!r}, and a new run store's name ends in "
                     f"{', '.join(STORE_SUFFIXES)} (%agent store runs.sqlite); %agent store off stops recording, "
                     "%agent store --prune deletes old runs; runs are still recorded where they were")


def _tokens(usage: dict[str, Any]) -> str:
    """``"12 in / 3 out"`` from a stored usage dict (old field names too)."""
    u = Usage.model_validate(usage)
    return f"{u.input_tokens} in / {u.output_tokens} out"


def system_block_lines(blocks: list[dict[str, Any]]) -> list[str]:
    """``%agent inspect``: which system blocks went into a request, and which were dropped to fit."""
    if not blocks:
        return []
    sent = [b for b in blocks if b.get("kept")]
    lines = [
        f"system blocks: {len(sent)} sent, ≈{sum(b.get('token_count', 0) for b in sent):,} tokens (estimate)"
        + (f"; {len(blocks) - len(sent)} dropped to fit the budget" if len(sent) < len(blocks) else "")
    ]
    for b in blocks:
        kind = "dynamic" if b.get("dynamic") else "static"
        lines.append(
            f"  {'sent   ' if b.get('kept') else 'dropped'}  {b.get('source')}  priority {b.get('priority')}  {kind}  "
            f"≈{b.get('token_count', 0):,} tokens"
        )
    return lines


async def _quietly(result: Any) -> None:
    """Await `result` when it is awaitable (a run); the line then shows nothing more (no ``Out[n]``).
    An interrupt ends it quietly: the view already says "interrupted" and keeps the partial text."""
    from ..outcomes import RunStopped

    if inspect.isawaitable(result):
        try:
            await result
        except (asyncio.CancelledError, RunStopped):
            return None


def _when(timestamp: float | None) -> str:
    if not timestamp:
        return "?"
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


@magics_class
class SessionMagics(Magics):
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
        runs [THREAD] | inspect [RUN_ID] | replay [RUN_ID] | store [PATH|off|--prune ...] | settings [NAME=VALUE ...] |
        grade ROW COLUMN pass|fail [NOTE]``
        (``%%agent`` is the cell magic)."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%agent: {exc}") from None
        if not words or words[0] not in SUBCOMMANDS:
            given = f"unknown subcommand {words[0]!r}; " if words else ""
            raise UsageError(f"%agent: {given}use one of: {', '.join(SUBCOMMANDS)} (the prompt goes in a %%agent cell)")
        sub, rest = words[0], words[1:]
        if sub in ("fix", "settings", "store"):  # several words
            return getattr(self, f"_{sub}")(rest)
        if sub == "grade":
            from ..grading import grade_command

            return grade_command(self.shell, rest)
        if len(rest) > 1:
            raise UsageError(f"%agent {sub} takes at most one argument, not {len(rest)}")
        arg = rest[0] if rest else None
        if sub in ("inspect", "runs", "threads"):  # plain listings of model and tool text: controls shown, not run
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
            system = f", system: {_short(thread.system, 60)!r}" if thread.system else ""
            print(f"{name}: {ok} turn{'s' if ok != 1 else ''}{extra}, ≈{tokens:,} tokens of history (estimate){system}")

    def _history(self, name: str | None) -> None:
        name = name or DEFAULT_THREAD
        if name not in self.session.threads:
            raise UsageError(
                f"%agent history: no thread {name!r}; threads: {', '.join(self.session.threads.names()) or 'none yet'}"
            )
        thread = self.session.threads.get(name)
        from IPython.display import display

        turns = len(thread.turns)
        header = f"thread {name!r}: {turns} turn{'s' if turns != 1 else ''}" + (
            f"; system: {_short(thread.system, 200)}" if thread.system else ""
        )
        if self._colour_terminal():
            from rich.text import Text

            from ..render.terminal_records import clean, print_rendered, transcript_renderables

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
        from ..views.terminal import colour_enabled

        return not self.agent_magics._widgets() and colour_enabled(sys.stdout)

    def _reset(self, name: str | None) -> None:
        name = name or DEFAULT_THREAD
        if self.session.threads.remove(name):
            print(f"thread {name!r} reset")
        else:
            print(f"no thread {name!r}; threads: {', '.join(self.session.threads.names()) or 'none yet'}")

    # -- memory ------------------------------------------------------------------------

    def _memory(self, _: str | None) -> None:
        from IPython.display import display

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

    def _store_or_fail(self) -> RunStore:
        store = self.session.store
        if store is None:
            why = self.session.store_error or "the run store is off (%agent store PATH turns it on)"
            raise UsageError(f"%agent: no run store: {why}")
        return store

    def _run_id(self, given: str | None) -> str:
        if given:
            return given
        if not self.session.run_ids:
            raise UsageError("%agent: no run in this session yet; give a RUN_ID (%agent runs lists them)")
        return self.session.run_ids[-1]

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
        from .settings import apply, current

        if words:
            apply(self.session, words)
        else:
            print(current(self.session))

    def _store(self, words: list[str]) -> None:
        if len(words) > 1 or (words and words[0].startswith("-")):
            return self._store_admin(words)
        path = words[0] if words else None
        if path is not None and path.lower() not in ("off", "none"):
            _check_new_store_name(path)
            try:  # checked and opened now, so a bad path is said here, not at the next run
                RunStore(check_store_path(path)).close()
            except StoreError as exc:
                raise UsageError(f"%agent store: {exc}; runs are still recorded where they were") from None
        if path is not None:
            self.session.set_store(None if path.lower() in ("off", "none") else path)
        store = self.session.store if self.session.store_path is not None else None
        print(f"run store: {summary(store)}" if store is not None else f"run store: {self.session.store_path or 'off'}")

    def _store_admin(self, words: list[str]) -> None:
        """``%agent store --prune [--older-than 30d] [--max-size 500MB] [--all]``: delete the oldest runs
        (to the session's ``store_max_size`` when no limit is given), then VACUUM."""
        from .settings import parse_duration, parse_size

        usage = "usage: %agent store --prune [--older-than 30d] [--max-size 500MB] [--all]"
        options: dict[str, Any] = {}
        rest = list(words)
        while rest:
            word = rest.pop(0)
            if word in ("--prune", "--all"):
                options[word[2:]] = True
            elif word in ("--older-than", "--max-size") and rest:
                value = rest.pop(0)
                options[word[2:]] = parse_duration(value) if word == "--older-than" else parse_size(value, word)
            else:
                raise UsageError(f"%agent store: unexpected {word!r}\n{usage}")
        if not options.pop("prune", False):
            raise UsageError(f"%agent store: give --prune to delete runs\n{usage}")
        if "older-than" not in options and "max-size" not in options:
            options["max-size"] = self.session.store_max_size  # to the cap
        keep = {t.run_id for name in self.session.threads.names() for t in self.session.threads.get(name).turns
                if t.run_id}
        store = self._store_or_fail()
        done = prune(store, older_than=options.get("older-than"), max_size=options.get("max-size"),
                     everything=options.get("all", False), keep=keep)
        self.session.size_warned = False
        print(f"{done.describe()}\nrun store: {summary(store)}")

    def _runs(self, thread: str | None) -> None:
        store = self._store_or_fail()
        rows = store.runs(thread=thread, limit=20)
        if not rows:
            print(f"no runs stored in {store.path}" + (f" for thread {thread!r}" if thread else ""))
            return
        for r in rows:
            usage = r.get("usage") or {}
            tokens = _tokens(usage) if usage else "-"
            print(
                f"{r['id']}  {_when(r['started_at'])}  {r['status']:<11}  {r['thread'] or '-':<12}  "
                f"{r['provider']}:{r['model']}  {tokens}  {_short(r['prompt'] or '', 60)!r}"
            )

    @staticmethod
    def _print_context(blocks: list[dict[str, Any]], masked: dict[str, int] | None = None) -> None:
        """The context blocks a run carried, with our token estimate of each and the values masked in
        each (`masked`: by block name, the cell template's too)."""
        from ..context.masking import OPT_OUT, describe

        if masked:
            print(f"masked: {describe(masked)}; {OPT_OUT} sends them as they are")
        if not blocks:
            print("context: none (--with NAME, --cells N, --error or %agent fix attach some)")
            return
        total = sum(b.get("tokens", 0) for b in blocks)
        print(f"context: {len(blocks)} block{'s' if len(blocks) != 1 else ''}, ≈{total:,} tokens (our estimate)")
        for b in blocks:
            cut = ", truncated to the budget" if b.get("truncated") else ""
            count = b.get("masked") or 0
            hidden = f", {count} value{'s' if count != 1 else ''} masked" if count else ""
            print(f"  {b.get('source')} {b.get('name')} ({b.get('kind')}): ≈{b.get('tokens', 0):,} tokens{cut}{hidden}")
            for line in _short(b.get("text") or "", 300).splitlines()[:6]:
                print("    " + line)

    def _inspect(self, run_id: str | None) -> None:
        if self.session.store is None and run_id is None and self.session.last_context:
            print("run store off: the last run's context only (%agent store PATH records whole runs)")
            self._print_context(self.session.last_context, self.session.last_masked)
            return
        store = self._store_or_fail()
        try:
            run = store.run(self._run_id(run_id))
        except KeyError as exc:
            raise UsageError(f"%agent inspect: {exc.args[0]}") from None
        usage = run.get("usage") or {}
        figures = [
            f"thread {run['thread']!r}",
            run["status"],
            f"{run['provider']}:{run['model']}",
            f"started {_when(run['started_at'])}",
        ]
        if run.get("duration_s") is not None:
            figures.append(f"{run['duration_s']:.2f} s")
        if usage:
            figures.append(f"{_tokens(usage)} tokens (provider usage)")
        if run.get("cost") is not None:
            figures.append(f"${run['cost']:.6f}")
        print(f"run {run['id']} · " + " · ".join(figures))
        if run.get("error"):
            print(f"  error: {run['error'].get('type')}: {run['error'].get('message')}")
        metadata = run.get("metadata") or {}
        self._print_context(metadata.get("context") or [], metadata.get("masked"))
        for node in store.nodes(run["id"]):
            self._print_node(node)

    @staticmethod
    def _print_node(node: dict[str, Any]) -> None:
        flags = [f for f in ("partial", "failed") if node.get(f)]
        head = f"#{node['seq']} {node['kind']}" + (f" {node['role']}" if node.get("role") else "")
        head += f" (turn {node['turn']})" if node.get("turn") else ""
        head += f" [{', '.join(flags)}]" if flags else ""
        data = redact_data(node.get("data") or {})
        print(head)
        kind = node["kind"]
        if kind == "request":
            print(f"  POST {data.get('url', '?')}  ({node.get('provider')}:{node.get('model')})")
            print("  body: " + _short(json.dumps(data.get("body"), ensure_ascii=False), 4000))
        elif kind == "message":
            message = Message.model_validate({k: v for k, v in data.items() if k in MESSAGE_FIELDS})
            for text in message_lines(message):
                print("  " + text)
            if node.get("role") == "assistant":
                timing = [f"{k} {node[k]:.3f} s" for k in ("latency_s", "ttft_s") if node.get(k) is not None]
                if node.get("attempts") is not None:
                    timing.append(f"attempts {node['attempts']}")
                retry = node.get("retry") or {}
                if retry.get("waits"):
                    timing.append(f"retry waits {retry['waits']} s")
                if retry.get("last_error"):
                    timing.append(f"last error {retry['last_error']}")
                if node.get("usage"):
                    timing.append(f"usage {_tokens(node['usage'])}")
                if timing:
                    print("  " + " · ".join(timing))
                if data.get("stop_reason"):
                    print(f"  stop: {data['stop_reason'].get('kind')} (raw {data['stop_reason'].get('raw')!r})")
                for line in system_block_lines((data.get("response") or {}).get("system_blocks") or []):
                    print("  " + line)
                if data.get("response"):
                    print("  response metadata: " + _json_short(data["response"], 2000))
        elif kind == "tool_call":
            name = data.get("native_name") or data.get("name")
            print(f"  {name}({_short(json.dumps(data.get('input')), 300)})  [{data.get('tag')}]")
        elif kind == "tool_result":
            result = data.get("result") or {}
            value = result.get("value")
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            label = "error" if data.get("is_error") else result.get("type", "result")
            tag, seconds = (data.get("action") or {}).get("tag"), node.get("latency_s") or 0
            print(f"  {label} [{tag}] in {seconds:.3f} s: {_short(text or '', 300)}")
        elif kind == "artifact":
            size = describe_size(data.get("size") or {})
            print(f"  {data.get('namespace')}: {data.get('kind')}, {size}, from {data.get('tool')}"
                  f" (off-prompt, in {data.get('memory')})")
        elif kind == "failure":
            error = data.get("error") or {}
            print(f"  {error.get('type')}: {error.get('message')}")
            if data.get("response"):
                print("  response metadata: " + _json_short(data["response"], 2000))
        elif kind == "notice":
            print("  " + _short(json.dumps(data, ensure_ascii=False), 300))

    def _replay(self, run_id: str | None) -> None:
        store = self._store_or_fail()
        try:
            run = store.run(self._run_id(run_id))
        except KeyError as exc:
            raise UsageError(f"%agent replay: {exc.args[0]}") from None
        nodes = store.nodes(run["id"])
        header = (f"replay of run {run['id']} from the run store · thread {run['thread']!r} · "
                  f"{_when(run['started_at'])} · {run['status']}")
        if not self.agent_magics._widgets():
            print(f"[{header}]")
            self._replay_text(run, replay_events(nodes))
            return
        from IPython.display import display

        display(
            {"text/plain": redact(header), "text/html": f'<div class="ipyagent-footer">{escape(redact(header))}</div>'},
            raw=True,
        )
        # The transcript the cell showed, figures and all; rebuilt from the nodes for a run
        # stored without one. Saved as a live run's is: a static transcript, not a widget.
        doc = stored_transcript(nodes)
        transcript = (
            Transcript.from_json(doc) if doc is not None else self._rebuilt_transcript(run, replay_events(nodes))
        )
        data, metadata = bundle(transcript)
        display(data, raw=True, metadata=metadata)

    @staticmethod
    def _rebuilt_transcript(run: dict[str, Any], events: list[Any]) -> Transcript:
        """The transcript of a stored run without a ``transcript`` node, from its events: the
        run's usage summed over its turns, the tool results as they were, the recorded time."""
        runs = [e for e in events if e != "interrupted"]
        completed = [e for e in runs if isinstance(e, ModelCompleted)]
        last = completed[-1] if completed else None
        stopped = "interrupted" in events or run["status"] in ("interrupted", "running")
        result = AgentResult(
            provider=f"{run['provider']}:{run['model']}",
            message=last.message if last else Message(role="assistant"),
            usage=sum((e.usage for e in completed), Usage()),
            stop_reason=last.stop_reason if last else None,
            interrupted=stopped,
            metadata=dict(last.metadata) if last else {},
        )
        transcript = transcript_of(
            result, events=runs, prompt=run.get("prompt"), provider=result.provider, elapsed_s=run.get("duration_s")
        )
        draw_artifacts(transcript, runs)
        return transcript

    @staticmethod
    def _replay_text(run: dict[str, Any], events: list[Any]) -> None:
        """Print a stored run as the terminal view printed it."""
        view = make_view(f"{run['provider']}:{run['model']}", widgets=False)
        duration = run.get("duration_s")
        for event in events:
            if event == "interrupted":
                view.mark_interrupted()
                continue
            view.feed(event)
            if duration is not None and isinstance(event, ModelStarted) and view.state.turn == 1:
                view.state.started = time.monotonic() - duration  # the footer shows the recorded time
        if not view.state.finished:  # a process that died mid-run
            view.mark_interrupted()
