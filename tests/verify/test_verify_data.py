"""The test data (cardbench.patterns): every sector is fixed by (tag, position), whatever request wrote it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.patterns import Pattern, bad_runs, merge_ranges

TAG = 0x1234_5678_9ABC_DEF1


def test_sector_layout():
    sp = Pattern(TAG)
    big = np.frombuffer(sp.block(1 << 30, 1 << 20), dtype=np.uint64).reshape(-1, 64)
    assert (big[:, 0] == TAG).all()
    assert (big[:, 1] == np.arange(1 << 30, (1 << 30) + (1 << 20), 512, dtype=np.uint64)).all()
    # incompressible: no two sectors share a body
    assert len({bytes(row[2:]) for row in big}) == big.shape[0]


@settings(max_examples=40, deadline=None)
@given(start=st.integers(0, 1 << 20), cut=st.integers(1, 63), n=st.integers(2, 64))
def test_any_request_split_gives_the_same_bytes(start, cut, n):
    sp = Pattern(TAG)
    pos = start * 512
    whole = sp.block(pos, n * 512)
    cut = min(cut, n - 1)
    parts = sp.block(pos, cut * 512) + sp.block(pos + cut * 512, (n - cut) * 512)
    assert whole == parts
    assert sp.judge(parts, pos).ok


def test_classes():
    sp = Pattern(TAG)
    pos = 8 << 20
    buf = bytearray(sp.block(pos, 8 * 512))
    buf[512:1024] = sp.block(pos + (256 << 20), 512)            # wrapped: data of 256 MiB later
    buf[1024:1536] = bytes(512)                                  # dropped: zeros
    buf[1536:2048] = Pattern(99).block(pos + 1536, 512)          # another run's data
    buf[2048 + 100] ^= 0xFF                                      # our sector, damaged body
    buf[2560:3072] = b"\xff" * 512                               # erased flash
    j = sp.judge(buf, pos, keep_classes=True)
    assert j.counts == {"ok": 3, "zero": 1, "overwritten": 1, "changed": 1, "foreign": 1, "garbage": 1}
    assert j.first_bad == pos + 512 and j.first_bad_class == "overwritten"
    assert j.misplaced == [(pos + 512, pos + (256 << 20))]
    runs = bad_runs(j.classes, pos)
    assert runs[0][:2] == (pos + 512, pos + 1024)
    assert [r[1] - r[0] for r in runs] == [512] * 5


def test_a_damaged_tag_is_damage_not_foreign():
    sp = Pattern(TAG)
    buf = bytearray(sp.block(4096, 512))
    buf[0] ^= 1
    assert sp.judge(buf, 4096).counts["changed"] == 1


def test_merge_ranges():
    assert merge_ranges([(5, 6), (0, 2), (2, 3), (10, 12)]) == [[0, 3], [5, 6], [10, 12]]
    assert merge_ranges([(0, 2), (4, 5)], gap=2) == [[0, 5]]


def test_memory_flat_for_big_positions():
    sp = Pattern(TAG)
    buf = np.empty(1 << 20, dtype=np.uint8)
    sp.fill(buf, (1 << 40) - (1 << 20))       # near 1 TiB: no position-sized tables anywhere
    assert sp.judge(buf, (1 << 40) - (1 << 20)).ok
