"""Cold reads proved cold, on every path: the file's page cache, the block device's under it, a
FUSE daemon reading through that device.

Why the file's own cache is not enough: a FUSE filesystem (exfat-fuse, ntfs-3g) is a process
that reads the block device through the *device's* page cache. ``posix_fadvise(DONTNEED)`` and
``mincore()`` on the file see nothing of it, and O_DIRECT on the file only bypasses FUSE's own
cache: a file just written reads back at memory speed (measured here: about 100 times the
card's rate on an emulated card with mkfs.exfat + mount.exfat-fuse). So before every cold read:

1. the file: fsync + ``posix_fadvise(DONTNEED)``, ``mincore()`` checks (workloads.files.drop_cache);
2. the block device under the filesystem: fsync + ``posix_fadvise(DONTNEED)`` on the device
   (anyone who can open it) and ``BLKFLSBUF`` (root: flush and invalidate its buffers, what
   ``blockdev --flushbufs`` does);

and after it, the proof: a cold read faster than the card itself delivers
(``FAST_FACTOR`` x a short O_DIRECT read of the device, 1 MiB requests over the file's own blocks
where FIEMAP names them, else from the device's start) is flagged, every cache is dropped
(the above plus ``/proc/sys/vm/drop_caches`` = 3 as root) and the file read once more; a figure
still too fast is a cache's and never the card's (the caller keeps it out of the runs). Where the
device cannot be opened (an unprivileged user), the proof falls back to the path's ceiling,
and what could not be dropped or checked is said.

Everything here takes plain paths and callables (the read itself is the caller's), so it sits
on whatever moves the bytes.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.engine.errors import DENIED, IoFault, IoSetupError
from cardbench.engine.fiemap import path_extents
from cardbench.target import is_fuse
from cardbench.workloads.files import drop_cache

#: BLKFLSBUF, linux/fs.h _IO(0x12, 97): flush a block device's buffers and drop its page cache
BLKFLSBUF = 0x1261
#: a cold read this many times faster than the device's own O_DIRECT read is not the card: a
#: card cannot deliver a file faster than its blocks (both are 1 MiB O_DIRECT requests; the
#: margin covers a card's position-dependent speed and the noise of a short probe)
FAST_FACTOR = 1.25
#: the device probe: 1 MiB O_DIRECT requests until PROBE_SECONDS have passed, at least
#: PROBE_MIN_BLOCKS requests, at most PROBE_MAX_BYTES
PROBE_BLOCK = 1 << 20
PROBE_SECONDS = 0.25
PROBE_MIN_BLOCKS = 2
PROBE_MAX_BYTES = 64 << 20
def drop_device_cache(device: str | None) -> dict[str, str]:
    """Flush and drop the page cache of ``device``; returns what was done or why not, per step
    ("fadvise", "BLKFLSBUF"): "done" or the reason in a few words."""
    if not device:
        return {"device": "no block device under this filesystem"}
    done: dict[str, str] = {}
    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return {"device": f"cannot open {device} ({e.strerror}): its page cache was not dropped"}
    try:
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done["fadvise"] = "done"
        except OSError as e:
            done["fadvise"] = e.strerror or str(e)
        try:
            fcntl.ioctl(fd, BLKFLSBUF, 0)
            done["BLKFLSBUF"] = "done"
        except OSError as e:
            done["BLKFLSBUF"] = "needs root" if e.errno in DENIED else (e.strerror or str(e))
    finally:
        os.close(fd)
    return done


def drop_all_caches() -> str:
    """``/proc/sys/vm/drop_caches`` = 3 (page cache, dentries and inodes), root only."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "done"
    except OSError as e:
        return "needs root" if e.errno in DENIED else (e.strerror or str(e))


def device_read_rate(device: str, regions: list[tuple[int, int]] | None = None) -> float | None:
    """A short O_DIRECT read of ``device`` in 1 MiB requests (what the card itself delivers), over
    ``regions`` ((offset, length) on the device, e.g. a file's extents) or from its start; bytes/s,
    or None when the device cannot be read."""
    try:
        dev = DataFile.open(device, write=False, direct=True)
    except (IoFault, IoSetupError):  # the card's I/O errors only: never Interrupted
        return None
    if not dev.direct:  # a device that refuses O_DIRECT would answer from its page cache
        dev.close()
        return None
    buf = aligned_buffer(PROBE_BLOCK)
    try:
        size = dev.size()
        offsets: list[int] = []
        for start, length in regions or [(0, size)]:
            a = -(-start // PROBE_BLOCK) * PROBE_BLOCK
            while a + PROBE_BLOCK <= min(start + length, size) and len(offsets) * PROBE_BLOCK < PROBE_MAX_BYTES:
                offsets.append(a)
                a += PROBE_BLOCK
        if len(offsets) < PROBE_MIN_BLOCKS:
            offsets = list(range(0, min(size, PROBE_MAX_BYTES) - PROBE_BLOCK + 1, PROBE_BLOCK))
        if len(offsets) < 1:
            return None
        done = 0
        t0 = time.perf_counter()
        for i, off in enumerate(offsets):
            if dev.read_at(buf, off) <= 0:
                break
            done += PROBE_BLOCK
            if i + 1 >= PROBE_MIN_BLOCKS and time.perf_counter() - t0 >= PROBE_SECONDS:
                break
        seconds = time.perf_counter() - t0
        return done / seconds if done and seconds > 0 else None
    except (IoFault, IoSetupError):  # the card's I/O errors only: never Interrupted
        return None
    finally:
        dev.close()
        release(buf)


def file_regions(path: str) -> list[tuple[int, int]] | None:
    """Where the file's bytes lie on its device (FIEMAP), or None where the filesystem does not say."""
    m = path_extents(path)
    if m is None or not m.extents:
        return None
    return [(ph, ln) for _lo, ph, ln in m.extents]


@dataclass
class ColdReads:
    """Cold reads of files on one filesystem, each proved cold (see the module docstring).

    ``device``: the block device under the filesystem (target.block_device_of, FUSE included);
    ``ceiling``: the path's physical ceiling in bytes/s, used when the device cannot be read.
    :meth:`of` makes one for a directory target."""

    device: str | None
    fstype: str | None
    ceiling: float | None = None
    card_rate: float | None = None
    proof: str | None = None
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    retried: int = 0
    cached_runs: int = 0

    @classmethod
    def of(cls, target, ceiling: float | None = None) -> "ColdReads":
        """Cold reads on a directory target (cardbench.target.open_target): its device and filesystem."""
        return cls(device=target.device, fstype=target.fstype, ceiling=ceiling)

    def drop(self, path: str, *, everything: bool = False) -> float:
        """Drop the file's and the device's page cache (``everything``: all caches, as root);
        returns the file's fraction still resident."""
        self.dropped = drop_device_cache(self.device)
        if everything:
            self.dropped["drop_caches"] = drop_all_caches()
        return drop_cache(path)

    def _limit(self, path: str) -> float | None:
        if self.card_rate is None and self.proof is None:
            rate = device_read_rate(self.device, file_regions(path)) if self.device else None
            if rate is not None:
                self.card_rate = rate
                self.proof = (f"each cold read compared with a short O_DIRECT read of {self.device} "
                              f"({rate / 1e6:.3f} MB/s); above {FAST_FACTOR:g}x that it is retried once with every "
                              "cache dropped, and a figure still above is a cache's, not the card's")
            elif self.ceiling:
                why = f"{self.device} cannot be read by this user" if self.device else "no block device found"
                self.proof = (f"{why}: cold reads checked only against the path's ceiling "
                              f"({self.ceiling / 1e6:.1f} MB/s)")
            else:
                why = f"{self.device} cannot be read by this user" if self.device else "no block device found"
                self.proof = f"{why} and the path's ceiling is unknown: cold reads could not be checked"
        if self.card_rate is not None:
            return self.card_rate * FAST_FACTOR
        return self.ceiling

    def read(self, path: str, read: Callable[[], tuple[float, object]]) -> tuple[object, bool, float]:
        """Drop caches, call ``read()`` (returns (bytes/s, anything)), prove it cold; returns
        (what the accepted read returned, whether it is cold, the file's resident fraction before
        it). A read above the limit is retried once with every cache dropped."""
        resident = self.drop(path)
        rate, out = read()
        limit = self._limit(path)
        if limit is None or rate <= limit:
            return out, True, resident
        self.retried += 1
        resident = self.drop(path, everything=True)
        rate, out = read()
        if rate <= limit:
            return out, True, resident
        self.cached_runs += 1
        return out, False, resident

    def method(self) -> dict:
        """What the result's method records: how caches were dropped and how coldness was proved."""
        d = {"device": self.device, "device_cache": self.dropped, "cold_proof": self.proof,
             "fast_factor": FAST_FACTOR if self.card_rate else None,
             "device_read_bytes_per_s": self.card_rate, "retried_runs": self.retried,
             "cached_runs": self.cached_runs}
        if is_fuse(self.fstype):
            d["fuse"] = "a FUSE daemon reads the block device through its page cache: dropped before each read"
        return d

    def warnings(self) -> list[str]:
        """What could not be dropped or checked, in words (empty when everything was)."""
        out = []
        not_done = {k: v for k, v in self.dropped.items() if v != "done"}
        if is_fuse(self.fstype) and not self.device:
            out.append("cold_read: a FUSE filesystem with no block device found under it: what its daemon caches "
                       "could not be dropped, and the reads could not be checked against the card")
        elif is_fuse(self.fstype):
            if not_done:
                out.append("cold_read: a FUSE filesystem reads the card through the device's page cache, and it "
                           f"could not be dropped ({'; '.join(f'{k}: {v}' for k, v in not_done.items())}); run as "
                           "root to drop it")
            if self.card_rate is None:
                # a kernel filesystem read with O_DIRECT (or fadvise + mincore) has no cache on
                # the path: the method says the device check was not made; FUSE needs it said
                out.append(f"cold_read: {self.proof}")
        if self.cached_runs:
            out.append(f"cold_read: {self.cached_runs} run(s) read faster than the card delivers even after every "
                       "cache was dropped: a cache answered; those runs are kept out of the figures")
        elif self.retried:
            out.append(f"cold_read: {self.retried} run(s) read faster than the card delivers; read again with every "
                       "cache dropped, they came from the card")
        return out
