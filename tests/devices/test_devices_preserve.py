"""--preserve on real loop devices: save, overwrite, restore; crash (SIGKILL) and recover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from cardbench.devices import get_device
from cardbench.devices.preserve import Preserver, recover_pending
from cardbench.errors import SafetyRefusal, UsageError
from devices_helpers import (
    device_sha256,
    direct_write,
    loop_device,
    mounted,
    needs_loop,
)

SIZE = 8 << 20
MiB = 1 << 20


@pytest.fixture
def noisy():
    """An 8 MiB loop device full of random bytes: (device, image)."""
    with loop_device(SIZE, random_fill=True) as pair:
        yield pair


def _scribble(dev: str, offset: int, length: int) -> None:
    """Overwrite [offset, offset+length), widened to 512-byte blocks, with fresh random bytes."""
    start = offset // 512 * 512
    end = -(-(offset + length) // 512) * 512
    direct_write(dev, start, os.urandom(end - start))


def _journals(root) -> list[str]:
    """Names of the journals under a root."""
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


@needs_loop
def test_save_overwrite_restore_is_byte_identical(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    root = tmp_path / "journal"
    p = Preserver(get_device(dev, whole_device=True), root)
    regions = [(0, 4096), (MiB + 100, 5000), (3 * MiB, 2 * MiB), (SIZE - 512, 512)]
    for off, length in regions:
        p.save(off, length)
        _scribble(dev, off, length)
    assert device_sha256(dev) != before
    assert len(_journals(root)) == 1
    saved = 4096 + 5120 + 2 * MiB + 512   # the unaligned region is widened to 10 whole blocks
    assert p.saved_bytes == saved
    assert p.restore() == saved
    assert device_sha256(dev) == before
    assert _journals(root) == []


@needs_loop
def test_overlapping_saves_keep_the_original_bytes(noisy, tmp_path):
    """The second save overlaps bytes already overwritten: only the new part may be copied."""
    dev, _ = noisy
    before = device_sha256(dev)
    with Preserver(get_device(dev, whole_device=True), tmp_path) as p:
        p.save(2 * MiB, 2 * MiB)
        _scribble(dev, 2 * MiB, 2 * MiB)
        new = p.save(3 * MiB, 2 * MiB)
        assert [(r.offset, r.length) for r in new] == [(4 * MiB, MiB)]
        _scribble(dev, 3 * MiB, 2 * MiB)
        assert p.save(2 * MiB + 512, 1024) == []         # all of it saved already
    assert device_sha256(dev) == before


@needs_loop
def test_context_manager_restores_when_the_body_raises(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    with pytest.raises(RuntimeError):
        with Preserver(get_device(dev, whole_device=True), tmp_path) as p:
            p.save(0, MiB)
            _scribble(dev, 0, MiB)
            raise RuntimeError("I/O went wrong mid-test")
    assert device_sha256(dev) == before
    assert _journals(tmp_path) == []


@needs_loop
def test_region_outside_the_device_is_refused(noisy, tmp_path):
    dev, _ = noisy
    with Preserver(get_device(dev, whole_device=True), tmp_path) as p:
        with pytest.raises(UsageError):
            p.save(SIZE - 512, 1024)
        with pytest.raises(UsageError):
            p.save(-1, 10)


@needs_loop
def test_journal_on_the_device_itself_is_refused():
    with loop_device(32 << 20) as (dev, _), mounted(dev) as mnt:
        target = os.path.join(mnt, "cardbench", "journal")
        with pytest.raises(SafetyRefusal) as e:
            Preserver(get_device(dev, whole_device=True), target)
        assert "on " + dev in e.value.message
        assert not os.path.exists(os.path.join(mnt, "cardbench"))   # nothing created there


CHILD = textwrap.dedent("""
    import os, signal, sys, mmap
    from cardbench.devices import get_device
    from cardbench.devices.preserve import Preserver
    dev, root = sys.argv[1], sys.argv[2]
    p = Preserver(get_device(dev, whole_device=True), root)
    fd = os.open(dev, os.O_WRONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 1 << 20)
    for off in (0, 5 << 20):
        p.save(off, 1 << 20)
        buf[:] = os.urandom(1 << 20)
        os.pwritev(fd, [buf], off)
    os.fsync(fd)
    print("overwritten", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _crash(dev: str, root: str) -> None:
    """Run a child that saves and overwrites two regions, then SIGKILLs itself."""
    from realparts import child_env
    proc = subprocess.run([sys.executable, "-c", CHILD, dev, root], capture_output=True, text=True, timeout=60,
                          env=child_env())
    assert proc.returncode == -9, proc.stderr
    assert "overwritten" in proc.stdout


@needs_loop
def test_recover_after_sigkill_is_byte_identical(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    root = str(tmp_path / "journal")
    _crash(dev, root)
    assert device_sha256(dev) != before
    assert len(_journals(root)) == 1
    reports = recover_pending(root)
    assert [r.status for r in reports] == ["restored"]
    assert (reports[0].device, reports[0].regions, reports[0].bytes) == (dev, 2, 2 * MiB)
    assert device_sha256(dev) == before
    assert _journals(root) == []
    assert recover_pending(root) == []


@needs_loop
def test_recovery_refuses_a_device_that_is_not_the_same(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    root = tmp_path / "journal"
    _crash(dev, str(root))
    header = root / _journals(root)[0] / "journal.json"
    data = json.loads(header.read_text())
    data["device"]["size"] += 512             # "another card at the same path"
    header.write_text(json.dumps(data))
    [report] = recover_pending(root)
    assert report.status == "skipped"
    assert device_sha256(dev) != before       # nothing written
    assert len(_journals(root)) == 1          # journal kept
    data["device"]["size"] -= 512
    header.write_text(json.dumps(data))
    assert [r.status for r in recover_pending(root)] == ["restored"]
    assert device_sha256(dev) == before


@needs_loop
def test_recovery_leaves_a_busy_device_alone(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    root = tmp_path / "journal"
    _crash(dev, str(root))
    holder = os.open(dev, os.O_RDONLY | os.O_EXCL)   # e.g. mounted again by an automounter
    try:
        [report] = recover_pending(root)
        assert report.status == "skipped" and "in use" in report.message
    finally:
        os.close(holder)
    assert device_sha256(dev) != before
    assert [r.status for r in recover_pending(root)] == ["restored"]
    assert device_sha256(dev) == before


@needs_loop
def test_recovery_never_touches_a_running_journal(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    p = Preserver(get_device(dev, whole_device=True), tmp_path)
    try:
        p.save(0, MiB)
        _scribble(dev, 0, MiB)
        [report] = recover_pending(tmp_path)
        assert report.status == "active" and str(os.getpid()) in report.message
        assert device_sha256(dev) != before
    finally:
        p.restore()
    assert device_sha256(dev) == before


@needs_loop
def test_damaged_journal_is_not_written_back(noisy, tmp_path):
    dev, _ = noisy
    root = tmp_path / "journal"
    _crash(dev, str(root))
    after_crash = device_sha256(dev)
    jdir = root / _journals(root)[0]
    region = jdir / "region-000002.bin"
    data = bytearray(region.read_bytes())
    data[100] ^= 0xFF
    region.write_bytes(bytes(data))
    [report] = recover_pending(root)
    assert report.status == "failed" and "damaged" in report.message
    assert device_sha256(dev) == after_crash
    assert jdir.exists()


@needs_loop
def test_closed_preserver_keeps_its_journal_for_recovery(noisy, tmp_path):
    dev, _ = noisy
    before = device_sha256(dev)
    p = Preserver(get_device(dev, whole_device=True), tmp_path)
    p.save(MiB, MiB)
    _scribble(dev, MiB, MiB)
    p.close()
    with pytest.raises(UsageError):
        p.save(0, 512)
    assert [r.status for r in recover_pending(tmp_path)] == ["restored"]
    assert device_sha256(dev) == before


def test_nothing_to_recover(tmp_path):
    assert recover_pending(tmp_path / "absent") == []
    assert recover_pending(tmp_path) == []


def test_short_read_is_a_device_fault_not_a_buffer_error(tmp_path):
    """A device that shrank mid-save gives a one-line DeviceFault (the mmap is still closed cleanly)."""
    from cardbench.devices.preserve import _read_device
    from cardbench.errors import DeviceFault

    f = tmp_path / "short"
    f.write_bytes(b"x" * 4096)
    fd = os.open(f, os.O_RDONLY)
    try:
        with pytest.raises(DeviceFault) as e:
            _read_device(fd, 0, 8192, None)
        assert e.value.message == "short read at byte 0 (4096 of 8192 bytes): device shrank or was removed"
    finally:
        os.close(fd)
