import zlib

from cardbench.patterns import SECTOR, Pattern


def test_pattern_is_reproducible_and_incompressible():
    a = Pattern(42).block(1 << 20, 1 << 20)
    b = Pattern(42).block(1 << 20, 1 << 20)
    assert a == b
    assert Pattern(43).block(1 << 20, 1 << 20) != a
    assert len(zlib.compress(bytes(a), 6)) > 0.97 * len(a)  # only the 16-byte sector headers compress


def test_check_classifies_sectors():
    p = Pattern(7)
    pos = 64 * SECTOR
    buf = p.block(pos, 16 * SECTOR)
    assert p.check(buf, pos).ok == 16
    buf[0:SECTOR] = p.block(3 * SECTOR, SECTOR)            # wraparound: data of position 3*512
    buf[SECTOR:2 * SECTOR] = bytes(SECTOR)                 # dropped write: zeros
    buf[2 * SECTOR + 100] ^= 0xFF                          # a flipped byte
    buf[3 * SECTOR:4 * SECTOR] = Pattern(8).block(pos + 3 * SECTOR, SECTOR)  # another run's data
    c = p.check(buf, pos)
    assert (c.ok, c.overwritten, c.zero, c.corrupted, c.foreign) == (12, 1, 1, 1, 1)
    assert c.misplaced == [(pos, 3 * SECTOR)]
    assert c.first_bad == [pos, pos + SECTOR, pos + 2 * SECTOR, pos + 3 * SECTOR]


def test_sector_data_depends_on_position_only():
    p = Pattern(99)
    big = p.block(0, 1 << 20)
    assert big[4096:8192] == p.block(4096, 4096)
    assert p.check(memoryview(big)[8192:16384], 8192).ok == 16
