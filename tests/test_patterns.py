import zlib

from cardbench.patterns import SECTOR, Pattern


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
