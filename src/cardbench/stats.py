"""Repetitions to figures: median, mean, spread, a 95% confidence interval, and outliers.

Figures are computed on per-run rates (bytes/seconds), never on averaged times, so a slow run
weighs as it should.

The 95% confidence interval is computed on the log scale when every value is positive (rates,
IOPS): Student's t on the logarithms, then exponentiated, an interval of the geometric mean.
Why: a rate cannot go below zero, and the noise of a transfer is multiplicative (a run that is
disturbed takes k times longer, it does not lose a fixed number of MB/s), so rates are skewed
to the right; a symmetric interval on the rates themselves reached below zero on a noisy path
(29-47% spread, issue 24). The log interval is always positive, asymmetric as the data are, and
for a small spread equal to the usual one to within a fraction of the spread. With a value of
zero or below the plain t interval is used, clipped at zero when every value is >= 0 (stated in
``ci_method``). With one run it is undefined (None).

``spread`` is (max - min) / median; above ``WIDE_SPREAD`` (20%) ``too_wide`` is set: the runs
disagree too much to judge a label by (:mod:`cardbench.verdicts.claims` makes such a verdict
inconclusive and says so).
"""

from __future__ import annotations

import functools
import math
import statistics
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

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
    ci95: tuple[float, float] | None   # 95% CI (geometric mean, log scale; see the module docstring)
    cv: float | None             # coefficient of variation (stdev / mean)
    outliers: list[int]          # indices of runs further than 3 MAD from the median
    ci_method: str | None = None  # "log-t" | "t" | "t, clipped at 0" | None (one run)
    spread: float | None = None   # (max - min) / median; None for n < 2 or a median of 0
    too_wide: bool = False        # spread > WIDE_SPREAD: too wide to judge a label by

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci95"] = list(self.ci95) if self.ci95 else None
        return d


#: (max - min) / median above which runs disagree too much to judge a label by
WIDE_SPREAD = 0.20


def _stdev(vals: list[float]) -> float:
    """The sample standard deviation (n >= 2), by the corrected two-pass algorithm (Chan, Golub
    and LeVeque, 1983) with exact sums (math.fsum): the second sum takes out the error of the
    rounded mean, so values a few ulps apart get their spread too. Within a few ulps of
    ``statistics.stdev``, which works in exact fractions and took most of the time of a summary
    (the station server summarises every test it is sent). OverflowError past a float's range,
    as ``statistics.stdev``."""
    m = math.fsum(vals) / len(vals)
    d = [v - m for v in vals]
    ss = math.fsum([x * x for x in d]) - math.fsum(d) ** 2 / len(vals)
    return math.sqrt(max(0.0, ss) / (len(vals) - 1))


def _interval(vals: list[float]) -> tuple[tuple[float, float], str]:
    """The 95% interval of ``vals`` (n >= 2) and how it was computed (module docstring)."""
    n = len(vals)
    t = t95(n - 1)
    if all(v > 0 for v in vals):
        logs = [math.log(v) for v in vals]
        m, sd = statistics.fmean(logs), _stdev(logs)
        half = t * sd / math.sqrt(n)
        return (math.exp(m - half), math.exp(m + half)), "log-t"
    mean, sd = statistics.fmean(vals), _stdev(vals)
    half = t * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if all(v >= 0 for v in vals) and lo < 0:
        return (0.0, hi), "t, clipped at 0"
    return (lo, hi), "t"


def summarize(values: list[float]) -> Summary:
    """Summarise repeated measurements. Raises ValueError on an empty list.

    The same values (bit for bit) give the same summary, kept for the last 1024 sets: a document
    is summarised each time it is written out (``Result.to_dict``), twice for each record the
    station server takes in."""
    if not values:
        raise ValueError("no values to summarise")
    s = _summarize(array("d", [float(v) for v in values]).tobytes())
    return replace(s, outliers=list(s.outliers))        # a list of its own for each caller


@functools.lru_cache(maxsize=1024)
def _summarize(packed: bytes) -> Summary:
    vals = array("d", packed).tolist()
    n = len(vals)
    med = statistics.median(vals)
    mean = statistics.fmean(vals)
    method = None
    spread = None
    if n >= 2:
        sd = _stdev(vals)
        ci, method = _interval(vals)
        cv = sd / mean if mean else None
        spread = (max(vals) - min(vals)) / med if med > 0 else None
    else:
        sd, ci, cv = None, None, None
    mad = statistics.median([abs(v - med) for v in vals]) if n >= 3 else 0.0
    outliers = [i for i, v in enumerate(vals) if mad > 0 and abs(v - med) > 3 * 1.4826 * mad]
    return Summary(n=n, median=med, mean=mean, min=min(vals), max=max(vals), stdev=sd, ci95=ci, cv=cv,
                   outliers=outliers, ci_method=method, spread=spread,
                   too_wide=spread is not None and spread > WIDE_SPREAD)


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


def percentiles(values: Sequence[float], points: tuple[float, ...] = (50, 90, 99, 99.9)) -> dict[str, float]:
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
