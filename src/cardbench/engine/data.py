"""Card data, opened once: a file or a block device with O_DIRECT (and the one fallback when it
is refused), ``read_at``/``write_at`` with the one errno table, the device's geometry, and the
two wrappers of f3's device stack: :class:`Timed` (time and count every transfer) and
:class:`Saved` (save before write, for ``--preserve`` and the non-destructive verify).

Everything in cardbench that moves the bytes of a card goes through here or through an engine
built on it (``cardbench.engine.sync``, ``cardbench.engine.queued``); lock files, journals and
state files are not card data and use plain file calls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import struct
import time
from dataclasses import dataclass

from cardbench.engine.errors import IoFault, io_error, short_transfer

#: ioctl numbers from linux/fs.h
BLKSSZGET = 0x1268
BLKGETSIZE64 = 0x80081272

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
SFR_WAIT_BEFORE = 1
SFR_WRITE = 2
SFR_WAIT_AFTER = 4


def open_raw(path: str, *, write: bool, direct: bool = True, create: bool = False,
             exclusive: bool = False) -> tuple[int, bool]:
    """Open ``path`` for card I/O; returns (fd, O_DIRECT actually used). Raises the OSError as it
    came (for callers that judge the errno themselves); see :func:`open_data` for the usual one.

    When the filesystem refuses O_DIRECT (EINVAL: tmpfs, some FUSE filesystems) and ``direct``
    was asked, falls back to buffered I/O and says so in the second value; callers must then
    drop the page cache themselves (fsync + posix_fadvise DONTNEED) and record it in the method.
    ``create``: a new file (O_CREAT | O_EXCL). ``exclusive``: O_EXCL on a block device (the
    kernel refuses it while mounted or opened exclusively by another, EBUSY).
    """
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC
    if create:
        flags |= os.O_CREAT | os.O_EXCL
    elif exclusive:
        flags |= os.O_EXCL
    if direct:
        try:
            return os.open(path, flags | os.O_DIRECT, 0o644), True
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o644), False


def open_data(path: str, *, write: bool, direct: bool = True, create: bool = False) -> tuple[int, bool]:
    """:func:`open_raw` with its failure as the one-line cardbench error (the errno table)."""
    try:
        return open_raw(path, write=write, direct=direct, create=create)
    except OSError as e:
        raise io_error(e, path, op="open") from None


def geometry(fd: int) -> tuple[int, int]:
    """(logical block size, size in bytes) of an open block device; of a file: (512, its size)."""
    try:
        sector = struct.unpack("i", fcntl.ioctl(fd, BLKSSZGET, struct.pack("i", 0)))[0]
    except OSError:
        sector = 512
    try:
        size = struct.unpack("Q", fcntl.ioctl(fd, BLKGETSIZE64, struct.pack("Q", 0)))[0]
    except OSError:
        size = os.lseek(fd, 0, os.SEEK_END)
    return max(512, sector), size


def size_of(path: str) -> int:
    """Size in bytes of a block device or file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise io_error(e, path, op="open") from None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


class DataFile:
    """An open card file or device: ``read_at``/``write_at`` (one ``preadv``/``pwritev``, errors
    through the one table), ``sync``, ``size``. ``DataFile.open(path, write=...)`` opens it with
    O_DIRECT (``direct`` says whether it was granted); ``DataFile(fd, path)`` wraps an open one
    (not closed by ``close`` unless ``owned``). A context manager."""

    def __init__(self, fd: int, path: str, *, direct: bool = True, owned: bool = False) -> None:
        self.fd = fd
        self.path = path
        self.direct = direct
        self.owned = owned

    @classmethod
    def open(cls, path: str, *, write: bool, direct: bool = True, create: bool = False) -> "DataFile":
        fd, used = open_data(path, write=write, direct=direct, create=create)
        return cls(fd, path, direct=used, owned=True)

    def _where(self, offset: int) -> str:
        return f"{self.path} at byte {offset}"

    def read_at(self, buf, offset: int) -> int:
        """Read into ``buf`` (all of it, one call) at ``offset``; the bytes read."""
        try:
            return os.preadv(self.fd, [buf], offset)
        except OSError as e:
            raise io_error(e, self._where(offset), op="read", offset=offset) from None

    def write_at(self, buf, offset: int) -> int:
        """Write ``buf`` (one call) at ``offset``; the bytes written."""
        try:
            return os.pwritev(self.fd, [buf], offset)
        except OSError as e:
            raise io_error(e, self._where(offset), op="write", offset=offset) from None

    def read_exact(self, buf, offset: int) -> None:
        """:meth:`read_at`, and a short read is an error too."""
        n = memoryview(buf).nbytes
        got = self.read_at(buf, offset)
        if got != n:
            raise short_transfer(self.path, "read", offset, got, n)

    def write_exact(self, buf, offset: int) -> None:
        """:meth:`write_at`, and a short write is an error too."""
        n = memoryview(buf).nbytes
        got = self.write_at(buf, offset)
        if got != n:
            raise short_transfer(self.path, "write", offset, got, n)

    def sync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise io_error(e, self.path, op="sync") from None

    def datasync(self) -> None:
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            raise io_error(e, self.path, op="sync") from None

    def sync_range(self, offset: int, nbytes: int, flags: int) -> None:
        """sync_file_range(2): start (and with the WAIT flags, wait for) writeback of a range."""
        fn = _libc.sync_file_range
        fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        if fn(self.fd, offset, nbytes, flags) != 0:
            e = ctypes.get_errno()
            raise io_error(OSError(e, os.strerror(e)), self.path, op="sync", offset=offset)

    def size(self) -> int:
        return os.lseek(self.fd, 0, os.SEEK_END)

    def geometry(self) -> tuple[int, int]:
        return geometry(self.fd)

    def close(self) -> None:
        if self.owned and self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> "DataFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class IOStats:
    """What :class:`Timed` counted: bytes, calls and seconds per direction, seconds of syncs."""

    bytes_written: int = 0
    bytes_read: int = 0
    writes: int = 0
    reads: int = 0
    write_seconds: float = 0.0
    read_seconds: float = 0.0
    sync_seconds: float = 0.0


class Timed:
    """f3's perf device: the same calls as the :class:`DataFile` it wraps, each one timed and
    counted into ``stats`` (failed calls count their time, not their bytes)."""

    def __init__(self, inner: DataFile) -> None:
        self.inner = inner
        self.path = inner.path
        self.stats = IOStats()

    def read_at(self, buf, offset: int) -> int:
        t0 = time.perf_counter()
        try:
            got = self.inner.read_at(buf, offset)
        finally:
            self.stats.read_seconds += time.perf_counter() - t0
        self.stats.reads += 1
        self.stats.bytes_read += max(0, got)
        return got

    def write_at(self, buf, offset: int) -> int:
        t0 = time.perf_counter()
        try:
            got = self.inner.write_at(buf, offset)
        finally:
            self.stats.write_seconds += time.perf_counter() - t0
        self.stats.writes += 1
        self.stats.bytes_written += max(0, got)
        return got

    def sync(self) -> None:
        t0 = time.perf_counter()
        try:
            self.inner.sync()
        finally:
            self.stats.sync_seconds += time.perf_counter() - t0


class Saved:
    """f3's safe device: before any ``write_at``, the ``saver`` (a
    :class:`cardbench.devices.preserve.Preserver`, or anything with ``save(offset, length)``)
    has saved the bytes about to be overwritten. ``save_ahead`` saves a span before a timed
    part, so the saves inside it find nothing new to copy."""

    def __init__(self, inner, saver) -> None:
        self.inner = inner
        self.path = inner.path
        self.saver = saver

    def save_ahead(self, offset: int, length: int) -> None:
        self.saver.save(offset, length)

    def read_at(self, buf, offset: int) -> int:
        return self.inner.read_at(buf, offset)

    def write_at(self, buf, offset: int) -> int:
        self.saver.save(offset, memoryview(buf).nbytes)
        return self.inner.write_at(buf, offset)

    def sync(self) -> None:
        self.inner.sync()


__all__ = ["BLKGETSIZE64", "BLKSSZGET", "DataFile", "IOStats", "IoFault", "Saved", "Timed", "geometry",
           "open_data", "open_raw", "size_of"]
