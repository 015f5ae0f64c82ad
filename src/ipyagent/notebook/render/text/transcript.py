"""A `Transcript` (or a comparison of them) as plain text, for terminals and a saved output's
``text/plain``: the answer, one bracketed line per tool call, then the footer; and the words both
fallbacks use (a tool call's status, an artifact's title, the price notes). Re-exported by
`transcript`."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ....core import (
    STOPPED_WORDS,
    ArtifactSummary,
    ComparisonRecord,
    OtherPart,
    ReasoningPart,
    ServerToolPart,
    TextPart,
    ToolCallPart,
    Transcript,
    footer_figures,
    visible_controls,
)
from ..citations import marked, markers_as_text, numbered_sources, server_text, sources_text

#: What a card's status line says before the outcome of a call the user approved.
APPROVAL_WORDS = {"approved": "approved by you · ", "preapproved": "approved in advance · "}

#: The one marker a stopped run gets in the terminal (`%%agent`, each stopped `%%compare` pane), as the
#: notebook's "■ interrupted; the text above is partial".
INTERRUPTED = "[interrupted; the text above is partial]"


def tool_status(call: ToolCallPart) -> str:
    """``done in 0.01 s`` / ``error in 0.01 s`` / ``not run``; a call that needed approval:
    ``denied`` (it was not run) or ``approved by you · done in 0.01 s`` (``approved in advance · …``
    for one the user let through with an option); a call the run's end
    cut off: ``interrupted after 0.50 s`` / ``stopped at the deadline after 0.50 s``."""
    if call.approval == "denied":
        return "denied"
    prefix = APPROVAL_WORDS.get(call.approval or "", "")
    if call.stopped is not None:
        words = STOPPED_WORDS.get(call.stopped, call.stopped)
        return prefix + (f"{words} after {call.duration_s:.2f} s" if call.duration_s is not None else words)
    if call.status == "pending":
        return prefix.removesuffix(" · ") if prefix else "not run"
    word = "error" if call.status == "error" else "done"
    return prefix + (f"{word} in {call.duration_s:.2f} s" if call.duration_s is not None else word)


def _failed(call: ToolCallPart) -> bool:
    """Drawn as an error: the tool failed (a denied call was not run, a stopped one was cut off: neither failed)."""
    return call.status == "error" and call.approval != "denied" and call.stopped is None


def _size(size: dict[str, int]) -> str:
    if "rows" in size:
        return f"{size['rows']:,} rows × {size.get('columns', 0):,} columns"
    for unit in ("bytes", "items", "chars"):
        if unit in size:
            return f"{size[unit]:,} {unit}"
    return ""


def artifact_title(a: ArtifactSummary) -> str:
    """``web_search-1: text, 12,000 chars, from WebSearch``."""
    bits = [a.kind, _size(a.size)]
    where = a.namespace or "artifact"
    return f"{where}: {', '.join(b for b in bits if b)}" + (f", from {a.tool}" if a.tool else "")


def price_notes(transcripts: Iterable[Transcript]) -> list[str]:
    """Why the runs' prices are unknown and how to set them, each note once (a cell of eight
    panes on one local server says it once)."""
    return list(dict.fromkeys(t.price_note for t in transcripts if t.price_note and t.cost is None))


def comparison_to_text(record: ComparisonRecord, *, limit: int | None = None) -> str:
    table = ""
    if record.table:
        rows = [record.table.columns, *record.table.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(record.table.columns))]
        table = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n\n"
    return table + "\n\n".join(
        f"== {e.transcript.provider}{f' (run {e.run + 1})' if record.runs > 1 else ''} "
        f"==\n{to_text(e.transcript, limit=limit, notes=False)}"
        for e in record.entries
    ) + "".join(f"\n{visible_controls(n)}" for n in price_notes(e.transcript for e in record.entries))


#: Characters of a run's text a saved output's ``text/plain`` keeps: the transcript and the HTML
#: fallback hold it all; plain text is for what shows no HTML (a terminal, a text export).
PLAIN_CHARS = 200


def text_pieces(t: Transcript) -> list[tuple[str, str]]:
    """`t` as (kind, text) pieces in reading order, what a terminal shows of it: ``title``,
    ``prompt`` (with `show_prompts`), ``text`` (Markdown, cited spans marked ``[n]``),
    ``reasoning``, ``tool_ok`` / ``tool_error`` / ``tool_denied`` / ``tool`` (not run),
    ``server`` (a provider-side tool), ``other``, ``sources`` (the numbered footnotes),
    ``artifact``, ``error``, ``interrupted`` and ``next_cell`` lines. The footer is `footer_figures`."""
    pieces: list[tuple[str, str]] = [("title", t.title)] if t.title else []
    numbers = numbered_sources(t)
    for message in t.messages:
        if message.role == "user" and t.show_prompts:
            pieces += [
                ("prompt", p.text if isinstance(p, TextPart) else f"[{getattr(p, 'summary', p.type)}]")
                for p in message.parts
            ]
        if message.role != "assistant":
            continue
        for part in message.parts:
            if isinstance(part, TextPart):
                pieces.append(("text", markers_as_text(marked(part, numbers)) if part.citations else part.text))
            elif isinstance(part, ServerToolPart):
                pieces.append(("server", server_text(part)))
            elif isinstance(part, ReasoningPart):
                pieces.append(("reasoning", part.text))
            elif isinstance(part, ToolCallPart):
                args = json.dumps(part.arguments, ensure_ascii=False)
                result = f" -> {part.result}" if part.result is not None else ""
                result += "".join(f" [{m.summary}]" for m in part.media) + "".join(f" [{n}]" for n in part.notes)
                kind = (
                    "tool_denied"
                    if part.approval == "denied"
                    else "tool_error"
                    if _failed(part)
                    else "tool_ok"
                    if part.status == "ok"
                    else "tool"
                )
                pieces.append((kind, f"[tool {part.name}({args}){result} · {tool_status(part)}]"))
            elif isinstance(part, OtherPart):
                pieces.append(("other", f"[{part.summary}]"))
    if numbers:
        pieces.append(("sources", "\n".join(["sources:", *sources_text(numbers)])))
    pieces += [("artifact", f"[artifact {artifact_title(a)}]") for a in t.artifacts]
    if t.error is not None:
        pieces.append(("error", f"[error] {t.error.message}"))
    if t.status == "interrupted":
        pieces.append(("interrupted", INTERRUPTED))
    if t.next_cell is not None:
        pieces.append(
            (
                "next_cell",
                f"[code for a new cell below: {t.next_cell.source.count(chr(10)) + 1} lines of {t.next_cell.language}]",
            )
        )
    return pieces


def _plain(kind: str, text: str) -> str:
    if kind == "title":
        return f"── {text}"
    if kind == "prompt":
        return f"user: {text}"
    return f"[reasoning: {len(text)} chars]" if kind == "reasoning" else text


def to_text(t: Transcript, *, limit: int | None = None, notes: bool = True) -> str:
    """Plain text for terminals: the answer, one bracketed line per tool call, (`notes`) why the
    price is unknown, then the footer; with `limit`, the text before the footer is cut after
    that many characters (at a line end when one is near) and says how much more there is."""
    # printed by a terminal: control characters shown, not run
    lines = [_plain(kind, visible_controls(text)) for kind, text in text_pieces(t)]
    footer = "\n[" + " · ".join(visible_controls(f) for f in footer_figures(t)) + "]"
    said = "".join(f"\n{visible_controls(note)}" for note in price_notes([t])) if notes else ""
    return _cut("\n".join(lines), limit) + said + footer


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    end = text.rfind("\n", limit // 2, limit)
    end = end if end > 0 else limit
    return f"{text[:end].rstrip()} … ({len(text) - end:,} more characters)"
