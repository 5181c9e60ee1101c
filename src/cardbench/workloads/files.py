"""File workloads: ``seq_write`` (a fresh file, timed through fsync) and ``cold_read`` (read back
with the page cache out of the way, content checked).

How the card is kept busy from the first byte: the file is written with O_DIRECT in 1 MiB
requests, so every request goes to the card at once instead of filling the page cache first
(the cp + sync method times page-cache fill + card and reads 0.93-0.997 of the true rate).
The data for the next request is made by a helper thread while the current one is on the card.
The bytes move through an engine of the I/O layer (``engine="sync"`` by default; ``queued`` at
depth 1 is the same system call; ``fio`` writes and reads the file by itself, unchecked).
The final fsync (metadata, journal) is inside the timing. Where the filesystem refuses
O_DIRECT, the file is written buffered with sync_file_range write-behind (the kernel starts
writing each chunk at once) and fdatasync, and the method says so.

Cold reads use O_DIRECT too; before each read the file's pages are dropped from the page
cache (fsync + posix_fadvise DONTNEED) and mincore() confirms none is resident. The content is
checked against the pattern in a helper thread, off the timed path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from cardbench.engine.base import IoOp
from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import SFR_WAIT_AFTER, SFR_WAIT_BEFORE, SFR_WRITE, DataFile
from cardbench.engine.jobs import Job, run_job
from cardbench.engine.registry import engine_info, get_engine
from cardbench.errors import DeviceFault, UsageError
from cardbench.patterns import CLASSES, Pattern
from cardbench.result import Run
from cardbench.signals import start_thread

Progress = Callable[[int], None]   # called with bytes just done

BLOCK = 1 << 20

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
def resident_fraction(path: str) -> float:
    """Fraction of the file's pages in the page cache (mincore on a mapping of it)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    page = mmap.PAGESIZE
    npages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        mincore = _libc.mincore
        mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        mmap_ = _libc.mmap
        mmap_.restype = ctypes.c_void_p
        mmap_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        munmap = _libc.munmap
        munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        addr = mmap_(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return 0.0
        try:
            vec = (ctypes.c_ubyte * npages)()
            if mincore(addr, size, vec) != 0:
                return 0.0
            return sum(b & 1 for b in vec) / npages
        finally:
            munmap(addr, size)
    finally:
        os.close(fd)


def drop_cache(path: str) -> float:
    """Push the file out of the page cache; returns the fraction still resident afterwards."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    left = resident_fraction(path)
    if left > 0 and os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
            left = resident_fraction(path)
        except OSError:
            pass
    return left


class _Filler:
    """Makes pattern blocks ahead of the writer in a helper thread (a ring of aligned buffers)."""

    def __init__(self, pattern: Pattern, size: int, block: int, depth: int = 3):
        self.pattern, self.size, self.block = pattern, size, block
        self.free: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        self.buffers = [aligned_buffer(block) for _ in range(depth)]
        for b in self.buffers:
            self.free.put(b)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        start_thread(self.thread)

    def _run(self) -> None:
        pos = 0
        while pos < self.size and not self.stop:
            buf = self.free.get()
            if buf is None:
                return
            n = min(self.block, self.size - pos)
            n_fill = (n + 511) // 512 * 512
            self.pattern.fill(memoryview(buf)[:n_fill], pos)
            self.ready.put((pos, n, buf))
            pos += n

    def close(self) -> None:
        self.stop = True
        self.free.put(None)
        self.thread.join(timeout=5)
        release(*self.buffers)


def write_file(path: str, size: int, pattern: Pattern, *, block: int = BLOCK, direct: bool = True,
               engine: str = "sync", progress: Progress | None = None) -> tuple[Run, dict]:
    """Write a fresh file of ``size`` bytes of pattern data through ``engine``; time from the
    first write to the end of fsync. Returns the run and the method actually used.

    An engine that runs whole jobs (fio) writes its own data instead (the run says so, and the
    file is then not checked by ``read_file``)."""
    if not engine_info(engine).caps.operations:
        return _job_file(engine, path, size, "write", block=block, direct=direct)
    eng = get_engine(engine, 1)
    eng.open(path, write=True, direct=direct, create=True)
    used_direct = eng.direct
    filler = _Filler(pattern, size, block)
    written = 0
    tail = 0
    try:
        t0 = time.perf_counter()
        while written < size:
            pos, n, buf = filler.ready.get()
            head = n // 512 * 512 if used_direct else n
            if head:
                done = _one_op(eng, "write", pos, buf, head)
            else:
                done = 0
            if head < n:
                # a size that is not sector-aligned: the last few bytes (< 512) through a second,
                # buffered descriptor
                done += _write_tail(path, memoryview(buf)[head:n], pos + head)
                tail = n - head
            if done != n:
                raise DeviceFault(f"{path}: short write ({done} of {n} bytes at {pos}): the card may be full")
            if not used_direct:
                # write-behind: the kernel starts writing each chunk at once, and the one two
                # chunks back must be on the card before the next goes out
                eng.file.sync_range(pos, n, SFR_WRITE)
                if pos >= 2 * block:
                    eng.file.sync_range(pos - 2 * block, block, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER)
            filler.free.put(buf)
            written += n
            if progress:
                progress(n)
        eng.sync()
        seconds = time.perf_counter() - t0
    finally:
        filler.close()
        eng.close()
    io = "O_DIRECT" if used_direct else "buffered+sync_file_range"
    if tail:
        io += f" (last {tail} B buffered: size not a multiple of 512)"
    method = {"engine": engine, "io": io, "block_size": block, "queue_depth": 1, "sync": "fsync inside timing"}
    return Run(bytes=size, seconds=seconds), method


def _one_op(eng, kind: str, offset: int, buf, length: int) -> int:
    """One operation through an engine at depth 1; the bytes it moved."""
    eng.submit(IoOp(kind, offset, buf, length))
    done = 0
    for c in eng.reap(1):
        done += c.result
    return done


def _write_tail(path: str, view: memoryview, offset: int) -> int:
    with DataFile.open(path, write=True, direct=False) as f:
        try:
            n = f.write_at(view, offset)
        finally:
            view.release()
        f.sync()
    return n


def read_file(path: str, pattern: Pattern, *, block: int = BLOCK, direct: bool = True, engine: str = "sync",
              progress: Progress | None = None) -> tuple[Run, dict, dict[str, int]]:
    """Read a file written by ``write_file`` cold through ``engine``: page cache dropped and
    checked, O_DIRECT, content verified off the timed path. Returns the run, the method and the
    sector counts per class of cardbench.patterns (ok, zero, overwritten, changed, foreign,
    garbage; all zero where the engine read it by itself and nothing was checked)."""
    resident = drop_cache(path)
    cache = {"cache": "dropped (fsync + posix_fadvise DONTNEED), checked with mincore",
             "resident_fraction_before": resident}
    if not engine_info(engine).caps.operations:
        run, method = _job_file(engine, path, os.path.getsize(path), "read", block=block, direct=direct)
        return run, {**method, **cache}, dict.fromkeys(CLASSES, 0)
    size = os.path.getsize(path)
    eng = get_engine(engine, 1)
    eng.open(path, write=False, direct=direct)
    used_direct = eng.direct
    bufs = [aligned_buffer(block) for _ in range(3)]
    counts = dict.fromkeys(CLASSES, 0)
    first_bad: list[int] = []

    def tally(j) -> None:
        for k, v in j.counts.items():
            counts[k] += v
        if j.first_bad is not None and not first_bad:
            first_bad.append(j.first_bad)
    futures: list = [None, None, None]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cardbench-check")
    try:
        pos = 0
        i = 0
        t0 = time.perf_counter()
        while pos < size:
            slot = i % 3
            if futures[slot] is not None:
                tally(futures[slot].result())
                futures[slot] = None
            n = min(block, size - pos)
            want = (n + 511) // 512 * 512 if used_direct else n
            got = _one_op(eng, "read", pos, bufs[slot], want)
            if got < n:
                raise DeviceFault(f"{path}: short read ({got} of {n} bytes at {pos})")
            aligned_n = n // 512 * 512
            if aligned_n:
                futures[slot] = pool.submit(pattern.judge, memoryview(bufs[slot])[:aligned_n], pos)
            pos += n
            i += 1
            if progress:
                progress(n)
        seconds = time.perf_counter() - t0
        for f in futures:
            if f is not None:
                tally(f.result())
    finally:
        pool.shutdown(wait=True)
        eng.close()
        release(*bufs)
    method = {"engine": engine, "io": "O_DIRECT" if used_direct else "buffered after fadvise(DONTNEED)",
              "block_size": block, "queue_depth": 1, **cache, "verified": True}
    bad = sum(v for k, v in counts.items() if k != "ok")
    extra = {"check": dict(counts, first_bad=first_bad[0])} if bad else {}
    return Run(bytes=size, seconds=seconds, extra=extra), method, counts


def _job_file(engine: str, path: str, size: int, op: str, *, block: int, direct: bool) -> tuple[Run, dict]:
    """``write_file``/``read_file`` on an engine that runs whole jobs: one sequential job of
    ``block``-byte requests at depth 1 over the file (whole blocks: the last partial block is
    left out), fsync inside the timing for a write."""
    area = size - size % block
    if area < block:
        raise UsageError(f"the {engine} engine moves whole {block}-byte blocks; {path} would hold {size} B")
    run = run_job(engine, Job(path=path, op=op, block_size=block, area=area, size=area, create=(op == "write"),
                              direct=direct, sync_end=True))
    method = {"engine": engine, "io": "O_DIRECT" if direct else "buffered", "block_size": block,
              "queue_depth": 1, "verified": False,
              "data": f"{engine}'s own data (not checked)"}
    if op == "write":
        method["sync"] = "fsync inside timing"
        if "data" in run.extra:     # what the engine says of its writes (fio: --refill_buffers)
            method["data"] += "; " + run.extra["data"]
    for key in ("fio_version", "fio_command"):
        if key in run.extra:
            method[key] = run.extra[key]
    if area != size:
        method["file_bytes_moved"] = area
    return Run(bytes=run.bytes, seconds=run.seconds), method
