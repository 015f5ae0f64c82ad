"""A run's transcript: a versioned JSON record of one agent run, for saved notebooks and tools.

When an ``%%agent`` run ends, its cell output carries this document, once, as
``application/vnd.ipyagent.transcript+json``, so a saved, reopened or exported
notebook still shows the run without a kernel: the JupyterLab extension in
``labextension/`` renders it.

It lives in core (pydantic only, no IPython, no agent import) so every layer
can read or write it: the notebook layer publishes it, the run store can keep
it, and a script reading a saved ``.ipynb`` needs nothing else. A run becomes one
in the agent layer (`ipyagent.agent.transcript_of`), which knows `AgentResult`.

No secrets: usage and errors leave out the provider's raw objects (which are
not needed to show a run), and nothing from request headers is ever read.
A ``%%compare`` cell saves a `ComparisonRecord` (one transcript per run) the
same way, as ``application/vnd.ipyagent.comparison+json``. The JSON Schema of
both is published beside this module as ``transcript.schema.json``
(``python -m ipyagent.core.transcript`` prints it).

This module is the document and its face: the messages' parts are `transcript_parts`, and
building them from a run's messages is `transcript_build`; their names are re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, Literal, Union

from pydantic import ConfigDict, Field, TypeAdapter

from .figures import comparison_footer, footer_figures
from .messages import TokenCounts
from .transcript_build import ToolTiming, transcript_messages
from .transcript_parts import (
    ALWAYS_WRITTEN,
    AUDIO_TYPES,
    MAX_IMAGE_CHARS,
    MEDIA_CHARS,
    PREVIEW_CHARS,
    RASTER_TYPES,
    RESULT_CHARS,
    STOPPED_WORDS,
    MediaPart,
    OtherPart,
    Part,
    ReasoningPart,
    ServerSource,
    ServerToolPart,
    TextPart,
    ToolCallPart,
    TranscriptCitation,
    TranscriptMessage,
    _Model,
    card_result,
    compact_json,
)

__all__ = [
    "ALWAYS_WRITTEN", "AUDIO_TYPES", "COMPARISON_MIME_TYPE", "FOOTER", "FOOTER_DOC", "MAX_IMAGE_CHARS", "MEDIA_CHARS",
    "MIME_TYPE", "PREVIEW_CHARS", "RASTER_TYPES", "RESULT_CHARS", "STOPPED_WORDS", "VERSION", "ArtifactSummary",
    "ComparisonEntry", "ComparisonMark", "ComparisonRecord", "ComparisonTable", "MediaPart", "NextCell", "OtherPart",
    "Part", "ReasoningPart", "ServerSource", "ServerToolPart", "TextPart", "Timings", "ToolCallPart", "ToolTiming",
    "Transcript", "TranscriptCitation", "TranscriptCost", "TranscriptError", "TranscriptMessage", "TranscriptUsage",
    "card_result", "compact_json", "json_schema", "transcript_messages",
]

#: The MIME type of a transcript in a cell output.
MIME_TYPE = "application/vnd.ipyagent.transcript+json"
#: The version of the document format; bumped on any incompatible change.
VERSION = 1
#: The field of a saved document holding its footer's figures, computed by ``to_json`` from the other
#: fields (`figures.footer_figures`, `figures.comparison_footer`): renderers draw them as they are and
#: compute none. A model read back leaves it out (it is computed again when written).
FOOTER = "footer"
FOOTER_DOC = "The footer's figures, computed from the other fields when written: drawn as they are."


class ArtifactSummary(_Model):
    """An off-prompt tool output kept in Task Memory: what it is, not the content.

    `size` is ``{"chars": n}`` / ``{"rows": n, "columns": n}`` / ``{"bytes": n}`` /
    ``{"items": n}``; `preview` is at most `PREVIEW_CHARS` characters of its text.
    """

    call_id: str | None = None
    tool: str | None = None
    namespace: str | None = None
    memory: str | None = None
    kind: str = "unknown"
    size: dict[str, int] = Field(default_factory=dict)
    preview: str = ""
    #: The entry as ``%agent memory`` draws it (Markdown, a table, an image), as sanitized HTML:
    #: set by the notebook layer; renderers sanitize it again (the labextension with DOMPurify).
    html: str | None = None


class TranscriptUsage(TokenCounts):
    """Tokens billed by the provider, summed over the run's model turns (`Usage` without `raw`).

    A transcript saved with the old names (``input``, ``output``, ``cache_read``...) still loads.
    """

    model_config = ConfigDict(extra="ignore")


class TranscriptCost(_Model):
    """The run's price in US dollars."""

    input_usd: float | None = None
    output_usd: float | None = None
    total_usd: float


class TranscriptError(_Model):
    type: str
    message: str
    code: str | int | None = None


class Timings(_Model):
    """Seconds. `total_s`: the whole run (model turns and tools); `first_token_s`:
    from the first request to its first token; `turns`: model turns taken."""

    total_s: float | None = None
    first_token_s: float | None = None
    turns: int = 0
    turn_latencies_s: list[float] = Field(default_factory=list)


class NextCell(_Model):
    """Code from the answer offered as a new cell (``--code``): `language` is the fence label
    asked for (``python``, ``sql``, ``all``); `source` the code. Renderers show it with an
    insert button and a copy button, for front ends that ignore ``set_next_input``."""

    language: str = "python"
    source: str


class Transcript(_Model):
    """One run, as saved in a notebook (format ``ipyagent.transcript``, `VERSION` 1).

    `provider` is ``provider:model`` as the run was asked for; `model` the model
    the provider said answered. `status` is ``completed``, ``failed`` (see
    `error`) or ``interrupted`` (the text is partial).
    """

    format: Literal["ipyagent.transcript"] = "ipyagent.transcript"
    version: Literal[1] = VERSION
    provider: str
    #: The name the user gave the provider (``-p small``, a ``%provider --alias``), shown before its
    #: id in the footer (``small · openai:gpt-6-luna``); None: it was named by its id.
    alias: str | None = None
    model: str | None = None
    status: Literal["completed", "failed", "interrupted"] = "completed"
    stop_reason: str | None = None
    stop_reason_raw: str | None = None
    messages: list[TranscriptMessage] = Field(default_factory=list)
    artifacts: list[ArtifactSummary] = Field(default_factory=list)
    usage: TranscriptUsage = Field(default_factory=TranscriptUsage)
    cost: TranscriptCost | None = None
    #: True when the run was priced but genai-prices did not know the model (the footer says "unknown price").
    price_unknown: bool = False
    #: Why the price is unknown and how to set it (``... --price-as PROVIDER:MODEL``), one line the
    #: driver wrote; shown once under the output, never as a footer figure. None: known, or not said.
    price_note: str | None = None
    timings: Timings = Field(default_factory=Timings)
    error: TranscriptError | None = None
    attempts: int | None = None
    replayed: bool = False
    next_cell: NextCell | None = None
    #: The generation settings the run used (`ModelSettings.as_dict`), empty when none was set.
    settings: dict[str, Any] = Field(default_factory=dict)
    #: Values the one redactor masked in the context the run was sent, by where they were (``cell
    #: template``, ``error``, a variable's name, ``In[3]``); empty when none was.
    masked: dict[str, int] = Field(default_factory=dict)
    #: A heading drawn above the run (``%agent history``: ``turn 2 · run 1a2b3c``).
    title: str | None = None
    #: Draw the user's messages too, each above the reply it got (``%agent history``). A cell's
    #: transcript leaves its prompt out: the prompt is the cell above.
    show_prompts: bool = False
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def text(self) -> str:
        """The assistant's text, all turns joined (what the live view shows as the answer)."""
        return "".join(p.text for m in self.messages if m.role == "assistant"
                       for p in m.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for m in self.messages for p in m.parts if isinstance(p, ToolCallPart)]

    def to_json(self) -> dict[str, Any]:
        """The JSON document (plain dicts and lists), default-valued fields left out (`compact_json`),
        with the `FOOTER` figures computed from them (`figures.footer_figures`)."""
        return {**compact_json(self), FOOTER: footer_figures(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> "Transcript":
        """Read a saved transcript.

        Raises:
            ValueError: not a transcript, or a version this ipyagent does not know
                (the message says which).
        """
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict) or data.get("format") != "ipyagent.transcript":
            raise ValueError("not an ipyagent transcript (its 'format' is not 'ipyagent.transcript')")
        if data.get("version") != VERSION:
            raise ValueError(
                f"transcript version {data.get('version')!r} is not supported (this ipyagent reads version {VERSION})"
            )
        return cls.model_validate(data)

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Any],
        *,
        provider: str,
        status: str = "completed",
        error: str | None = None,
        title: str | None = None,
    ) -> "Transcript":
        """The transcript of stored messages (a thread's turn: its prompt, replies, tool calls
        and results), drawn with its prompts (`show_prompts`). Usage is the sum of the
        assistant messages' usage; no timings are known beyond the model turns taken.

        `status` is ``completed``, ``failed`` (with `error`, one line) or ``interrupted``.
        """
        messages = list(messages)
        replies = [m for m in messages if getattr(m, "role", None) == "assistant"]
        usages = [m.usage for m in replies if getattr(m, "usage", None) is not None]
        fields = tuple(TranscriptUsage.model_fields)
        usage = TranscriptUsage(**{f: sum(int(getattr(u, f, 0) or 0) for u in usages) for f in fields})
        return cls(
            provider=provider,
            status=status,
            messages=transcript_messages(messages),
            usage=usage,
            timings=Timings(turns=len(replies)),
            title=title,
            show_prompts=True,
            error=TranscriptError(type="failed", message=error) if status == "failed" and error else None,
        )


#: The MIME type of a comparison (``%%compare``): one transcript per run, side by side.
COMPARISON_MIME_TYPE = "application/vnd.ipyagent.comparison+json"


class ComparisonEntry(_Model):
    """One run of a comparison: the provider's position (`index`, 0-based), the run number
    (`run`, 0-based) and its transcript."""

    index: int
    run: int = 0
    transcript: Transcript


class ComparisonMark(_Model):
    """A figure the comparison's table marks as the best of its column among the providers: the
    cell at `row`, `column` (indexes into `ComparisonTable.rows`) and why (`label`: ``fastest``,
    ``cheapest``, ``fewest tokens``)."""

    row: int
    column: int
    label: str


class ComparisonTable(_Model):
    """The figures table of a comparison as shown: column titles and rows of cell texts (per
    provider its median row, then with several runs one row per run); `row_runs` gives each
    row's ``[provider index, run]``, run None for a provider's row (empty in older records)."""

    columns: list[str] = Field(default_factory=list)
    rows: list[list[str]] = Field(default_factory=list)
    row_runs: list[list[int | None]] = Field(default_factory=list)
    #: The best figure of a column among two or more providers, on their own rows (empty when they tie).
    marks: list[ComparisonMark] = Field(default_factory=list)


class ComparisonRecord(_Model):
    """The same prompt sent to several providers (``%%compare``), as saved in a notebook.

    `entries` are in provider order, then run order; `wall_s` is the whole comparison's
    time in seconds.
    """

    format: Literal["ipyagent.comparison"] = "ipyagent.comparison"
    version: Literal[1] = VERSION
    providers: list[str] = Field(default_factory=list)
    runs: int = 1
    wall_s: float | None = None
    entries: list[ComparisonEntry] = Field(default_factory=list)
    table: ComparisonTable | None = None
    #: The panes' titles as the user typed them (aliases), when they differ from `providers`.
    titles: list[str] | None = None
    #: True when the comparison was stopped: finished runs are complete, stopped ones partial.
    interrupted: bool = False
    #: The run (0-based) each pane shows, as the user picked it while the comparison streamed
    #: (None: not picked, the pane shows its last run); None when no pane was picked.
    selected: list[int | None] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document, default-valued fields left out (`compact_json`), with its `FOOTER`
        figures (`figures.comparison_footer`) and each run's."""
        doc = compact_json(self)
        for entry, saved in zip(self.entries, doc.get("entries", [])):
            saved["transcript"][FOOTER] = footer_figures(entry.transcript)
        return {**doc, FOOTER: comparison_footer(self)}


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of both documents: a transcript (`MIME_TYPE`) or a
    comparison (`COMPARISON_MIME_TYPE`), told apart by ``format``; with the `FOOTER` each
    ``to_json`` writes beside the fields."""
    schema = TypeAdapter(Union[Transcript, ComparisonRecord]).json_schema()
    for name in ("Transcript", "ComparisonRecord"):
        schema["$defs"][name]["properties"][FOOTER] = {
            "description": FOOTER_DOC, "items": {"type": "string"}, "type": "array", "title": "Footer"
        }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "ipyagent transcript", **schema}


if __name__ == "__main__":  # python -m ipyagent.core.transcript > src/ipyagent/core/transcript.schema.json
    print(json.dumps(json_schema(), indent=2))
