"""Cost shown only when known: no "unknown price" figure, no "—" cost or judge-cost column; once
per cell, a note saying why the price is unknown and how to set it (``--price-as``), kept in the
saved document (`Transcript.price_note`, the evaluation's notes)."""

from __future__ import annotations

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.core import ComparisonEntry, ComparisonRecord, ComparisonTable, Transcript, TranscriptCost
from ipyagent.drivers import create_driver
from ipyagent.notebook.render.evaluation import evaluation_html, evaluation_text
from ipyagent.notebook.render.transcript import comparison_to_html, comparison_to_text, footer_figures, to_html, to_text

NOTE = "price unknown: http://127.0.0.1:8000/v1 is not openai's own API; set it with ..."


def test_the_driver_says_why_a_price_is_unknown_and_how_to_set_it(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-notes-0123456789")
    local = create_driver("openai:m", base_url="http://127.0.0.1:8000/v1")
    how = "set it with %provider ... --price-as PROVIDER:MODEL (price_as= in Python)"
    assert local.price_note() == f"price unknown: http://127.0.0.1:8000/v1 is not openai's own API; {how}"
    assert create_driver("openai:n", base_url="http://127.0.0.1:8000/v1").price_note() == local.price_note()  # one host
    unlisted = create_driver("openai:no-such-model")
    assert unlisted.price_note() == f"price unknown: genai-prices has no price for openai:no-such-model; {how}"
    priced_as = create_driver("openai:m", base_url="http://127.0.0.1:8000/v1", price_as="openai:nope")
    assert priced_as.price_note() == ("price unknown: genai-prices has no price for openai:nope; "
                                      "name a model it lists in --price-as")


def test_a_transcript_says_it_once_above_the_footer_never_as_a_figure() -> None:
    t = Transcript(provider="openai:m", price_unknown=True, price_note=NOTE)
    assert "unknown price" not in footer_figures(t)
    assert to_text(t).endswith("\n" + NOTE + "\n[openai:m · 0 in / 0 out tokens]")  # above the footer: it stays last
    assert to_html(t).count("price unknown: ") == 1 and "ipyagent-price-note" in to_html(t)
    priced = Transcript(provider="openai:m", cost=TranscriptCost(input_usd=0.001, output_usd=0.002, total_usd=0.003),
                        price_note=NOTE)
    assert "$0.003" in footer_figures(priced) and "price unknown" not in to_text(priced)  # known: no note


def test_a_comparison_says_it_once_and_leaves_out_the_unknown_cost_column() -> None:
    table = ComparisonTable(columns=["provider:model", "total (s)", "cost", "error"],
                            rows=[["openai:m", "0.5", "—", ""], ["openai:n", "0.6", "—", ""]],
                            row_runs=[[0, None], [1, None]])
    panes = [ComparisonEntry(index=i, transcript=Transcript(provider=p, price_unknown=True, price_note=NOTE))
             for i, p in enumerate(["openai:m", "openai:n"])]
    record = ComparisonRecord(providers=["openai:m", "openai:n"], entries=panes, table=table)
    html = comparison_to_html(record)
    assert html.count("price unknown: ") == 1 and "<th>cost</th>" not in html
    assert comparison_to_text(record).count("price unknown: ") == 1
    table.rows[1][2] = "$0.0012"
    assert "<th>cost</th>" in comparison_to_html(record)  # one known price: the column stays


def test_an_evaluation_shows_cost_and_judge_cost_only_when_known() -> None:
    ev = Evaluation(["openai:m"], [{"q": "x"}], notes=[NOTE])
    ev.results = [EvalResult(row=0, provider="openai:m", prompt="x", fields={"q": "x"}, text="x", status="ok")]
    doc = ev.to_json()
    head = evaluation_text(doc).splitlines()[1]
    assert "cost" not in head and "judge" not in head and NOTE in evaluation_text(doc)
    summary = evaluation_html(doc).split('<details class="ipyagent-eval-details">')[0]  # "details" has every figure
    assert "<th>cost</th>" not in summary and "<th>judge cost</th>" not in summary
    ev.results[0].cost = 0.002
    head = evaluation_text(ev.to_json()).splitlines()[1]
    assert "cost" in head and "judge cost" not in head  # a price, but no judge ran


def test_a_cost_column_left_out_keeps_the_marks_on_their_figures() -> None:
    from ipyagent.core import ComparisonMark
    from ipyagent.notebook.render.html import cells_to_html

    columns = ["provider:model", "out tokens", "cost", "stop", "error"]
    rows = [["openai:m", "12", "—", "end_turn", ""], ["openai:n", "30", "—", "length", ""]]
    marks = [ComparisonMark(row=0, column=1, label="fewest tokens"), ComparisonMark(row=1, column=3, label="x")]
    html = cells_to_html(columns, rows, marks)
    assert "<th>cost</th>" not in html and "<td><b>12</b></td>" in html and "<td><b>length</b></td>" in html
