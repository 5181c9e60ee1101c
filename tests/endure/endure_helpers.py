"""Emulated cards for endurance tests, and sectors put straight onto a card between rounds."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cardbench.emulate import CardSpec
from cardbench.endure.sectors import RoundSectors
from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.units import MiB

ROOT = os.geteuid() == 0
needs_emulator = pytest.mark.skipif(not (ROOT and os.path.exists("/dev/fuse")), reason="needs root and /dev/fuse")

#: an unusual size, so that the search for a card among block devices of its size meets no other
#: test's emulated card (those are 16/27/32/64 MiB)
SIZE = 19 * MiB
SECTORS = SIZE // 512


def spec(name: str = "e0", **kw) -> CardSpec:
    """A small card that is not throttled (rounds in a fraction of a second)."""
    return CardSpec(size=SIZE, write_rate=10e9, read_rate=10e9, name=name, **kw)


def put(device: str, offset: int, data: bytes) -> None:
    """Write ``data`` (a multiple of 512 bytes) at ``offset`` of the card, O_DIRECT, flushed."""
    buf = aligned_buffer(len(data))
    try:
        buf[:] = data
        with DataFile.open(device, write=True) as f:
            f.write_exact(buf, offset)
            f.sync()
    finally:
        release(buf)


def sectors_of(card_uuid: str, pos: int, rnd: int, n: int = 8) -> bytes:
    """``n`` sectors of card ``card_uuid``'s round ``rnd`` at ``pos``, as the run writes them."""
    b = bytearray(n * 512)
    RoundSectors(card_uuid).fill(b, pos, rnd)
    return bytes(b)


def garbage(n: int = 8) -> bytes:
    return np.random.default_rng(7).bytes(n * 512)
