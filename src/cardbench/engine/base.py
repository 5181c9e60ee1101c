"""The engine interface and what every engine shares (aligned buffers, opening files)."""

from __future__ import annotations

import errno
import mmap
import os
from dataclasses import dataclass
from typing import Protocol

from cardbench.errors import DeviceFault, TargetError, UsageError

ALIGN = 4096


def aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned, zeroed, writable buffer usable with O_DIRECT (an anonymous mmap)."""
    if size <= 0 or size % 512:
        raise ValueError("buffer size must be a positive multiple of 512")
    return mmap.mmap(-1, size)


@dataclass
class IoOp:
    """One operation: read or write ``length`` bytes at ``offset`` from/into ``buf``."""

    kind: str           # "read" | "write"
    offset: int
    buf: object         # writable buffer (mmap / memoryview) of at least ``length`` bytes
    length: int
    tag: object = None  # caller's cookie, handed back in the completion


@dataclass
class Completion:
    op: IoOp
    result: int          # bytes done
    submitted: float     # time.perf_counter() at submit
    completed: float     # time.perf_counter() at completion

    @property
    def latency(self) -> float:
        return self.completed - self.submitted


class Engine(Protocol):
    """What a workload needs from an engine."""

    name: str
    queue_depth: int

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None: ...

    def submit(self, op: IoOp) -> None: ...

    def reap(self, min_complete: int = 1) -> list[Completion]: ...

    def pending(self) -> int: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


def open_fd(path: str, *, write: bool, direct: bool, create: bool = False) -> tuple[int, bool]:
    """Open ``path`` for the engine; returns (fd, direct actually used).

    When the filesystem refuses O_DIRECT (EINVAL: tmpfs, some FUSE filesystems) and ``direct``
    was asked, falls back to buffered I/O and says so in the second value; callers must then
    drop the page cache themselves (fsync + posix_fadvise DONTNEED) and record it in the method.
    """
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC
    if create:
        flags |= os.O_CREAT | os.O_EXCL
    try:
        if direct:
            try:
                return os.open(path, flags | os.O_DIRECT, 0o644), True
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
        return os.open(path, flags, 0o644), False
    except OSError as e:
        raise os_error(e, path) from None


def os_error(e: OSError, path: str) -> Exception:
    """Turn an OSError during I/O into the right one-line cardbench error."""
    what = {
        errno.ENOSPC: "the filesystem is full",
        errno.EROFS: "the filesystem is read-only",
        errno.EIO: "I/O error (the card failed or was removed)",
        errno.ENODEV: "the device is gone (removed?)",
        errno.ENXIO: "the device is gone (removed?)",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOENT: "no such file or directory",
        errno.EDQUOT: "disk quota exceeded",
    }.get(e.errno, e.strerror or str(e))
    msg = f"{path}: {what}"
    if e.errno in (errno.EACCES, errno.EPERM, errno.ENOENT):
        return TargetError(msg)
    return DeviceFault(msg)


def get_engine(name: str = "sync", queue_depth: int = 1) -> Engine:
    """An engine by name: ``sync`` (always), ``queued`` (io_uring, or threads where io_uring is
    missing) and ``fio`` where installed.

    ``fio`` runs whole jobs rather than single operations: what comes back is a
    :class:`cardbench.engine.fio.FioEngine`, whose ``run(path, rw, bs, ...)`` returns a Run
    (workloads take ``engine="fio"``); its submit/reap raise UsageError.
    """
    if name == "sync":
        from cardbench.engine.sync import SyncEngine
        return SyncEngine()
    if name == "queued":
        try:
            from cardbench.engine.queued import QueuedEngine
        except ImportError:
            raise UsageError("the queued engine is not available in this build") from None
        return QueuedEngine(queue_depth=queue_depth)
    if name == "fio":
        from cardbench.engine.fio import FioEngine
        return FioEngine(queue_depth=queue_depth)  # type: ignore[return-value]
    raise UsageError(f"unknown engine {name!r} (choose sync, queued or fio)")
