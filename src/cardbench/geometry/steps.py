"""Which boundaries cost more to read across: the step detector (pure; no I/O, no clock).

The read pass (:mod:`cardbench.geometry.timing`) reads a small block just before, straddling and
just after each boundary it samples, keeps the minimum of several tries of each (load only ever
adds time, so a minimum is the card's own figure), and hands over one *cost* per boundary:
``straddling - (before + after) / 2``, in seconds (flashbench -a's ``diff``). A card pays more to
read across the boundary of one of its allocation units (or pages) than across any other.

:func:`find_unit` asks, for each candidate unit, whether the costly boundaries are exactly its
multiples. Every split of the boundaries into "costly" (the k highest costs) and "not" is
scored against every candidate by F1 (the harmonic mean of *precision*, the costly boundaries
that are multiples of the unit, and *recall*, the multiples that are costly): the true unit
scores 1, its double or half about 0.67, a non-power-of-two like 12 MiB against 4 MiB 0.5. The
best (unit, split) is then judged: its step (median cost at its multiples minus median elsewhere)
must be well above the spread of the other boundaries (robust z, from the median absolute
deviation) and above a floor of 10 us, with at least two multiples sampled. Anything less is
"none": no unit, never a guess.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Sequence

#: a found value's confidence: "high", "low", or "none" (nothing found, the value is null)
CONFIDENCES = ("high", "low", "none")
#: smallest step taken for one (seconds): below it a timer or a busy host could make it up
MIN_STEP = 10e-6
#: the spread of the costs is taken as at least this (seconds): a clock's resolution
MIN_NOISE = 1e-6
#: F1 at or above: high confidence (with Z_HIGH); at or above F1_LOW: low; below: none
F1_HIGH, F1_LOW = 0.9, 0.75
#: robust z of the step: high, low
Z_HIGH, Z_LOW = 5.0, 3.5


@dataclass
class StepFinding:
    """What :func:`find_unit` found.

    unit        the unit (same units as the offsets, bytes), or None ("no boundary found")
    confidence  "high" | "low" | "none"
    f1          how well the costly boundaries are the unit's multiples (1 = exactly)
    step        median extra cost at the unit's boundaries over the other boundaries (seconds)
    noise       spread of the other boundaries' costs (1.4826 x MAD, seconds)
    multiples   boundaries sampled at multiples of the unit; costly: how many were judged costly
    reason      one line saying why (for "none" and "low")
    """

    unit: int | None
    confidence: str
    f1: float = 0.0
    step: float | None = None
    noise: float | None = None
    multiples: int = 0
    costly: int = 0
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def mad(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: a standard deviation that outliers do not move."""
    if not values:
        return 0.0
    m = statistics.median(values)
    return 1.4826 * statistics.median([abs(v - m) for v in values])


def find_unit(offsets: Sequence[int], costs: Sequence[float], candidates: Sequence[int], *,
              min_step: float = MIN_STEP) -> StepFinding:
    """The unit whose multiples are exactly the costly boundaries, judged (see the module text).

    ``offsets``: the boundaries sampled (bytes from the device's start); ``costs``: the cost of
    reading across each (seconds); ``candidates``: the units to try (bytes; each should leave some
    sampled boundaries that are not its multiples)."""
    if len(offsets) != len(costs):
        raise ValueError("one cost per offset")
    n = len(offsets)
    cands = [c for c in sorted(set(candidates)) if c > 0]
    multiples = {c: [i for i, off in enumerate(offsets) if off % c == 0] for c in cands}
    cands = [c for c in cands if 2 <= len(multiples[c]) < n]
    if n < 8 or not cands:
        return StepFinding(None, "none", reason="too few boundaries sampled to judge a step")
    divides: list[list[int]] = [[] for _ in range(n)]
    for ci, c in enumerate(cands):
        for i in multiples[c]:
            divides[i].append(ci)
    order = sorted(range(n), key=lambda i: costs[i], reverse=True)
    mult = [len(multiples[c]) for c in cands]
    tp = [0] * len(cands)
    best = (-1.0, 0, 0)   # (f1, k, -candidate index): ties go to the larger split, then the smaller unit
    for k in range(1, n // 2 + n // 10 + 1):
        for ci in divides[order[k - 1]]:
            tp[ci] += 1
        for ci in range(len(cands)):
            if tp[ci]:
                f1 = 2 * tp[ci] / (k + mult[ci])
                key = (round(f1, 9), k, -ci)
                if key > best:
                    best = key
    f1, k, neg = best
    if f1 <= 0:
        return StepFinding(None, "none", reason="no boundary costs more than the others")
    unit = cands[-neg]
    on = set(multiples[unit])
    at = [costs[i] for i in on]
    off = [costs[i] for i in range(n) if i not in on]
    step = statistics.median(at) - statistics.median(off)
    noise = max(mad(off), MIN_NOISE)
    costly = len(on & set(order[:k]))
    finding = StepFinding(unit, "high", f1=f1, step=step, noise=noise, multiples=len(on), costly=costly)
    z = step / noise
    if step < min_step or z < Z_LOW or f1 < F1_LOW:
        finding.unit, finding.confidence = None, "none"
        finding.reason = (f"no clear step: the best fit ({unit} B) explains the costly boundaries at F1 {f1:.2f}, "
                          f"its step is {step * 1e6:.1f} us against a spread of {noise * 1e6:.1f} us")
    elif f1 < F1_HIGH or z < Z_HIGH or len(on) < 3:
        finding.confidence = "low"
        finding.reason = (f"a step of {step * 1e6:.1f} us (spread {noise * 1e6:.1f} us) at F1 {f1:.2f} over "
                          f"{len(on)} boundaries")
    return finding
