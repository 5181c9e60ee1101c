"""Repetitions to figures: median, mean, spread, a 95% confidence interval, and outliers.

The confidence interval of the mean rate uses Student's t (two-sided, 95%); with one run it is
undefined (None). Figures are computed on per-run rates (bytes/seconds), never on averaged
times, so a slow run weighs as it should.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

# Two-sided 95% Student t quantiles for df = 1..30; beyond 30 the normal 1.96 is close enough
# for the run counts a card benchmark uses.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df: int) -> float:
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    return _T95[df - 1] if df <= len(_T95) else 1.96


@dataclass(frozen=True)
class Summary:
    """Figures of a set of repeated measurements of one quantity (e.g. bytes/s)."""

    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float | None          # sample standard deviation; None for n < 2
    ci95: tuple[float, float] | None   # 95% CI of the mean; None for n < 2
    cv: float | None             # coefficient of variation (stdev / mean)
    outliers: list[int]          # indices of runs further than 3 MAD from the median

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci95"] = list(self.ci95) if self.ci95 else None
        return d


def summarize(values: list[float]) -> Summary:
    """Summarise repeated measurements. Raises ValueError on an empty list."""
    if not values:
        raise ValueError("no values to summarise")
    vals = [float(v) for v in values]
    n = len(vals)
    med = statistics.median(vals)
    mean = statistics.fmean(vals)
    if n >= 2:
        sd = statistics.stdev(vals)
        half = t95(n - 1) * sd / math.sqrt(n)
        ci = (mean - half, mean + half)
        cv = sd / mean if mean else None
    else:
        sd, ci, cv = None, None, None
    mad = statistics.median([abs(v - med) for v in vals]) if n >= 3 else 0.0
    outliers = [i for i, v in enumerate(vals) if mad > 0 and abs(v - med) > 3 * 1.4826 * mad]
    return Summary(n=n, median=med, mean=mean, min=min(vals), max=max(vals), stdev=sd, ci95=ci, cv=cv,
                   outliers=outliers)


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval of the median: the k-th smallest and the k-th
    largest value, k the largest rank with P(Binomial(n, 1/2) < k) <= (1 - level) / 2, so the
    interval covers the true median with at least ``level`` probability whatever the
    distribution (9 values: the 2nd and 8th, 96%; 16 values: the 4th and 13th, 98%). None when
    there are too few values for the level (fewer than 6 at 95%)."""
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    s = sorted(values)
    n = len(s)
    tail = (1 - level) / 2
    k = 0
    below = 0.0        # P(B <= k - 1), B ~ Binomial(n, 1/2)
    while k < n:
        p = math.comb(n, k) / 2 ** n
        if below + p > tail:
            break
        below += p
        k += 1
    if k == 0:
        return None
    return s[k - 1], s[n - k]


def percentiles(values: list[float], points: tuple[float, ...] = (50, 90, 99, 99.9)) -> dict[str, float]:
    """Percentiles by linear interpolation between closest ranks, plus "max".

    Keys: "p50", "p90", "p99", "p99.9", "max" (format of the point with trailing ".0" dropped).
    """
    if not values:
        return {}
    s = sorted(values)
    out: dict[str, float] = {}
    for p in points:
        k = (len(s) - 1) * p / 100.0
        lo = math.floor(k)
        hi = min(lo + 1, len(s) - 1)
        out["p" + (f"{p:g}")] = s[lo] + (s[hi] - s[lo]) * (k - lo)
    out["max"] = s[-1]
    return out
