import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.stats import median_ci, percentiles, summarize


def test_summary_figures():
    s = summarize([10.0, 12.0, 11.0])
    assert s.median == 11.0 and s.mean == pytest.approx(11.0)
    assert s.min == 10.0 and s.max == 12.0
    assert s.stdev == pytest.approx(statistics.stdev([10, 12, 11]))
    # on the log scale: t(0.975, 2) = 4.303; exp(mean(log x) +- 4.303 * sd(log x) / sqrt(3))
    logs = [math.log(v) for v in (10, 12, 11)]
    half = 4.303 * statistics.stdev(logs) / 3 ** 0.5
    lo, hi = s.ci95
    assert lo == pytest.approx(math.exp(statistics.fmean(logs) - half), rel=1e-3)
    assert hi == pytest.approx(math.exp(statistics.fmean(logs) + half), rel=1e-3)
    assert s.ci_method == "log-t" and not s.too_wide and s.spread == pytest.approx(2 / 11)


def test_a_noisy_rate_has_a_positive_interval_and_is_too_wide_to_judge():
    """Issue 24: a path with a 29-47% spread gave a 95% interval reaching below zero."""
    rates = [4.0e6, 2.1e6, 6.2e6]
    s = summarize(rates)
    lo, hi = s.ci95
    mean, half = statistics.fmean(rates), 4.303 * statistics.stdev(rates) / 3 ** 0.5
    assert mean - half < 0            # the symmetric interval reaches below zero
    assert 0 < lo < min(rates) and hi > max(rates)
    assert s.too_wide and s.spread > 0.2


def test_values_with_a_zero_use_the_plain_interval_clipped():
    s = summarize([0.0, 1.0, 9.0])
    assert s.ci_method == "t, clipped at 0" and s.ci95[0] == 0.0


def test_single_run_has_no_spread():
    s = summarize([5.0])
    assert s.stdev is None and s.ci95 is None


def test_outlier_flagged():
    s = summarize([10.0, 10.1, 9.9, 10.0, 30.0])
    assert s.outliers == [4]


def test_percentiles():
    p = percentiles(list(range(1, 101)))
    assert p["p50"] == pytest.approx(50.5) and p["max"] == 100
    assert p["p99.9"] == pytest.approx(99.901)


def test_median_ci_ranks():
    # 9 values: the 2nd and 8th (P(B <= 1) = 10/512 <= 2.5%, P(B <= 2) = 46/512 > 2.5%)
    assert median_ci(list(range(9, 0, -1))) == (2, 8)
    # 16 values: the 4th and 13th (697/65536 <= 2.5% < 2517/65536)
    assert median_ci([float(v) for v in range(1, 17)]) == (4.0, 13.0)
    # 6 is the fewest values with a 95% interval (the extremes, 1 - 2/64); 5 have none
    assert median_ci([3, 1, 2, 6, 5, 4]) == (1, 6)
    assert median_ci([1, 2, 3, 4, 5]) is None
    assert median_ci([1, 2, 3, 4, 5], level=0.9) == (1, 5)
    with pytest.raises(ValueError):
        median_ci([1, 2, 3], level=1.0)


def test_median_ci_covers_the_median():
    # the stated coverage holds on a skewed distribution: draws of 16 from an exponential
    import random
    rng = random.Random(7)
    true_median = __import__("math").log(2)
    hits = 0
    trials = 2000
    for _ in range(trials):
        lo, hi = median_ci([rng.expovariate(1.0) for _ in range(16)])
        hits += lo <= true_median <= hi
    # exact coverage with 16 values is 1 - 2 * 697/65536 = 97.9%
    assert 0.965 <= hits / trials <= 0.99



@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.lists(st.floats(min_value=1e-6, max_value=1e12), min_size=2, max_size=60),
    # values a few ulps apart: the rounded mean's error is of the spread's own size
    st.tuples(st.floats(min_value=1e-6, max_value=1e12), st.lists(st.integers(0, 8), min_size=2, max_size=20))
    .map(lambda b: [b[0] + k * math.ulp(b[0]) for k in b[1]])))
def test_the_standard_deviation_is_the_exact_one_to_a_few_ulps(vals):
    # stats' own fsum stdev; statistics.stdev (exact fractions, correctly rounded) is the reference
    got, want = summarize(vals).stdev, statistics.stdev(vals)
    assert got == pytest.approx(want, rel=1e-9, abs=0.0)
