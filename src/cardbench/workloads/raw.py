"""Raw block-device workloads: ``raw_read`` and ``raw_write`` sampled at evenly spread positions
over the whole device (rate against position), and ``raw_access`` (4 KiB random reads at queue
depth 1, latency percentiles).

All use O_DIRECT through the sync engine, so the page cache never answers. ``raw_write`` writes
pattern data and is only reached through the safety rules (cardbench.devices.safety); with a
``preserve`` object every region is saved (and journaled) before it is overwritten.
"""

from __future__ import annotations

import os
import random
import time
from typing import Callable

from cardbench.engine.base import aligned_buffer, os_error
from cardbench.errors import DeviceFault
from cardbench.patterns import Pattern
from cardbench.result import Run
from cardbench.stats import percentiles

BLOCK = 1 << 20
Progress = Callable[[int], None]


def _close(buf) -> None:
    """Close an I/O buffer; a slice still held by the traceback of a Ctrl-C (pattern.fill was
    running) must not turn the interruption into a BufferError: the collector frees it then."""
    try:
        buf.close()
    except BufferError:
        pass


def device_size(fd: int) -> int:
    return os.lseek(fd, 0, os.SEEK_END)


def open_device(path: str, write: bool = False) -> int:
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_DIRECT | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except OSError as e:
        raise os_error(e, path) from None


def positions(size: int, count: int, sample: int, align: int = BLOCK) -> list[int]:
    """``count`` offsets evenly spread from the start to the end of the device (the last sample
    ends at the device's end), aligned down to ``align``."""
    last = max(0, size - sample)
    if count <= 1:
        return [0]
    return sorted({(last * i // (count - 1)) // align * align for i in range(count)})


def _timed_span(fd: int, path: str, kind: str, offset: int, length: int, buf, pattern: Pattern | None,
                progress: Progress | None) -> float:
    """Read or write ``length`` bytes from ``offset`` in BLOCK requests; seconds taken."""
    mv = memoryview(buf)
    t0 = time.perf_counter()
    try:
        done = 0
        while done < length:
            n = min(BLOCK, length - done)
            if kind == "write":
                assert pattern is not None
                pattern.fill(mv[:n], offset + done)
                got = os.pwritev(fd, [mv[:n]], offset + done)
            else:
                got = os.preadv(fd, [mv[:n]], offset + done)
            if got != n:
                raise DeviceFault(f"{path}: short {kind} at byte {offset + done} ({got} of {n}): the device ended early")
            done += n
            if progress:
                progress(n)
        if kind == "write":
            os.fsync(fd)
    except OSError as e:
        raise os_error(e, f"{path} at byte {offset + done}") from None
    finally:
        mv.release()
    return time.perf_counter() - t0


def sampled_sweep(path: str, kind: str, *, count: int, sample: int, pattern: Pattern | None = None,
                  preserve=None, progress: Progress | None = None) -> Run:
    """One sweep: ``count`` samples of ``sample`` bytes at evenly spread positions. The run's
    bytes and seconds are the sums; ``extra['positions']`` is [[offset, bytes_per_s], ...]."""
    fd = open_device(path, write=(kind == "write"))
    buf = aligned_buffer(BLOCK)
    try:
        size = device_size(fd)
        sample = max(BLOCK, min(sample, size // BLOCK * BLOCK))
        points = []
        total_s = 0.0
        total_b = 0
        for off in positions(size, count, sample):
            if preserve is not None and kind == "write":
                preserve.save(off, sample)
            s = _timed_span(fd, path, kind, off, sample, buf, pattern, progress)
            points.append([off, sample / s])
            total_s += s
            total_b += sample
        return Run(bytes=total_b, seconds=total_s, extra={"positions": points, "sample_bytes": sample})
    finally:
        os.close(fd)
        _close(buf)


def auto_sample(path: str, count: int, target_seconds: float = 3.0) -> int:
    """A sample size such that a sweep of ``count`` samples lasts about ``target_seconds``."""
    fd = open_device(path)
    buf = aligned_buffer(BLOCK)
    try:
        size = device_size(fd)
        probe = BLOCK
        while True:
            s = _timed_span(fd, path, "read", 0, min(probe, size), buf, None, None)
            if s >= 0.25 or probe * 4 > size:
                break
            probe *= 4
        rate = min(probe, size) / s
        sample = int(rate * target_seconds / count) // BLOCK * BLOCK
        return max(BLOCK, min(sample, size // count // BLOCK * BLOCK or BLOCK))
    finally:
        os.close(fd)
        _close(buf)


def random_access(path: str, *, duration: float = 2.0, block: int = 4096, max_ops: int = 100_000,
                  seed: int | None = None) -> Run:
    """4 KiB random reads at queue depth 1 spread over the whole device, for ``duration`` s."""
    fd = open_device(path)
    buf = aligned_buffer(block)
    mv = memoryview(buf)
    rng = random.Random(seed)
    lat: list[float] = []
    try:
        blocks = device_size(fd) // block
        t_start = time.perf_counter()
        deadline = t_start + duration
        now = t_start
        while now < deadline and len(lat) < max_ops:
            off = rng.randrange(blocks) * block
            t0 = time.perf_counter()
            try:
                got = os.preadv(fd, [mv], off)
            except OSError as e:
                raise os_error(e, f"{path} at byte {off}") from None
            now = time.perf_counter()
            if got != block:
                raise DeviceFault(f"{path}: short read at byte {off}")
            lat.append(now - t0)
        seconds = now - t_start
    finally:
        mv.release()
        os.close(fd)
        _close(buf)
    return Run(bytes=len(lat) * block, seconds=seconds, ops=len(lat), latency_s=percentiles(lat))
