"""The I/O layer's shared parts on real files: the one errno table (the same fault is the same
error whichever command meets it), DataFile's typed errors, the Timed and
Saved wrappers, and the one verdict rule the quick probe and the full verify share."""

from __future__ import annotations

import errno
import os

import pytest

from cardbench.engine.buffers import aligned_buffer
from cardbench.engine.data import DataFile, Saved, Timed
from cardbench.engine.errors import GONE, IoFault, IoSetupError, io_error
from cardbench.errors import DeviceFault, TargetError
from cardbench.verify.io import DeviceIO, IOFailure
from cardbench.verify.verdict import judge


@pytest.mark.parametrize("err", [errno.ENOMEDIUM, errno.ESHUTDOWN, errno.ENODEV, errno.ENXIO, errno.EIO])
def test_one_table_for_every_path(err, tmp_path):
    """A fault gives one class and one wording through the engines, the probe's device I/O and
    the full verify (all read the same table)."""
    e = io_error(OSError(err, os.strerror(err)), "/dev/x", op="read", offset=4096)
    assert isinstance(e, IoFault) and isinstance(e, DeviceFault) and e.exit_code == 5
    assert (e.errno, e.op, e.offset) == (err, "read", 4096)
    assert e.gone == (err in GONE)
    from cardbench.verify.io import _failure
    f = _failure("read", 4096, 512, e)
    assert f.gone == e.gone and e.message.split(": ", 1)[1] in f.message


def test_setup_errors_are_target_errors(tmp_path):
    with pytest.raises(IoSetupError) as ei:
        DataFile.open(str(tmp_path / "missing"), write=False)
    assert isinstance(ei.value, TargetError) and ei.value.errno == errno.ENOENT and ei.value.op == "open"


def test_datafile_reads_back_timed(tmp_path):
    p = str(tmp_path / "data")
    buf = aligned_buffer(4096)
    buf[:4] = b"card"
    with DataFile.open(p, write=True, create=True) as f:
        assert f.write_at(buf, 0) == 4096
        f.sync()
    with DataFile.open(p, write=False) as f:
        t = Timed(f)
        out = aligned_buffer(4096)
        assert t.read_at(out, 0) == 4096 and out[:4] == b"card"
        assert t.stats.reads == 1 and t.stats.bytes_read == 4096 and t.stats.read_seconds > 0
        with pytest.raises(IoFault):
            f.write_at(buf, 0)                     # opened read-only: EBADF, a fault of the card's I/O


def test_saved_saves_before_every_write(tmp_path):
    p = str(tmp_path / "data")
    saved = []

    class Saver:
        def save(self, offset, length):
            saved.append((offset, length))
            with open(p, "rb") as fh:
                fh.seek(offset)
                assert fh.read(length) == b"\0" * length      # the bytes are still the old ones

    with open(p, "wb") as fh:
        fh.write(b"\0" * 8192)
    with DataFile.open(p, write=True) as f:
        s = Saved(f, Saver())
        buf = aligned_buffer(4096)
        buf[:] = b"\xff" * 4096
        s.write_at(buf, 4096)
    assert saved == [(4096, 4096)]


def test_device_io_short_read_is_a_failure(tmp_path):
    p = tmp_path / "short"
    p.write_bytes(b"x" * 4096)
    fd = os.open(p, os.O_RDONLY)
    io = DeviceIO(fd, str(p), 8192)
    try:
        with pytest.raises(IOFailure, match="short read at byte 4096"):
            io.read(4096, 512)
    finally:
        io.close()
        os.close(fd)


@pytest.mark.parametrize("evidence,expected", [
    (dict(wrapped=True), ("counterfeit", "wraparound")),
    (dict(lost_bytes=10, lost_kind="dropped", lost_is_tail=True), ("counterfeit", "dropped")),
    (dict(lost_bytes=10, lost_kind="other", lost_is_tail=True), ("damaged", None)),          # < 1%
    (dict(lost_bytes=100, lost_kind="other", lost_is_tail=True), ("counterfeit", "other")),  # >= 1%
    (dict(lost_bytes=100, lost_kind="dropped"), ("damaged", None)),       # scattered: damage, however much
    (dict(lost_bytes=5000, lost_kind="dropped"), ("damaged", None)),
    (dict(damaged=True), ("damaged", None)),
    (dict(stopped=True), ("damaged", None)),
    (dict(wrapped=True, stopped=True), ("counterfeit", "wraparound")),
    (dict(), ("genuine", None)),
])
def test_one_verdict_rule(evidence, expected):
    assert judge(whole=10_000, **evidence) == expected
