"""Aligned buffers for O_DIRECT: one page-aligned buffer, or a set of them on huge pages."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator, Sequence
from typing import overload

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


class AlignedBuffers(Sequence[memoryview]):
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

    @overload
    def __getitem__(self, i: int) -> memoryview: ...

    @overload
    def __getitem__(self, i: slice) -> list[memoryview]: ...

    def __getitem__(self, i: int | slice) -> memoryview | list[memoryview]:
        return self._views[i]

    def __iter__(self) -> Iterator[memoryview]:
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


def release(*bufs) -> None:
    """Close buffers (and release views) quietly: a slice still held by the traceback of a Ctrl-C
    (a fill or a read was running) must not turn the interruption into a BufferError; the
    collector frees it then."""
    for b in bufs:
        if b is None:
            continue
        try:
            if isinstance(b, memoryview):
                b.release()
            else:
                b.close()
        except BufferError:
            pass
