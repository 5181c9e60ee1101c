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
    kernel two at a time as well, and each pass waits for at least one completion. Random
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

import ctypes
import errno
import mmap
import os
import platform
import queue
import struct
import threading
import time
from collections import deque

from cardbench.engine.base import Completion, IoOp, LoopResult, open_fd, os_error, pio_loop, submit_reap_loop
from cardbench.errors import UsageError

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

# --- io_uring ABI (include/uapi/linux/io_uring.h) -------------------------------------------

_SYS_IO_URING_SETUP = 425   # the same number on every architecture with the unified table
_SYS_IO_URING_ENTER = 426

_IORING_SETUP_CLAMP = 1 << 4
_IORING_SETUP_SUBMIT_ALL = 1 << 7
_IORING_SETUP_COOP_TASKRUN = 1 << 8
_IORING_SETUP_SINGLE_ISSUER = 1 << 12
_IORING_SETUP_DEFER_TASKRUN = 1 << 13

_IORING_FEAT_SINGLE_MMAP = 1 << 0
_IORING_FEAT_NODROP = 1 << 1
_IORING_FEAT_RW_CUR_POS = 1 << 3     # 5.6: IORING_OP_READ / IORING_OP_WRITE exist too

_IORING_ENTER_GETEVENTS = 1 << 0
#: io_uring_enter errors that only mean "enter again" (interrupted, or the kernel is short of room)
_RETRY_ERRNOS = (errno.EINTR, errno.EAGAIN, errno.EBUSY)

_IORING_OFF_SQ_RING = 0
_IORING_OFF_CQ_RING = 0x8000000
_IORING_OFF_SQES = 0x10000000

_IORING_OP_FSYNC = 3
_IORING_OP_READ = 22
_IORING_OP_WRITE = 23
_OPCODES = {"read": _IORING_OP_READ, "write": _IORING_OP_WRITE}

_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)

# struct io_uring_params: 10 x u32, then io_sqring_offsets and io_cqring_offsets (40 B each)
_PARAMS = struct.Struct("<10I" + "7IIQ" + "7IIQ")
# struct io_uring_sqe (64 B): opcode flags ioprio fd off addr len rw_flags user_data buf_index
# personality splice_fd_in addr3 pad
_SQE = struct.Struct("<BBHiQQIiQHHiQQ")
_CQE = struct.Struct("<QiI")

# Architectures whose loads and stores are not reordered against each other (TSO): rings can
# be read without fences. Elsewhere only DEFER_TASKRUN rings are used (see module docstring).
_TSO_MACHINES = {"x86_64", "amd64", "i386", "i686"}
_UNIFIED_SYSCALLS = _TSO_MACHINES | {"aarch64", "arm64", "armv7l", "armv6l", "riscv64", "ppc64le", "ppc64",
                                     "s390x", "loongarch64"}

_libc = None
_perf = time.perf_counter
_SETUP_FLAGS: int | None = None
_SUBMIT_BATCH: int | None = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


class RingUnavailable(OSError):
    """io_uring cannot be used here (kernel, sysctl, seccomp, architecture)."""


class _Ring:
    """A raw io_uring: setup, mmap'd rings, enter. No locking: one thread only."""

    def __init__(self, entries: int) -> None:
        machine = platform.machine().lower()
        if machine not in _UNIFIED_SYSCALLS:
            raise RingUnavailable(errno.ENOSYS, f"io_uring not wired for {machine}")
        syscall = _syscall()
        base = _IORING_SETUP_CLAMP | _IORING_SETUP_SUBMIT_ALL
        tries = [base | _IORING_SETUP_SINGLE_ISSUER | _IORING_SETUP_DEFER_TASKRUN]
        if machine in _TSO_MACHINES:
            tries += [base | _IORING_SETUP_COOP_TASKRUN, base, _IORING_SETUP_CLAMP]
        if _SETUP_FLAGS is not None:        # for experiments only
            tries = [_SETUP_FLAGS]
        fd = -1
        err = 0
        params = (ctypes.c_char * _PARAMS.size)()
        for flags in tries:
            ctypes.memset(params, 0, _PARAMS.size)
            struct.pack_into("<3I", params, 0, 0, 0, flags)
            fd = syscall(_SYS_IO_URING_SETUP, ctypes.c_uint(entries), params)
            if fd >= 0:
                self.setup_flags = flags
                break
            err = ctypes.get_errno()
            if err != errno.EINVAL:
                break
        if fd < 0:
            raise RingUnavailable(err, f"io_uring_setup: {os.strerror(err)}")
        self.fd = fd
        try:
            p = _PARAMS.unpack_from(params)
            sq_entries, cq_entries, _flags, _cpu, _idle, features = p[0:6]
            sq_off = p[10:19]
            cq_off = p[19:28]
            if not features & _IORING_FEAT_RW_CUR_POS or not features & _IORING_FEAT_NODROP:
                raise RingUnavailable(errno.ENOSYS, "io_uring too old (needs Linux 5.6+)")
            self.features = features
            self.sq_entries = sq_entries
            self.cq_entries = cq_entries
            sq_size = sq_off[6] + sq_entries * 4            # array offset + u32 per entry
            cq_size = cq_off[5] + cq_entries * _CQE.size    # cqes offset + 16 B per entry
            prot = mmap.PROT_READ | mmap.PROT_WRITE
            flags = mmap.MAP_SHARED | _MAP_POPULATE
            if features & _IORING_FEAT_SINGLE_MMAP:
                size = max(sq_size, cq_size)
                self.sq_map = mmap.mmap(fd, size, flags, prot, offset=_IORING_OFF_SQ_RING)
                self.cq_map = self.sq_map
            else:
                self.sq_map = mmap.mmap(fd, sq_size, flags, prot, offset=_IORING_OFF_SQ_RING)
                self.cq_map = mmap.mmap(fd, cq_size, flags, prot, offset=_IORING_OFF_CQ_RING)
            self.sqes = mmap.mmap(fd, sq_entries * _SQE.size, flags, prot, offset=_IORING_OFF_SQES)
            self.sq32 = memoryview(self.sq_map).cast("I")
            self.cq32 = memoryview(self.cq_map).cast("I")
            self.sq_head_i = sq_off[0] // 4
            self.sq_tail_i = sq_off[1] // 4
            self.sq_mask = self.sq32[sq_off[2] // 4]
            self.cq_head_i = cq_off[0] // 4
            self.cq_tail_i = cq_off[1] // 4
            self.cq_mask = self.cq32[cq_off[2] // 4]
            self.cqes_off = cq_off[5]
            if self.cqes_off % 16:
                raise RingUnavailable(errno.EINVAL, "io_uring CQ entries are not 16-byte aligned")
            # the SQ array says which SQE each ring entry is: entry ``tail`` points at the SQE of
            # the slot being submitted, and a slot's SQE is rewritten only after its completion
            self.sq_array_i = sq_off[6] // 4
            self.sq_tail = self.sq32[self.sq_tail_i]
        except BaseException:
            self.close()
            raise
        self._enter = syscall

    def sq_space(self) -> int:
        return self.sq_entries - ((self.sq_tail - self.sq32[self.sq_head_i]) & 0xFFFFFFFF)

    def sq_unconsumed(self) -> int:
        """Entries written to the SQ that the kernel has not taken yet."""
        return (self.sq_tail - self.sq32[self.sq_head_i]) & 0xFFFFFFFF

    def enter(self, to_submit: int, min_complete: int) -> None:
        """Submit ``to_submit`` queued entries and wait for ``min_complete`` completions."""
        fd = self.fd
        while True:
            r = self._enter(_SYS_IO_URING_ENTER, fd, to_submit, min_complete, _IORING_ENTER_GETEVENTS,
                            None, 0)
            if r >= 0:
                return
            e = ctypes.get_errno()
            if e == errno.EINTR:
                # whatever was consumed is reflected in the SQ head; submit the rest
                to_submit = self.sq_unconsumed()
                continue
            if e in (errno.EAGAIN, errno.EBUSY):
                # the kernel is short of memory or the CQ is backed up: harvest, then retry
                return
            raise OSError(e, os.strerror(e))

    def close(self) -> None:
        for name in ("sq32", "cq32"):
            mv = getattr(self, name, None)
            if mv is not None:
                mv.release()
                setattr(self, name, None)
        for name in ("sqes", "cq_map", "sq_map"):
            m = getattr(self, name, None)
            if m is not None and not m.closed:
                m.close()
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)
            self.fd = -1


def _probe_io_uring() -> str | None:
    """None if a ring can be set up here, else the reason why not."""
    try:
        r = _Ring(1)
    except (OSError, AttributeError) as e:
        return str(e)
    r.close()
    return None


_PROBE: list = []


def io_uring_available() -> tuple[bool, str | None]:
    """(usable, reason if not). Probed once per process."""
    if not _PROBE:
        _PROBE.append(_probe_io_uring())
    reason = _PROBE[0]
    return reason is None, reason


class QueuedEngine:
    """Up to ``queue_depth`` operations in flight; io_uring, or a thread pool where it is missing.

    ``backend``: "auto" (depth 1: direct; deeper: io_uring if it works, else threads),
    "io_uring", "threads" or "direct" (each operation done in ``submit`` with preadv/pwritev,
    depth 1 only in effect). After ``open`` the chosen backend is in ``self.backend``.
    """

    name = "queued"

    def __init__(self, queue_depth: int = 32, backend: str = "auto", submit_batch: int | None = None) -> None:
        if not isinstance(queue_depth, int) or not 1 <= queue_depth <= MAX_QUEUE_DEPTH:
            raise UsageError(f"queue depth must be 1..{MAX_QUEUE_DEPTH}, got {queue_depth!r}")
        if submit_batch is None:
            submit_batch = _SUBMIT_BATCH or DEFAULT_SUBMIT_BATCH
        if not isinstance(submit_batch, int) or submit_batch < 1:
            raise UsageError(f"submit batch must be a positive whole number, got {submit_batch!r}")
        self.submit_batch = submit_batch
        if backend not in BACKENDS:
            raise UsageError(f"unknown queued backend {backend!r} ({', '.join(BACKENDS)})")
        self.queue_depth = queue_depth
        self.requested_backend = backend
        self.backend: str | None = None
        self.backend_reason: str | None = None
        self.fd: int | None = None
        self.path = ""
        self.direct = False
        self._impl: _UringImpl | _ThreadImpl | None = None

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None:
        self.path = path
        self.fd, self.direct = open_fd(path, write=write, direct=direct, create=create)
        try:
            self._impl = self._make_impl()
        except BaseException:
            os.close(self.fd)
            self.fd = None
            raise
        # the hot calls go straight to the backend (one Python call less per operation); at
        # depth 1 the io_uring backend submits and waits in one system call
        impl = self._impl
        self.submit = impl.submit_wait if self.queue_depth == 1 and self.backend == "io_uring" \
            else impl.submit  # type: ignore[method-assign]
        self.reap = self._impl.reap           # type: ignore[method-assign]

    def _make_impl(self):
        assert self.fd is not None
        if self.requested_backend == "direct" or (self.requested_backend == "auto" and self.queue_depth == 1):
            self.backend = "direct"
            return _DirectImpl(self.fd, self.path)
        if self.requested_backend in ("auto", "io_uring"):
            try:
                impl = _UringImpl(self.fd, self.path, self.queue_depth, self.submit_batch)
                self.backend = "io_uring"
                return impl
            except RingUnavailable as e:
                if self.requested_backend == "io_uring":
                    from cardbench.errors import EnvironmentMissing
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
                    latencies) -> LoopResult:
        """See :func:`cardbench.engine.base.closed_loop`: io_uring and depth 1 run their own lean
        loop (no Python object per operation); the thread pool goes through submit/reap."""
        assert self._impl is not None, "engine not open"
        own = getattr(self._impl, "closed_loop", None)
        if own is None:
            return submit_reap_loop(self, kind, bufs, length, next_offset, max_ops=max_ops, duration=duration,
                                    latencies=latencies)
        return own(kind, bufs, length, next_offset, max_ops=max_ops, duration=duration, latencies=latencies)

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
        self._impl.wait_idle()
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise os_error(e, self.path) from None

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
            if self.fd is not None:
                fd, self.fd = self.fd, None
                os.close(fd)

    def __enter__(self) -> "QueuedEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _UringImpl:
    def __init__(self, fd: int, path: str, queue_depth: int, submit_batch: int) -> None:
        self.fd = fd
        self.path = path
        self.ring = _Ring(queue_depth)
        self.depth = self.ring.sq_entries       # power of two >= queue_depth
        self.slots_free = list(range(self.depth - 1, -1, -1))
        self.slot_op: list[IoOp | None] = [None] * self.depth
        self.slot_t: list[float] = [0.0] * self.depth
        self.unsent: list[int] = []              # slots written into the SQ, not yet entered
        self.inflight = 0                        # entered, not completed
        self.done: list[Completion] = []         # completed, not yet handed out
        self.addr: dict[int, tuple[object, object, int]] = {}
        self.errors: list[Exception] = []         # failed operations, raised one per reap
        #: hand queued entries to the kernel once this many wait (see QueuedEngine)
        self.submit_batch = submit_batch

    def _address(self, buf) -> tuple:
        """(buf, ctypes view, address, size); cached, which keeps the buffer referenced (so mapped)."""
        try:
            c = ctypes.c_char.from_buffer(buf)
            a = ctypes.addressof(c)
            size = memoryview(buf).nbytes
        except TypeError:
            if isinstance(buf, bytes):   # read-only bytes can be written from
                c = ctypes.c_char_p(buf)
                a = ctypes.cast(c, ctypes.c_void_p).value
                size = len(buf)
            else:
                raise
        if len(self.addr) > 4096 and not self.inflight and not self.unsent:
            self.addr.clear()
        ent = self.addr[id(buf)] = (buf, c, a, size)
        return ent

    def _queue(self, op: IoOp) -> int:
        """Write ``op`` into a free slot's SQE and put that slot on the SQ ring (not yet handed
        to the kernel); returns the slot. The caller has made sure a slot is free."""
        opcode = _OPCODES.get(op.kind)
        if opcode is None:
            raise ValueError(f"unknown operation {op.kind!r}")
        buf = op.buf
        ent = self.addr.get(id(buf))
        if ent is None or ent[0] is not buf:
            ent = self._address(buf)
        length = op.length
        if not 0 < length <= ent[3]:
            raise ValueError(f"operation length {length} does not fit its {ent[3]}-byte buffer")
        slot = self.slots_free.pop()
        ring = self.ring
        tail = ring.sq_tail
        _SQE.pack_into(ring.sqes, slot << 6, opcode, 0, 0, self.fd, op.offset, ent[2], length, 0, slot,
                       0, 0, 0, 0, 0)
        ring.sq32[ring.sq_array_i + (tail & ring.sq_mask)] = slot
        tail = (tail + 1) & 0xFFFFFFFF
        ring.sq_tail = tail
        ring.sq32[ring.sq_tail_i] = tail
        self.slot_op[slot] = op
        return slot

    def _enter_failure(self, err: int) -> Exception:
        """The one-line error for an ``io_uring_enter`` that failed with ``err`` (not one of
        the passing ones in ``_RETRY_ERRNOS``)."""
        if err == errno.EEXIST:
            return UsageError("a queued engine belongs to the thread that opened it (make one engine per thread)")
        return os_error(OSError(err, os.strerror(err)), self.path)

    def submit(self, op: IoOp) -> None:
        # a free slot means free room in the SQ too (entries in the SQ hold slots)
        if not self.slots_free:
            self._wait(1)        # full: make room, keep the completions for the next reap
        unsent = self.unsent
        unsent.append(self._queue(op))
        if len(unsent) >= self.submit_batch:
            self._wait(0)

    def submit_wait(self, op: IoOp) -> None:
        """Depth 1: submit and wait in one system call (nothing else can be in flight).

        The lean path of the common case (one entry in, one completion out); anything else
        (interrupted, kernel busy, an error of the call) goes on through the general path."""
        if self.inflight or self.unsent or not self.slots_free:
            self._wait(self.inflight + len(self.unsent))
        slot = self._queue(op)
        ring = self.ring
        t0 = self.slot_t[slot] = _perf()
        r = ring._enter(_SYS_IO_URING_ENTER, ring.fd, 1, 1, _IORING_ENTER_GETEVENTS, None, 0)
        if r == 1:
            cq32 = ring.cq32
            head = cq32[ring.cq_head_i]
            if cq32[ring.cq_tail_i] == (head + 1) & 0xFFFFFFFF:
                now = _perf()
                user, res, _flags = _CQE.unpack_from(ring.cq_map, ring.cqes_off + (head & ring.cq_mask) * 16)
                cq32[ring.cq_head_i] = (head + 1) & 0xFFFFFFFF
                if user == slot:
                    self.slot_op[slot] = None
                    self.slots_free.append(slot)
                    if res < 0:
                        self.errors.append(os_error(OSError(-res, os.strerror(-res)), self.path))
                    else:
                        self.done.append(Completion(op, res, t0, now))
                    return
                cq32[ring.cq_head_i] = head          # not ours (cannot happen): general path
        err = ctypes.get_errno() if r < 0 else 0
        if ring.sq_unconsumed():
            self.unsent.append(slot)
        else:
            self.inflight += 1
        self._harvest()
        if err and err not in _RETRY_ERRNOS:
            raise self._enter_failure(err)

    def _wait(self, min_complete: int) -> None:
        """Enter the kernel: submit what is queued, wait, harvest completions into ``done``."""
        ring = self.ring
        unsent = self.unsent
        n = len(unsent)
        outstanding = self.inflight + n
        want = min(min_complete, outstanding)
        if n:
            t = time.perf_counter()
            st = self.slot_t
            for s in unsent:
                st[s] = t
        try:
            ring.enter(n, want)
        except OSError as e:
            raise self._enter_failure(e.errno) from None
        finally:
            if n:
                # the kernel consumed whatever the SQ head says
                sent = n - ring.sq_unconsumed()
                self.inflight += sent
                self.unsent = unsent[sent:]
        self._harvest()

    def _harvest(self) -> None:
        ring = self.ring
        cq32 = ring.cq32
        head = cq32[ring.cq_head_i]
        tail = cq32[ring.cq_tail_i]
        if head == tail:
            return
        now = time.perf_counter()
        cq_map = ring.cq_map
        mask = ring.cq_mask
        off = ring.cqes_off
        unpack = _CQE.unpack_from
        slot_op = self.slot_op
        slot_t = self.slot_t
        free = self.slots_free
        done = self.done
        n = 0
        while head != tail:
            slot, res, _flags = unpack(cq_map, off + (head & mask) * 16)
            head = (head + 1) & 0xFFFFFFFF
            n += 1
            op = slot_op[slot]
            slot_op[slot] = None
            free.append(slot)
            if res < 0:
                self.errors.append(os_error(OSError(-res, os.strerror(-res)), self.path))
                continue
            done.append(Completion(op, res, slot_t[slot], now))
        cq32[ring.cq_head_i] = head
        self.inflight -= n

    def closed_loop(self, kind: str, bufs, length: int, next_offset, *, max_ops: int, duration: float,
                    latencies) -> LoopResult:
        """The closed loop on the ring itself, one slot per buffer.

        Each slot's SQE is written once (operation, file, buffer, length, slot number); an
        operation going out again only gets a new offset and a ring entry. One
        ``io_uring_enter`` per pass hands over every operation queued since the last one and
        waits for at least one completion (fio: iodepth_batch_complete_min=1). Completions are
        read straight from the CQ ring. No IoOp or Completion objects."""
        if self.pending():
            raise UsageError("closed_loop needs an engine with nothing in flight")
        opcode = _OPCODES[kind]
        ring = self.ring
        nb = min(len(bufs), self.depth, max_ops)
        fd = self.fd
        sqes = ring.sqes
        for s in range(nb):
            ent = self._address(bufs[s])
            if not 0 < length <= ent[3]:
                raise ValueError(f"operation length {length} does not fit its {ent[3]}-byte buffer")
            _SQE.pack_into(sqes, s << 6, opcode, 0, 0, fd, 0, ent[2], length, 0, s, 0, 0, 0, 0, 0)
        for s in range(nb):
            self.slots_free.remove(s)
        cqes = memoryview(ring.cq_map)[ring.cqes_off:ring.cqes_off + ring.cq_entries * _CQE.size]
        sqe_q = memoryview(sqes).cast("Q")          # the offset of slot s is sqe_q[s * 8 + 1]
        cq_q = cqes.cast("Q")                       # CQE i: user_data at cq_q[2 i]
        cq_i = cqes.cast("i")                       # and res at cq_i[4 i + 2]
        sq32 = ring.sq32
        cq32 = ring.cq32
        arr = ring.sq_array_i
        smask = ring.sq_mask
        cmask = ring.cq_mask
        sq_head_i, sq_tail_i = ring.sq_head_i, ring.sq_tail_i
        cq_head_i, cq_tail_i = ring.cq_head_i, ring.cq_tail_i
        enter = ring._enter
        rfd = ring.fd
        get_errno = ctypes.get_errno
        perf = _perf
        append = latencies.append
        queued_at = [0.0] * nb
        batch = self.submit_batch
        total = n = 0
        stopped = "size"
        error = 0
        inflight = 0
        tail = ring.sq_tail
        unsent = 0
        head = cq32[cq_head_i]
        t0 = perf()
        deadline = t0 + duration
        try:
            for s in range(nb):
                sqe_q[(s << 3) + 1] = next_offset()
                sq32[arr + (tail & smask)] = s
                tail = (tail + 1) & 0xFFFFFFFF
                queued_at[s] = t0
                unsent += 1
            sq32[sq_tail_i] = tail
            issued = nb
            stop = issued >= max_ops
            while True:
                if enter(_SYS_IO_URING_ENTER, rfd, unsent, 1, _IORING_ENTER_GETEVENTS, None, 0) < 0:
                    e = get_errno()
                    if e not in _RETRY_ERRNOS:
                        raise self._enter_failure(e)
                left = (tail - sq32[sq_head_i]) & 0xFFFFFFFF     # queued, not yet taken by the kernel
                inflight += unsent - left
                unsent = left
                head = cq32[cq_head_i]
                ctail = cq32[cq_tail_i]
                if head == ctail:
                    continue
                now = perf()
                if not stop and now >= deadline:
                    stop = True
                    stopped = "duration"
                while head != ctail:
                    i = head & cmask
                    s = cq_q[i << 1]
                    res = cq_i[(i << 2) + 2]
                    head = (head + 1) & 0xFFFFFFFF
                    inflight -= 1
                    append(now - queued_at[s])
                    if res != length:
                        if res < 0:
                            error = error or -res
                        else:
                            total += res
                            n += 1
                        if not stop:
                            stopped = "end of target"
                        stop = True
                        continue
                    total += res
                    n += 1
                    if not stop:
                        sqe_q[(s << 3) + 1] = next_offset()
                        sq32[arr + (tail & smask)] = s
                        tail = (tail + 1) & 0xFFFFFFFF
                        queued_at[s] = now
                        unsent += 1
                        issued += 1
                        if issued >= max_ops:
                            stop = True
                        if unsent >= batch:
                            # hand these to the kernel now (see DEFAULT_SUBMIT_BATCH)
                            sq32[sq_tail_i] = tail
                            enter(_SYS_IO_URING_ENTER, rfd, unsent, 0, 0, None, 0)
                            left = (tail - sq32[sq_head_i]) & 0xFFFFFFFF
                            inflight += unsent - left
                            unsent = left
                cq32[cq_head_i] = head
                sq32[sq_tail_i] = tail
                if stop and not inflight and not unsent:
                    break
        except BaseException:
            # leave the rings consistent (completions seen are consumed, entries written are
            # published), then wait for everything out there before the buffers can go
            cq32[cq_head_i] = head
            sq32[sq_tail_i] = tail
            ring.sq_tail = tail
            self.inflight, self.unsent = inflight, []
            self._drain_loop(inflight + unsent)
            raise
        finally:
            ring.sq_tail = tail
            if not self.inflight:     # (a drain that gave up leaves the slots taken)
                self.slots_free.extend(range(nb))
            for view in (sqe_q, cq_q, cq_i, cqes):
                view.release()
        if error:
            raise os_error(OSError(error, os.strerror(error)), self.path)
        return LoopResult(total, n, t0, perf(), stopped)

    def _drain_loop(self, outstanding: int) -> None:
        """After a failure inside ``closed_loop``: submit what is queued and wait until nothing
        is in flight (the kernel may still be writing into the buffers); results are dropped."""
        ring = self.ring
        stuck = 0
        while outstanding > 0 and stuck < 3:
            unsent = ring.sq_unconsumed()
            ring._enter(_SYS_IO_URING_ENTER, ring.fd, unsent, outstanding, _IORING_ENTER_GETEVENTS, None, 0)
            cq32 = ring.cq32
            head, ctail = cq32[ring.cq_head_i], cq32[ring.cq_tail_i]
            got = (ctail - head) & 0xFFFFFFFF
            cq32[ring.cq_head_i] = ctail
            stuck = stuck + 1 if not got else 0
            outstanding -= got
        self.inflight = max(0, outstanding)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        if self.unsent or self.inflight:
            # always enter: with DEFER_TASKRUN completions are only posted inside io_uring_enter
            self._wait(max(0, min_complete - len(self.done)))
        if self.errors:
            # raise the first error; the good completions stay for the next reap
            raise self.errors.pop(0)
        done, self.done = self.done, []
        return done

    def pending(self) -> int:
        return self.inflight + len(self.unsent) + len(self.done)

    def wait_idle(self) -> None:
        while self.inflight or self.unsent:
            self._wait(self.inflight + len(self.unsent))

    def close(self) -> None:
        try:
            stuck = 0
            while (self.inflight or self.unsent) and stuck < 3:
                before = (self.inflight, len(self.unsent))
                try:
                    self._wait(self.inflight + len(self.unsent))
                except Exception:
                    pass   # an I/O error while draining: keep draining the rest
                stuck = stuck + 1 if (self.inflight, len(self.unsent)) == before else 0
        finally:
            self.done = []
            self.addr.clear()
            self.ring.close()


class _DirectImpl:
    """Depth 1 without a ring: preadv/pwritev in ``submit``, like the sync engine.

    With one operation at a time there is nothing to overlap, and the plain system call is the
    cheapest way to issue it: on this project's test machine random 4 KiB QD1 writes ran ~8%
    faster with pwrite than through io_uring (fio psync vs fio io_uring showed the same)."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.done: list[Completion] = []

    def submit(self, op: IoOp) -> None:
        kind = op.kind
        if kind not in _OPCODES:
            raise ValueError(f"unknown operation {kind!r}")
        mv = memoryview(op.buf)[: op.length]
        t0 = _perf()
        try:
            if kind == "write":
                n = os.pwritev(self.fd, [mv], op.offset)
            else:
                n = os.preadv(self.fd, [mv], op.offset)
        except OSError as e:
            raise os_error(e, self.path) from None
        finally:
            mv.release()
        self.done.append(Completion(op, n, t0, _perf()))

    def reap(self, min_complete: int = 1) -> list[Completion]:
        done, self.done = self.done, []
        return done

    def closed_loop(self, kind, bufs, length, next_offset, *, max_ops, duration, latencies) -> LoopResult:
        return pio_loop(self.fd, self.path, kind, bufs[0], length, next_offset, max_ops=max_ops,
                        duration=duration, latencies=latencies)

    def pending(self) -> int:
        return len(self.done)

    def wait_idle(self) -> None:
        pass

    def close(self) -> None:
        self.done = []


class _ThreadImpl:
    """``depth`` threads each doing one blocking preadv/pwritev at a time."""

    def __init__(self, fd: int, path: str, queue_depth: int) -> None:
        self.fd = fd
        self.path = path
        self.depth = queue_depth
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.results: deque = deque()
        self.cond = threading.Condition(threading.Lock())
        self.outstanding = 0           # submitted, not reaped
        self.running = 0               # submitted, not completed
        self.threads = [threading.Thread(target=self._worker, name=f"cardbench-io-{i}", daemon=True)
                        for i in range(queue_depth)]
        for t in self.threads:
            t.start()

    def _worker(self) -> None:
        fd = self.fd
        jobs = self.jobs
        results = self.results
        cond = self.cond
        perf = time.perf_counter
        while True:
            op = jobs.get()
            if op is None:
                return
            mv = memoryview(op.buf)[: op.length]
            t0 = perf()
            try:
                if op.kind == "write":
                    n = os.pwritev(fd, [mv], op.offset)
                else:
                    n = os.preadv(fd, [mv], op.offset)
                item = Completion(op, n, t0, perf())
            except OSError as e:
                item = os_error(e, self.path)
            finally:
                mv.release()
            with cond:
                results.append(item)
                self.running -= 1
                cond.notify()

    def submit(self, op: IoOp) -> None:
        if op.kind not in ("read", "write"):
            raise ValueError(f"unknown operation {op.kind!r}")
        with self.cond:
            self.outstanding += 1
            self.running += 1
        self.jobs.put(op)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        with self.cond:
            want = min(min_complete, self.outstanding)
            while len(self.results) < want:
                self.cond.wait()
            items = list(self.results)
            self.results.clear()
            errors = [it for it in items if isinstance(it, Exception)]
            if errors:
                # raise the first error; the good completions stay for the next reap
                self.results.extend(it for it in items if not isinstance(it, Exception))
                self.outstanding -= len(errors)
                raise errors[0]
            self.outstanding -= len(items)
        return items

    def pending(self) -> int:
        return self.outstanding

    def wait_idle(self) -> None:
        with self.cond:
            while self.running:
                self.cond.wait()

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for t in self.threads:
            t.join()
