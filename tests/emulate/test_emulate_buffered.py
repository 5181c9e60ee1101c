"""Buffered I/O through ext4 on the card is paced too: write()+fsync, and cold reads after remount."""

from __future__ import annotations

import os
import time

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
from emulate_helpers import needs_emulator

pytestmark = [needs_emulator, pytest.mark.timing]

WRITE = 8 * MB
READ = 12 * MB
FILE = 24 * MiB


@pytest.mark.slow
def test_buffered_write_fsync_and_cold_read_are_paced():
    spec = CardSpec(size=96 * MiB, write_rate=WRITE, read_rate=READ, name="ext4card")
    with EmulatedCard(spec) as card:
        t = time.monotonic()
        with card.filesystem("ext4") as mnt:
            setup = time.monotonic() - t
            assert setup < 5, f"mkfs + mount took {setup:.1f} s (mkfs should run unpaced)"
            path = os.path.join(mnt, "data.bin")
            chunk = os.urandom(MiB)
            before = card.status()["counters"]["bytes_written"]
            t = time.monotonic()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                for _ in range(FILE // MiB):
                    os.write(fd, chunk)
                os.fsync(fd)
            finally:
                os.close(fd)
            w = FILE / (time.monotonic() - t)
            assert card.status()["counters"]["bytes_written"] - before >= FILE  # it reached the card
            card.remount()
            before = card.status()["counters"]["bytes_read"]
            t = time.monotonic()
            n = 0
            with open(path, "rb", buffering=0) as f:
                while block := f.read(MiB):
                    n += len(block)
            r = n / (time.monotonic() - t)
            assert n == FILE
            assert card.status()["counters"]["bytes_read"] - before >= FILE  # cold: from the card
            print(f"\next4 buffered: write+fsync {w / MB:.3f} MB/s (set {WRITE / MB}), "
                  f"cold read {r / MB:.3f} MB/s (set {READ / MB})")
            assert w == pytest.approx(WRITE, rel=0.03)
            assert r == pytest.approx(READ, rel=0.03)
