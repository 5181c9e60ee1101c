"""Which boundaries cost more to read across: the step detector (pure; no I/O, no clock).

The read pass (:mod:`cardbench.geometry.timing`) reads a small block just before, straddling and
just after each boundary it samples, keeps the minimum of several tries of each (load only ever
adds time, so a minimum is the card's own figure), and hands over one *cost* per boundary:
``straddling - (before + after) / 2``, in seconds (flashbench -a's ``diff``). A card pays more to
read across the boundary of one of its allocation units (or pages) than across any other.

:func:`find_unit` tries the candidate units from the smallest up and takes the first whose
multiples stand out, judged three ways:

* the step: the median cost at its multiples minus the median elsewhere, at least 10 us and
  well above the spread of the other boundaries (robust z, from the median absolute deviation);
* the hit rate: nearly all of its multiples cost more than halfway up that step. A unit twice
  too small has only half its multiples costly, a 4 MiB guess of a 12 MiB AU a third (so it
  fails), while a unit too large would also pass: hence the smallest first;
* chance: a busy machine leaves some boundaries costly by accident. Taking the rate of costly
  boundaries among the non-multiples as the rate of accidents, the binomial probability of as
  many costly multiples by accident, times the number of candidates tried (Bonferroni), must
  be tiny. Two or three multiples (a 64 MiB AU) are thus only taken on a quiet machine.

Anything less is "none": no unit, never a guess.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Sequence

#: a found value's confidence: "high", "low", or "none" (nothing found, the value is null)
CONFIDENCES = ("high", "low", "none")
#: smallest step taken for one (seconds): below it a timer or a busy host could make it up
MIN_STEP = 10e-6
#: the spread of the costs is taken as at least this (seconds): a clock's resolution
MIN_NOISE = 1e-6
#: share of the unit's multiples that must be costly: high, low
HIT_HIGH, HIT_LOW = 0.9, 0.75
#: robust z of the step: high, low
Z_HIGH, Z_LOW = 5.0, 3.5
#: chance of as many costly multiples by accident, times the candidates tried: high, low
P_HIGH, P_LOW = 1e-6, 1e-3


@dataclass
class StepFinding:
    """What :func:`find_unit` found.

    unit        the unit (same units as the offsets, bytes), or None ("no boundary found")
    confidence  "high" | "low" | "none"
    step        median extra cost at the unit's boundaries over the other boundaries (seconds)
    noise       spread of the other boundaries' costs (1.4826 x MAD, seconds)
    multiples   boundaries sampled at multiples of the unit; costly: how many of them were costly
    false_rate  share of the other boundaries that were costly (accidents)
    p_value     chance of as many costly multiples by accident, times the candidates tried
    reason      one line saying why (for "none" and "low")
    """

    unit: int | None
    confidence: str
    step: float | None = None
    noise: float | None = None
    multiples: int = 0
    costly: int = 0
    false_rate: float | None = None
    p_value: float | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def mad(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: a standard deviation that outliers do not move."""
    if not values:
        return 0.0
    m = statistics.median(values)
    return 1.4826 * statistics.median([abs(v - m) for v in values])


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
             for i in range(k, n + 1))
    return min(1.0, sum(math.exp(t) for t in terms))


def judge(unit: int, at: Sequence[float], off: Sequence[float], tried: int, min_step: float = MIN_STEP) -> StepFinding:
    """One candidate: the costs at its multiples (``at``) against the others (``off``)."""
    step = statistics.median(at) - statistics.median(off)
    noise = max(mad(off), MIN_NOISE)
    half = statistics.median(off) + step / 2
    costly = sum(1 for c in at if c > half)
    false_rate = (sum(1 for c in off if c > half) + 1) / (len(off) + 2)
    p = min(1.0, tried * binomial_tail(costly, len(at), false_rate))
    f = StepFinding(unit, "none", step=step, noise=noise, multiples=len(at), costly=costly,
                    false_rate=false_rate, p_value=p)
    hit, z = costly / len(at), step / noise
    if step < min_step or z < Z_LOW or hit < HIT_LOW or p > P_LOW:
        f.reason = (f"no clear step: at best {costly} of the {len(at)} boundaries at multiples of {unit} B cost "
                    f"{step * 1e6:.1f} us more (spread {noise * 1e6:.1f} us, {false_rate:.1%} of the others as "
                    f"costly, chance {p:.2g})")
        return f
    if hit >= HIT_HIGH and z >= Z_HIGH and p <= P_HIGH and len(at) >= 3:
        f.confidence = "high"
    else:
        f.confidence = "low"
        f.reason = (f"{costly} of {len(at)} boundaries cost {step * 1e6:.1f} us more (spread {noise * 1e6:.1f} us, "
                    f"chance {p:.2g})")
    return f


def find_unit(offsets: Sequence[int], costs: Sequence[float], candidates: Sequence[int], *,
              min_step: float = MIN_STEP) -> StepFinding:
    """The smallest candidate unit whose multiples stand out (see the module text).

    ``offsets``: the boundaries sampled (bytes from the device's start); ``costs``: the cost of
    reading across each (seconds); ``candidates``: the units to try (bytes)."""
    if len(offsets) != len(costs):
        raise ValueError("one cost per offset")
    n = len(offsets)
    cands = []
    for c in sorted(set(candidates)):
        on = [i for i, off in enumerate(offsets) if c > 0 and off % c == 0]
        if 2 <= len(on) < n:
            cands.append((c, on))
    if n < 8 or not cands:
        return StepFinding(None, "none", reason="too few boundaries sampled to judge a step")
    best: StepFinding | None = None
    for unit, on in cands:
        mark = set(on)
        f = judge(unit, [costs[i] for i in on], [costs[i] for i in range(n) if i not in mark], len(cands), min_step)
        if f.confidence != "none":
            return f
        if best is None or (f.costly / f.multiples, f.step or 0) > (best.costly / best.multiples, best.step or 0):
            best = f
    assert best is not None
    best.unit = None
    return best
