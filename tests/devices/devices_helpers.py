"""Helpers for the device tests: the sysfs fixture tree, and real loop devices cleaned up always."""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import shutil
import subprocess
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAPTOP = os.path.join(HERE, "fixtures", "laptop")
LAPTOP_SYS = os.path.join(LAPTOP, "sys")
LAPTOP_PROC = os.path.join(LAPTOP, "proc")
LAPTOP_LSBLK = os.path.join(LAPTOP, "lsblk.json")

CAN_LOOP = os.geteuid() == 0 and shutil.which("losetup") is not None and os.path.exists("/dev/loop-control")


def needs_loop(test):
    """Mark a test as needing root and loop devices (the project's ``needs_root`` marker) and skip it
    where they are missing."""
    return pytest.mark.needs_root(pytest.mark.skipif(not CAN_LOOP, reason="needs root and loop devices")(test))


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command, capturing output."""
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def write_mbr(img: str, first_sector: int, sectors: int) -> None:
    """Write an MBR with one Linux partition (type 0x83) at [first_sector, first_sector + sectors)."""
    entry = bytearray(16)
    entry[4] = 0x83
    entry[8:12] = first_sector.to_bytes(4, "little")
    entry[12:16] = sectors.to_bytes(4, "little")
    with open(img, "r+b") as f:
        f.seek(446)
        f.write(bytes(entry))
        f.seek(510)
        f.write(b"\x55\xaa")


@contextlib.contextmanager
def loop_device(size: int, *, read_only: bool = False, partitioned: bool = False, random_fill: bool = False):
    """A loop device over a fresh image file; yields (device, image). Detached and deleted afterwards.

    ``partitioned`` writes an MBR with one partition from 1 MiB to the end and scans it (``-P``);
    ``random_fill`` fills the image with random bytes first (for preserve tests).
    """
    d = tempfile.mkdtemp(prefix="cardbench-devtest-")
    img = os.path.join(d, "disk.img")
    with open(img, "wb") as f:
        if random_fill:
            f.write(os.urandom(size))
        else:
            f.truncate(size)
    if partitioned:
        write_mbr(img, 2048, size // 512 - 2048)
    dev = None
    try:
        args = ["losetup", "-f", "--show"] + (["-r"] if read_only else []) + (["-P"] if partitioned else []) + [img]
        for attempt in range(10):  # other test sessions may grab the same free device: retry
            proc = sh(*args, check=False)
            if proc.returncode == 0:
                dev = proc.stdout.strip()
                break
            time.sleep(0.1 * (attempt + 1))
        assert dev, f"losetup failed: {proc.stderr.strip()}"
        if partitioned:
            part = dev + "p1"
            for _ in range(20):
                if os.path.exists(part):
                    break
                time.sleep(0.05)
            if not os.path.exists(part):
                # Kernels built without partition table parsers (no CONFIG_MSDOS_PARTITION) still
                # accept partitions added by ioctl(BLKPG): partx reads the table in user space.
                sh("partx", "-a", dev, check=False)
            for _ in range(50):
                if os.path.exists(part):
                    break
                time.sleep(0.05)
            if not os.path.exists(part):
                pytest.skip(f"{part} did not appear (no partition support)")
        yield dev, img
    finally:
        if dev:
            if partitioned:
                sh("partx", "-d", dev, check=False)
            for _ in range(20):
                # by number only while it is still ours: once freed, the number may already be
                # another test's (another xdist worker, another run on this machine)
                back = sh("losetup", "-n", "-O", "BACK-FILE", dev, check=False).stdout
                if img not in back or sh("losetup", "-d", dev, check=False).returncode == 0:
                    break
                time.sleep(0.1)
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def mounted(dev: str):
    """mkfs.ext4 + mount in a fresh temporary directory; unmounted and removed afterwards."""
    sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
    mnt = tempfile.mkdtemp(prefix="cardbench-devtest-mnt-")
    ok = False
    try:
        sh("mount", dev, mnt)
        ok = True
        yield mnt
    finally:
        if ok and sh("umount", mnt, check=False).returncode != 0:
            sh("umount", "-l", mnt, check=False)
        os.rmdir(mnt)


def device_sha256(path: str) -> str:
    """sha256 of a whole block device, read with O_DIRECT (no page cache involved)."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, 1 << 20) as buf:
            off = 0
            while True:
                n = os.preadv(fd, [buf], off)
                if n <= 0:
                    break
                h.update(memoryview(buf)[:n])
                off += n
    finally:
        os.close(fd)
    return h.hexdigest()


def direct_write(path: str, offset: int, data: bytes) -> None:
    """Write ``data`` at ``offset`` with O_DIRECT (both multiples of 512), then fsync."""
    assert offset % 512 == 0 and len(data) % 512 == 0
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, len(data)) as buf:
            buf[:] = data
            assert os.pwritev(fd, [buf], offset) == len(data)
        os.fsync(fd)
    finally:
        os.close(fd)
