"""The quick fake-capacity probe: where does the card stop storing what it is given?

It works on anything with ``size``, ``sector``, ``read``, ``write_pattern`` and ``sync`` (a
:class:`cardbench.verify.io.DeviceIO` on a real device, or the simulated card of the tests), and
on a *saver* whose ``save(offset, length)`` is called before every write (the preserve journal in
non-destructive mode; None in destructive mode). Every block it writes is pattern data that names
the run and its own position (:mod:`cardbench.patterns`), so a block read back tells whether it
is right, lost (zeros, old data: the write was *dropped*) or the data of another position (the
card *wrapped around*: the distance between the two positions is a multiple of the real size).

Phases (the first MiB, where the partition table lives, is never written):

0. Read-only look: the first sector and the last block. If the end does not read, find by
   bisection (reads only) where reading stops working: a card "smaller than it says".
A. Quick look (~40 blocks): a reference block, blocks at reference + 2^k (f3probe's wraparound
   test for power-of-two modules) and 16 blocks spread to the very end; read back at once. A
   cache can make a bad block look good but never a good one bad, so anything bad is proof.
B. Cache size, only once a lost block is known: f3probe's idea, but run where it is cheap -- on
   the bad area. Write a canary block there, write F bytes elsewhere, read the canary; F = 0,
   256 KiB, 512 KiB, ... until the canary reads bad. Flushes in later rounds are 2x that.
C. The comb: blocks every ``h`` bytes over the (believed) good area, written in random order,
   then a dense window W of ``F >= h`` bytes right after the first MiB written last, then read back
   in writing order (each block has had at least F bytes written after it: the cache flush, made
   of data that is itself checked). Because the teeth are closer than W is wide, a card that wraps
   at *any* size M (not only powers of two) sends some tooth into W, where W's later data replaces
   it: the tooth reads back as W's data and names the distance M. The first MiB is also read back
   to catch teeth past the end that land there. Default F: size/64, clamped to 8..256 MiB (f3probe
   assumes caches up to 1 GiB and so writes up to 2 GiB on a good card).
D. Narrowing: between the last good and the first bad position, 15 blocks per round at even
   steps (with the cache flush in between when the card has a cache), down to one sector.
E. The extent of I/O-error ranges, by bisection with the failing operation.

Wraparound: usable size = gcd of the distances (checked to be a multiple of the sector size).
Dropped writes / errors at the end: usable size = first bad sector of the tail.
"""

from __future__ import annotations

import bisect
import math
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from cardbench.engine.errors import fault_errno
from cardbench.errors import CardbenchError, DeviceFault, Interrupted
from cardbench.patterns import CLASSES, SECTOR, Pattern, merge_ranges
from cardbench.verify.io import GONE_ERRNOS, IOFailure
from cardbench.verify.verdict import judge

MiB = 1 << 20
GiB = 1 << 30
RESERVED = MiB
SAMPLE_BYTES = 512
COMB_SAMPLES = 512
CONFIRM_SAMPLES = 128
CONFIRM_FLUSH = 8 * MiB
NARROW_SAMPLES = 15
MAX_CACHE_PROBE = GiB
MIN_DEVICE = 4 * MiB
DROPPED = ("zero", "foreign", "garbage")


class CardGone(Exception):
    """The card stopped answering altogether (pulled out, or died); ``gone``: the device itself
    went away (the target's rule, :meth:`cardbench.target.Target.gone`), not a card that
    is still there and answers nothing."""

    def __init__(self, offset: int, op: str, message: str, gone: bool = False):
        super().__init__(message)
        self.offset = offset
        self.op = op
        self.message = message
        self.gone = gone


class _OutOfTime(Exception):
    pass


class JournalFailure(Exception):
    """The preserve journal could not save a region: stop writing (what was saved is restored)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class Sample:
    offset: int
    length: int
    phase: str
    order: int = -1
    status: str = "pending"        # ok | bad | read_error | write_error | pending
    first_bad: int | None = None   # absolute position of the first sector not ok
    last_ok_end: int | None = None  # end of the last ok sector
    cls: str | None = None         # dominant bad class, or "read_error"/"write_error"
    w_mark: int = 0                # bytes written in the run when this sample had been written
    exposure: int = 0              # bytes written after it before it was read back

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass
class ProbeOptions:
    time_budget: float | None = None
    seed: int | None = None
    #: the largest cache the card is assumed to have when nothing can be measured (None: auto)
    assume_cache_bytes: int | None = None
    sample_bytes: int = SAMPLE_BYTES
    comb_samples: int = COMB_SAMPLES


@dataclass
class ProbeResult:
    size: int
    readable_end: int
    usable_bytes: int | None
    verdict: str | None     # None: the card went away before it looked anything but genuine (verdict.judge)
    kind: str | None
    bad_ranges: list[list[int]]
    wrap_bytes: int | None
    tail_start: int | None
    cache_bytes: int | None
    cache_note: str
    complete: bool
    error: str | None
    removed_at: int | None
    method: dict[str, Any]
    confidence: dict[str, Any]
    evidence: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _gcd_all(values: list[int]) -> int:
    g = 0
    for v in values:
        g = math.gcd(g, abs(int(v)))
    return g


def _align_down(x: int, a: int) -> int:
    return x // a * a


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


class Prober:
    """One probe of one card. ``Prober(io, saver=..., progress=..., options=...).run()``.
    ``gone(errno) -> bool``: did the device go away (asked once the card stopped answering;
    the target's :meth:`~cardbench.target.Target.gone`; default: the errno says so)."""

    def __init__(self, io, *, saver=None, progress=None, options: ProbeOptions | None = None,
                 tag: int | None = None, clock: Callable[[], float] = time.monotonic,
                 gone: Callable[[int | None], bool] | None = None):
        self.io = io
        self.gone = gone or (lambda err: err in GONE_ERRNOS)
        #: the probe ended because the device went away: no verdict from what it could not read
        self.went_away = False
        self.saver = saver
        self.progress = progress
        self.opt = options or ProbeOptions()
        self.clock = clock
        self.size = int(io.size)
        self.sector = max(SECTOR, int(getattr(io, "sector", SECTOR)))
        if self.size < MIN_DEVICE:
            raise ValueError(f"the device is too small to probe ({self.size} bytes; at least {MIN_DEVICE})")
        self.rng = random.Random(self.opt.seed)
        if tag is None:
            tag = self.rng.getrandbits(64) or 1
        self.pattern = Pattern(tag)
        self.b = _align_up(max(self.opt.sample_bytes, self.sector), self.sector)
        self.a = RESERVED
        self.end = _align_down(self.size, self.sector)
        self.samples: list[Sample] = []
        self.distances: list[int] = []
        self.misplaced: list[tuple[int, int]] = []
        self.error_ranges: list[list[Any]] = []   # [start, end, "read"|"write"]
        self.cache_bytes: int | None = None
        self.cache_note = "not measured (no lost block to measure it on)"
        self.flush_bytes = 0
        self.assumed_cache = 0
        self.spacing = 0
        self.rounds = 0
        self.narrow_rounds = 0
        self.saved_upto = 0
        self.notes: list[str] = []
        self.save_seconds = 0.0
        self.write_ops = 0
        self._order = 0
        self._adv: Callable[[int], None] = lambda n: None
        self._started = 0.0
        self._out_of_time = False
        self.unreadable_tail: int | None = None
        self.t_write = 0.0   # average seconds per sample write (with its save)
        self.t_read = 0.0
        self.written_total = 0
        self.seq_read: float | None = None
        self.seq_write: float | None = None

    # -- time ------------------------------------------------------------------------------------
    def _elapsed(self) -> float:
        return self.clock() - self._started

    def _time_left(self) -> float:
        if self.opt.time_budget is None:
            return math.inf
        return self.opt.time_budget - self._elapsed()

    def _check_time(self, reserve: float = 0.0) -> None:
        if self._time_left() < reserve:
            self._out_of_time = True
            raise _OutOfTime()

    # -- progress ---------------------------------------------------------------------------------
    @contextmanager
    def _task(self, description: str, total: int | None) -> Iterator[None]:
        if self.progress is None:
            yield
            return
        with self.progress.task(description, total) as adv:
            old = self._adv
            self._adv = adv
            try:
                yield
            finally:
                self._adv = old

    # -- failures -----------------------------------------------------------------------------------
    def _alive(self) -> bool:
        try:
            self.io.read(0, self.sector)
            return True
        except IOFailure:
            return False

    def _failure(self, e: IOFailure) -> None:
        """Raise CardGone if the card stopped answering altogether; otherwise return (a bad spot)."""
        if e.gone or not self._alive():
            raise CardGone(e.offset, e.op, f"the card stopped answering at byte {e.offset} "
                                           f"({e.op}: {e.message}); removed?", gone=self.gone(e.errno))

    # -- primitive steps ------------------------------------------------------------------------------
    def _save(self, offset: int, length: int) -> None:
        """Have the journal copy [offset, offset + length) before it is overwritten.

        The region is read first: one that cannot be read cannot be saved (it is a read error
        of the card), and the journal is only asked to save what reads."""
        if self.saver is None:
            return
        t0 = time.perf_counter()
        try:
            pos = offset
            while pos < offset + length:
                n = min(MiB, offset + length - pos)
                self.io.read(pos, n)
                pos += n
            self.saver.save(offset, length)
        except DeviceFault as e:
            raise IOFailure("read", offset, length, fault_errno(e),
                            f"cannot save the bytes at {offset} before writing: {e.message}") from None
        except Interrupted:
            raise   # SIGTERM while saving: an interruption, not a journal failure
        except (CardbenchError, OSError) as e:
            msg = e.message if isinstance(e, CardbenchError) else str(e)
            raise JournalFailure(f"the preserve journal failed ({msg}); stopped before writing more") from None
        finally:
            self.save_seconds += time.perf_counter() - t0

    def _write(self, s: Sample) -> bool:
        """Save and write one sample; False (and the sample marked) when that failed."""
        t0 = time.perf_counter()
        try:
            self._save(s.offset, s.length)
            self.io.write_pattern(s.offset, s.length, self.pattern)
        except IOFailure as e:
            self._failure(e)
            s.status = "read_error" if e.op == "read" else "write_error"
            s.cls = s.status
            s.first_bad = s.offset
            self.error_ranges.append([s.offset, s.end, "read" if e.op == "read" else "write"])
            return False
        finally:
            dt = time.perf_counter() - t0
            self.t_write = dt if not self.write_ops else 0.8 * self.t_write + 0.2 * dt
            self.write_ops += 1
        s.order = self._order
        self._order += 1
        self.written_total += s.length
        s.w_mark = self.written_total
        self._adv(s.length)
        return True

    def _judge(self, s: Sample) -> None:
        """Read one sample back and judge it."""
        t0 = time.perf_counter()
        try:
            buf = self.io.read(s.offset, s.length)
        except IOFailure as e:
            self._failure(e)
            s.status, s.cls, s.first_bad = "read_error", "read_error", s.offset
            self.error_ranges.append([s.offset, s.end, "read"])
            return
        finally:
            dt = time.perf_counter() - t0
            self.t_read = dt if not self.t_read else 0.8 * self.t_read + 0.2 * dt
        j = self.pattern.judge(buf, s.offset, keep_classes=True)
        s.exposure = self.written_total - s.w_mark
        self._adv(s.length)
        self._take_misplaced(j.misplaced)
        if j.ok:
            s.status, s.first_bad, s.last_ok_end, s.cls = "ok", None, s.end, None
            return
        s.status = "bad"
        s.first_bad = j.first_bad
        s.cls = j.dominant_bad()
        assert j.classes is not None        # judged with keep_classes
        oks = np.nonzero(j.classes == 0)[0]
        s.last_ok_end = s.offset + (int(oks[-1]) + 1) * SECTOR if oks.size else None

    def _take_misplaced(self, misplaced: list[tuple[int, int]]) -> None:
        for where, belongs in misplaced:
            d = abs(belongs - where)
            if d and d % SECTOR == 0:
                self.distances.append(d)
                if len(self.misplaced) < 64:
                    self.misplaced.append((where, belongs))

    def _sync(self) -> None:
        try:
            self.io.sync()
        except IOFailure as e:
            self._failure(e)
            self.notes.append(f"flushing the card's write cache failed ({e.message})")

    def _new(self, offset: int, length: int, phase: str) -> Sample:
        s = Sample(offset, length, phase)
        self.samples.append(s)
        return s

    def _write_read(self, batch: list[Sample], flush: int = 0, shuffle: bool = False) -> None:
        """Write ``batch`` (random order if asked), then ``flush`` bytes of W, then read back in order."""
        order = list(batch)
        if shuffle:
            self.rng.shuffle(order)
        written = [s for s in order if self._write(s)]
        if flush:
            self._flush(flush)
        self._sync()
        for s in written:
            self._judge(s)

    def _flush(self, nbytes: int) -> None:
        """Write ``nbytes`` of pattern data at [a, a + nbytes): pushes the card's cache out."""
        nbytes = _align_down(min(nbytes, max(0, self.end - self.a)), self.sector)
        if nbytes <= 0:
            return
        chunk = MiB
        pos = self.a
        while pos < self.a + nbytes:
            n = min(chunk, self.a + nbytes - pos)
            try:
                if pos + n > self.saved_upto:
                    start = max(pos, self.saved_upto)
                    self._save(start, pos + n - start)
                    self.saved_upto = pos + n
                self.io.write_pattern(pos, n, self.pattern)
            except IOFailure as e:
                self._failure(e)
                self.error_ranges.append([pos, pos + n, "read" if e.op == "read" else "write"])
            self.written_total += n
            self._adv(n)
            pos += n

    # -- evidence -----------------------------------------------------------------------------------
    def _wrap(self) -> int | None:
        if not self.distances:
            return None
        g = _gcd_all(self.distances)
        return g if g >= self.sector and g % SECTOR == 0 else None

    def _trust(self) -> int:
        """Bytes that must have been written after a block for its *good* reading to count: the
        measured cache, else the flush of the comb once it ran (a quick-look read-back straight
        after writing may have come from the card's cache; a bad read-back is always proof)."""
        if self.cache_bytes is not None:
            return self.cache_bytes
        return self.flush_bytes if self.rounds >= 2 else 0

    def _tail(self, limit: int) -> tuple[int, int | None, list[Sample]]:
        """(last good end, first bad of the tail or None, tail samples) among samples below ``limit``."""
        wrapped = self._wrap() is not None
        judged = [s for s in self.samples if s.status != "pending" and s.offset < limit
                  and not (wrapped and s.cls == "overwritten")]   # explained by the wraparound
        trust = self._trust()
        # a canary of the cache search that read good was the cache's answer, not the card's
        good_end = max([s.last_ok_end for s in judged if s.last_ok_end is not None
                        and s.exposure >= trust and s.phase != "cache"], default=self.a)
        tail = [s for s in judged if s.status != "ok" and s.first_bad is not None and s.first_bad >= good_end]
        bad = min((s.first_bad for s in tail if s.first_bad is not None), default=None)
        return good_end, bad, tail

    # -- phases ----------------------------------------------------------------------------------------
    def _phase0(self) -> None:
        """Read-only: the first sector and the last block; find where reading stops if it does."""
        try:
            self.io.read(0, self.sector)
        except IOFailure as e:
            raise CardGone(0, "read", f"the card does not read at all ({e.message})",
                           gone=self.gone(e.errno)) from None
        last = self.end - self.b
        try:
            self.io.read(last, self.b)
            return
        except IOFailure as e:
            self._failure(e)
        # bisection on "a read of one sector at x fails"
        lo, hi = self.a, last          # lo reads (assumed; checked), hi fails
        if not self._reads(lo):
            lo = 0
        while hi - lo > self.sector:
            mid = _align_down((lo + hi) // 2, self.sector)
            if mid <= lo:
                break
            if self._reads(mid):
                lo = mid
            else:
                hi = mid
        first_fail = hi
        # is everything above unreadable (a short card) or just a damaged range?
        probes = [first_fail + (self.end - first_fail) * k // 8 for k in range(1, 8)]
        probes = [_align_down(p, self.sector) for p in probes]
        readable = [p for p in probes if p > first_fail and self._reads(p)]
        if not readable:
            self.unreadable_tail = first_fail
            self.error_ranges.append([first_fail, self.end, "read"])
            self.notes.append(f"reads fail from byte {first_fail} to the end ({self.end - first_fail} bytes)")
            self.end = first_fail
        else:
            top = min(readable)
            lo2, hi2 = first_fail, top    # lo2 fails, hi2 reads
            while hi2 - lo2 > self.sector:
                mid = _align_down((lo2 + hi2) // 2, self.sector)
                if mid <= lo2:
                    break
                if self._reads(mid):
                    hi2 = mid
                else:
                    lo2 = mid
            self.error_ranges.append([first_fail, lo2 + self.sector, "read"])
            self.notes.append(f"reads fail in [{first_fail}, {lo2 + self.sector})")

    def _reads(self, x: int) -> bool:
        try:
            self.io.read(x, self.sector)
            return True
        except IOFailure as e:
            self._failure(e)
            return False

    def _phase_a(self) -> None:
        b, a, end = self.b, self.a, self.end
        if end - a < 4 * b:
            raise ValueError("nothing to probe past the first MiB")
        ref = self._new(a, b, "quick")
        positions: set[int] = set()
        k = 20
        while a + (1 << k) + b <= end:
            positions.add(a + (1 << k))
            k += 1
        for i in range(16):
            positions.add(_align_down(a + b + (end - 2 * b - a) * i // 15, self.sector))
        positions.add(end - b)
        batch = [ref] + [self._new(p, b, "quick") for p in sorted(positions) if p >= a + b and p + b <= end]
        with self._task("verify: quick look", 2 * b * len(batch)):
            self._write_read(batch)
        self.rounds += 1

    def _comb(self, upper: int, flush: int, count: int, phase: str) -> None:
        """Teeth every h over [a + flush, upper), written in random order, then W = [a, a + flush)."""
        a, b = self.a, self.b
        span = upper - a - flush
        if span < 2 * b:
            flush = max(0, _align_down((upper - a) // 2, self.sector))
            span = upper - a - flush
        h = max(b, _align_down(max(span // max(1, count), b), self.sector))
        self.spacing = h
        phase_off = _align_down(self.rng.randrange(0, max(1, h - b + 1)), self.sector)
        pos = a + flush + phase_off
        batch: list[Sample] = []
        while pos + b <= upper:
            batch.append(self._new(pos, b, phase))
            pos += h
        if upper == self.end and (not batch or batch[-1].end < upper):
            batch.append(self._new(upper - b, b, phase))
        # spots inside W, read back after it was written
        w_spots = []
        if flush >= b:
            step = max(b, _align_down(flush // 16, self.sector))
            w_spots = [Sample(p, b, "window") for p in range(a, a + flush - b + 1, step)]
        total = 2 * b * len(batch) + flush + b * len(w_spots) + (a if upper == self.end else 0)
        with self._task(f"verify: sampling {len(batch)} positions", total):
            order = list(batch)
            self.rng.shuffle(order)
            written = [s for s in order if self._write(s)]
            self._flush(flush)
            self._sync()
            if upper == self.end and self._wrap() is None:
                self._scan_head()
            for s in written:
                self._judge(s)
            for s in w_spots:
                self.samples.append(s)
                s.order = -2
                self._judge(s)
        self.rounds += 1

    def _scan_head(self) -> None:
        """Read the first MiB (never written): our data there means the end wrapped onto it."""
        pos = 0
        while pos < self.a:
            n = min(MiB, self.a - pos)
            try:
                buf = self.io.read(pos, n)
            except IOFailure as e:
                self._failure(e)
                pos += n
                continue
            j = self.pattern.judge(buf, pos)
            self._take_misplaced(j.misplaced)
            self._adv(n)
            pos += n

    def _measure_cache(self, tail_start: int) -> None:
        """f3probe's cache-size search, on the lost area: write a canary there, write F bytes
        elsewhere, read the canary. A write to a lost block is lost again, so the canary can be
        a block already known to be lost; only a cache can make it read back good."""
        lost = [s.first_bad for s in self.samples if s.status == "bad" and s.first_bad is not None
                and s.first_bad >= tail_start and s.cls in DROPPED]
        if not lost:
            self.cache_note = "not measured (no lost block to measure it on)"
            return
        c0 = _align_down(min(lost), self.sector)
        length = min(self.b, self.end - c0)
        limit = min(MAX_CACHE_PROBE, max(0, _align_down(tail_start - self.a, self.sector)))
        f = 0
        with self._task("verify: measuring the card's cache", None):
            while True:
                s = self._new(c0, length, "cache")
                self._write_read([s], flush=f)
                if s.status != "ok":
                    self.cache_bytes = f
                    self.cache_note = ("none: a lost block reads back bad at once" if f == 0 else
                                       f"at most {f} bytes: a lost block reads back bad after {f} bytes written "
                                       f"elsewhere")
                    return
                f = 256 * 1024 if f == 0 else f * 2
                if f > limit:
                    break
                self._check_time()
        self.cache_bytes = None
        self.cache_note = f"more than {limit} bytes (a lost block still read back good after that much)"

    def _narrow(self, good_end: int, bad: int, flush: int) -> tuple[int, int]:
        """Shrink [good_end, bad) to one sector; returns the final (good_end, bad)."""
        L, B = good_end, bad
        rounds = max(1, math.ceil(math.log(max(2, (B - L) // self.sector), NARROW_SAMPLES + 1)))
        estimate = rounds * (2 * NARROW_SAMPLES * self.b + flush)
        with self._task("verify: narrowing the boundary", estimate):
            while B > L:
                self._check_time()
                gap = B - L
                m = max(1, min(NARROW_SAMPLES, gap // self.sector))
                step = gap / m
                length = max(self.sector, min(self.b, _align_down(int(step), self.sector)))
                pos = sorted({_align_down(int(L + k * step), self.sector) for k in range(m)})
                pos = [p for p in pos if L <= p and p + length <= B] or [L]
                batch = [self._new(p, min(length, B - p), "narrow") for p in pos]
                self._write_read(batch, flush=flush)
                self.narrow_rounds += 1
                newL, newB, _ = self._tail(self._limit())
                if newB is None:
                    # the bad block vanished (it was the cache's doing): start over from the comb
                    self.notes.append("a block that read bad earlier read good later")
                    return newL, B
                if (newL, newB) == (L, B):
                    break
                L, B = newL, newB
        return L, B

    def _limit(self) -> int:
        w = self._wrap()
        return min(self.end, w) if w else self.end

    def _error_extents(self) -> None:
        """Find where each error range really starts and ends (bisection with the failing op)."""
        goods = sorted((s.offset, s.end) for s in self.samples if s.status == "ok")
        good_starts = [g[0] for g in goods]
        ranges: list[list[int]] = []
        for r in merge_ranges([(r[0], r[1]) for r in self.error_ranges]):
            # failures with no good block between them are one range
            if ranges and bisect.bisect_left(good_starts, ranges[-1][1]) == bisect.bisect_left(good_starts, r[0]):
                ranges[-1][1] = r[1]
            else:
                ranges.append(r)
        if not ranges or len(ranges) > 16:
            return
        refined: list[list[Any]] = []
        for s, e in ranges:
            kind = next((r[2] for r in self.error_ranges if r[0] < e and r[1] > s), "read")
            if self.unreadable_tail is not None and e >= self.end:
                refined.append([s, e, kind])
                continue
            # a failing sector inside the failed request
            f0 = next((x for x in range(s, e, self.sector) if self._fails(x, kind)), None)
            if f0 is None:
                self.notes.append(f"an error in [{s}, {e}) did not happen again")
                continue
            lo = max([ge for gs, ge in goods if ge <= f0], default=self.a)
            hi = min([gs for gs, ge in goods if gs > f0], default=self.end)
            start = self._bisect_fail(lo, f0, kind, rising=True) if f0 > lo else f0
            stop = self._bisect_fail(f0, hi, kind, rising=False) if hi > f0 + self.sector else f0 + self.sector
            refined.append([start, stop, kind])
        self.error_ranges = refined

    def _fails(self, x: int, kind: str) -> bool:
        if kind == "read":
            return not self._reads(x)
        s = Sample(x, self.sector, "extent")
        ok = self._write(s)
        return not ok

    def _bisect_fail(self, lo: int, hi: int, kind: str, rising: bool) -> int:
        """rising: lo works, hi fails -> first failing offset. Else lo fails, hi works -> end of failure."""
        lo, hi = _align_down(lo, self.sector), _align_down(hi, self.sector)
        steps = 0
        while hi - lo > self.sector and steps < 40:
            steps += 1
            mid = _align_down((lo + hi) // 2, self.sector)
            if mid <= lo:
                break
            f = self._fails(mid, kind)
            if rising:
                lo, hi = (lo, mid) if f else (mid, hi)
            else:
                lo, hi = (mid, hi) if f else (lo, mid)
        return hi if rising else hi

    # -- the plan ---------------------------------------------------------------------------------------
    def _default_flush(self) -> int:
        if self.opt.assume_cache_bytes is not None:
            f = self.opt.assume_cache_bytes
        else:
            f = min(256 * MiB, max(8 * MiB, self.size // 64))
        f = min(f, max(self.b, (self.end - self.a) // 4))
        return max(self.sector, _align_down(f, MiB) if f >= MiB else _align_down(f, self.sector))

    def _measure_rates(self) -> None:
        """With a time budget: time one sequential 1 MiB read (reads are always safe) to cost the
        flush; cards write at most about as fast as they read, assume half."""
        n = min(MiB, _align_down(self.a, self.sector))
        t0 = time.perf_counter()
        try:
            self.io.read(0, n)
        except IOFailure as e:
            self._failure(e)
            return
        dt = max(1e-6, time.perf_counter() - t0)
        self.seq_read = n / dt
        self.seq_write = self.seq_read / 2

    def _fit_budget(self, count: int, flush: int, share: float, span: int,
                    keep_wrap: bool) -> tuple[int, int]:
        """Fewer teeth and a smaller flush until the estimate fits ``share`` of the time left.

        With ``keep_wrap`` the teeth stay closer than the flush window is wide (any wraparound is
        still caught): cost n * per_tooth + (span / n) * per_flush_byte, smallest near
        n = sqrt(span * per_byte / per_tooth). Only when even that does not fit is the guarantee
        given up (the confidence says so)."""
        left = self._time_left()
        if math.isinf(left):
            return count, flush
        per = max(1e-5, self.t_write + self.t_read)
        seq_w = self.seq_write or max(self.b / max(1e-6, self.t_write), 1e6)
        seq_r = self.seq_read or 2 * seq_w
        per_byte = 1 / seq_w + ((1 / seq_r + 1 / seq_w) if self.saver is not None else 0.0)
        avail = share * left

        def cost(n: int, f: int) -> float:
            return n * per + f * per_byte

        if cost(count, flush) <= avail:
            return count, flush
        if keep_wrap:
            n = count
            while n >= 16:
                f = max(flush if flush < span // n else 0, _align_up(span // n, MiB))
                f = max(MiB, min(f, span // 2))
                if cost(n, f) <= avail:
                    return n, f
                n //= 2
        n = max(16, int((avail - MiB * per_byte) / per)) if avail > MiB * per_byte else 16
        return min(count, n), MiB

    def run(self) -> ProbeResult:
        self._started = self.clock()
        error = None
        removed_at = None
        complete = True
        try:
            self._phase0()
            if self.opt.time_budget is not None:
                self._measure_rates()
            self._phase_a()
            self._rest()
        except CardGone as g:
            error, removed_at, complete = g.message, g.offset, False
            self.went_away = g.gone
        except JournalFailure as j:
            error, complete = j.message, False
        except _OutOfTime:
            complete = True   # a verdict with what was learned; the confidence says how much
            self.notes.append(f"time budget of {self.opt.time_budget:g} s reached")
        return self._result(error, removed_at, complete)

    def _rest(self) -> None:
        self.assumed_cache = self._default_flush()
        wrap = self._wrap()
        good_end, bad, tail = self._tail(self._limit())
        if bad is not None and not wrap and any(s.cls in DROPPED for s in tail):
            self._measure_cache(bad)
        # C: the comb over the area believed good
        if wrap:
            # the wrap size does not depend on the cache (a cache hides overwrites, never makes
            # them); the comb below it confirms that what is written there stays, and -- teeth
            # closer than W is wide -- refines a distance that was a multiple of the real size
            upper, flush = wrap, min(self.assumed_cache, CONFIRM_FLUSH)
            count = max(CONFIRM_SAMPLES, (wrap - self.a) // max(flush, 1))
        elif bad is not None:
            upper = bad
            flush = 2 * self.cache_bytes if self.cache_bytes is not None else self.assumed_cache
            count = CONFIRM_SAMPLES
        else:
            upper, flush, count = self.end, self.assumed_cache, self.opt.comb_samples
        upper = min(upper, self.end)
        if upper - self.a > 4 * self.b:
            if bad is None and not wrap:
                # teeth closer than W is wide: a wrap at any size lands a tooth in W
                count = max(count, (upper - self.a) // max(flush, 1))
            count, flush = self._fit_budget(count, flush, 0.7, upper - self.a, keep_wrap=bad is None)
            self.flush_bytes = max(self.flush_bytes, flush)
            self._check_time()
            self._comb(upper, flush, count, "comb")
        # D: narrowing the tail boundary
        wrap = self._wrap()
        good_end, bad, tail = self._tail(self._limit())
        if bad is not None:
            if self.cache_bytes is None and any(s.cls in DROPPED for s in tail) and \
                    self.cache_note.startswith("not measured"):
                self._measure_cache(bad)
            flush = 2 * self.cache_bytes if self.cache_bytes is not None else self.assumed_cache
            flush = min(flush, max(0, good_end - self.a))
            self.flush_bytes = max(self.flush_bytes, flush)
            self._narrow(good_end, bad, flush)
        # E: extents of I/O errors
        if self.error_ranges:
            self._check_time()
            self._error_extents()

    # -- the result -----------------------------------------------------------------------------------
    def _result(self, error: str | None, removed_at: int | None, complete: bool) -> ProbeResult:
        wrap = self._wrap()
        limit = self._limit()
        good_end, bad, tail = self._tail(limit)
        counts = {c: 0 for c in CLASSES}
        statuses: dict[str, int] = {}
        for s in self.samples:
            statuses[s.status] = statuses.get(s.status, 0) + 1
            if s.cls:
                counts[s.cls] = counts.get(s.cls, 0) + 1
        # the tail: from some point to the end the card loses, wraps or refuses what it is given
        tail_start: int | None = None
        kind: str | None = None
        if wrap:
            tail_start, kind = wrap, "wraparound"
        if bad is not None and (tail_start is None or bad < tail_start):
            tail_start = bad
            kind = kind or ("dropped" if any(s.cls in DROPPED for s in tail) else "other")
        if self.unreadable_tail is not None and (tail_start is None or self.unreadable_tail < tail_start):
            tail_start = self.unreadable_tail
            kind = kind or "other"
        # damage below the tail
        middle: list[tuple[int, int]] = []
        for s in self.samples:
            if s.status in ("ok", "pending") or s.first_bad is None or s.offset >= limit:
                continue
            if s.phase == "extent":
                continue
            if wrap and s.cls == "overwritten":
                continue   # explained by the wraparound
            if tail_start is None or s.first_bad < tail_start:
                middle.append((s.first_bad, min(s.end, tail_start) if tail_start is not None else s.end))
        for r in self.error_ranges if not self.went_away else ():   # a gone card's errors say nothing of it
            if tail_start is None or r[0] < tail_start:
                middle.append((r[0], min(r[1], tail_start) if tail_start is not None else r[1]))
        middle = [(s, e) for s, e in merge_ranges(middle)]
        fake_bytes = self.size - tail_start if tail_start is not None else 0
        verdict, vkind = judge(whole=self.size, wrapped=kind == "wraparound",
                               lost_bytes=fake_bytes if tail_start is not None else 0, lost_kind=kind,
                               lost_is_tail=True, damaged=bool(middle), stopped=error is not None,
                               gone=self.went_away)
        usable: int | None = self.end
        if verdict == "counterfeit":
            kind = vkind
            usable = tail_start
            if kind != "wraparound" and bad is not None and tail_start == bad and good_end < bad:
                usable = good_end   # boundary not narrowed to the sector (time budget): the safe side
        elif tail_start is not None or middle:
            kind = None
            usable = min([tail_start if tail_start is not None else self.end] + [r[0] for r in middle])
        usable_out: int | None = int(usable) if usable is not None else None
        if error is not None and verdict != "counterfeit":
            usable_out = None   # unknown: the card went away before we could tell
        bad_ranges = merge_ranges(middle + ([(tail_start, self.size)] if tail_start is not None else []))
        uncertainty = 0
        if bad is not None and not wrap:
            uncertainty = max(0, bad - good_end)
        sample_count = sum(1 for s in self.samples if s.order >= 0)
        stats = self.io.stats
        method = {
            "algorithm": "cardbench quick probe (sampling + window + bisection)",
            "pattern": "512-byte sectors: run tag, own position, pool data chosen by position",
            "tag": f"{self.pattern.tag:016x}",
            "seed": self.opt.seed,
            "reserved_bytes": self.a,
            "sample_bytes": self.b,
            "sector_bytes": self.sector,
            "positions_sampled": sample_count,
            "comb_spacing_bytes": self.spacing,
            "cache_flush_bytes": self.flush_bytes,
            "assumed_max_cache_bytes": self.assumed_cache,
            "measured_cache_bytes": self.cache_bytes,
            "rounds": self.rounds,
            "narrowing_rounds": self.narrow_rounds,
            "bytes_written": stats.bytes_written,
            "bytes_read": stats.bytes_read,
            "writes": stats.writes,
            "reads": stats.reads,
            "time_budget_s": self.opt.time_budget,
            "preserved": self.saver is not None,
        }
        spacing = self.spacing or (self.end - self.a)
        confidence = {
            "min_detected_fake_bytes": spacing,
            "boundary_uncertainty_bytes": uncertainty,
            "cache_assumption_bytes": self.flush_bytes,
            "any_wrap_size_detected": bool(self.flush_bytes and self.spacing and self.spacing <= self.flush_bytes),
            "statement": self._statement(verdict, spacing, uncertainty),
        }
        evidence = {
            "samples_by_status": statuses,
            "bad_samples_by_class": {k: v for k, v in counts.items() if v and k != "ok"},
            "wrap_distances": sorted(set(self.distances))[:16],
            "misplaced_examples": [list(p) for p in self.misplaced[:8]],
            "error_ranges": [list(r) for r in self.error_ranges],
        }
        return ProbeResult(
            size=self.size, readable_end=self.end, usable_bytes=usable_out, verdict=verdict, kind=kind,
            bad_ranges=bad_ranges, wrap_bytes=wrap, tail_start=tail_start, cache_bytes=self.cache_bytes,
            cache_note=self.cache_note, complete=complete, error=error, removed_at=removed_at, method=method,
            confidence=confidence, evidence=evidence, notes=self.notes, seconds=self._elapsed())

    def _statement(self, verdict: str | None, spacing: int, uncertainty: int) -> str:
        mb = spacing / 1e6
        cache = self.flush_bytes / 1e6
        if verdict == "genuine":
            text = (f"every fake or failing area at the end longer than {mb:.3g} MB would have been found "
                    f"(a block every {mb:.3g} MB, read back after {cache:.3g} MB more were written: a card "
                    f"buffering less than that cannot hide lost blocks)")
            if not (self.flush_bytes and self.spacing and self.spacing <= self.flush_bytes):
                text += ("; but a card that wraps around at a size that is not a power of two could have been "
                         "missed (the blocks were further apart than the window: give it more time)")
            return text
        if uncertainty:
            return f"the boundary is known to within {uncertainty} bytes (time budget)"
        return "the boundary was located to the sector"
