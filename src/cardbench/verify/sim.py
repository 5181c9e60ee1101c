"""A simulated card in memory, for testing the probe's logic in milliseconds.

It has what the FUSE emulator (:mod:`cardbench.emulate`) does not: a *data* cache that answers
reads of recently written sectors even when the flash dropped them (the trick that fools naive
fake-capacity probes), dropped writes that read back as the old contents, and reads past the real
end that fail. Same methods as :class:`cardbench.verify.io.DeviceIO`.
"""

from __future__ import annotations

import errno
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from cardbench.verify.io import IOFailure, IOStats

SECTOR = 512


@dataclass
class SimSpec:
    size: int
    real_size: int | None = None
    #: "wraparound" | "drop" | "unreadable" (reads and writes past real_size fail with EIO)
    fake_mode: str = "wraparound"
    #: what a dropped sector reads back as: "zero" | "old" (what was there before) | "ff"
    dropped_reads: str = "zero"
    #: bytes of recently written sectors the controller keeps and answers reads from (LRU)
    cache_bytes: int = 0
    #: [(start, end, "read"|"write"|"both")]
    errors: list[tuple[int, int, str]] = field(default_factory=list)
    #: after this many I/O requests every request fails with ENODEV (card pulled out)
    yank_after: int | None = None
    #: initial content of every sector: a function pos -> 512 bytes (default zeros)
    initial: Callable[[int], bytes] | None = None


class SimCard:
    """In-memory card (sparse: only written sectors are stored)."""

    def __init__(self, spec: SimSpec):
        self.spec = spec
        self.size = spec.size
        self.sector = SECTOR
        self.path = "sim"
        self.store: dict[int, bytes] = {}
        self.cache: OrderedDict[int, bytes] = OrderedDict()
        self.cache_sectors = spec.cache_bytes // SECTOR
        self.ops = 0
        self.stats = IOStats()
        self.yanked = False

    # -- mapping ------------------------------------------------------------------------------
    def _phys(self, pos: int) -> int | None:
        real = self.spec.real_size
        if real is None or pos < real:
            return pos
        if self.spec.fake_mode == "wraparound":
            return pos % real
        return None

    def _initial(self, phys: int) -> bytes:
        if self.spec.initial is None:
            return bytes(SECTOR)
        return bytes(self.spec.initial(phys))

    def _stored(self, phys: int) -> bytes:
        return self.store.get(phys) or self._initial(phys)

    def _tick(self, op: str, offset: int, length: int) -> None:
        self.ops += 1
        if self.yanked or (self.spec.yank_after is not None and self.ops > self.spec.yank_after):
            self.yanked = True
            raise IOFailure(op, offset, length, errno.ENODEV, f"{op} error at byte {offset}: device gone")
        if offset < 0 or offset + length > self.size:
            raise IOFailure(op, offset, length, errno.EIO, f"short {op} at byte {offset}")
        for s, e, kind in self.spec.errors:
            if kind in (op, "both") and offset < e and offset + length > s:
                raise IOFailure(op, offset, length, errno.EIO, f"{op} error at byte {offset}: I/O error")
        real = self.spec.real_size
        if self.spec.fake_mode == "unreadable" and real is not None and offset + length > real:
            raise IOFailure(op, offset, length, errno.EIO, f"{op} error at byte {offset}: I/O error")

    # -- the four methods ------------------------------------------------------------------------
    def read(self, offset: int, length: int) -> memoryview:
        self._tick("read", offset, length)
        out = bytearray(length)
        for i in range(0, length, SECTOR):
            pos = offset + i
            if pos in self.cache:
                out[i:i + SECTOR] = self.cache[pos]
                continue
            phys = self._phys(pos)
            if phys is None:
                mode = self.spec.dropped_reads
                data = b"\xff" * SECTOR if mode == "ff" else (self._initial(pos) if mode == "old" else bytes(SECTOR))
            else:
                data = self._stored(phys)
            out[i:i + SECTOR] = data
        self.stats.reads += 1
        self.stats.bytes_read += length
        return memoryview(out)

    def write_pattern(self, offset: int, length: int, pattern) -> None:
        self._tick("write", offset, length)
        data = pattern.block(offset, length)
        self.write_bytes(offset, data)

    def write_bytes(self, offset: int, data) -> None:
        data = bytes(data)
        for i in range(0, len(data), SECTOR):
            pos = offset + i
            sec = data[i:i + SECTOR]
            phys = self._phys(pos)
            if phys is not None:
                self.store[phys] = sec
            if self.cache_sectors:
                self.cache[pos] = sec
                self.cache.move_to_end(pos)
                # keyed by address: a write to an alias leaves the other address's stale copy
                # in the cache (it hides wraparound until evicted, as real controllers do)
                while len(self.cache) > self.cache_sectors:
                    self.cache.popitem(last=False)
        self.stats.writes += 1
        self.stats.bytes_written += len(data)

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass

    # -- for tests ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[int, bytes]:
        return dict(self.store)


class SimSaver:
    """The journal for a simulated card: saves what reads back, restores in reverse order."""

    def __init__(self, card: SimCard):
        self.card = card
        self.saved: list[tuple[int, bytes]] = []
        self._done: list[tuple[int, int]] = []

    def save(self, offset: int, length: int) -> None:
        end = offset + length
        cur = offset
        for s, e in sorted(self._done):
            if e <= cur or s >= end:
                continue
            if s > cur:
                self._save(cur, s)
            cur = max(cur, e)
        if cur < end:
            self._save(cur, end)

    def _save(self, s: int, e: int) -> None:
        data = bytes(self.card.read(s, e - s))
        self.saved.append((s, data))
        self._done.append((s, e))

    def restore(self) -> int:
        total = 0
        for off, data in reversed(self.saved):
            self.card.write_bytes(off, data)
            total += len(data)
        self.card.cache.clear()
        self.saved.clear()
        self._done.clear()
        return total
