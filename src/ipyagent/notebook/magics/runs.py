"""``%agent store / runs / evals / inspect / replay``: the run store, read back (`RunStoreCommands`, a part
of `session.SessionMagics`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ...agent import AgentResult, stored_evaluations, transcript_of
from ...core import (
    MESSAGE_FIELDS,
    Message,
    ModelCompleted,
    ModelStarted,
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
    is_url,
    prune,
    replay_events,
    shown_location,
    stored_transcript,
    summary,
)
from ..context.masking import OPT_OUT, describe
from ..render.html import escape
from ..render.text.evaluations import evaluations_lines
from ..render.text.session import (
    json_short,
    message_lines,
    short,
    system_block_lines,
    tokens_text,
    when_text,
)
from ..session import Session
from ..views.run_view import make_view
from ..views.transcript_output import bundle, draw_artifacts
from .settings import parse_duration, parse_size


#: What `%agent inspect` says of the requests it lists: masked for showing, not as they went out (the
#: redactor masks a template's values before sending; the cell's own text goes as it was typed).
MASKED_LISTING = ("secrets are masked in this listing; a {{ }} value was masked before it was sent, "
                  "text typed in the cell was sent as typed")

#: What a new run store's file name ends with (an existing SQLite file may be called anything).
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
#: The longest id ``%agent inspect/replay`` look up (a run's is 12 characters, `memory.new_run_id`;
#: a prefix is shorter): a longer one is refused, not echoed whole in the error.
RUN_ID_MAX = 64


def _check_new_store_name(path: str) -> None:
    """A word that names no existing file is a new store only when it ends like one: a mistyped
    subcommand (``%agent store prune``, ``on``) would otherwise move the session's runs, grades and
    cache to a new empty file of that name.

    Raises:
        UsageError: a new file not ending in `STORE_SUFFIXES`, saying what to give instead.
    """
    if is_url(path):  # a PostgreSQL database: checked when opened
        return
    given = Path(path).expanduser()
    if given.exists() or given.suffix.lower() in STORE_SUFFIXES:
        return
    raise UsageError(f"%agent store: there is no file {path!r}, and a new run store's name ends in "
                     f"{', '.join(STORE_SUFFIXES)} (%agent store runs.sqlite); %agent store off stops recording, "
                     "%agent store --prune deletes old runs; runs are still recorded where they were")


class RunStoreCommands:
    """The run-store subcommands of ``%agent`` (mixed into `SessionMagics`, whose `session` and
    `agent_magics` they use)."""

    session: Session
    agent_magics: Any

    def _store_or_fail(self) -> RunStore:
        store = self.session.store
        if store is None:
            why = self.session.store_error or "the run store is off (%agent store PATH turns it on)"
            raise UsageError(f"%agent: no run store: {why}")
        return store

    def _run_id(self, given: str | None) -> str:
        """`given`, or the session's last run. An id longer than `RUN_ID_MAX` is refused, its start
        shown (the store's "no run" would echo it whole)."""
        if given and len(given) > RUN_ID_MAX:
            raise UsageError(f"%agent: {given[:24]!r}… ({len(given):,} characters) is not a run id (ids are "
                             "12 characters; %agent runs lists them)")
        if given:
            return given
        if not self.session.run_ids:
            raise UsageError("%agent: no run in this session yet; give a RUN_ID (%agent runs lists them)")
        return self.session.run_ids[-1]

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
        where = shown_location(self.session.store_path) if self.session.store_path is not None else "off"
        print(f"run store: {summary(store)}" if store is not None else f"run store: {where}")

    def _store_admin(self, words: list[str]) -> None:
        """``%agent store --prune [--older-than 30d] [--max-size 500MB] [--all]``: delete the oldest runs
        (to the session's ``store_max_size`` when no limit is given), then VACUUM."""
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
            tokens = tokens_text(usage) if usage else "-"
            print(
                f"{r['id']}  {when_text(r['started_at'])}  {r['status']:<11}  {r['thread'] or '-':<12}  "
                f"{r['provider']}:{r['model']}  {tokens}  {short(r['prompt'] or '', 60)!r}"
            )

    def _evals(self, _: str | None) -> None:
        """``%agent evals``: the evaluations the store keeps whole, newest first, as a small table
        (`evaluations_lines`): id, when, the cell, rows × columns × repeats, runs, ``interrupted``,
        and under each its columns' pass rates (named as the matrix names them)."""
        store = self._store_or_fail()
        listed = stored_evaluations(store, limit=20)
        if not listed:
            print(f"no evaluations stored in {store.path}; a %%compare --over cell or ipyagent.evaluate keeps one")
            return
        print("\n".join(evaluations_lines(listed)))
        print("ipyagent.load_evaluation(ID) gives one back (ev.to_dataframe(), ev.summary(), ev.diff(...))")

    @staticmethod
    def _print_context(blocks: list[dict[str, Any]], masked: dict[str, int] | None = None) -> None:
        """The context blocks a run carried, with our token estimate of each and the values masked in
        each (`masked`: by block name, the cell template's too)."""
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
            name = f"{b.get('source')} {b.get('name')} ({b.get('kind')})"
            print(f"  {name}: ≈{b.get('tokens', 0):,} tokens{cut}{hidden}")
            for line in short(b.get("text") or "", 300).splitlines()[:6]:
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
            f"started {when_text(run['started_at'])}",
        ]
        if run.get("duration_s") is not None:
            figures.append(f"{run['duration_s']:.2f} s")
        if usage:
            figures.append(f"{tokens_text(usage)} tokens (provider usage)")
        if run.get("cost") is not None:
            figures.append(f"${run['cost']:.6f}")
        print(f"run {run['id']} · " + " · ".join(figures))
        if run.get("error"):
            print(f"  error: {run['error'].get('type')}: {run['error'].get('message')}")
        metadata = run.get("metadata") or {}
        self._print_context(metadata.get("context") or [], metadata.get("masked"))
        print(f"requests: {MASKED_LISTING}")
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
            print("  body (secrets masked): " + short(json.dumps(data.get("body"), ensure_ascii=False), 4000))
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
                    timing.append(f"usage {tokens_text(node['usage'])}")
                if timing:
                    print("  " + " · ".join(timing))
                if data.get("stop_reason"):
                    print(f"  stop: {data['stop_reason'].get('kind')} (raw {data['stop_reason'].get('raw')!r})")
                for line in system_block_lines((data.get("response") or {}).get("system_blocks") or []):
                    print("  " + line)
                if data.get("response"):
                    print("  response metadata: " + json_short(data["response"], 2000))
        elif kind == "tool_call":
            name = data.get("native_name") or data.get("name")
            print(f"  {name}({short(json.dumps(data.get('input')), 300)})  [{data.get('tag')}]")
        elif kind == "tool_result":
            result = data.get("result") or {}
            value = result.get("value")
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            label = "error" if data.get("is_error") else result.get("type", "result")
            tag, seconds = (data.get("action") or {}).get("tag"), node.get("latency_s") or 0
            print(f"  {label} [{tag}] in {seconds:.3f} s: {short(text or '', 300)}")
        elif kind == "artifact":
            size = describe_size(data.get("size") or {})
            print(f"  {data.get('namespace')}: {data.get('kind')}, {size}, from {data.get('tool')}"
                  f" (off-prompt, in {data.get('memory')})")
        elif kind == "failure":
            error = data.get("error") or {}
            print(f"  {error.get('type')}: {error.get('message')}")
            if data.get("response"):
                print("  response metadata: " + json_short(data["response"], 2000))
        elif kind == "notice":
            print("  " + short(json.dumps(data, ensure_ascii=False), 300))

    def _replay(self, run_id: str | None) -> None:
        store = self._store_or_fail()
        try:
            run = store.run(self._run_id(run_id))
        except KeyError as exc:
            raise UsageError(f"%agent replay: {exc.args[0]}") from None
        nodes = store.nodes(run["id"])
        header = (f"replay of run {run['id']} from the run store · thread {run['thread']!r} · "
                  f"{when_text(run['started_at'])} · {run['status']}")
        if not self.agent_magics._widgets():
            print(f"[{header}]")
            self._replay_text(run, replay_events(nodes))
            return

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
