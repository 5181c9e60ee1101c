"""Raw block-device workloads: ``raw_read`` and ``raw_write`` sampled at evenly spread positions
over the whole device (rate against position), and ``raw_access`` (4 KiB random reads at queue
depth 1, latency percentiles).

All move bytes through the I/O layer (:class:`cardbench.engine.data.DataFile`: O_DIRECT, one
call per request), so the page cache never answers. ``raw_write`` writes pattern data and is
only reached through the safety rules (cardbench.devices.safety); with a ``preserve`` object
every region is saved (and journaled) before it is overwritten
(:class:`cardbench.engine.data.Saved`; each sample is saved ahead, outside its timing).
"""

from __future__ import annotations

import random
import time
from typing import Callable

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile, Saved
from cardbench.errors import DeviceFault
from cardbench.patterns import Pattern
from cardbench.result import Run
from cardbench.stats import percentiles

BLOCK = 1 << 20
Progress = Callable[[int], None]


def open_device(target, write: bool = False) -> DataFile:
    """The device's bytes: ``target`` a device target (cardbench.target.open_target) opens
    through its own ``open_data``; a path (a library caller's) through the I/O layer directly."""
    if hasattr(target, "open_data"):
        return target.open_data(write=write)
    return DataFile.open(target, write=write)


def positions(size: int, count: int, sample: int, align: int = BLOCK) -> list[int]:
    """``count`` offsets evenly spread from the start to the end of the device (the last sample
    ends at the device's end), aligned down to ``align``."""
    last = max(0, size - sample)
    if count <= 1:
        return [0]
    return sorted({(last * i // (count - 1)) // align * align for i in range(count)})


def _timed_span(dev, kind: str, offset: int, length: int, buf, pattern: Pattern | None,
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
                got = dev.write_at(mv[:n], offset + done)
            else:
                got = dev.read_at(mv[:n], offset + done)
            if got != n:
                raise DeviceFault(f"{dev.path}: short {kind} at byte {offset + done} ({got} of {n}): "
                                  "the device ended early")
            done += n
            if progress:
                progress(n)
        if kind == "write":
            dev.sync()
    finally:
        mv.release()
    return time.perf_counter() - t0


def sampled_sweep(path, kind: str, *, count: int, sample: int, pattern: Pattern | None = None,
                  preserve=None, progress: Progress | None = None) -> Run:
    """One sweep: ``count`` samples of ``sample`` bytes at evenly spread positions. The run's
    bytes and seconds are the sums; ``extra['positions']`` is [[offset, bytes_per_s], ...]."""
    f = open_device(path, write=(kind == "write"))
    dev = Saved(f, preserve) if preserve is not None and kind == "write" else f
    buf = aligned_buffer(BLOCK)
    try:
        size = f.size()
        sample = max(BLOCK, min(sample, size // BLOCK * BLOCK))
        points = []
        total_s = 0.0
        total_b = 0
        for off in positions(size, count, sample):
            if isinstance(dev, Saved):
                dev.save_ahead(off, sample)
            s = _timed_span(dev, kind, off, sample, buf, pattern, progress)
            points.append([off, sample / s])
            total_s += s
            total_b += sample
        return Run(bytes=total_b, seconds=total_s, extra={"positions": points, "sample_bytes": sample})
    finally:
        f.close()
        release(buf)


def auto_sample(path, count: int, target_seconds: float = 3.0) -> int:
    """A sample size such that a sweep of ``count`` samples lasts about ``target_seconds``."""
    f = open_device(path)
    buf = aligned_buffer(BLOCK)
    try:
        size = f.size()
        probe = BLOCK
        while True:
            s = _timed_span(f, "read", 0, min(probe, size), buf, None, None)
            if s >= 0.25 or probe * 4 > size:
                break
            probe *= 4
        rate = min(probe, size) / s
        sample = int(rate * target_seconds / count) // BLOCK * BLOCK
        return max(BLOCK, min(sample, size // count // BLOCK * BLOCK or BLOCK))
    finally:
        f.close()
        release(buf)


def random_access(path, *, duration: float = 2.0, block: int = 4096, max_ops: int = 100_000,
                  seed: int | None = None) -> Run:
    """4 KiB random reads at queue depth 1 spread over the whole device, for ``duration`` s."""
    f = open_device(path)
    buf = aligned_buffer(block)
    mv = memoryview(buf)
    rng = random.Random(seed)
    lat: list[float] = []
    try:
        blocks = f.size() // block
        t_start = time.perf_counter()
        deadline = t_start + duration
        now = t_start
        while now < deadline and len(lat) < max_ops:
            off = rng.randrange(blocks) * block
            t0 = time.perf_counter()
            got = f.read_at(mv, off)
            now = time.perf_counter()
            if got != block:
                raise DeviceFault(f"{f.path}: short read at byte {off}")
            lat.append(now - t0)
        seconds = now - t_start
    finally:
        release(mv, buf)
        f.close()
    return Run(bytes=len(lat) * block, seconds=seconds, ops=len(lat), latency_s=percentiles(lat))
