import zlib

import numpy as np

from cardbench.engine.buffers import AlignedBuffers
from cardbench.patterns import SECTOR, FreshWrites, Pattern


def test_pattern_is_reproducible_and_incompressible():
    a = Pattern(42).block(1 << 20, 1 << 20)
    b = Pattern(42).block(1 << 20, 1 << 20)
    assert a == b
    assert Pattern(43).block(1 << 20, 1 << 20) != a
    # only the 24-byte sector headers compress (tag, position, sequence number: 4.7% of a sector)
    assert len(zlib.compress(bytes(a), 6)) > 0.95 * len(a)


def test_judge_classifies_sectors():
    p = Pattern(7)
    pos = 64 * SECTOR
    buf = p.block(pos, 16 * SECTOR)
    assert p.judge(buf, pos).ok
    buf[0:SECTOR] = p.block(3 * SECTOR, SECTOR)            # wraparound: data of position 3*512
    buf[SECTOR:2 * SECTOR] = bytes(SECTOR)                 # dropped write: zeros
    buf[2 * SECTOR + 100] ^= 0xFF                          # a flipped byte
    buf[3 * SECTOR:4 * SECTOR] = Pattern(8).block(pos + 3 * SECTOR, SECTOR)  # another run's data
    j = p.judge(buf, pos)
    c = j.counts
    assert (c["ok"], c["overwritten"], c["zero"], c["changed"], c["foreign"]) == (12, 1, 1, 1, 1)
    assert j.misplaced == [(pos, 3 * SECTOR)]
    assert j.first_bad == pos and j.first_bad_class == "overwritten"


def test_sector_data_depends_on_position_only():
    p = Pattern(99)
    big = p.block(0, 1 << 20)
    assert big[4096:8192] == p.block(4096, 4096)
    assert p.judge(memoryview(big)[8192:16384], 8192).ok


def test_each_write_of_a_position_has_its_own_data():
    p = Pattern(5)
    pos = 3 << 20
    first, again = p.block(pos, 8192, seq=1), p.block(pos, 8192, seq=2)
    a = np.frombuffer(first, np.uint8).reshape(-1, SECTOR)
    b = np.frombuffer(again, np.uint8).reshape(-1, SECTOR)
    assert not (a[:, 24:] == b[:, 24:]).all(axis=1).any()     # every body differs, not only the header
    assert p.judge(again, pos, seq=2).ok and not p.judge(again, pos, seq=1).ok
    tags, where, seqs, intact = p.headers(again)
    assert intact.all() and (tags == 5).all() and (seqs == 2).all()
    assert (where == np.arange(pos, pos + 8192, SECTOR)).all()
    # a damaged body is not intact; another position's data of another write is overwritten
    again[SECTOR + 100] ^= 1
    assert p.headers(again)[3].tolist() == [True, False] + [True] * 14
    j = p.judge(p.block(0, SECTOR, seq=9), 1 << 20, seq=3)
    assert j.counts["overwritten"] == 1 and j.misplaced == [(1 << 20, 0)]
    # the engine's per-write maker makes the same bytes, small writes and large
    for size in (2048, 4096, 3 << 20):   # the small loop, the unrolled 4 KiB, numpy
        with AlignedBuffers(2, size) as bufs:
            fresh = FreshWrites(p, bufs, size, first_seq=7)
            fresh.fill(1, pos)
            fresh.fill(0, pos)
            assert fresh.seq == 9
            assert bytes(bufs[1]) == bytes(p.block(pos, size, seq=7))
            assert bytes(bufs[0]) == bytes(p.block(pos, size, seq=8))
            fresh.close()
