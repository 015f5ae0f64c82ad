"""`agent.evaluation.statistics`: each hand-written formula against scipy (to 3 decimals or
better), the bootstrap's two ways of drawing, the verdict's rule and its words."""

from __future__ import annotations

import random
import statistics as std_statistics

import numpy as np
import pytest
import scipy.stats as scipy_stats

from ipyagent.agent.evaluation import statistics as stats
from ipyagent.agent.evaluation.statistics import (
    bootstrap_mean,
    cohen_kappa,
    compare_paired,
    mcnemar_exact,
    paired_bootstrap,
    percentile,
    row_bootstrap,
    rows_needed,
    wilson_interval,
)


@pytest.mark.parametrize("passed, n", [(0, 1), (1, 1), (17, 20), (15, 20), (0, 20), (20, 20), (1, 3), (180, 200),
                                       (9000, 10000)])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_wilson_interval_is_scipys(passed, n, confidence) -> None:
    ours = wilson_interval(passed, n, confidence)
    theirs = scipy_stats.binomtest(passed, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-9)


def test_wilson_interval_without_runs_and_bad_counts() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="between 0 and n=3"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match="confidence level"):
        wilson_interval(1, 3, 1.5)


@pytest.mark.parametrize("b, c", [(0, 0), (0, 1), (3, 9), (9, 3), (5, 5), (0, 5), (40, 10), (500, 430), (2500, 2400)])
def test_mcnemar_exact_is_scipys_binomial_test(b, c) -> None:
    expected = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue if b + c else 1.0
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert mcnemar_exact(np.int64(b), np.int64(c)) == mcnemar_exact(b, c)  # numpy's counts: no overflow
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def _scipy_percentile(values: list[float], seed: int, confidence: float = 0.95) -> tuple[float, float]:
    result = scipy_stats.bootstrap((np.asarray(values, dtype=float),), np.mean, n_resamples=stats.RESAMPLES,
                                   method="percentile", confidence_level=confidence, vectorized=True,
                                   rng=np.random.default_rng(seed))
    return result.confidence_interval.low, result.confidence_interval.high


def test_the_paired_bootstrap_draws_rows_as_scipy_does_and_gives_its_interval() -> None:
    draw = random.Random(7)
    differences = [[float(draw.random() < 0.6) - float(draw.random() < 0.9)] for _ in range(200)]
    assert 200 * stats.RESAMPLES <= stats.INDEX_DRAWS  # rows drawn by index, as scipy does
    for seed in (0, 1, 12345):
        ours = paired_bootstrap(differences, seed=seed)
        assert ours == pytest.approx(_scipy_percentile([d[0] for d in differences], seed), abs=5e-4)
    assert paired_bootstrap(differences, seed=3) == paired_bootstrap(differences, seed=3)  # seeded: reproducible
    assert paired_bootstrap(differences, seed=3) != paired_bootstrap(differences, seed=4)


def test_a_scores_mean_interval_is_scipys() -> None:
    draw = random.Random(3)
    scores = [round(draw.random(), 2) for _ in range(60)]
    assert bootstrap_mean(scores, seed=5, confidence=0.9) == pytest.approx(_scipy_percentile(scores, 5, 0.9), abs=5e-4)
    assert bootstrap_mean([], seed=5) is None


def test_past_the_index_draws_the_kinds_of_rows_give_the_same_distribution(monkeypatch) -> None:
    draw = random.Random(11)
    rows = [[float(draw.random() < 0.7) - float(draw.random() < 0.8) for _ in range(3)] for _ in range(400)]
    sums, counts = [sum(r) for r in rows], [3] * len(rows)
    assert 400 * stats.RESAMPLES > stats.INDEX_DRAWS
    by_kinds = row_bootstrap(sums, counts, seed=1)
    monkeypatch.setattr(stats, "INDEX_DRAWS", 10**9)
    by_index = row_bootstrap(sums, counts, seed=1)
    assert by_kinds != by_index  # another way of drawing ...
    assert by_kinds == pytest.approx(by_index, abs=0.006)  # ... of the same distribution: Monte Carlo error only
    # A row's repeats stay together: the interval is wider than if the 1,200 pairs were independent rows.
    flat = row_bootstrap([d for r in rows for d in r], [1] * 1200, seed=1)
    assert by_index[1] - by_index[0] > flat[1] - flat[0]


def test_row_bootstrap_refuses_what_has_no_meaning() -> None:
    with pytest.raises(ValueError, match="one of each per row"):
        row_bootstrap([1.0], [1, 1])
    with pytest.raises(ValueError, match="at least one value"):
        row_bootstrap([1.0, 0.0], [1, 0])
    with pytest.raises(ValueError, match="resamples"):
        row_bootstrap([1.0], [1], resamples=0)
    assert paired_bootstrap([[], []]) is None


def test_cohen_kappa_on_the_textbook_table_and_its_edges() -> None:
    # 50 items: both yes 20, first yes only 5, second yes only 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4.
    table = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    agreement = cohen_kappa(table)
    assert (agreement.n, agreement.percent) == (50, pytest.approx(70.0)) and agreement.kappa == pytest.approx(0.4)
    assert cohen_kappa([(True, True), (False, False)]).kappa == 1.0
    assert cohen_kappa([(True, False), (False, True)]).kappa == -1.0
    assert cohen_kappa([(True, True)] * 4) == stats.Agreement(4, 100.0, None)  # one answer throughout: undefined
    assert cohen_kappa([]) == stats.Agreement(0, None, None)
    # The first rater off 0.5, so the second's rate counts: p_o 5/6, rates 4/6 and 5/6, p_e 22/36, kappa 8/14.
    uneven = [(True, True)] * 4 + [(False, True), (False, False)]
    assert cohen_kappa(uneven).kappa == pytest.approx(8 / 14)


def _exact_mcnemar_power(n: int, discordant: float, gap: float) -> float:
    """The probability that the exact McNemar test at 0.05 rejects, over n pairs of which a share
    `discordant` disagree, B's side `gap` ahead."""
    only_b = (discordant + gap) / 2 / discordant
    power = 0.0
    for d in range(n + 1):
        p_d = scipy_stats.binom.pmf(d, n, discordant)
        if p_d < 1e-12:
            continue
        c = np.arange(d + 1)
        reject = np.array([mcnemar_exact(d - k, k) < 0.05 for k in c])
        power += p_d * scipy_stats.binom.pmf(c, d, only_b)[reject].sum()
    return power


@pytest.mark.parametrize("discordant", [0.1, 0.3, 0.5])
def test_rows_needed_gives_the_exact_test_its_power(discordant) -> None:
    n = rows_needed(discordant)
    assert 0.75 <= _exact_mcnemar_power(n, discordant, 0.10) <= 0.85
    assert _exact_mcnemar_power(n // 2, discordant, 0.10) < 0.6
    assert rows_needed(0.0) == rows_needed(0.10)  # a 10-point gap needs 10% of pairs disagreeing at the least
    assert rows_needed(0.5, gap=0.2) < rows_needed(0.5)


def _runs(p: float, rows: int, seed: int, repeats: int = 1) -> dict[tuple[int, int], bool]:
    draw = random.Random(seed)
    return {(row, k): draw.random() < p for row in range(rows) for k in range(repeats)}


def test_a_clear_gap_is_a_verdict_with_scipys_p_value_and_interval() -> None:
    a, b = _runs(0.9, 200, 1), _runs(0.6, 200, 2)
    result = compare_paired(a, b, baseline="A", column="B", seed=0)
    only_a = sum(a[k] and not b[k] for k in a)
    only_b = sum(b[k] and not a[k] for k in a)
    assert (result.only_baseline, result.only_column, result.pairs, result.rows) == (only_a, only_b, 200, 200)
    assert round(result.p_value, 3) == round(scipy_stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue, 3)
    low, high = _scipy_percentile([float(b[k]) - float(a[k]) for k in sorted(a)], 0)
    assert (round(result.low, 3), round(result.high, 3)) == (round(low, 3), round(high, 3))
    assert result.verdict == "worse" and result.winner == "A"
    assert result.sentence().startswith(f"A better by {round(-result.difference * 100)} points (95% CI ")
    assert "McNemar p < 0.001; n=200)" in result.sentence()
    flipped = compare_paired(b, a, baseline="B", column="A", seed=0)
    assert flipped.verdict == "better" and flipped.winner == "A" and flipped.difference == -result.difference


def test_equal_columns_over_twenty_rows_are_no_significant_difference_with_the_rows_needed() -> None:
    a, b = _runs(0.7, 20, 3), _runs(0.7, 20, 4)
    result = compare_paired(a, b, baseline="A", column="B")
    assert result.verdict == "no significant difference" and result.winner is None
    discordant = (result.only_baseline + result.only_column) / 20
    assert result.needed_rows == rows_needed(discordant)
    assert result.sentence() == (f"no significant difference (n=20, need ≈ {result.needed_rows:,} rows "
                                 "to detect a 10-point gap)")


def test_the_verdict_needs_both_the_exact_test_and_the_interval() -> None:
    # 5 of 20 rows only B passed, none only A: the bootstrap interval excludes 0, McNemar p = 0.0625.
    a = {(r, 0): r >= 5 for r in range(20)}
    b = {(r, 0): True for r in range(20)}
    result = compare_paired(a, b, baseline="A", column="B")
    assert result.low > 0 and result.p_value == pytest.approx(0.0625)
    assert result.verdict == "no significant difference"
    a = {(r, 0): r >= 8 for r in range(20)}  # 8 discordant: p = 0.0078
    assert compare_paired(a, b, baseline="A", column="B").verdict == "better"


def test_repeats_pair_by_row_and_repeat_and_rows_without_a_pair_are_left_out() -> None:
    a, b = _runs(0.9, 50, 5, repeats=3), _runs(0.5, 50, 6, repeats=3)
    del b[(0, 0)], b[(0, 1)], b[(0, 2)], b[(1, 2)]  # row 0 not run on B; row 1 once less
    result = compare_paired(a, b, baseline="A", column="B")
    assert (result.pairs, result.rows) == (146, 49)
    assert result.sentence().endswith("n=49 rows, 146 pairs)")
    needed = rows_needed((result.only_baseline + result.only_column) / 146)
    assert result.needed_rows == -(-needed * 49 // 146)  # pairs needed, in rows of about three pairs
    assert compare_paired({}, {}, baseline="A", column="B").sentence() == "no significant difference (n=0)"


# -- mutation gaps (issue 27) ---------------------------------------------------------------------

def test_the_bootstraps_pass_their_resamples_and_confidence_on_and_default_to_95_percent() -> None:
    values, differences = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0], [[1, 0], [0], [-1, 1, 1], [1]]
    assert bootstrap_mean(values, seed=3) == bootstrap_mean(values, seed=3, confidence=0.95)
    assert bootstrap_mean(values, seed=3, resamples=7) == row_bootstrap(values, [1] * 6, seed=3, resamples=7)
    assert bootstrap_mean(values, seed=3, resamples=7) != bootstrap_mean(values, seed=3)
    sums, counts = [1, 0, 1, 1], [2, 1, 3, 1]
    assert paired_bootstrap(differences, seed=3, resamples=7, confidence=0.5) == row_bootstrap(
        sums, counts, seed=3, resamples=7, confidence=0.5)
    assert paired_bootstrap(differences, seed=3, resamples=7, confidence=0.5) != paired_bootstrap(
        differences, seed=3, resamples=7)


def test_cohen_kappa_reads_the_second_rater_s_passes_from_its_own_column() -> None:
    # both yes 1, first yes only 2, both no 1: p_o 0.5, first 0.75, second 0.25, p_e 0.375, kappa 0.2.
    table = [(True, True)] + [(True, False)] * 2 + [(False, False)]
    assert cohen_kappa(table).kappa == pytest.approx(0.2)


def test_p_values_read_below_a_thousandth_or_to_three_decimals() -> None:
    assert (stats.p_text(0.0009), stats.p_text(0.001), stats.p_text(0.5)) == ("p < 0.001", "p = 0.001", "p = 0.500")


def _verdict(verdict: str, difference: float | None, low: float | None, high: float | None) -> stats.Comparison:
    return stats.Comparison(baseline="A", column="B", pairs=200, rows=200, baseline_rate=0.2, rate=0.8,
                            difference=difference, low=low, high=high, only_baseline=1, only_column=61,
                            p_value=0.0001, verdict=verdict, needed_rows=None)


def test_a_verdict_s_sentence_names_the_winner_by_its_points_and_interval_either_way() -> None:
    better = _verdict("better", 0.6, 0.52, 0.68)
    assert better.sentence() == "B better by 60 points (95% CI 52 to 68; McNemar p < 0.001; n=200)"
    assert better.to_dict()["winner"] == "B" and better.to_dict()["sentence"] == better.sentence()
    worse = _verdict("worse", -0.6, -0.68, -0.52)
    assert worse.sentence() == "A better by 60 points (95% CI 52 to 68; McNemar p < 0.001; n=200)"
    for half in (_verdict("better", 0.6, None, 0.68), _verdict("better", None, 0.52, 0.68)):
        assert half.sentence() == "no significant difference (n=200)"  # without a difference and both ends


def test_compare_paired_counts_rows_and_rates_and_passes_its_options_on() -> None:
    # Row 0: two repeats (B - A: +1, +1), row 1: one (0), row 2: three (+1, 0, -1); key (3, 0) only in A.
    a = {(0, 0): False, (0, 1): False, (1, 0): True, (2, 0): False, (2, 1): True, (2, 2): True, (3, 0): True}
    b = {(0, 0): True, (0, 1): True, (1, 0): True, (2, 0): True, (2, 1): True, (2, 2): False}
    result = compare_paired(a, b, baseline="A", column="B", seed=3, resamples=50, confidence=0.5, gap=0.2)
    assert (result.pairs, result.rows, result.baseline_rate, result.rate) == (6, 3, 0.5, 5 / 6)
    assert result.difference == pytest.approx(2 / 6)
    assert (result.low, result.high) == row_bootstrap([2, 0, 0], [2, 1, 3], seed=3, resamples=50, confidence=0.5)
    assert result.needed_rows == -(-rows_needed(4 / 6, gap=0.2) * 3 // 6)  # 1 pair only A passed, 3 only B
    assert compare_paired({}, {}, baseline="A", column="B").needed_rows is None


@pytest.mark.parametrize("interval", [(0.0, 0.3), (-0.3, 0.0), (-0.1, 0.3)])
def test_an_interval_touching_or_holding_zero_is_no_verdict(interval, monkeypatch) -> None:
    monkeypatch.setattr(stats, "row_bootstrap", lambda *args, **kwargs: interval)
    monkeypatch.setattr(stats, "mcnemar_exact", lambda b, c: 0.001)
    a, b = {(0, 0): True, (1, 0): False}, {(0, 0): False, (1, 0): True}
    assert compare_paired(a, b, baseline="A", column="B").verdict == "no significant difference"


def test_rows_needed_by_connor_s_formula_and_its_bounds() -> None:
    # (1.96 sqrt(0.5) + 0.8416 sqrt(0.5 - 0.01))^2 / 0.01 = 390.1: 391 pairs.
    assert rows_needed(0.5) == 391 and rows_needed(1.0, gap=1.0) == 4  # a gap of the whole share is allowed
    for gap in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"^the gap is a share in \(0, 1\], not {gap}$"):
            rows_needed(0.5, gap=gap)
    with pytest.raises(ValueError, match=r"^the discordant share is in \[0, 1\], not 1.5$"):
        rows_needed(1.5)


def test_a_wilson_interval_never_passes_one_though_its_float_sum_may() -> None:
    assert wilson_interval(9, 9)[1] == 1.0  # centre + half is 1.0000000000000002 here


def test_no_seed_is_the_fixed_seed_and_the_index_draws_hold_at_their_limit(monkeypatch) -> None:
    sums, counts = [1.0, 0.0, 2.0, 1.0], [1, 1, 2, 1]
    assert row_bootstrap(sums, counts, resamples=5) == row_bootstrap(sums, counts, resamples=5, seed=stats.SEED)
    monkeypatch.setattr(stats, "INDEX_DRAWS", 4 * 5)  # 4 rows x 5 resamples: still drawn by index
    at_limit = row_bootstrap(sums, counts, resamples=5, confidence=0.5)
    monkeypatch.setattr(stats, "INDEX_DRAWS", 4 * 5 + 1)
    assert row_bootstrap(sums, counts, resamples=5, confidence=0.5) == at_limit


def test_mcnemar_refuses_a_negative_count_in_words() -> None:
    with pytest.raises(ValueError, match=r"^counts are 0 or more, not -1 and 2$"):
        mcnemar_exact(-1, 2)


@pytest.mark.parametrize("index_draws", [stats.INDEX_DRAWS, 0])
def test_rows_of_unequal_size_divide_each_draw_by_its_own_count(index_draws, monkeypatch) -> None:
    """Two rows with the same ratio, one value and two: every draw's ratio is 1, drawn by index or by kinds."""
    monkeypatch.setattr(stats, "INDEX_DRAWS", index_draws)
    assert row_bootstrap([1.0, 2.0], [1, 2], resamples=50) == (1.0, 1.0)
    assert row_bootstrap([1.0, 2.0], [1, 2], resamples=1) == (1.0, 1.0)  # one resample is enough


def test_the_confidence_level_excludes_both_ends_and_errors_say_why() -> None:
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match=rf"^the confidence level is between 0 and 1, not {level}$"):
            wilson_interval(1, 2, level)
    with pytest.raises(ValueError, match="^every row has at least one value$"):
        row_bootstrap([1.0], [0])
    a, b = {(0, 0): True}, {(0, 0): False}
    assert compare_paired(a, b, baseline="A", column="B", gap=0.2).gap == 0.2


@pytest.mark.parametrize("size", [2, 3, 7, 10, 101, 1000])
@pytest.mark.parametrize("q", [0.01, 0.1, 0.5, 0.9, 0.99])
def test_percentile_is_the_stdlib_s_inclusive_cut_to_the_last_bit(size, q) -> None:
    draw = random.Random(size)
    ordered = sorted(draw.lognormvariate(0, 1) for _ in range(size))
    expected = std_statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]
    assert percentile(ordered, q) == expected


def test_percentile_of_one_value_is_it_and_of_none_is_none() -> None:
    assert percentile([2.5], 0.9) == 2.5
    assert percentile([], 0.5) is None
