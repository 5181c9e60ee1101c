"""Where a file's bytes are on the device: the FIEMAP ioctl (ext4, xfs, btrfs, f2fs; vfat/exfat
on recent kernels). Full mode uses it to turn "file 7, byte 123" into "byte N of the card", so a
fill through a filesystem can still name the real capacity and the f3fix line. Best effort: None
when the filesystem does not answer."""

from __future__ import annotations

import bisect
import fcntl
import os
import struct

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
_HDR = struct.Struct("=QQIIII")          # fm_start, fm_length, fm_flags, fm_mapped_extents, fm_extent_count, reserved
_EXT = struct.Struct("=QQQQQIIII")       # logical, physical, length, reserved64[2], flags, reserved[3]
_LAST = 0x1
_UNUSABLE = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400   # unknown, delalloc, encoded, encrypted, not aligned, inline, tail
BATCH = 256


class ExtentMap:
    """Sorted (logical, physical, length) extents of one file; ``physical(offset)``."""

    def __init__(self, extents: list[tuple[int, int, int]]):
        self.extents = sorted(extents)
        self._starts = [e[0] for e in self.extents]

    def physical(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        lo, ph, ln = self.extents[i]
        if offset >= lo + ln:
            return None
        return ph + (offset - lo)

    def pieces(self, offset: int, length: int) -> list[tuple[int, int]]:
        """Physical (start, length) pieces of [offset, offset + length) of the file."""
        out: list[tuple[int, int]] = []
        end = offset + length
        i = max(0, bisect.bisect_right(self._starts, offset) - 1)
        while offset < end and i < len(self.extents):
            lo, ph, ln = self.extents[i]
            if offset < lo:
                offset = lo
                continue
            if offset >= lo + ln:
                i += 1
                continue
            n = min(end, lo + ln) - offset
            out.append((ph + offset - lo, n))
            offset += n
            i += 1
        return out


def file_extents(fd: int) -> ExtentMap | None:
    """The extents of an open file, or None when FIEMAP is not supported / not trustworthy."""
    extents: list[tuple[int, int, int]] = []
    start = 0
    for _ in range(100000):
        buf = bytearray(_HDR.size + BATCH * _EXT.size)
        _HDR.pack_into(buf, 0, start, 0xFFFF_FFFF_FFFF_FFFF - start, FIEMAP_FLAG_SYNC, 0, BATCH, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf, True)
        except OSError:
            return None
        mapped = _HDR.unpack_from(buf, 0)[3]
        if mapped == 0:
            break
        last = False
        for k in range(mapped):
            lo, ph, ln, _r1, _r2, flags, _a, _b, _c = _EXT.unpack_from(buf, _HDR.size + k * _EXT.size)
            if flags & _UNUSABLE:
                return None
            extents.append((lo, ph, ln))
            start = lo + ln
            last = last or bool(flags & _LAST)
        if last:
            break
    return ExtentMap(extents)


def path_extents(path: str) -> ExtentMap | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return file_extents(fd)
    finally:
        os.close(fd)
