"""Moving bytes for a verification: O_DIRECT reads and writes of a whole block device.

:class:`DeviceIO` is what the probe (:mod:`cardbench.verify.probe`) talks to: the I/O layer's
:class:`~cardbench.engine.data.DataFile`, timed (:class:`~cardbench.engine.data.Timed`), with
the probe's own words for a failure. The simulated card (:mod:`cardbench.verify.sim`) has the
same four methods, so the algorithm is tested without a device. Every failure is an
:class:`IOFailure` naming the operation and the byte where it failed; the probe decides what it
means (a damaged range, a short card, a card that was pulled out).
"""

from __future__ import annotations

import errno

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile, IOStats, Timed
from cardbench.engine.errors import GONE, IO_ERRORS, describe

__all__ = ["CHUNK", "DeviceIO", "GONE_ERRNOS", "IOFailure", "IOStats"]

#: bytes per O_DIRECT request for long spans
CHUNK = 1 << 20
#: errnos that mean the device itself is gone, not one bad spot (the I/O layer's table)
GONE_ERRNOS = GONE


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


def _failure(op: str, offset: int, length: int, e) -> IOFailure:
    return IOFailure(op, offset, length, e.errno, f"{op} error at byte {offset}: {describe(e.errno)}")


def _short(op: str, offset: int, length: int, got: int) -> IOFailure:
    return IOFailure(op, offset, length, errno.EIO,
                     f"short {op} at byte {offset} ({got} of {length} bytes): the device ended early")


class DeviceIO:
    """O_DIRECT I/O on an open block device ``fd`` of ``size`` bytes (logical block ``sector``).

    ``read`` returns a view of an internal aligned buffer, valid until the next call.
    """

    def __init__(self, fd: int, path: str, size: int, sector: int = 512, chunk: int = CHUNK):
        self.path = path
        self.size = size
        self.sector = max(512, sector)
        self.chunk = chunk
        self._io = Timed(DataFile(fd, path))
        self.stats: IOStats = self._io.stats
        self._rbuf = aligned_buffer(chunk)
        self._wbuf = aligned_buffer(chunk)

    def close(self) -> None:
        # a view handed out by read() may still be alive (held by the traceback of a Ctrl-C)
        release(self._rbuf, self._wbuf)

    def read(self, offset: int, length: int) -> memoryview:
        """Read ``length`` (<= chunk) bytes at ``offset``."""
        if length > self.chunk:
            raise ValueError("read longer than a chunk; use read_span")
        mv = memoryview(self._rbuf)[:length]
        try:
            got = self._io.read_at(mv, offset)
        except IO_ERRORS as e:
            raise _failure("read", offset, length, e) from None
        if got != length:
            raise _short("read", offset, length, got)
        return mv

    def write_pattern(self, offset: int, length: int, pattern) -> None:
        """Write the pattern data that belongs at ``offset`` .. ``offset + length``."""
        done = 0
        while done < length:
            n = min(self.chunk, length - done)
            mv = memoryview(self._wbuf)[:n]
            try:
                pattern.fill(mv, offset + done)
                got = self._io.write_at(mv, offset + done)
            except IO_ERRORS as e:
                raise _failure("write", offset + done, n, e) from None
            finally:
                mv.release()
            if got != n:
                raise _short("write", offset + done, n, got)
            done += n

    def sync(self) -> None:
        try:
            self._io.sync()
        except IO_ERRORS as e:
            raise _failure("sync", 0, 0, e) from None
