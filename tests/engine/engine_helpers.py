"""Helpers for the engine tests: a directory where O_DIRECT works, data files, emulated cards."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile

import pytest

ROOT = os.geteuid() == 0
HAVE_FUSE = os.path.exists("/dev/fuse")
needs_root = pytest.mark.skipif(not ROOT, reason="needs root (loop devices)")
needs_emulator = pytest.mark.skipif(not (ROOT and HAVE_FUSE), reason="needs root and /dev/fuse")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


def direct_ok(directory: str) -> bool:
    probe = os.path.join(directory, ".odirect-probe")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False
        raise
    os.close(fd)
    os.unlink(probe)
    return True


@contextlib.contextmanager
def odirect_dir(preferred: str):
    """``preferred`` if O_DIRECT works there (not tmpfs), else a temporary directory in /var/tmp."""
    if direct_ok(preferred):
        yield preferred
        return
    d = tempfile.mkdtemp(prefix="cardbench-test-", dir="/var/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fill_random(path: str, size: int) -> bytes:
    """Write ``size`` random bytes to ``path`` (a file, made anew, or the start of a block
    device), synced; returns them."""
    data = os.urandom(size)
    device = os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)
    with open(path, "r+b" if device else "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return data


def data_file(directory: str, size: int, name: str = "data.bin") -> tuple[str, bytes]:
    """A file of ``size`` random bytes; returns (path, content)."""
    path = os.path.join(directory, name)
    return path, fill_random(path, size)


@contextlib.contextmanager
def emulated_card(**spec):
    """An emulated card (cardbench.emulate); skips when the emulator cannot run here."""
    from cardbench.emulate import CardSpec, EmulatedCard
    from cardbench.errors import EnvironmentMissing
    try:
        card = EmulatedCard(CardSpec(**spec))
        card.__enter__()
    except EnvironmentMissing as e:
        pytest.skip(f"emulated card not available: {e}")
    try:
        yield card
    finally:
        card.__exit__(None, None, None)


def max_overlap(completions) -> int:
    """The most operations in flight at one instant, from [submitted, completed] intervals."""
    events = []
    for c in completions:
        events.append((c.submitted, 1))
        events.append((c.completed, -1))
    events.sort(key=lambda e: (e[0], e[1]))   # a completion at the same instant closes first
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best
