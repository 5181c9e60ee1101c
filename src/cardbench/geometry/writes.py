"""The write pass (``--write``): how many AUs the card keeps open, and FAT-tuned first AUs.

Open AUs (flashbench --open-au's idea): for N = 1, 2, ... write ``rounds`` chunks into each of N
fresh AUs in turn (round-robin), in order within each AU ("linear") or in a shuffled order
("random"), and time every write. A card that keeps at least N AUs open writes each chunk at its
plain speed; one AU more and every write closes an AU and opens another (a garbage collection),
so the median write time jumps. The first round (which opens the AUs) is left out of the median.
The count is the last N before the jump, confirmed by the next N; stopped there.

FAT-tuned AUs (flashbench --find-fat's idea): each of the first AUs gets small writes in random
places, each followed by writes to one AU more than the card keeps open, so an ordinary AU has
been closed before its next write and pays a garbage collection every time. An AU tuned for a
FAT (kept in a fast mode for small scattered writes) does not. The same is done on an ordinary
AU as the reference.

Every write goes through the I/O layer (:class:`cardbench.engine.data.DataFile` on the fd the
safety rules opened). With ``saver`` (a :class:`cardbench.devices.preserve.Preserver`), every
region a test writes is saved before the test starts, outside its timing.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile

KiB, MiB = 1 << 10, 1 << 20
#: bytes per timed write of the open-AU test (at most an AU / rounds)
CHUNK = 64 * KiB
#: bytes per timed write of the FAT test
SMALL = 16 * KiB
ROUNDS = 6
MAX_OPEN = 12
#: the first AUs looked at by the FAT test
FAT_LOOK = 8
#: the FAT test leaves the first MiB alone (the partition table), as the quick verify does
KEEP = 1 * MiB
#: a median write time this many times the plain one is a collapse (garbage collection per write)
COLLAPSE = 2.0
#: ... and this many times, confirmed by the next N: high confidence
CLEAR = 3.0


@dataclass
class OpenUnits:
    """Open-AU test in one order. ``per_write`` maps N to the median seconds per write after the
    first round. ``count``: the AUs kept open (None: not found); ``at_least``: no collapse up to
    the last N tried."""

    order: str
    count: int | None = None
    confidence: str = "none"
    at_least: int | None = None
    per_write: dict[int, float] = field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["per_write"] = {str(k): round(v, 6) for k, v in self.per_write.items()}
        return d


@dataclass
class FatUnits:
    """FAT test: ``per_write[i]`` median seconds of the scattered writes into AU i; ``reference``
    the same on an ordinary AU; ``count`` the leading AUs found tuned."""

    count: int | None = None
    confidence: str = "none"
    per_write: list[float] = field(default_factory=list)
    reference: float | None = None
    reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Writer:
    """Timed writes of one incompressible buffer through a DataFile (saving first when asked)."""

    def __init__(self, dev: DataFile, saver=None, size: int = CHUNK) -> None:
        self.dev = dev
        self.saver = saver
        self.buf = aligned_buffer(size)
        self.buf[:] = os.urandom(size)
        self.view = memoryview(self.buf)

    def save(self, plan: list[tuple[int, int]]) -> None:
        if self.saver is not None:
            for off, n in plan:
                self.saver.save(off, n)

    def write(self, offset: int, length: int) -> float:
        t = time.perf_counter()
        self.dev.write_exact(self.view[:length], offset)
        return time.perf_counter() - t

    def close(self) -> None:
        self.view.release()
        release(self.buf)


def pool_units(size: int, au: int, first: int) -> int:
    """How many whole AUs there are from AU ``first`` to the end of the device."""
    return max(0, size // au - first)


def open_units(w: Writer, size: int, au: int, order: str = "linear", *, max_open: int = MAX_OPEN,
               rounds: int = ROUNDS, first_unit: int = FAT_LOOK + 2, rng: random.Random | None = None) -> OpenUnits:
    """The open-AU test in ``order`` ("linear" or "random"); see the module text."""
    rng = rng or random.Random()
    chunk = min(CHUNK, au // rounds // 4096 * 4096)
    out = OpenUnits(order)
    pool = pool_units(size, au, first_unit)
    if chunk < 4096 or pool < 2:
        out.reason = "the device has too few AUs for the open-AU test"
        return out
    t0 = time.perf_counter()
    nxt = 0
    collapsed: list[int] = []
    plain: float | None = None
    for n in range(1, max_open + 1):
        units = [first_unit + (nxt + i) % pool for i in range(n)]
        nxt += n
        slots = {u: (list(range(rounds)) if order == "linear" else rng.sample(range(rounds), rounds)) for u in units}
        plan = [(u * au + s * chunk, chunk) for u in units for s in slots[u]]
        w.save(plan)
        times = []
        for r in range(rounds):
            for u in units:
                dt = w.write(u * au + slots[u][r] * chunk, chunk)
                if r:
                    times.append(dt)
        out.per_write[n] = statistics.median(times)
        if plain is None:
            plain = out.per_write[n]
        if out.per_write[n] >= COLLAPSE * plain:
            collapsed.append(n)
            if len(collapsed) >= 2 or n == max_open:
                break
        else:
            plain = min(plain, out.per_write[n])
            collapsed.clear()
    out.seconds = time.perf_counter() - t0
    if not collapsed:
        out.at_least = max(out.per_write)
        out.reason = f"no collapse up to {out.at_least} AUs written in turn: it keeps at least {out.at_least} open"
        return out
    n = collapsed[0]
    out.count = n - 1
    ratio = out.per_write[n] / (plain or out.per_write[n])
    confirmed = len(collapsed) >= 2
    if n == 1:
        out.count, out.reason = None, "even one AU written in turn is slow: no open AU to find"
    elif ratio >= CLEAR and confirmed:
        out.confidence = "high"
    else:
        out.confidence = "low"
        out.reason = (f"writes slow down {ratio:.1f}x from {n} AUs on"
                      + ("" if confirmed else " (not confirmed by the next count)"))
    return out


def fat_units(w: Writer, size: int, au: int, open_count: int | None, *, rounds: int = 4,
              look: int = FAT_LOOK, rng: random.Random | None = None) -> FatUnits:
    """Which of the first ``look`` AUs take scattered small writes without collecting; see the module."""
    rng = rng or random.Random()
    out = FatUnits()
    if open_count is None:
        out.reason = "needs the open-AU count (not found)"
        return out
    others_first = look + 2
    if pool_units(size, au, others_first) < open_count + 2:
        out.reason = "the device has too few AUs for the FAT test"
        return out
    look = min(look, size // au)
    t0 = time.perf_counter()
    others = [others_first + i for i in range(open_count + 1)]
    pointer = {u: 0 for u in others}
    reference = others_first + open_count + 1

    def one(unit: int) -> float:
        low = KEEP // SMALL if unit == 0 and au >= 2 * KEEP else 0     # the partition table stays
        picks = [rng.randrange(low, au // SMALL) * SMALL for _ in range(rounds)]
        plan = [(unit * au + p, SMALL) for p in picks]
        for u in others:
            plan += [(u * au + (pointer[u] + r * SMALL) % au, SMALL) for r in range(rounds)]
        w.save(plan)
        times = []
        for p in picks:
            times.append(w.write(unit * au + p, SMALL))
            for u in others:
                w.write(u * au + pointer[u], SMALL)
                pointer[u] = (pointer[u] + SMALL) % au
        return statistics.median(times[1:])

    out.reference = one(reference)
    out.per_write = [one(i) for i in range(look)]
    out.seconds = time.perf_counter() - t0
    fast = [t * COLLAPSE <= out.reference for t in out.per_write]
    count = 0
    while count < len(fast) and fast[count]:
        count += 1
    out.count = count
    ratios = [out.reference / t for t in out.per_write]
    clear = all(r >= CLEAR for r, f in zip(ratios, fast, strict=True) if f) and all(r < 1.5 for r, f in zip(ratios, fast, strict=True) if not f)
    out.confidence = "high" if clear else "low"
    if not clear:
        out.reason = "the first AUs' write times are between an ordinary AU's and a tuned one's"
    if any(fast[count:]):
        out.reason = (out.reason + "; " if out.reason else "") + "fast AUs also after the first slow one"
        out.confidence = "low"
    return out
