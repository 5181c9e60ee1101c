"""The emulator's flash geometry: AU and page crossings, open AUs, FAT-tuned AUs (the pacing
model without FUSE, then the same on a real loop device)."""

from __future__ import annotations

import mmap
import os
import time

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.emulate.pacing import ReaderModel
from cardbench.errors import UsageError
from cardbench.units import MB, MiB
from emulate_helpers import needs_emulator

KiB = 1024


def model(**kw):
    spec = CardSpec(**{"size": 256 * MiB, "write_rate": 10 * MB, "read_rate": 20 * MB, **kw})
    return ReaderModel(None).add(spec)


def test_crossings_cost_their_set_time_and_nothing_else():
    c = model(au_bytes=12 * MiB, page_bytes=16 * KiB, au_cross=0.002, page_cross=0.0005)
    assert c.geometry_seconds("read", 12 * MiB - 512, 1024) == 0.002        # across the AU boundary
    assert c.geometry_seconds("read", 4 * MiB - 512, 1024) == 0.0005        # 4 MiB: only a page boundary
    assert c.geometry_seconds("read", 12 * MiB - 1024, 1024) == 0.0         # just before
    assert c.geometry_seconds("read", 12 * MiB, 1024) == 0.0                # just after
    assert c.geometry_seconds("read", 16 * KiB + 512, 1024) == 0.0
    assert c.counters.au_crossings == 1 and c.counters.page_crossings == 1


def test_no_geometry_costs_nothing():
    c = model()
    assert c.geometry_seconds("read", 4 * MiB - 512, 1024) == 0.0
    assert c.geometry_seconds("write", 4 * MiB - 512, 1024) == 0.0


def _round_robin(c, units, chunk=64 * KiB, rounds=4, first=8):
    """Write ``rounds`` chunks into each of ``units`` AUs in turn; the GCs of the later rounds."""
    au = c.au_bytes
    before = 0
    for r in range(rounds):
        if r == 1:
            before = c.counters.garbage_collections
        for u in range(units):
            c.geometry_seconds("write", (first + u) * au + r * chunk, chunk)
    return c.counters.garbage_collections - before


@pytest.mark.parametrize("open_aus", [2, 6])
def test_open_aus_past_the_limit_every_write_collects(open_aus):
    c = model(au_bytes=4 * MiB, open_aus=open_aus, gc_seconds=0.02)
    assert _round_robin(c, open_aus) == 0
    assert _round_robin(c, open_aus + 1, first=40) == 3 * (open_aus + 1)


def test_random_order_has_its_own_limit_and_fat_units_are_free():
    c = model(au_bytes=4 * MiB, open_aus=4, open_aus_random=1, gc_seconds=0.02, fat_aus=2)
    au = 4 * MiB
    # out of order in two AUs at once: each switch closes the other
    for _ in range(3):
        for u in (10, 11):
            c.geometry_seconds("write", u * au + 1 * MiB, 4096)
            c.geometry_seconds("write", u * au + 3 * MiB, 4096)
    assert c.counters.garbage_collections >= 4
    c = model(au_bytes=4 * MiB, open_aus=1, gc_seconds=0.02, fat_aus=2)
    for i in range(20):   # the FAT AUs and one more, in any order: nothing collected
        c.geometry_seconds("write", (i % 2) * au + (i * 37 % 64) * 4096, 4096)
        c.geometry_seconds("write", 9 * au + i * 4096, 4096)
    assert c.counters.garbage_collections == 0


@pytest.mark.parametrize("kw", [dict(page_bytes=16 * KiB), dict(au_bytes=4 * MiB, page_bytes=3 * MiB),
                                dict(au_bytes=1000), dict(open_aus=2), dict(au_bytes=4 * MiB, au_cross=-1),
                                dict(au_bytes=4 * MiB, open_aus=2, open_aus_random=3)])
def test_bad_geometry_is_one_line(kw):
    with pytest.raises(UsageError):
        CardSpec(size=64 * MiB, write_rate=MB, read_rate=MB, **kw)


def test_spec_round_trips_through_json():
    spec = CardSpec(size=64 * MiB, write_rate=MB, read_rate=MB, au_bytes=12 * MiB, page_bytes=16 * KiB,
                    au_cross=0.001, open_aus=2, gc_seconds=0.01, fat_aus=1)
    assert CardSpec.from_json(spec.to_json()) == spec


def _read_us(fd, buf, offset, tries=7):
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        os.preadv(fd, [buf], offset)
        best = min(best, time.perf_counter() - t)
    return best


@needs_emulator
@pytest.mark.needs_root
@pytest.mark.timing
def test_loop_device_sees_the_crossing_delay():
    """On the real loop device a 1 KiB O_DIRECT read across the AU boundary is at least au_cross
    slower than the reads beside it (minima: load only adds)."""
    spec = CardSpec(size=64 * MiB, write_rate=40 * MB, read_rate=40 * MB, au_bytes=12 * MiB,
                    page_bytes=16 * KiB, au_cross=0.003, page_cross=0.001)
    with EmulatedCard(spec) as card:
        buf = mmap.mmap(-1, 1024)
        fd = os.open(card.device, os.O_RDONLY | os.O_DIRECT)
        try:
            pre, on, post = (_read_us(fd, buf, 12 * MiB + d) for d in (-1024, -512, 0))
            page = _read_us(fd, buf, 4 * MiB - 512)
        finally:
            os.close(fd)
            buf.close()
        counters = card.status()["counters"]
    assert on - max(pre, post) >= 0.003 * 0.95
    assert 0.001 * 0.95 <= page - max(pre, post) < 0.003
    assert counters["au_crossings"] == 7 and counters["page_crossings"] == 7
