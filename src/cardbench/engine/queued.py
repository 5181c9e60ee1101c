"""The queued engine: many operations in flight at once (queue depth 1..256).

Backends behind the same ``submit``/``reap`` calls (``QueuedEngine(depth, backend=...)``;
after ``open`` the one in use is in ``engine.backend`` and workloads record it):

``io_uring`` (the default for depth > 1 where the kernel allows it)
    A minimal io_uring on the raw system calls (``io_uring_setup`` / ``io_uring_enter`` through
    ctypes, the rings mmap'd into Python); no extra package. (The PyPI ``liburing`` package was
    tried: it installs, but takes only ``bytearray`` buffers, not the page-aligned mmaps O_DIRECT
    needs, and marks several calls untested.) ``submit`` writes a submission entry into the
    shared ring and hands queued entries to the kernel two at a time (``DEFAULT_SUBMIT_BATCH``);
    ``reap`` hands over the rest and waits. Feeding the device a few at a time keeps it
    streaming like fio does (one ``io_uring_enter`` per I/O); handing over everything only at
    ``reap`` made completions come back in waves and cost a quarter of the IOPS at QD32.
    ``submitted`` is taken just before the system call that handed the operation to the kernel,
    ``completed`` just after the call that returned it (fio's "lat", slightly more than its
    "clat").

    ``closed_loop`` (what pattern runs use, see :func:`cardbench.engine.base.closed_loop`) runs
    on the ring directly: one slot per buffer whose submission entry is written once, so an
    operation going out again costs a new offset and a ring index; completions are read from
    the CQ ring through memoryviews, with no IoOp or Completion object. Refills go to the
    kernel two at a time as well, and each pass waits for at least one completion. The loop
    names the file as registered file 0 and its buffers as registered buffers
    (``READ_FIXED``/``WRITE_FIXED``: the kernel pins their pages once per loop, not at each
    operation; plain reads and writes where the kernel refuses): random 4 KiB QD32 writes on a
    loop device, 5.5 against 6.3 us of CPU a write in the same run. Random
    4 KiB QD32 against fio in the same run (``bench/engine_vs_fio.py``-style pairs): handing
    over 1 / 2 / all 32 at a time gave 0.98 / 0.97 / 0.81 of fio on a file on the virtio disk
    and 0.94 / 0.99 / 1.06 on a loop device (CPU-bound there: fewer system calls win), so 2.
    CPU time per operation fell from ~5 us to ~3.5 us (fio: ~3).

    Memory ordering: on x86-64 (TSO) the rings are read and written with plain loads and
    stores, as liburing does there. On other architectures the ring is only used with
    ``IORING_SETUP_DEFER_TASKRUN`` (Linux 6.1+), where the kernel posts completions in our own
    thread during ``io_uring_enter``, so no user-space barrier is needed; without it the thread
    pool is used instead. A ring made with ``IORING_SETUP_SINGLE_ISSUER`` belongs to the thread
    that opened it: ``open``, ``submit`` and ``reap`` from one thread (one engine per thread).

``direct`` (the default at depth 1)
    ``os.preadv``/``os.pwritev`` in ``submit``, like the sync engine. One operation at a time
    has nothing to overlap and the plain call is the cheapest way to issue it (random 4 KiB QD1
    writes: pwrite ~8% faster than io_uring here, and fio's psync beats fio's io_uring alike).

``threads`` (fallback)
    ``queue_depth`` worker threads doing ``os.preadv``/``os.pwritev`` (they release the GIL).
    Used where io_uring is missing (kernel < 5.6), disabled (``kernel.io_uring_disabled``,
    seccomp in containers) or not safe to drive from Python on this architecture. About half
    of io_uring's random 4 KiB QD32 rate (GIL hand-offs per operation).

Measurements: ``bench/engine_vs_fio.py`` (figures in ``BACKEND_NOTE``).
"""

from __future__ import annotations

from cardbench.engine.base import (
    Completion,
    IoOp,
    LoopResult,
    pio_loop,
    submit_reap_loop,
)
from cardbench.engine.data import DataFile
from cardbench.engine.registry import Capabilities, EngineInfo, register
from cardbench.engine.threads import _ThreadImpl
from cardbench.engine.uring import _UringImpl
from cardbench.engine.uring_abi import (
    _OPCODES,
    RingUnavailable,
    _perf,
    io_uring_available,
)
from cardbench.errors import EnvironmentMissing, UsageError

__all__ = ["BACKENDS", "MAX_QUEUE_DEPTH", "QueuedEngine", "io_uring_available"]

MAX_QUEUE_DEPTH = 256
BACKENDS = ("auto", "io_uring", "threads", "direct")
#: Entries handed to the kernel as soon as this many are queued, instead of all at once at the
#: next ``reap``. Feeding the device a few at a time keeps it streaming: on a busy virtio disk
#: random 4 KiB QD32 reads went from 0.74x fio (everything at reap) to 0.90-0.96x (1, 2 or 4
#: at a time; 2 was best); on a quiet disk the two were within noise.
DEFAULT_SUBMIT_BATCH = 2

BACKEND_NOTE = (
    "bench/engine_vs_fio.py, 16 rounds of 0.5 s, on a virtio disk (2 vCPUs; fio on huge-page buffers like "
    "ours), median ratios to fio over three unpinned runs: random 4 KiB QD32 io_uring 0.95-1.15 on a file "
    "and on a loop device; threads 0.31-0.73; sequential 1 MiB 0.96-1.09; QD1 direct preadv/pwritev 0.96-1.09 "
    "unpinned, 0.90-1.00 (0.94 over all pairs) with both tools pinned to the CPU that takes the disk's interrupts"
)


class QueuedEngine:
    """Up to ``queue_depth`` operations in flight; io_uring, or a thread pool where it is missing.

    ``backend``: "auto" (depth 1: direct; deeper: io_uring if it works, else threads),
    "io_uring", "threads" or "direct" (each operation done in ``submit`` with preadv/pwritev,
    depth 1 only in effect). After ``open`` the chosen backend is in ``self.backend``.
    """

    name = "queued"
    caps = Capabilities(max_queue_depth=MAX_QUEUE_DEPTH, own_loop=True)

    def __init__(self, queue_depth: int = 32, backend: str = "auto", submit_batch: int | None = None) -> None:
        if not isinstance(queue_depth, int) or not 1 <= queue_depth <= MAX_QUEUE_DEPTH:
            raise UsageError(f"queue depth must be 1..{MAX_QUEUE_DEPTH}, got {queue_depth!r}")
        if submit_batch is None:
            submit_batch = DEFAULT_SUBMIT_BATCH
        if not isinstance(submit_batch, int) or submit_batch < 1:
            raise UsageError(f"submit batch must be a positive whole number, got {submit_batch!r}")
        self.submit_batch = submit_batch
        if backend not in BACKENDS:
            raise UsageError(f"unknown queued backend {backend!r} ({', '.join(BACKENDS)})")
        self.queue_depth = queue_depth
        self.requested_backend = backend
        self.backend: str | None = None
        self.backend_reason: str | None = None
        self.file: DataFile | None = None
        self.fd: int | None = None
        self.path = ""
        self.direct = False
        self._impl: _UringImpl | _ThreadImpl | _DirectImpl | None = None

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None:
        self.path = path
        self.file = DataFile.open(path, write=write, direct=direct, create=create)
        self.fd, self.direct = self.file.fd, self.file.direct
        try:
            self._impl = self._make_impl()
        except BaseException:
            self.file.close()
            self.file = self.fd = None
            raise
        # the hot calls go straight to the backend (one Python call less per operation); at
        # depth 1 the io_uring backend submits and waits in one system call
        # (an instance attribute over the method, on purpose: hence the two ignores)
        impl = self._impl
        if self.queue_depth == 1 and isinstance(impl, _UringImpl):
            self.submit = impl.submit_wait    # type: ignore[method-assign]
        else:
            self.submit = impl.submit         # type: ignore[method-assign]
        self.reap = impl.reap                 # type: ignore[method-assign]

    def _make_impl(self) -> _UringImpl | _ThreadImpl | _DirectImpl:
        assert self.file is not None and self.fd is not None
        if self.requested_backend == "direct" or (self.requested_backend == "auto" and self.queue_depth == 1):
            self.backend = "direct"
            return _DirectImpl(self.file)
        if self.requested_backend in ("auto", "io_uring"):
            try:
                impl = _UringImpl(self.fd, self.path, self.queue_depth, self.submit_batch)
                self.backend = "io_uring"
                return impl
            except RingUnavailable as e:
                if self.requested_backend == "io_uring":
                    raise EnvironmentMissing(f"io_uring is not usable here: {e.strerror or e}") from None
                self.backend_reason = f"io_uring unavailable ({e.strerror or e}); using a thread pool"
        self.backend = "threads"
        return _ThreadImpl(self.fd, self.path, self.queue_depth)

    def submit(self, op: IoOp) -> None:
        """Queue ``op``; the kernel gets it at the next ``reap`` (or now, if the queue is full)."""
        assert self._impl is not None, "engine not open"
        self._impl.submit(op)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        """Hand queued operations to the kernel and wait until ``min_complete`` (capped at what is
        in flight) have completed; returns every completion available."""
        assert self._impl is not None, "engine not open"
        return self._impl.reap(min_complete)

    def closed_loop(self, kind: str, bufs, length: int, next_offset, *, max_ops: int, duration: float,
                    latencies, fill=None) -> LoopResult:
        """See :func:`cardbench.engine.base.closed_loop`: io_uring and depth 1 run their own lean
        loop (no Python object per operation); the thread pool goes through submit/reap."""
        assert self._impl is not None, "engine not open"
        if isinstance(self._impl, _ThreadImpl):       # the one backend without its own loop
            return submit_reap_loop(self, kind, bufs, length, next_offset, max_ops=max_ops, duration=duration,
                                    latencies=latencies, fill=fill)
        return self._impl.closed_loop(kind, bufs, length, next_offset, max_ops=max_ops, duration=duration,
                                      latencies=latencies, fill=fill)

    def pending(self) -> int:
        """Operations submitted and not yet reaped."""
        return self._impl.pending() if self._impl else 0

    def drain(self) -> list[Completion]:
        """Wait for everything in flight; returns the completions."""
        out: list[Completion] = []
        while self.pending():
            out.extend(self.reap(self.pending()))
        return out

    def sync(self) -> None:
        """fsync the target (after the operations in flight finish; their completions stay reapable)."""
        assert self.fd is not None and self._impl is not None
        assert self.file is not None
        self._impl.wait_idle()
        self.file.sync()

    def close(self) -> None:
        """Wait for operations in flight (the kernel may still be writing into their buffers), then
        release the ring and close the file."""
        impl, self._impl = self._impl, None
        self.__dict__.pop("submit", None)
        self.__dict__.pop("reap", None)
        try:
            if impl is not None:
                impl.close()
        finally:
            if self.file is not None:
                f, self.file, self.fd = self.file, None, None
                f.close()

    def __enter__(self) -> "QueuedEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _DirectImpl:

    """Depth 1 without a ring: preadv/pwritev in ``submit``, like the sync engine.

    With one operation at a time there is nothing to overlap, and the plain system call is the
    cheapest way to issue it: on this project's test machine random 4 KiB QD1 writes ran ~8%
    faster with pwrite than through io_uring (fio psync vs fio io_uring showed the same)."""

    def __init__(self, file: DataFile) -> None:
        self.file = file
        self.fd = file.fd
        self.path = file.path
        self.done: list[Completion] = []

    def submit(self, op: IoOp) -> None:
        kind = op.kind
        if kind not in _OPCODES:
            raise ValueError(f"unknown operation {kind!r}")
        mv = memoryview(op.buf)[: op.length]
        t0 = _perf()
        try:
            n = self.file.write_at(mv, op.offset) if kind == "write" else self.file.read_at(mv, op.offset)
        finally:
            mv.release()
        self.done.append(Completion(op, n, t0, _perf()))

    def reap(self, min_complete: int = 1) -> list[Completion]:
        done, self.done = self.done, []
        return done

    def closed_loop(self, kind, bufs, length, next_offset, *, max_ops, duration, latencies,
                    fill=None) -> LoopResult:
        return pio_loop(self.fd, self.path, kind, bufs[0], length, next_offset, max_ops=max_ops,
                        duration=duration, latencies=latencies, fill=fill)

    def pending(self) -> int:
        return len(self.done)

    def wait_idle(self) -> None:
        pass

    def close(self) -> None:
        self.done = []


def _make(queue_depth: int = 32, **options) -> QueuedEngine:
    return QueuedEngine(queue_depth, **options)


register(EngineInfo("queued", "io_uring on raw system calls (a thread pool where it is missing), depth 1..256",
                    QueuedEngine.caps, make=_make))
