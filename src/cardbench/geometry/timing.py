"""The read pass: time small reads around boundaries and find the AU and the page (read-only).

flashbench -a's idea, widened: for every boundary sampled, read ``read_bytes`` just before it,
straddling it and just after it, ``repeats`` times each in a shuffled order over all boundaries
(a burst of load lands on random boundaries, not on one candidate), keep each read's minimum,
and take ``straddling - (before + after) / 2`` as the boundary's cost. Boundaries are sampled
every 256 KiB over three times the largest AU tried (so every AU candidate, a multiple of
512 KiB up to 64 MiB, has at least two multiples and boundaries between them), and, for the
page, every 2 KiB over 1 MiB in the middle of the device (leaving out the 512 KiB boundaries).
:func:`cardbench.geometry.steps.find_unit` judges the costs.

All reads go through the I/O layer (:class:`cardbench.engine.data.DataFile`, O_DIRECT, an
aligned buffer).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.errors import TargetError
from cardbench.geometry.doc import size_text
from cardbench.geometry.steps import StepFinding, find_unit

KiB, MiB = 1 << 10, 1 << 20
#: AU candidates are multiples of this, from it up to ``max_au`` (the issue: not only powers of two)
AU_STEP = 512 * KiB
#: boundaries of the AU scan are this far apart (half a candidate step: a 512 KiB AU has non-multiples)
AU_GRID = 256 * KiB
#: the largest AU tried by default (the SD spec's largest AU_SIZE, Fh = 64 MB)
MAX_AU = 64 * MiB
#: page candidates: multiples of PAGE_GRID from 2 x PAGE_GRID to PAGE_MAX
PAGE_GRID = 2 * KiB
PAGE_MAX = 256 * KiB
PAGE_SPAN = 1 * MiB
#: tries of each read (the minimum is kept)
REPEATS = 6
#: at most this many rounds of REPEATS tries, while they fit in BUDGET seconds (the issue: <= 60 s)
MAX_ROUNDS = 3
BUDGET = 50.0


@dataclass
class BoundaryScan:
    """Costs per boundary (seconds) and the plain read time beside each (min of before/after)."""

    offsets: list[int]
    costs: list[float]
    plain: list[float]
    seconds: float = 0.0
    best: list[list[float]] = field(default_factory=list, repr=False)   # [before, across, after] minima
    repeats: int = 0

    def to_dict(self) -> dict:
        return {"offsets": self.offsets, "cost_seconds": [round(c, 9) for c in self.costs],
                "read_seconds": [round(p, 9) for p in self.plain], "repeats": self.repeats,
                "seconds": round(self.seconds, 3)}


@dataclass
class ReadPass:
    """What the read pass found: the AU and page findings, the scans behind them, the time."""

    au: StepFinding
    page: StepFinding
    au_scan: BoundaryScan
    page_scan: BoundaryScan
    read_bytes: int
    repeats: int
    max_au: int
    seconds: float
    read_floor: float = 0.0         # median plain read time (seconds)
    notes: list[str] = field(default_factory=list)


def au_boundaries(size: int, max_au: int = MAX_AU, read_bytes: int = 1024) -> list[int]:
    """Boundaries of the AU scan: every AU_GRID up to 3 x ``max_au`` (2 x if the device is smaller).
    Raises TargetError when the device cannot hold two of the largest AU tried."""
    if max_au < AU_STEP or max_au % AU_STEP:
        raise TargetError(f"the largest AU tried must be a multiple of 512 KiB, got {size_text(max_au)}")
    need = 2 * max_au + read_bytes
    if size < need:
        raise TargetError(f"the device is too small ({size_text(size)}) for the largest AU tried ({size_text(max_au)}): "
                          f"it needs at least {size_text(need)}; try a smaller --max-au")
    top = min(3 * max_au, (size - read_bytes) // AU_GRID * AU_GRID)
    return list(range(AU_GRID, top + 1, AU_GRID))


def page_boundaries(size: int) -> list[int]:
    """Boundaries of the page scan: every PAGE_GRID over PAGE_SPAN in the middle of the device,
    without the multiples of AU_STEP (AU boundaries, judged by the AU scan)."""
    base = max(0, (size // 2 - PAGE_SPAN) // PAGE_SPAN * PAGE_SPAN)
    return [base + k for k in range(PAGE_GRID, PAGE_SPAN, PAGE_GRID) if (base + k) % AU_STEP]


def scan(dev: DataFile, offsets: list[int], read_bytes: int, repeats: int, rng: random.Random,
         progress: Callable[[int], None] | None = None, more: BoundaryScan | None = None) -> BoundaryScan:
    """Time reads before, across and after each boundary; the minimum of ``repeats`` tries each
    (``more``: an earlier scan of the same boundaries to add tries to: minima only get better)."""
    buf = aligned_buffer(read_bytes)
    half = read_bytes // 2
    best = more.best if more is not None else [[float("inf")] * 3 for _ in offsets]
    order = list(range(len(offsets)))
    perf = time.perf_counter
    read = dev.read_exact
    t0 = perf()
    try:
        for _ in range(repeats):
            rng.shuffle(order)
            for i in order:
                b = offsets[i]
                row = best[i]
                for k, off in enumerate((b - read_bytes, b - half, b)):
                    t = perf()
                    read(buf, off)
                    dt = perf() - t
                    if dt < row[k]:
                        row[k] = dt
            if progress is not None:
                progress(3 * len(offsets))
    finally:
        release(buf)
    costs = [on - (pre + post) / 2 for pre, on, post in best]
    plain = [min(pre, post) for pre, _, post in best]
    return BoundaryScan(list(offsets), costs, plain, (more.seconds if more else 0.0) + perf() - t0,
                        best, (more.repeats if more else 0) + repeats)


def au_candidates(max_au: int = MAX_AU) -> list[int]:
    return list(range(AU_STEP, max_au + 1, AU_STEP))


def page_candidates() -> list[int]:
    return list(range(2 * PAGE_GRID, PAGE_MAX + 1, PAGE_GRID))


def read_pass(dev: DataFile, size: int, sector: int = 512, *, max_au: int = MAX_AU, repeats: int = REPEATS,
              seed: int | None = None, progress: Callable[[int], None] | None = None,
              budget: float = BUDGET) -> ReadPass:
    """The read-only pass over an open device of ``size`` bytes (logical block ``sector``).
    When the first ``repeats`` tries leave the answer unclear, up to MAX_ROUNDS - 1 more rounds
    of tries are added while a next round is likely to end within ``budget`` seconds."""
    read_bytes = max(1024, 2 * sector)
    rng = random.Random(seed)
    offsets = au_boundaries(size, max_au, read_bytes)
    t0 = time.perf_counter()
    au_scan = scan(dev, offsets, read_bytes, repeats, rng, progress)
    au = find_unit(au_scan.offsets, au_scan.costs, au_candidates(max_au))
    page_scan = scan(dev, page_boundaries(size), read_bytes, repeats, rng, progress)
    page = find_unit(page_scan.offsets, page_scan.costs, page_candidates())
    # A busy machine keeps some minima above the card's own figure: unless the answer is already
    # clear, more tries (the minima only get better), as long as the time allows.
    rounds = 1
    while rounds < MAX_ROUNDS and time.perf_counter() - t0 < budget * rounds / (rounds + 1):
        if au.confidence == "high" and page.confidence != "low":
            break
        rounds += 1
        au_scan = scan(dev, offsets, read_bytes, repeats, rng, progress, more=au_scan)
        au = find_unit(au_scan.offsets, au_scan.costs, au_candidates(max_au))
        if page.confidence != "high":
            page_scan = scan(dev, page_scan.offsets, read_bytes, repeats, rng, progress, more=page_scan)
            page = find_unit(page_scan.offsets, page_scan.costs, page_candidates())
    if page.unit is not None and au.unit is not None and au.unit % page.unit:
        page.confidence = "low"
        page.reason = f"the page found ({size_text(page.unit)}) does not divide the AU ({size_text(au.unit)})"
    floor = statistics.median(au_scan.plain + page_scan.plain)
    return ReadPass(au=au, page=page, au_scan=au_scan, page_scan=page_scan, read_bytes=read_bytes, repeats=au_scan.repeats,
                    max_au=max_au, seconds=time.perf_counter() - t0, read_floor=floor)


def scan_reads(size: int, max_au: int = MAX_AU, repeats: int = REPEATS, read_bytes: int = 1024) -> int:
    """How many reads :func:`read_pass` makes (for progress)."""
    return 3 * repeats * (len(au_boundaries(size, max_au, read_bytes)) + len(page_boundaries(size)))
