"""The engine interface and what every engine shares (aligned buffers, opening files)."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import time
from array import array
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from cardbench.errors import DeviceFault, TargetError, UsageError

ALIGN = 4096


def aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned, zeroed, writable buffer usable with O_DIRECT (an anonymous mmap)."""
    if size <= 0 or size % 512:
        raise ValueError("buffer size must be a positive multiple of 512")
    return mmap.mmap(-1, size)


#: Transparent huge page size (x86-64, arm64 with 4 KiB pages).
HUGE_PAGE = 2 << 20
#: Buffer sets from this size on are put on huge pages (small ones gain nothing).
HUGE_MIN = 256 << 10


class AlignedBuffers:
    """``count`` page-aligned, zeroed buffers of ``size`` bytes in one anonymous mapping.

    Where they add up to a huge page or more, the mapping is aligned to one and asked for
    transparent huge pages (``MADV_HUGEPAGE``; the kernel may say no and use small pages). That
    makes each buffer physically contiguous: a 1 MiB O_DIRECT request is then a few segments,
    not 256 scattered pages that a device with ``max_segments`` 128 (a loop device) must split.
    A split request cannot be issued without blocking, so io_uring hands it to a worker thread:
    on this project's test machine sequential 1 MiB QD8 reads on a loop device ran at half the
    rate, and at twice the CPU per operation, whenever the freshly mapped pages came back
    scattered (every other run). fio's buffers are subject to the same luck.

    Index it like a list (each item a writable memoryview); ``close`` when done (after the
    engine that used the buffers is closed)."""

    def __init__(self, count: int, size: int) -> None:
        if count < 1:
            raise ValueError("need at least one buffer")
        if size <= 0 or size % 512:
            raise ValueError("buffer size must be a positive multiple of 512")
        stride = -(-size // ALIGN) * ALIGN
        total = stride * count
        huge = total >= HUGE_MIN and hasattr(mmap, "MADV_HUGEPAGE")
        span = -(-total // HUGE_PAGE) * HUGE_PAGE if huge else total
        self._map = mmap.mmap(-1, span + (HUGE_PAGE if huge else 0), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        start = 0
        if huge:
            c = ctypes.c_char.from_buffer(self._map)
            start = -ctypes.addressof(c) % HUGE_PAGE
            del c
            try:
                self._map.madvise(mmap.MADV_HUGEPAGE, start, span)
            except OSError:
                pass    # no THP here (disabled, or an old kernel): small pages it is
        whole = memoryview(self._map)
        self._views = [whole[start + i * stride:start + i * stride + size] for i in range(count)]
        whole.release()

    def __len__(self) -> int:
        return len(self._views)

    def __getitem__(self, i):
        return self._views[i]

    def __iter__(self):
        return iter(self._views)

    def close(self) -> None:
        for v in self._views:
            v.release()
        self._views = []
        if not self._map.closed:
            self._map.close()

    def __enter__(self) -> "AlignedBuffers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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


@dataclass
class LoopResult:
    """What :func:`closed_loop` did: ``ops`` operations moved ``bytes`` between ``t0`` and ``t1``
    (``time.perf_counter()``), and why it stopped: "size" (``max_ops`` issued), "duration" or
    "end of target" (a short transfer)."""

    bytes: int
    ops: int
    t0: float
    t1: float
    stopped: str


class Engine(Protocol):
    """What a workload needs from an engine.

    An engine may also offer ``closed_loop`` (same arguments as :func:`closed_loop` after the
    engine): the same loop without a Python object per operation. :func:`closed_loop` uses it
    where it exists and ``submit``/``reap`` otherwise.
    """

    name: str
    queue_depth: int

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None: ...

    def submit(self, op: IoOp) -> None: ...

    def reap(self, min_complete: int = 1) -> list[Completion]: ...

    def pending(self) -> int: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


def closed_loop(engine: Engine, kind: str, bufs: Sequence, length: int, next_offset: Callable[[], int], *,
                max_ops: int, duration: float, latencies: array) -> LoopResult:
    """Keep ``len(bufs)`` operations of ``length`` bytes in flight on an open ``engine``.

    Each buffer carries one operation at a time; when it completes, the buffer goes out again
    at ``next_offset()``. Stops issuing once ``max_ops`` were issued, ``duration`` seconds have
    passed, or a transfer comes back short; waits for those in flight and returns. Each
    operation's latency (seconds, from when it was queued to when its completion was seen,
    fio's "lat") is appended to ``latencies``. An I/O error is raised (a one-line cardbench
    error) after the operations in flight have finished; nothing is left in flight.
    """
    if kind not in ("read", "write"):
        raise ValueError(f"unknown operation {kind!r}")
    if max_ops < 1 or not bufs:
        raise ValueError("closed_loop needs at least one buffer and one operation")
    own = getattr(engine, "closed_loop", None)
    if own is not None:
        return own(kind, bufs, length, next_offset, max_ops=max_ops, duration=duration, latencies=latencies)
    return submit_reap_loop(engine, kind, bufs, length, next_offset, max_ops=max_ops, duration=duration,
                            latencies=latencies)


def submit_reap_loop(engine: Engine, kind: str, bufs: Sequence, length: int, next_offset: Callable[[], int], *,
                     max_ops: int, duration: float, latencies: array) -> LoopResult:
    """:func:`closed_loop` through ``submit`` and ``reap`` (any engine; one IoOp per buffer)."""
    submit = engine.submit
    reap = engine.reap
    pending = engine.pending
    append = latencies.append
    perf = time.perf_counter
    ops = [IoOp(kind, 0, b, length) for b in bufs[:max_ops]]
    total = n = 0
    stopped = "size"
    t0 = perf()
    deadline = t0 + duration
    try:
        for op in ops:
            op.offset = next_offset()
            submit(op)
        issued = len(ops)
        stop = issued >= max_ops
        while True:
            comps = reap(1)
            if not stop and perf() >= deadline:
                stop = True
                stopped = "duration"
            for c in comps:
                append(c.completed - c.submitted)
                r = c.result
                total += r
                n += 1
                if r != length:
                    if not stop:
                        stopped = "end of target"
                    stop = True
                if not stop:
                    op = c.op
                    op.offset = next_offset()
                    submit(op)
                    issued += 1
                    if issued >= max_ops:
                        stop = True
            if stop and not pending():
                break
    except BaseException:
        _drain(engine)
        raise
    return LoopResult(total, n, t0, perf(), stopped)


def _drain(engine: Engine) -> None:
    """Wait for what is in flight after a failure (buffers must not be reused while the kernel
    may still write into them); errors of those operations are dropped, the first one counts."""
    for _ in range(1000):
        if not engine.pending():
            return
        try:
            engine.reap(engine.pending())
        except Exception:
            pass


def pio_loop(fd: int, path: str, kind: str, buf, length: int, next_offset: Callable[[], int], *, max_ops: int,
             duration: float, latencies: array) -> LoopResult:
    """:func:`closed_loop` at depth 1 with plain ``preadv``/``pwritev``: the sync engine's loop
    (and the queued engine's at depth 1). Each operation is timed around its system call."""
    call = os.preadv if kind == "read" else os.pwritev
    mv = memoryview(buf)[:length]
    iov = [mv]
    perf = time.perf_counter
    append = latencies.append
    total = n = 0
    stopped = "size"
    t0 = perf()
    deadline = t0 + duration
    try:
        while n < max_ops:
            off = next_offset()
            t = perf()
            r = call(fd, iov, off)
            t1 = perf()
            append(t1 - t)
            n += 1
            total += r
            if r != length:
                stopped = "end of target"
                break
            if t1 >= deadline:
                stopped = "duration"
                break
    except OSError as e:
        raise os_error(e, path) from None
    finally:
        mv.release()
    return LoopResult(total, n, t0, perf(), stopped)


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
