"""A `Transcript` as the fallbacks that travel beside it: sanitized HTML and plain text.

Front ends without the ipyagent JupyterLab extension pick the best of these
(nbconvert's HTML export and Notebook/Lab without the extension: HTML; a
terminal: plain text). Both show what the live view shows: the answer,
reasoning (collapsed), tool calls with arguments, status, duration and result,
off-prompt artifacts, errors, and the footer figures. (No Markdown: every
front end that draws Markdown prefers the HTML; see `transcript_output`.) The plain text is
`text.transcript`, whose names this module re-exports.

Model text is untrusted. In HTML it goes through `render.markdown_to_html`
(raw HTML escaped, then nh3), and the whole body through nh3 once more.
`inert`, `_fenced` and `_md_escape` serve the Markdown of other outputs
(``%tools``, evaluations): a renderer that trusts Markdown still runs nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from ...core import (
    ComparisonRecord,
    MediaPart,
    OtherPart,
    ReasoningPart,
    ServerToolPart,
    TextPart,
    ToolCallPart,
    Transcript,
    TranscriptMessage,
    comparison_footer,
    footer_figures,
)
from .citations import (
    marked,
    markers_as_html,
    numbered_sources,
    server_html,
    sources_html,
)
from .html import cells_to_html, compact, escape, markdown_to_html, sanitize, with_titles
from .policy import RASTER_TYPES
from .streamed_html import settled
from .text.transcript import (  # noqa: F401 - the names this module had
    APPROVAL_WORDS,
    PLAIN_CHARS,
    _failed,
    artifact_title,
    comparison_to_text,
    price_notes,
    text_pieces,
    to_text,
    tool_status,
)

#: Scoped CSS of the HTML fallback, rule by rule with what it styles (none: always needed);
#: JupyterLab theme variables with plain fallbacks. Text takes the output area's own font and colour.
_RULES = (
    (
        ("ipyagent-tool", "ipyagent-artifact"),
        ".ipyagent-transcript details.ipyagent-tool,.ipyagent-transcript details.ipyagent-artifact"
        "{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;margin:4px 0;padding:2px 8px}",
    ),
    (("ipyagent-tool-error",), ".ipyagent-transcript .ipyagent-tool-error{border-color:var(--jp-error-color1,#b00)}"),
    (("<pre",), ".ipyagent-transcript pre{margin:2px 0;white-space:pre-wrap;word-break:break-all}"),
    (("ipyagent-tool",), ".ipyagent-transcript details.ipyagent-tool pre{max-height:16em;overflow:auto}"),
    (("ipyagent-source",), ".ipyagent-transcript .ipyagent-source pre{word-break:normal}"),
    (("ipyagent-reasoning",), ".ipyagent-transcript .ipyagent-reasoning{color:var(--jp-ui-font-color2,#666)}"),
    (
        ("ipyagent-error",),
        ".ipyagent-transcript .ipyagent-error{color:var(--jp-error-color1,#b00);border-left:3px solid "
        "var(--jp-error-color1,#b00);padding-left:8px}",
    ),
    (
        ("<table",),  # answer tables: left-aligned, text left, numbers right (html.py `_numeric_columns`)
        ".ipyagent-transcript .ipyagent-text table{border-collapse:collapse;margin-left:0;margin-right:auto}"
        ".ipyagent-transcript .ipyagent-text th,.ipyagent-transcript .ipyagent-text td{text-align:left;"
        "border:1px solid var(--jp-border-color2,#ddd);padding:2px 8px}"
        ".ipyagent-transcript .ipyagent-text thead th{border-bottom:2px solid var(--jp-border-color1,#bbb)}",
    ),
    (("ipyagent-status",), ".ipyagent-transcript .ipyagent-status{color:var(--jp-warn-color1,#a60)}"),
    (
        ("ipyagent-sources",),
        ".ipyagent-transcript .ipyagent-sources{border-top:1px solid var(--jp-border-color2,#ddd);margin-top:6px}",
    ),
    (
        ("ipyagent-prompt",),
        ".ipyagent-transcript .ipyagent-prompt{border-left:3px solid "
        "var(--jp-border-color1,#bbb);padding-left:8px;margin:6px 0}",
    ),
    (
        ("ipyagent-title",),
        ".ipyagent-transcript .ipyagent-title{font-weight:bold;border-bottom:1px solid "
        "var(--jp-border-color2,#ddd);margin:8px 0 4px}",
    ),
    (
        (),
        ".ipyagent-transcript .ipyagent-meta,.ipyagent-transcript "
        ".ipyagent-footer{color:var(--jp-ui-font-color2,#777);font-size:var(--jp-ui-font-size0,11px)}",
    ),
)
#: Every rule (a comparison's panes may hold anything).
STYLE = "<style>\n" + "\n".join(rule for _, rule in _RULES) + "\n</style>"


def style_for(body: str) -> str:
    """The rules of `STYLE` that `body` (HTML) needs: a saved notebook keeps them in every output."""
    return (
        "<style>" + "".join(rule for needs, rule in _RULES if not needs or any(n in body for n in needs)) + "</style>"
    )


#: What a comparison adds to `STYLE`: its panes side by side.
COMPARISON_STYLE = """<style>
.ipyagent-comparison .ipyagent-grid{display:grid;gap:6px 12px}
.ipyagent-comparison .ipyagent-cols-1{grid-template-columns:minmax(0,1fr)}
.ipyagent-comparison .ipyagent-cols-2{grid-template-columns:repeat(2,minmax(0,1fr))}
.ipyagent-comparison .ipyagent-cols-3{grid-template-columns:repeat(3,minmax(0,1fr))}
.ipyagent-comparison .ipyagent-pane{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;padding:2px 8px;
min-width:0}
.ipyagent-comparison .ipyagent-pane-title{border-bottom:1px solid var(--jp-border-color2,#ddd);margin:4px 0}
.ipyagent-compare-table{border-collapse:collapse;margin-top:6px;font-size:var(--jp-ui-font-size1,13px)}
.ipyagent-compare-table th,.ipyagent-compare-table td{border:1px solid var(--jp-border-color2,#ddd);padding:2px 8px;
text-align:right}
.ipyagent-compare-table td:first-child,.ipyagent-compare-table td:last-child,.ipyagent-compare-table th{text-align:left}
.ipyagent-compare-table td.ipyagent-error{border:1px solid var(--jp-border-color2,#ddd);padding-left:8px}
</style>"""


#: The HTML fallback draws an answer's Markdown while that takes at most this many characters per
#: character of Markdown (saved, on one line: `render.compact`); a denser answer (a table, a list
#: and a link every few lines) is drawn as its Markdown source, preformatted, so a saved output stays
#: within 2.5 times its text (the transcript ~1.1, this fallback ≤ 1.3, the plain text's start).
HTML_BUDGET = 1.3
#: Answers shorter than this are always drawn (their HTML's weight is the output's frame, not tags).
BUDGET_MIN_CHARS = 2_000
#: Said under an answer drawn as its source.
SOURCE_NOTE = (
    "shown as Markdown source: drawn, it would take too much room in the notebook (the ipyagent extension draws it)"
)


def answer_html(text: str, markdown: Callable[[str], str] = markdown_to_html) -> str:
    """Sanitized HTML of an answer's Markdown (by `markdown`), or, past `HTML_BUDGET`, its source in a ``<pre>``."""
    html = markdown(text)
    if len(text) < BUDGET_MIN_CHARS or len(compact(html)) <= HTML_BUDGET * len(text):
        return html
    return f'<div class="ipyagent-source"><pre>{escape(text)}</pre></div><p class="ipyagent-meta">{SOURCE_NOTE}</p>'


def _arguments(call: ToolCallPart) -> str:
    return json.dumps(call.arguments, ensure_ascii=False, indent=1) if call.arguments else "{}"


# -- HTML ------------------------------------------------------------------------------


def to_html(t: Transcript, *, markdown: Callable[[str], str] = markdown_to_html) -> str:
    """Sanitized HTML, styled like the live view (tool cards and reasoning collapsed); with
    the code offered as a new cell (`next_cell_html`) after the sanitized part. `markdown`
    renders the answer's Markdown (a `StreamedMarkdown.html` that rendered it while it streamed)."""
    body = _html_body(t, markdown) + price_notes_html([t]) + next_cell_html(t)
    return f'<div class="ipyagent-transcript">{style_for(body)}{body}</div>'


#: Inline handlers of the next-cell buttons (fixed strings; the code is read from the escaped <code>).
_CODE_OF = "this.closest('.ipyagent-next-cell').querySelector('code').textContent"
_COPY_JS = f"navigator.clipboard&&navigator.clipboard.writeText({_CODE_OF});this.textContent='copied'"
_INSERT_JS = (
    f"var c={_CODE_OF};if(window.Jupyter&&Jupyter.notebook&&Jupyter.notebook.insert_cell_below)"
    "{Jupyter.notebook.insert_cell_below('code').set_text(c);this.textContent='inserted'}"
    "else{navigator.clipboard&&navigator.clipboard.writeText(c);this.textContent='copied: paste it into a new cell'}"
)


def next_cell_html(t: Transcript) -> str:
    """The code offered as a new cell, with an insert and a copy button, for front ends that
    ignore ``set_next_input`` and run an output's script (VS Code, Colab, classic Notebook).
    Where scripts are stripped (JupyterLab's sanitizer) the code stays readable and selectable."""
    cell = t.next_cell
    if cell is None:
        return ""
    return (
        f'<div class="ipyagent-next-cell" data-language="{escape(cell.language)}">'
        f'<div class="ipyagent-meta">code for a new cell below ({escape(cell.language)})'
        f' <button class="ipyagent-insert" title="insert as a new cell" onclick="{escape(_INSERT_JS)}">insert</button>'
        f' <button class="ipyagent-copy" title="copy the code" onclick="{escape(_COPY_JS)}">copy</button></div>'
        f"<pre><code>{escape(cell.source)}</code></pre></div>"
    )


def comparison_to_html(record: ComparisonRecord) -> str:
    """Sanitized HTML of a comparison: one column per provider (at most three a row); with several
    runs, each run a collapsible section, the one the user picked open, else the last (the
    extension's renderer has tabs)."""
    columns = min(max(len(record.providers), 1), 3)
    titles = record.titles or record.providers
    panes = []
    for index, provider in enumerate(record.providers):
        runs = [e for e in record.entries if e.index == index]
        title = titles[index] if index < len(titles) else provider
        under = f' <span class="ipyagent-meta">{escape(provider)}</span>' if title != provider else ""
        body = [f'<div class="ipyagent-pane-title"><b>{escape(title)}</b>{under}</div>']
        shown = shown_run(record, index)
        for entry in runs:
            if record.runs > 1:
                opened = " open" if entry.run == shown else ""
                body.append(
                    f'<details class="ipyagent-run"{opened}><summary>run {entry.run + 1} of {record.runs}</summary>'
                    f"{_html_body(entry.transcript)}</details>"
                )
            else:
                body.append(_html_body(entry.transcript))
        panes.append(f'<div class="ipyagent-pane">{"".join(body)}</div>')
    footer = comparison_footer(record)
    wall = f'<div class="ipyagent-footer">{" · ".join(footer)}</div>' if footer else ""
    table = (sanitize(cells_to_html(record.table.columns, with_titles(record.table.rows, record.table.row_runs,
                                                                     record.titles), record.table.marks))
             if record.table else "")
    table += price_notes_html(e.transcript for e in record.entries)
    # Each pane's body is sanitized by _html_body; the rest is our own markup over escaped text.
    grid = f'<div class="ipyagent-grid ipyagent-cols-{columns}">{"".join(panes)}</div>{table}{wall}'
    return f'<div class="ipyagent-transcript ipyagent-comparison">{STYLE}{COMPARISON_STYLE}{grid}</div>'


def shown_run(record: ComparisonRecord, index: int) -> int | None:
    """The run pane `index` shows: the one the user picked (`record.selected`) when it is saved,
    else its last; None when the pane has no run."""
    runs = [e.run for e in record.entries if e.index == index]
    picked = record.selected[index] if record.selected and index < len(record.selected) else None
    return picked if picked in runs else max(runs, default=None)


def image_html(part: OtherPart) -> str | None:
    """An image the model returned as ``<img>`` with a ``data:`` URL (raster types only), else None."""
    if part.kind != "image" or not part.data or part.mime_type not in RASTER_TYPES:
        return None
    data = "".join(
        c for c in part.data if c.isalnum() or c in "+/="
    )  # base64 only: nothing can break out of the attribute
    return f'<img class="ipyagent-image" alt="image from the model" src="data:{part.mime_type};base64,{data}">'


def media_html(part: MediaPart) -> str:
    """A tool's image as ``<img>`` (a raster ``data:`` URL, as `image_html`) with its summary under it;
    audio and files as their summary line (the labextension plays and offers them; HTML exports do not)."""
    summary = f'<div class="ipyagent-meta">{escape(part.summary)}</div>'
    if part.kind == "image" and part.data and part.mime_type in RASTER_TYPES:
        data = "".join(c for c in part.data if c.isalnum() or c in "+/=")
        return (f'<div class="ipyagent-media"><img class="ipyagent-image" alt="{escape(part.summary)}" '
                f'src="data:{part.mime_type};base64,{data}">{summary}</div>')
    why = "" if part.data else ": too large to show"
    return f'<div class="ipyagent-media"><p class="ipyagent-meta">{escape(part.summary)}{why}</p></div>'


def _prompt_html(message: TranscriptMessage) -> str:
    """A user's message (`Transcript.show_prompts`): its text as Markdown, other parts as a line."""
    body = "".join(
        markdown_to_html(p.text)
        if isinstance(p, TextPart)
        else f'<p class="ipyagent-meta">{escape(getattr(p, "summary", p.type))}</p>'
        for p in message.parts
    )
    return f'<div class="ipyagent-prompt"><div class="ipyagent-meta">user</div>{body}</div>'


def _part_html(part: Any, markdown: Callable[[str], str], numbers: dict[Any, Any]) -> str:
    """One part of an assistant message as HTML (sanitized again with the body): its text (cited
    spans marked with their footnote numbers), reasoning, a tool card (with its media), an image."""
    if isinstance(part, TextPart):
        if part.citations:  # markers after the Markdown was rendered and sanitized: never the model's
            return f'<div class="ipyagent-text">{markers_as_html(answer_html(marked(part, numbers), markdown))}</div>'
        return f'<div class="ipyagent-text">{answer_html(part.text, markdown)}</div>'
    if isinstance(part, ReasoningPart):
        body = "<p>(redacted by the provider)</p>" if part.redacted and not part.text else markdown(part.text)
        return f'<details class="ipyagent-reasoning"><summary>reasoning</summary>{body}</details>'
    if isinstance(part, ToolCallPart):
        css = "ipyagent-tool ipyagent-tool-error" if _failed(part) else "ipyagent-tool"
        result = ""
        if part.result is not None and (part.result or not part.media):
            label = "error" if _failed(part) else "result"
            result = f'<div class="ipyagent-meta">{label}</div><pre class="ipyagent-result">{escape(part.result)}</pre>'
        result += "".join(media_html(m) for m in part.media)
        result += "".join(f'<div class="ipyagent-meta">{escape(n)}</div>' for n in part.notes)
        return (f'<details class="{css}"{" open" if part.media else ""}><summary><b>{escape(part.name)}</b> '
                f'<span class="ipyagent-meta">{escape(part.id)} · {escape(tool_status(part))}</span></summary>'
                '<div class="ipyagent-meta">arguments</div><pre '
                f'class="ipyagent-args">{escape(_arguments(part))}</pre>{result}</details>')
    if isinstance(part, ServerToolPart):
        return server_html(part)
    if isinstance(part, OtherPart):
        return image_html(part) or f'<p class="ipyagent-meta">{escape(part.summary)}</p>'
    return ""


def last_text_part(t: Transcript) -> TextPart | None:
    """The last text part of `t`'s assistant messages (None: none)."""
    texts = [p for m in t.messages if m.role == "assistant" for p in m.parts if isinstance(p, TextPart)]
    return texts[-1] if texts else None


def price_notes_html(transcripts: Iterable[Transcript]) -> str:
    return "".join(f'<div class="ipyagent-meta ipyagent-price-note">{escape(note)}</div>'
                   for note in price_notes(transcripts))


def _html_body(t: Transcript, markdown: Callable[[str], str] = markdown_to_html) -> str:
    """The body's HTML, sanitized: model and tool text through nh3, artifacts as memory_html drew
    (and sanitized) them, with their data: images."""
    parts: list[str] = [f'<div class="ipyagent-title">{escape(t.title)}</div>'] if t.title else []
    numbers = numbered_sources(t)
    # A run stopped mid-answer: the end of its last text drawn as the live view drew it (`settled`).
    cut_off = last_text_part(t) if t.status == "interrupted" else None

    def settled_markdown(text: str) -> str:
        return markdown(settled(text))

    for message in t.messages:
        if message.role == "user" and t.show_prompts:
            parts.append(_prompt_html(message))
        if message.role != "assistant":
            continue  # the prompt is the cell above; tool results sit in their calls
        parts += [_part_html(part, settled_markdown if part is cut_off and not part.citations else markdown, numbers)
                  for part in message.parts]
    body = [sanitize("".join(parts) + sources_html(numbers))]
    for artifact in t.artifacts:
        if artifact.html:  # drawn and sanitized by memory_html (its data: image is added after nh3)
            body.append(artifact.html)
        else:
            body.append(
                sanitize(
                    f'<details class="ipyagent-artifact"><summary>{escape(artifact_title(artifact))}</summary>'
                    f"<pre>{escape(artifact.preview)}</pre></details>"
                )
            )
    parts = []
    if t.error is not None:
        parts.append(f'<div class="ipyagent-error">⚠ {escape(t.error.message)}</div>')
    if t.status == "interrupted":
        parts.append('<div class="ipyagent-status">■ interrupted; the text above is partial</div>')
    parts.append('<div class="ipyagent-footer">' + " · ".join(escape(f) for f in footer_figures(t)) + "</div>")
    return "".join(body) + sanitize("".join(parts))


# -- Markdown of other outputs (``%tools``, evaluations) ---------------------------------

_SCHEME = re.compile(r"(?i)\b(javascript|vbscript|data|file)(\s*):(?=\S)")


def inert(markdown: str) -> str:
    """The last wall for a Markdown fallback, whatever a renderer makes of code spans and
    fences: no ``<`` survives to start a tag, and no script-capable scheme stays a scheme.

    No image is left to load either: ``![alt](url)`` and ``![alt][ref]`` become the text
    ``!\\[alt](url)``, since a Markdown renderer would fetch the URL when it draws the output.

    Inside code a ``<`` then shows as ``&lt;``: an ugly but safe fallback of a fallback.
    """
    return _SCHEME.sub(r"\1\2&#58;", markdown.replace("<", "&lt;").replace("![", "!\\["))


def _fenced(text: str, info: str = "") -> str:
    run = max((len(r) for r in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (run + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _md_escape(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]<>()#+!|~])", r"\\\1", text)
