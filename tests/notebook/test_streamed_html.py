"""The HTML fallback rendered while an answer streams (notebook/render/streamed_html.py): the same HTML as
rendering the whole answer at the end, and at the end only the unfinished rest is rendered."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ipyagent.notebook.render import streamed_html
from ipyagent.notebook.render.html import _markdown, markdown_to_html
from ipyagent.notebook.render.streamed_html import MarkdownHtmlStream, StreamedMarkdown, finished_prefix

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from render_path import answer  # noqa: E402  (the benchmark's Markdown: headings, prose, lists, code, tables)

TRICKY = [
    # A reference defined early, used later (passed on to the later chunks).
    "[docs]: https://example.com/docs\n\n" + "Some text.\n\n" * 40 + "See [the docs][docs].\n\n" + "More.\n\n" * 40,
    # A paragraph turned into a heading by its underline; a list made loose by a blank line; a lazy quote line.
    ("Intro para\n\n" * 30)
    + "Title\n=====\n\n- a\n\n- b\n  still b\n\n> quote\nlazy line\n\n"
    + ("tail para\n\n" * 30),
    # A table, a fence with blank lines inside, an indented code block, a setext h2.
    ("| a | b |\n|---|---|\n| 1 | 2 |\n\n" * 10)
    + "```\ncode\n\n\nmore code\n```\n\n    indented\n\nHead\n---\n"
    + ("x\n\n" * 50),
    # HTML in the Markdown (escaped), a link with a title, emphasis across a soft break.
    ('<script>alert(1)</script>\n\n[a](http://x.test "t") *one\ntwo*\n\n' * 30),
]


def _streamed(text: str, piece: int) -> MarkdownHtmlStream:
    stream = MarkdownHtmlStream()
    for i in range(0, len(text), piece):
        stream.append(text[i:i + piece])
    return stream


@pytest.mark.parametrize("piece", [1, 3, 7, 50])
@pytest.mark.parametrize("case", range(len(TRICKY) + 1))
def test_the_html_rendered_while_streaming_equals_the_whole_answer_rendered(monkeypatch, case, piece):
    monkeypatch.setattr(streamed_html, "CHUNK", 64)  # many cuts, at every kind of block edge
    text = TRICKY[case] if case < len(TRICKY) else answer(12_000)
    stream = _streamed(text, piece)
    assert stream._head, "nothing was rendered while streaming"
    assert stream.html(text) == markdown_to_html(text)


def test_a_reference_defined_after_the_first_chunk_renders_the_whole_answer(monkeypatch):
    monkeypatch.setattr(streamed_html, "CHUNK", 64)
    text = (
        "See [the docs][docs].\n\n" + "Some text.\n\n" * 40 + "[docs]: https://example.com/docs\n\n" + "More.\n\n" * 40
    )
    stream = _streamed(text, 5)
    assert stream.html(text) is None  # the early link depends on the late definition
    assert StreamedMarkdown().html(text) == markdown_to_html(
        text
    ) and 'href="https://example.com/docs"' in markdown_to_html(text)
    # Defined in the unfinished rest only: also the whole answer.
    late = "See [the docs][docs].\n\n" + "Some text.\n\n" * 40 + "[docs]: https://example.com/docs\n"
    assert _streamed(late, 5).html(late) is None


def test_a_text_that_does_not_continue_the_stream_is_rendered_whole(monkeypatch):
    monkeypatch.setattr(streamed_html, "CHUNK", 64)
    text = answer(3_000)
    streams = StreamedMarkdown()
    for i in range(0, len(text), 3):
        streams.append((1, 0, "text_delta"), text[i:i + 3])
    redacted = text.replace("Section 1", "Section ?")  # e.g. a secret redacted in the saved text
    assert streams.html(redacted) == markdown_to_html(redacted)
    assert streams.html(text) == markdown_to_html(text)


class _Counting:
    """Counts the characters parsed for block structure and rendered by markdown-it."""

    def __init__(self, monkeypatch) -> None:
        self.parsed = self.rendered = 0
        blocks, md = streamed_html._blocks, _markdown()
        render = md.render
        monkeypatch.setattr(streamed_html, "_blocks", lambda src: self.count("parsed", src) or blocks(src))
        monkeypatch.setattr(md, "render", lambda src, env=None: self.count("rendered", src) or render(src, env))

    def count(self, what: str, src: str) -> None:
        setattr(self, what, getattr(self, what) + len(src))


def test_the_end_renders_only_the_unfinished_rest_and_streaming_parses_each_character_about_twice(monkeypatch):
    counting = _Counting(monkeypatch)
    text = answer(135_000)
    stream = _streamed(text, 3)
    during = counting.parsed + counting.rendered
    counting.parsed = counting.rendered = 0
    html = stream.html(text)
    assert counting.rendered < 2 * streamed_html.CHUNK, counting.rendered  # the rest, not 135,000 characters
    assert html == markdown_to_html(text)
    assert during < 2.5 * len(text), during


def test_one_block_longer_than_a_chunk_is_not_parsed_again_for_every_delta(monkeypatch):
    counting = _Counting(monkeypatch)
    text = "```python\n" + "x = 1\n" * 20_000 + "```\n"  # 120,000 characters in one open block
    stream = _streamed(text, 3)
    assert counting.parsed < 3 * len(text), counting.parsed  # tried again only when it doubled
    assert stream.html(text) is None  # nothing finished: the end renders it whole


def test_finished_prefix_matches_the_labextensions_rule():
    assert finished_prefix("para one\n\npara two\n") == len("para one\n\n")  # the last block may grow
    assert finished_prefix("para one\n\npara two") == 0  # it starts on a line not yet complete
    assert finished_prefix("para one\n") == 0  # a single block: never finished
    assert finished_prefix("# h\n\n- a\n- b") == len("# h\n\n")
    assert finished_prefix("a\n\n```\nopen fence\n\nstill open") == len("a\n\n")
    assert finished_prefix("a\n\nb\n---") == len("a\n\n")  # "b" may be a heading now, kept open


def test_a_live_run_saves_the_same_html_and_replaces_the_live_view_before_the_widget_hears_of_the_end(monkeypatch):
    from ipyagent.core import Message, ModelCompleted, ModelStarted, StopReason, TextBlock, TextDelta, Usage
    from ipyagent.notebook.views import transcript_output
    from ipyagent.notebook.views.transcript_output import LiveTranscript, bundle

    monkeypatch.setattr(streamed_html, "CHUNK", 256)
    calls: list[str] = []

    class View:
        def feed(self, event):
            pass

        def end(self, doc, saved=None):
            calls.append("widget end")

        def close(self):
            calls.append("widget closed")

    monkeypatch.setattr(transcript_output, "update_display", lambda data, **kw: calls.append("saved output"))
    text = answer(6_000)
    live = LiveTranscript(View(), provider="openai:m", prompt="p", show=False)
    live.feed(ModelStarted(provider="openai", model="m"))
    for i in range(0, len(text), 3):
        live.feed(TextDelta(0, text[i:i + 3]))
    done = ModelCompleted(
        message=Message(role="assistant", content=[TextBlock(text=text)]),
        usage=Usage(input_tokens=1, output_tokens=9),
        stop_reason=StopReason(kind="end_turn"),
        metadata={},
    )
    live.feed(done)
    rendered: list[int] = []
    real = transcript_output.StreamedMarkdown.html
    monkeypatch.setattr(
        transcript_output.StreamedMarkdown, "html", lambda self, t: rendered.append(len(t)) or real(self, t)
    )
    transcript = live.finish(None)
    # The page showing the run swaps in the saved output first, so it never draws the transcript twice.
    assert calls == ["saved output", "widget end", "widget closed"]
    assert rendered == [len(text)]  # the HTML fallback came from the streamed rendering
    assert bundle(transcript, markdown=live.markdown.html) == bundle(transcript)


# -- the unfinished end of a streaming answer, drawn plainly (`settled`; markdown.test.ts has the same cases)


def _shown(html: str) -> str:
    """The words `html` shows, tags and white space collapsed."""
    import html as html_module
    import re

    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.parametrize("source, shown", [
    ("A **Short", "A **Short"),
    ("A **Short answer*", "A **Short answer*"),  # markdown-it alone: *<em>Short answer</em>
    ("Run `code *here*", "Run `code *here*"),  # not <em>here</em> before the code span closes
    ("See [link](htt", "See [link](htt"),
    ("See [**the docs**", "See [**the docs**"),
    ("See [the docs]", "See [the docs]"),
])
def test_an_open_strong_code_span_or_link_at_the_end_is_drawn_as_its_plain_text(source, shown):
    html = markdown_to_html(streamed_html.settled(source))
    assert _shown(html) == shown
    assert not any(tag in html for tag in ("<em>", "<strong>", "<code>", "<a "))


def test_what_is_closed_stays_markdown_and_the_plain_text_starts_at_the_first_open_construct():
    html = markdown_to_html(streamed_html.settled("**Done** and `x` and [a](https://example.com) then *open"))
    assert "<strong>Done</strong>" in html and "<code>x</code>" in html and 'href="https://example.com"' in html
    assert _shown(html).endswith("then *open")
    assert streamed_html.settled("*a* **b**") == "*a* **b**"
    assert streamed_html.settled("x **b *c") == "x \\*\\*b \\*c"
    assert streamed_html.unclosed_at("2 * 3 = 6") == -1  # a lone `*` between spaces opens nothing
    assert streamed_html.unclosed_at("snake_case_name") == -1  # nor does an intraword `_`
    assert streamed_html.unclosed_at("``a ` b") == 0  # a code span closes with a run of its own length only


@pytest.mark.parametrize("source", ["- one\n- ", "- one\n-", "1. one\n2.", "- one\n  - ", "- one\n- \n"])
def test_a_list_item_still_forming_is_held_back_no_empty_li(source):
    html = markdown_to_html(streamed_html.settled(source))
    assert html.count("<li>") == 1 and "<li></li>" not in html and _shown(html) == "one"


def test_a_fence_opening_line_is_held_back_and_an_open_code_block_left_as_it_is():
    assert streamed_html.settled("Text\n```py") == "Text\n"
    assert streamed_html.settled("Text\n```py\nx = *a") == "Text\n```py\nx = *a"
    assert streamed_html.settled("    **x") == "    **x"
    assert streamed_html.settled("- one\n- t") == "- one\n- t"
    assert "<h1>" not in markdown_to_html(streamed_html.settled("Title\n#"))


def test_a_saved_interrupted_answer_ends_as_the_live_view_drew_it():
    from ipyagent.core import TextPart, Transcript, TranscriptMessage
    from ipyagent.notebook.render.transcript import to_html

    def saved(status: str) -> str:
        t = Transcript(provider="openai:m", status=status,
                       messages=[TranscriptMessage(role="assistant", parts=[TextPart(text="Answer: **Short answer*")])])
        return to_html(t)

    assert "<em>" not in saved("interrupted") and "**Short answer*" in saved("interrupted")
    assert "<em>Short answer</em>" in saved("completed")  # a finished answer is CommonMark as written


TABLE = ("| name | score | share | mark |\n|---|---|---|:-:|\n"
         "| a | 1,200 | 5% | 3 |\n| b | 3.5 ms | — | x |\n| c | v2 | 7% | 1 |\n")


def test_a_numeric_answer_column_is_right_aligned_text_and_own_alignment_kept():
    html = markdown_to_html(TABLE)
    assert "<td>a</td>" in html  # text: no alignment of its own, left by the stylesheet
    assert '<td style="text-align:right">5%</td>' in html and '<th style="text-align:right">share</th>' in html
    assert '<td style="text-align:right">1,200</td>' not in html  # "v2" makes the score column text
    assert '<td style="text-align:center">3</td>' in html  # the column's `:-:` honoured
    assert "text-align:right" in markdown_to_html(TABLE.replace("v2", "12"))


def test_the_saved_html_aligns_answer_tables_left_only_when_there_is_a_table():
    from ipyagent.core import TextPart, Transcript, TranscriptMessage
    from ipyagent.notebook.render.transcript import to_html

    def saved(text: str) -> str:
        return to_html(Transcript(provider="openai:m", messages=[
            TranscriptMessage(role="assistant", parts=[TextPart(text=text)])]))

    assert "margin-left:0" in saved(TABLE) and "text-align:left" in saved(TABLE)
    assert "margin-left:0" not in saved("no table")
