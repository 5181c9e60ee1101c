"""The io_uring ABI on raw system calls (include/uapi/linux/io_uring.h): setting a ring up,
its mmap'd submission and completion queues, ``io_uring_enter``. No locking: one thread only.
See :mod:`cardbench.engine.queued` for why and how it is used."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import struct
import time

_SYS_IO_URING_SETUP = 425   # the same number on every architecture with the unified table
_SYS_IO_URING_ENTER = 426
_SYS_IO_URING_REGISTER = 427

_IORING_REGISTER_BUFFERS = 0
_IORING_UNREGISTER_BUFFERS = 1
_IORING_REGISTER_FILES = 2
#: sqe.flags: ``fd`` is an index into the registered files
_IOSQE_FIXED_FILE = 1

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
#: the same on registered buffers (``buf_index``): no page pinning per operation
_OPCODES_FIXED = {"read": 4, "write": 5}     # IORING_OP_READ_FIXED, IORING_OP_WRITE_FIXED

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

    def register(self, opcode: int, arg, nr: int) -> int:
        """``io_uring_register(opcode, arg, nr)``: 0, or the errno it failed with."""
        r = self._enter(_SYS_IO_URING_REGISTER, self.fd, ctypes.c_uint(opcode), arg, ctypes.c_uint(nr))
        return ctypes.get_errno() if r < 0 else 0

    def register_buffers(self, spans: list[tuple[int, int]]) -> bool:
        """Register ``spans`` ((address, size), ...) as fixed buffers 0, 1, ...; False where the
        kernel says no (old, locked-memory limit): the caller then uses plain reads and writes."""
        iov = (ctypes.c_uint64 * (2 * len(spans)))(*(x for span in spans for x in span))
        return self.register(_IORING_REGISTER_BUFFERS, iov, len(spans)) == 0

    def unregister_buffers(self) -> None:
        self.register(_IORING_UNREGISTER_BUFFERS, None, 0)

    def register_file(self, fd: int) -> bool:
        """Register ``fd`` as fixed file 0 (no file lookup per operation); False if refused."""
        fds = (ctypes.c_int32 * 1)(fd)
        return self.register(_IORING_REGISTER_FILES, fds, 1) == 0

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
