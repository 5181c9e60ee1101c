"""The endurance sector layout on buffers (no device): each class made by hand and named."""

from __future__ import annotations

import numpy as np
import pytest

from cardbench.endure.sectors import (
    CLASSES,
    CORRUPT,
    ERASED,
    FOREIGN,
    MISPLACED,
    OK,
    STALE,
    RoundSectors,
    bad_counts,
    new_card_uuid,
    sector_uuids,
)

N = 64            # sectors in a buffer


def _buf(s: RoundSectors, pos: int, rnd: int) -> bytearray:
    b = bytearray(N * 512)
    s.fill(b, pos, rnd)
    return b


def test_a_round_reads_back_whole():
    s = RoundSectors(new_card_uuid())
    b = _buf(s, 1 << 20, 3)
    counts = s.classify(b, 1 << 20, 3)
    assert counts[OK] == N and counts.sum() == N
    assert bad_counts(counts) == {c: 0 for c in CLASSES}
    # the same bytes are made again from (address, round) alone, whatever the request
    half = bytearray(32 * 512)
    s.fill(half, (1 << 20) + 32 * 512, 3)
    assert bytes(half) == bytes(b[32 * 512:])


def test_each_class_is_named():
    me = RoundSectors(new_card_uuid())
    other = RoundSectors(new_card_uuid())
    pos, rnd = 8 << 20, 5
    b = _buf(me, pos, rnd)
    b[0:512] = bytes(512)                                           # erased 00
    b[512:1024] = b"\xff" * 512                                     # erased FF
    b[1024:1536] = _buf(me, pos, rnd - 2)[1024:1536]                # an earlier round, right address: stale
    b[1536:2048] = _buf(me, pos + (1 << 20), rnd)[0:512]            # another address: misplaced
    b[2048:2560] = _buf(me, 0, 1)[0:512]                            # another address, earlier round: misplaced
    b[2560:3072] = _buf(other, pos, rnd)[2560:3072]                 # another card: foreign
    b[3072 + 100] ^= 0x01                                           # one bit of the body: corrupt
    b[3584 + 20] ^= 0x80                                            # one bit of the address: check fails: corrupt
    b[4096:4608] = np.random.default_rng(1).bytes(512)              # noise: corrupt
    b[4608:5120] = _buf(me, pos, rnd + 1)[4608:5120]                # a round not written yet: corrupt
    got = me.classes(b, pos, rnd)
    want = [ERASED, ERASED, STALE, MISPLACED, MISPLACED, FOREIGN, CORRUPT, CORRUPT, CORRUPT, CORRUPT]
    assert list(got[:10]) == want
    assert (got[10:] == OK).all()
    counts = bad_counts(me.classify(b, pos, rnd))
    assert counts == {"erased": 2, "stale": 1, "misplaced": 2, "foreign": 1, "corrupt": 4, "unreadable": 0}


def test_a_stale_sector_of_the_same_round_is_not_stale():
    """A sector whose header says this very round and address but whose body differs is damage."""
    me = RoundSectors(new_card_uuid())
    b = _buf(me, 0, 2)
    b[600] ^= 0xFF
    assert me.classes(b, 0, 2)[1] == CORRUPT


def test_sector_uuids_names_the_card():
    u = new_card_uuid()
    s = RoundSectors(u)
    b = _buf(s, 0, 1)
    b[512:1024] = bytes(512)
    ids = sector_uuids(b)
    assert ids[0] == u and ids[1] is None and ids[2] == u


def test_bad_input():
    with pytest.raises(ValueError):
        RoundSectors("00" * 16)
    s = RoundSectors(new_card_uuid())
    with pytest.raises(ValueError):
        s.fill(bytearray(512), 100, 1)
    with pytest.raises(ValueError):
        s.fill(bytearray(512), 0, 0)
