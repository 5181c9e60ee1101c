"""Helpers for the emulated-card tests: leak checks, O_DIRECT I/O, fio."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess

import pytest

from cardbench.emulate import system
from realparts import emulator_leftovers as leftovers  # noqa: F401

ROOT = os.geteuid() == 0
HAVE_FUSE = os.path.exists("/dev/fuse")

needs_emulator = pytest.mark.skipif(not (ROOT and HAVE_FUSE), reason="needs root and /dev/fuse")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


def assert_gone(workdir: str, device: str | None, pid: int | None) -> None:
    """Nothing of one emulator is left: no loop device, mount, process or directory."""
    assert leftovers(workdir) == []
    if device is not None:
        info = system.loop_info(device)
        assert info is None or not info.backing_file.startswith(workdir), f"{device} still attached"
    if pid is not None:
        assert not system.is_server_process(pid, workdir), f"server {pid} still running"
    assert not os.path.exists(workdir), f"{workdir} not removed"


# -- I/O helpers ------------------------------------------------------------------------------

def dio_write(device: str, offset: int, data: bytes) -> None:
    """One O_DIRECT write (data length a multiple of 512)."""
    buf = mmap.mmap(-1, len(data))
    buf.write(data)
    fd = os.open(device, os.O_WRONLY | os.O_DIRECT)
    try:
        assert os.pwritev(fd, [buf], offset) == len(data)
    finally:
        os.close(fd)
        buf.close()


def dio_read(device: str, offset: int, length: int) -> bytes:
    """One O_DIRECT read."""
    buf = mmap.mmap(-1, length)
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.preadv(fd, [buf], offset)
        return bytes(buf[:n])
    finally:
        os.close(fd)
        buf.close()


def fio(device: str, rw: str, size: int, bs: str = "1M", extra: tuple[str, ...] = ()) -> dict:
    """Run fio (O_DIRECT, psync) on the device; returns the job's read/write section."""
    args = ["fio", "--name=t", f"--filename={device}", "--direct=1", f"--bs={bs}", "--ioengine=psync",
            f"--rw={rw}", f"--size={size}", "--output-format=json", *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    return job["write" if "write" in rw else "read"]
