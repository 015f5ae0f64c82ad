"""Statistics that answer "is B better than A on these rows?": pure functions of counts and arrays.

* `wilson_interval`: a pass rate's 95% Wilson score interval (Wilson 1927; what
  ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")`` gives).
* `bootstrap_mean`: a mean's percentile bootstrap interval, resampling rows (seeded);
  `paired_bootstrap` does it for the per-row differences of two columns.
* `mcnemar_exact`: the exact (binomial) McNemar p-value on the discordant pairs
  (``scipy.stats.binomtest(b, b + c, 0.5).pvalue``).
* `cohen_kappa`: agreement of two raters on pass / fail beyond chance (Cohen 1960).
* `rows_needed`: pairs needed to detect a gap in paired pass rates (Connor 1987).
* `percentile`: one cut of values kept in order, as ``statistics.quantiles(n=100,
  method="inclusive")`` gives it (the summary's p50 and p90 times).
* `compare_paired`: all of it for two columns, with a verdict in words (`Comparison`).

Every formula is written here and checked against scipy in the tests; scipy is not needed
at run time. numpy is imported on the first bootstrap.

The bootstrap resamples *rows*, keeping a row's repeats together (they are not independent:
the same question). While rows × resamples stays under `INDEX_DRAWS` it draws row indices
exactly as ``scipy.stats.bootstrap(..., method="percentile")`` does with the same seed,
so the two give the same interval. Past that it draws how many times each *kind* of row (its
sum and count, often a handful of kinds) is picked, as multinomial counts: the same bootstrap
distribution, in time that does not grow with the rows (30,000 cells in milliseconds).
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

#: Bootstrap resamples (scipy's default).
RESAMPLES = 9999
#: The seed of every bootstrap unless one is given: the same data, the same interval.
SEED = 0
#: Row indices drawn at most by the index resampling (rows × resamples); past it, multinomial counts.
INDEX_DRAWS = 2_000_000
#: The gap in pass rate the sample size is given for (10 points).
GAP = 0.10
#: Significance level and power of the verdict and the sample size.
ALPHA = 0.05
POWER = 0.80


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"the confidence level is between 0 and 1, not {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(passed: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion `passed` / `n` (None when `n` is 0).

    Raises:
        ValueError: `passed` outside 0..`n`, or a confidence level outside (0, 1).
    """
    if n == 0:
        return None
    if not 0 <= passed <= n:
        raise ValueError(f"passed is between 0 and n={n}, not {passed}")
    z = _z(confidence)
    p, z2 = passed / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The ``q`` cut (0.01 .. 0.99, in hundredths) of ``ordered`` (ascending), or None when empty.

    ``statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]``, the same float,
    for the one cut asked: two reads and no list of 99 cuts. One value is its own percentile."""
    if len(ordered) < 2:
        return ordered[0] if ordered else None
    j, delta = divmod(round(q * 100) * (len(ordered) - 1), 100)
    return (ordered[j] * (100 - delta) + ordered[j + 1] * delta) / 100


def _rng(seed: int | None) -> Any:
    import numpy as np

    return np.random.default_rng(SEED if seed is None else seed)


def _quantiles(means: Any, confidence: float) -> tuple[float, float]:
    import numpy as np

    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _resampled_ratios(sums: Sequence[float], counts: Sequence[int], resamples: int, rng: Any) -> Any:
    """Σ sums / Σ counts over `resamples` draws of len(sums) rows with replacement.

    Row indices drawn as scipy's bootstrap draws them (``rng.integers(0, n, (resamples, n))``)
    while that is at most `INDEX_DRAWS`; else each distinct (sum, count) kind's multinomial count.
    """
    import numpy as np

    n = len(sums)
    if n * resamples <= INDEX_DRAWS:
        picks = rng.integers(0, n, (resamples, n))
        drawn = np.asarray(sums, dtype=float)[picks].sum(axis=1)
        if min(counts) == max(counts):  # every row as many values (one per repeat): n of them in each draw
            return drawn / (n * counts[0])
        return drawn / np.asarray(counts, dtype=float)[picks].sum(axis=1)
    kinds = Counter(zip(sums, counts))
    values = np.array(list(kinds), dtype=float)  # (kinds, 2): sum, count
    drawn = rng.multinomial(n, np.fromiter(kinds.values(), dtype=float, count=len(kinds)) / n, size=resamples)
    return (drawn @ values[:, 0]) / (drawn @ values[:, 1])  # drawn: (resamples, kinds), times each kind is picked


def row_bootstrap(sums: Sequence[float], counts: Sequence[int], *, seed: int | None = None,
                  resamples: int = RESAMPLES, confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of Σ sums / Σ counts, resampling rows (a row: the sum of its
    values and how many; its repeats stay together). None without rows.

    Raises:
        ValueError: lengths differ, a row with no value, resamples < 1, a bad confidence level.
    """
    if len(sums) != len(counts):
        raise ValueError(f"{len(sums)} sums and {len(counts)} counts: one of each per row")
    if not len(sums):
        return None
    if resamples < 1:
        raise ValueError(f"resamples is 1 or more, not {resamples}")
    _z(confidence)
    if min(counts) <= 0:
        raise ValueError("every row has at least one value")
    return _quantiles(_resampled_ratios(sums, counts, resamples, _rng(seed)), confidence)


def bootstrap_mean(values: Sequence[float], *, seed: int | None = None, resamples: int = RESAMPLES,
                   confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of `values` (one per row); None when empty."""
    return row_bootstrap(values, [1] * len(values), seed=seed, resamples=resamples, confidence=confidence)


def paired_bootstrap(differences: Sequence[Sequence[float]], *, seed: int | None = None, resamples: int = RESAMPLES,
                     confidence: float = 0.95) -> tuple[float, float] | None:
    """Interval of the mean paired difference: `differences` holds, per row, the differences of
    its pairs (B − A: +1, 0, -1 for pass / fail; one per repeat). Rows without pairs are left out."""
    rows = [row for row in differences if len(row)]
    return row_bootstrap([sum(row) for row in rows], [len(row) for row in rows], seed=seed, resamples=resamples,
                         confidence=confidence)


def mcnemar_exact(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value: `b` pairs where only A passed, `c` where only B did.

    Under no difference each discordant pair is A's or B's with probability 1/2, so
    p = min(1, 2 P(X <= min(b, c))) for X ~ Binomial(b + c, 1/2), summed in exact integers.

    Raises:
        ValueError: a negative count.
    """
    b, c = operator.index(b), operator.index(c)  # Python ints (numpy's would overflow below)
    if b < 0 or c < 0:
        raise ValueError(f"counts are 0 or more, not {b} and {c}")
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    term, tail = 1, 1  # C(n, 0)
    for i in range(1, k + 1):
        term = term * (n - i + 1) // i
        tail += term
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True, slots=True)
class Agreement:
    """Two raters on the same items: `n` items, `percent` agreeing (0-100), Cohen's `kappa`
    (None when undefined: no items, or both raters gave one same answer throughout)."""

    n: int
    percent: float | None
    kappa: float | None


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """Agreement of two raters' pass / fail on the same items: (first, second) per item.

    kappa = (p_o - p_e) / (1 - p_e): p_o the share agreeing, p_e the share expected by chance
    from each rater's own pass rate."""
    table = Counter((bool(x), bool(y)) for x, y in pairs)
    n = sum(table.values())
    if n == 0:
        return Agreement(0, None, None)
    observed = (table[True, True] + table[False, False]) / n
    first = (table[True, True] + table[True, False]) / n
    second = (table[True, True] + table[False, True]) / n
    chance = first * second + (1 - first) * (1 - second)
    kappa = None if chance == 1.0 else (observed - chance) / (1 - chance)
    return Agreement(n, observed * 100, kappa)


def rows_needed(discordant: float, *, gap: float = GAP, alpha: float = ALPHA, power: float = POWER) -> int:
    """Pairs needed for a paired test at level `alpha` to find a difference of `gap` in pass rate
    with probability `power`, when a share `discordant` of pairs disagree (Connor 1987):
    n = (z_(1-alpha/2) sqrt(psi) + z_power sqrt(psi - gap^2))^2 / gap^2, psi at least `gap` (a gap
    needs that many disagreeing pairs at the least).

    Raises:
        ValueError: a gap outside (0, 1], a share outside [0, 1].
    """
    if not 0.0 < gap <= 1.0:
        raise ValueError(f"the gap is a share in (0, 1], not {gap}")
    if not 0.0 <= discordant <= 1.0:
        raise ValueError(f"the discordant share is in [0, 1], not {discordant}")
    psi = max(discordant, gap)
    normal = NormalDist()
    a, b = normal.inv_cdf(1 - alpha / 2), normal.inv_cdf(power)
    return math.ceil((a * math.sqrt(psi) + b * math.sqrt(psi - gap * gap)) ** 2 / (gap * gap))


def _percent(share: float) -> str:
    return f"{share * 100:.0f}"


def p_text(p: float) -> str:
    """A p-value as read: ``p < 0.001`` or ``p = 0.034``."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


@dataclass(frozen=True, slots=True)
class Comparison:
    """Column `column` (B) against `baseline` (A) on the same rows and repeats.

    Attributes:
        pairs: (row, repeat) pairs where both have a pass / fail (skipped runs left out); rows: their rows.
        baseline_rate, rate: A's and B's pass rates over those pairs (None without pairs).
        difference: rate - baseline_rate; low, high: its paired-bootstrap interval (rows resampled).
        only_baseline, only_column: discordant pairs (only A passed; only B passed).
        p_value: exact McNemar on the discordant pairs.
        verdict: ``better`` or ``worse`` (B against A: p < `ALPHA` and the interval excludes 0), or
            ``no significant difference``.
        needed_rows: rows needed to detect a `gap` with `POWER` at the observed disagreement (`rows_needed`).
        confidence, gap: of the interval and of `needed_rows`.
    """

    baseline: str
    column: str
    pairs: int
    rows: int
    baseline_rate: float | None
    rate: float | None
    difference: float | None
    low: float | None
    high: float | None
    only_baseline: int
    only_column: int
    p_value: float
    verdict: str
    needed_rows: int | None
    confidence: float = 0.95
    gap: float = GAP

    @property
    def winner(self) -> str | None:
        return {"better": self.column, "worse": self.baseline}.get(self.verdict)

    def sentence(self) -> str:
        """The verdict in words: ``A better by 30 points (95% CI 22 to 38; McNemar p < 0.001; n=200)``
        or ``no significant difference (n=20, need ≈ 390 rows to detect a 10-point gap)``."""
        n = f"n={self.rows}" + (f" rows, {self.pairs} pairs" if self.pairs != self.rows else "")
        if self.winner is None or self.difference is None or self.low is None or self.high is None:
            need = (f", need ≈ {self.needed_rows:,} rows to detect a {_percent(self.gap)}-point gap"
                    if self.needed_rows else "")
            return f"no significant difference ({n}{need})"
        sign = 1 if self.verdict == "better" else -1
        low, high = sorted((sign * self.low, sign * self.high))
        return (f"{self.winner} better by {_percent(sign * self.difference)} points ({self.confidence:.0%} CI "
                f"{_percent(low)} to {_percent(high)}; McNemar {p_text(self.p_value)}; {n})")

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        out.update(winner=self.winner, sentence=self.sentence())
        return out


def compare_paired(baseline_runs: dict[tuple[int, int], bool], runs: dict[tuple[int, int], bool], *, baseline: str,
                   column: str, seed: int | None = None, resamples: int = RESAMPLES, confidence: float = 0.95,
                   gap: float = GAP) -> Comparison:
    """`column` against `baseline` from their pass / fail per (row, repeat); the pairs are the keys
    both have. The interval resamples rows (a row's repeats together); McNemar counts pairs."""
    sums: dict[int, int] = {}  # per row: Σ (B - A) over its pairs
    counts: dict[int, int] = {}  # per row: its pairs
    only_a = only_b = a_passed = b_passed = 0
    for key, a in baseline_runs.items():
        b = runs.get(key)
        if b is None:
            continue
        a_passed += a
        b_passed += b
        only_a += a and not b
        only_b += b and not a
        row = key[0]
        sums[row] = sums.get(row, 0) + b - a
        counts[row] = counts.get(row, 0) + 1
    pairs, rows = sum(counts.values()), len(counts)
    p = mcnemar_exact(only_a, only_b)
    interval = row_bootstrap(list(sums.values()), list(counts.values()), seed=seed, resamples=resamples,
                             confidence=confidence)
    difference = (b_passed - a_passed) / pairs if pairs else None
    verdict = "no significant difference"
    if interval is not None and p < ALPHA and (interval[0] > 0 or interval[1] < 0):
        verdict = "better" if interval[0] > 0 else "worse"
    needed = None
    if pairs:
        needed = math.ceil(rows_needed((only_a + only_b) / pairs, gap=gap) * rows / pairs)
    rates = (a_passed / pairs, b_passed / pairs) if pairs else (None, None)
    return Comparison(baseline, column, pairs, rows, *rates, difference, *(interval or (None, None)), only_a, only_b, p,
                      verdict, needed, confidence, gap)
