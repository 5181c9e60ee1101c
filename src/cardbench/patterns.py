"""Fast, incompressible, verifiable data: every 512-byte sector says where it belongs.

Layout of each 512-byte sector written at absolute position ``pos`` (bytes from the start of
the file or device):

    bytes 0..7    the run tag (uint64, little endian): which run wrote it
    bytes 8..15   ``pos`` itself (uint64): where it belongs
    bytes 16..511 pseudo-random bytes from a per-run pool, at a position derived from ``pos``

The pool is 8 MiB of seeded random data (numpy PCG64); sector k takes pool row (k * 4099) mod
16384, so the data is incompressible, depends on the sector's position only, and can be
regenerated anywhere for checking. Gathering the rows and stamping the headers are vectorised
numpy operations, so making and checking data runs at memory speed (bench/patterns_speed.py).

Checking classifies each sector as ``ok``, ``zero`` (reads back as zeros: dropped write),
``overwritten`` (a sector of this run that belongs at another position: wraparound),
``foreign`` (another run's tag) or ``corrupted`` (anything else).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SECTOR = 512
POOL_BYTES = 8 << 20
_POOL_SECTORS = POOL_BYTES // SECTOR
_STRIDE = 4099  # prime: neighbouring positions draw far-apart pool slices


@dataclass
class CheckCounts:
    """Per-class sector counts of a check, and the positions of the first few bad sectors."""

    ok: int = 0
    zero: int = 0
    overwritten: int = 0
    foreign: int = 0
    corrupted: int = 0
    first_bad: list[int] = field(default_factory=list)
    #: for overwritten sectors: (where found, where it belongs), first few
    misplaced: list[tuple[int, int]] = field(default_factory=list)

    @property
    def bad(self) -> int:
        return self.zero + self.overwritten + self.foreign + self.corrupted

    def add(self, other: "CheckCounts") -> None:
        self.ok += other.ok
        self.zero += other.zero
        self.overwritten += other.overwritten
        self.foreign += other.foreign
        self.corrupted += other.corrupted
        self.first_bad.extend(other.first_bad[: max(0, 16 - len(self.first_bad))])
        self.misplaced.extend(other.misplaced[: max(0, 16 - len(self.misplaced))])

    def to_dict(self) -> dict:
        return {"ok": self.ok, "zero": self.zero, "overwritten": self.overwritten, "foreign": self.foreign,
                "corrupted": self.corrupted, "first_bad": self.first_bad,
                "misplaced": [list(p) for p in self.misplaced]}


class Pattern:
    """The data of one run. ``Pattern(tag)`` makes the same bytes every time for the same tag."""

    def __init__(self, tag: int):
        self.tag = int(tag) & 0xFFFF_FFFF_FFFF_FFFF
        rng = np.random.Generator(np.random.PCG64(self.tag))
        self._rows = np.frombuffer(rng.bytes(POOL_BYTES), dtype=np.uint8).reshape(-1, SECTOR)

    def fill(self, buf, pos: int) -> None:
        """Fill ``buf`` (writable buffer, length a multiple of 512) with the data that belongs at ``pos``.

        Each sector depends on its own position only, so ``block(0, 1 MiB)[4096:8192] ==
        block(4096, 4096)``: data written in one request size can be checked in another.
        """
        view = np.frombuffer(buf, dtype=np.uint8)
        n = view.size
        if n % SECTOR or pos % SECTOR:
            raise ValueError("buffer length and position must be multiples of 512")
        sectors = view.reshape(-1, SECTOR)
        first = pos // SECTOR
        rows = (np.arange(first, first + sectors.shape[0], dtype=np.uint64) * _STRIDE) % _POOL_SECTORS
        np.take(self._rows, rows.astype(np.intp), axis=0, out=sectors)
        hdr = sectors[:, :16].view(np.uint64)
        hdr[:, 0] = self.tag
        hdr[:, 1] = np.arange(pos, pos + n, SECTOR, dtype=np.uint64)

    def block(self, pos: int, length: int) -> bytearray:
        buf = bytearray(length)
        self.fill(buf, pos)
        return buf

    def check(self, buf, pos: int, scratch: bytearray | None = None) -> CheckCounts:
        """Compare ``buf`` (read from ``pos``) with what this run wrote there; classify each sector."""
        got = np.frombuffer(buf, dtype=np.uint8)
        n = got.size
        if scratch is None or len(scratch) < n:
            scratch = bytearray(n)
        exp_mv = memoryview(scratch)[:n]
        self.fill(exp_mv, pos)
        exp = np.frombuffer(exp_mv, dtype=np.uint8)
        counts = CheckCounts()
        if np.array_equal(got, exp):
            counts.ok = n // SECTOR
            return counts
        g = got.reshape(-1, SECTOR)
        e = exp.reshape(-1, SECTOR)
        same = (g == e).all(axis=1)
        counts.ok = int(same.sum())
        bad_idx = np.nonzero(~same)[0]
        ghdr = g[:, :16].view(np.uint64)
        for i in bad_idx:
            where = pos + int(i) * SECTOR
            row = g[i]
            if not row.any():
                counts.zero += 1
            elif int(ghdr[i, 0]) == self.tag and int(ghdr[i, 1]) != where:
                belongs = int(ghdr[i, 1])
                if belongs % SECTOR == 0 and np.array_equal(row, self.block(belongs, SECTOR)):
                    counts.overwritten += 1
                    if len(counts.misplaced) < 16:
                        counts.misplaced.append((where, belongs))
                else:
                    counts.corrupted += 1
            elif int(ghdr[i, 0]) != self.tag and ghdr[i, 1] % SECTOR == 0 and int(ghdr[i, 0]) != 0:
                counts.foreign += 1
            else:
                counts.corrupted += 1
            if len(counts.first_bad) < 16:
                counts.first_bad.append(where)
        return counts
