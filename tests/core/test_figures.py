"""core.figures: the words under a run and a comparison, computed once for every renderer."""

from __future__ import annotations

import pytest

from ipyagent.core.figures import comparison_footer, footer_figures, format_usd, masked_figure, plural, provider_title
from ipyagent.core.transcript import ComparisonRecord, Timings, Transcript, TranscriptCost, TranscriptUsage


@pytest.mark.parametrize(("amount", "shown"), [
    (0, "$0"), (-1, "$0"), (1, "$1.00"), (1.5, "$1.50"), (1234.567, "$1,234.57"), (0.99, "$0.99"), (0.5, "$0.5"),
    (0.00117, "$0.00117"), (0.001234, "$0.00123"), (0.1, "$0.1"), (0.999, "$0.999"),
    (0.9996, "$1.00"), (0.99949, "$0.999")])  # rounds up to a whole dollar: shown as one, with cents
def test_a_price_has_cents_from_a_dollar_up_and_three_significant_digits_below(amount, shown) -> None:
    assert format_usd(amount) == shown


def test_counts_and_provider_titles() -> None:
    assert (plural(0, "row"), plural(1, "row"), plural(2, "row")) == ("0 rows", "1 row", "2 rows")
    assert (plural(1, "retry", "retries"), plural(2, "retry", "retries")) == ("1 retry", "2 retries")
    assert provider_title("openai:m", "small") == "small · openai:m"
    assert provider_title("openai:m", "openai:m") == provider_title("openai:m") == "openai:m"


def test_masked_values_are_counted_by_where_they_were() -> None:
    assert masked_figure({"cell template": 1, "error": 2, "tool": 0}) == "3 values masked (cell template 1, error 2)"
    assert masked_figure({"error": 1}) == "1 value masked (error 1)"
    assert masked_figure({"error": 0}) == masked_figure({}) == ""


def test_a_full_footer_names_every_figure_in_order() -> None:
    t = Transcript(provider="openai:m", alias="small", usage=TranscriptUsage(input_tokens=3, output_tokens=4),
                   timings=Timings(first_token_s=0.123, total_s=1.5, turns=2), stop_reason="max_tokens",
                   attempts=3, replayed=True, cost=TranscriptCost(total_usd=0.0042), masked={"error": 2},
                   settings={"temperature": 0.0, "max_output_tokens": 64})
    assert footer_figures(t) == ["small · openai:m", "3 in / 4 out tokens", "first token 0.12 s", "total 1.50 s",
                                 "2 model turns", "stop: max_tokens", "2 retries", "replayed from cassette",
                                 "$0.0042", "2 values masked (error 2)", "temperature 0 · max tokens 64"]


def test_a_footer_leaves_out_what_does_not_apply() -> None:
    assert footer_figures(Transcript(provider="p:m")) == ["p:m", "0 in / 0 out tokens"]
    one_turn = Transcript(provider="p:m", stop_reason="end_turn", attempts=1, timings=Timings(turns=1))
    assert footer_figures(one_turn) == ["p:m", "0 in / 0 out tokens"]
    assert footer_figures(Transcript(provider="p:m", status="failed", stop_reason="max_tokens")) == ["p:m", "failed"]
    assert footer_figures(Transcript(provider="p:m", status="interrupted", usage=TranscriptUsage(output_tokens=2))) == [
        "p:m", "0 in / 2 out tokens", "interrupted"]
    assert footer_figures(Transcript(provider="p:m", status="failed", usage=TranscriptUsage(input_tokens=5)))[1] == (
        "5 in / 0 out tokens")


def test_settings_from_a_newer_ipyagent_are_shown_as_they_are() -> None:
    t = Transcript(provider="p:m", settings={"temperature": 0.5, "warp": "9"})
    assert footer_figures(t)[-1] == "temperature 0.5 · warp 9"


def test_a_comparison_footer_says_its_time_and_whether_it_was_interrupted() -> None:
    assert comparison_footer(ComparisonRecord(wall_s=2.5)) == ["compared in 2.50 s"]
    assert comparison_footer(ComparisonRecord(wall_s=2.5, interrupted=True)) == ["compared in 2.50 s", "interrupted"]
    assert comparison_footer(ComparisonRecord(interrupted=True)) == ["interrupted"]
    assert comparison_footer(ComparisonRecord()) == []


def test_one_retry_is_counted() -> None:
    assert footer_figures(Transcript(provider="p:m", attempts=2))[-1] == "1 retry"
