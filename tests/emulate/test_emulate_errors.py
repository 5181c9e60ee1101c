"""EIO on byte ranges, and yanking the card."""

from __future__ import annotations

import errno
import os

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
from emulate_helpers import assert_gone, dio_read, dio_write, needs_emulator

pytestmark = needs_emulator

BLOCK = b"\x5a" * 4096


def eio(fn, *args) -> bool:
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == errno.EIO, e
        return True
    return False


def test_eio_ranges_by_kind_and_live():
    spec = CardSpec(size=16 * MiB, write_rate=100 * MB, read_rate=100 * MB, name="eio",
                    errors=[(1 * MiB, 2 * MiB, "read"), (3 * MiB, 4 * MiB, "write"), (5 * MiB, 6 * MiB, "both")])
    with EmulatedCard(spec) as card:
        dev = card.device
        # read-only range
        assert eio(dio_read, dev, 1 * MiB + 8192, 4096)
        assert not eio(dio_write, dev, 1 * MiB + 8192, BLOCK)
        # write-only range
        assert eio(dio_write, dev, 3 * MiB, BLOCK)
        assert not eio(dio_read, dev, 3 * MiB, 4096)
        # both
        assert eio(dio_read, dev, 6 * MiB - 4096, 4096)
        assert eio(dio_write, dev, 5 * MiB, BLOCK)
        # a request that only touches the range fails too
        assert eio(dio_read, dev, 1 * MiB - 4096, 8192)
        # outside
        dio_write(dev, 8 * MiB, BLOCK)
        assert dio_read(dev, 8 * MiB, 4096) == BLOCK
        assert card.status()["counters"]["eio"] == 5
        # live: clear the errors, add a new one
        card.set(errors=[(8 * MiB, 8 * MiB + 4096, "read")])
        assert not eio(dio_read, dev, 1 * MiB + 8192, 4096)
        assert eio(dio_read, dev, 8 * MiB, 4096)


def test_yank_fails_everything_and_teardown_still_cleans_up():
    spec = CardSpec(size=32 * MiB, write_rate=50 * MB, read_rate=50 * MB, name="yank")
    card = EmulatedCard(spec)
    with card:
        workdir, dev, pid = card.reader.workdir, card.device, card.reader.pid
        with card.filesystem("ext4") as mnt:
            with open(os.path.join(mnt, "f"), "wb") as f:
                f.write(b"x" * 65536)
            card.yank()
            assert card.status()["yanked"]
            assert eio(dio_read, dev, 0, 4096)
            assert eio(dio_write, dev, 16 * MiB, BLOCK)
            with pytest.raises(OSError):  # the file system cannot write back
                with open(os.path.join(mnt, "g"), "wb") as f:
                    f.write(b"y" * 65536)
                    os.fsync(f.fileno())
    assert_gone(workdir, dev, pid)
