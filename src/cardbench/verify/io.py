"""Moving bytes for a verification: O_DIRECT reads and writes of a whole block device.

:class:`DeviceIO` is what the probe (:mod:`cardbench.verify.probe`) talks to; the simulated card
(:mod:`cardbench.verify.sim`) has the same four methods, so the algorithm is tested without a
device. Every failure is an :class:`IOFailure` naming the operation and the byte where it failed;
the probe decides what it means (a damaged range, a short card, a card that was pulled out).
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

from cardbench.engine.base import aligned_buffer

#: bytes per O_DIRECT request for long spans
CHUNK = 1 << 20
#: errnos that mean the device itself is gone, not one bad spot
GONE_ERRNOS = frozenset({errno.ENODEV, errno.ENXIO, errno.ENOMEDIUM, errno.ESHUTDOWN})


class IOFailure(Exception):
    """A read, write or sync failed (EIO, short transfer, device gone) at ``offset``."""

    def __init__(self, op: str, offset: int, length: int, err: int | None, message: str):
        super().__init__(message)
        self.op = op
        self.offset = offset
        self.length = length
        self.errno = err
        self.message = message

    @property
    def gone(self) -> bool:
        return self.errno in GONE_ERRNOS


@dataclass
class IOStats:
    bytes_written: int = 0
    bytes_read: int = 0
    writes: int = 0
    reads: int = 0
    write_seconds: float = 0.0
    read_seconds: float = 0.0
    sync_seconds: float = 0.0


class DeviceIO:
    """O_DIRECT I/O on an open block device ``fd`` of ``size`` bytes (logical block ``sector``).

    ``read`` returns a view of an internal aligned buffer, valid until the next call.
    """

    def __init__(self, fd: int, path: str, size: int, sector: int = 512, chunk: int = CHUNK):
        self.fd = fd
        self.path = path
        self.size = size
        self.sector = max(512, sector)
        self.chunk = chunk
        self._rbuf = aligned_buffer(chunk)
        self._wbuf = aligned_buffer(chunk)
        self.stats = IOStats()

    def close(self) -> None:
        # a view handed out by read() may still be alive (held by the traceback of a Ctrl-C):
        # that must not turn the interruption into a BufferError; the collector frees it then
        for b in (self._rbuf, self._wbuf):
            try:
                b.close()
            except BufferError:
                pass

    def _fail(self, op: str, offset: int, length: int, e: OSError | None, short: int | None = None) -> IOFailure:
        if e is not None:
            what = {errno.EIO: "I/O error", errno.ENODEV: "device gone", errno.ENXIO: "device gone",
                    errno.ENOMEDIUM: "no medium"}.get(e.errno, e.strerror or str(e))
            return IOFailure(op, offset, length, e.errno, f"{op} error at byte {offset}: {what}")
        return IOFailure(op, offset, length, errno.EIO,
                         f"short {op} at byte {offset} ({short} of {length} bytes): the device ended early")

    def read(self, offset: int, length: int) -> memoryview:
        """Read ``length`` (<= chunk) bytes at ``offset``."""
        if length > self.chunk:
            raise ValueError("read longer than a chunk; use read_span")
        mv = memoryview(self._rbuf)[:length]
        t0 = time.perf_counter()
        try:
            got = os.preadv(self.fd, [mv], offset)
        except OSError as e:
            raise self._fail("read", offset, length, e) from None
        finally:
            self.stats.read_seconds += time.perf_counter() - t0
        self.stats.reads += 1
        self.stats.bytes_read += max(0, got)
        if got != length:
            raise self._fail("read", offset, length, None, got)
        return mv

    def write_pattern(self, offset: int, length: int, pattern) -> None:
        """Write the pattern data that belongs at ``offset`` .. ``offset + length``."""
        done = 0
        while done < length:
            n = min(self.chunk, length - done)
            mv = memoryview(self._wbuf)[:n]
            pattern.fill(mv, offset + done)
            t0 = time.perf_counter()
            try:
                got = os.pwritev(self.fd, [mv], offset + done)
            except OSError as e:
                raise self._fail("write", offset + done, n, e) from None
            finally:
                self.stats.write_seconds += time.perf_counter() - t0
                mv.release()
            self.stats.writes += 1
            self.stats.bytes_written += max(0, got)
            if got != n:
                raise self._fail("write", offset + done, n, None, got)
            done += n

    def sync(self) -> None:
        t0 = time.perf_counter()
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise self._fail("sync", 0, 0, e) from None
        finally:
            self.stats.sync_seconds += time.perf_counter() - t0
