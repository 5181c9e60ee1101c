import statistics

import pytest

from cardbench.stats import percentiles, summarize


def test_summary_figures():
    s = summarize([10.0, 12.0, 11.0])
    assert s.median == 11.0 and s.mean == pytest.approx(11.0)
    assert s.min == 10.0 and s.max == 12.0
    assert s.stdev == pytest.approx(statistics.stdev([10, 12, 11]))
    # t(0.975, 2) = 4.303; half width = 4.303 * 1 / sqrt(3)
    lo, hi = s.ci95
    assert hi - 11.0 == pytest.approx(4.303 / 3 ** 0.5, rel=1e-3)
    assert lo == pytest.approx(22.0 - hi)


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
