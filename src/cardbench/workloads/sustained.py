"""Sustained write: write the card end to end and find where its fast write cache runs out.

``sustained_write(path)`` writes sequentially with O_DIRECT over the free space of a filesystem
(a file, leaving a margin, removed afterwards) or over a block device's range (only with
``allow_write=True``), and records the rate against bytes written in slices (about 0.5% of the
total, at least one chunk). The curve ``[[bytes_written, bytes_per_s], ...]`` is kept in
``extra["curve"]``.

Where the cache ends (:func:`analyze_curve`):

1. split the curve in two where a two-level step fits best (least squares);
2. if the first level is not clearly faster (``min_ratio``, 1.2x), there is no cache to find;
3. the cache ends in the first slice after which the rate stays below the midpoint between the
   fast and slow levels; the fast rate is the median of the slices before it, the slow rate the
   median of the slices after it;
4. inside the two slices around that point, the bytes written fast are solved from their time
   (t = x/fast + (L - x)/slow), so the position is found to better than a slice.

``extra``: ``curve``, ``cache_end_bytes`` (None if no cache was found or it did not run out),
``fast_bytes_per_s``, ``slow_bytes_per_s``, ``slice_bytes``.
"""

from __future__ import annotations

import os
import time
from array import array
from typing import Any, Callable

import numpy as np

from cardbench.engine.base import IoOp
from cardbench.engine.buffers import aligned_buffer
from cardbench.engine.errors import IoFault
from cardbench.engine.registry import get_engine
from cardbench.errors import TargetError, UsageError
from cardbench.patterns import Pattern
from cardbench.plan import sustained_size
from cardbench.result import Run, TestResult
from cardbench.signals import sigterm_raises
from cardbench.stats import percentiles
from cardbench.target import Target
from cardbench.workloads.random import MiB, check_write_allowed

DEFAULT_CHUNK = 4 * MiB
#: slices per run (about 0.5% each)
DEFAULT_SLICES = 200
#: the fast level must be this much faster than the slow one to count as a cache
MIN_CACHE_RATIO = 1.2


def sustained_write(target: Target, total_bytes: int | None = None, chunk: int = DEFAULT_CHUNK, allow_write: bool = False,
                    *, slice_bytes: int | None = None, margin: int | None = None, offset: int = 0,
                    engine: str = "sync", queue_depth: int = 1, max_seconds: float | None = None,
                    direct: bool = True, tag: int | None = None, min_ratio: float = MIN_CACHE_RATIO,
                    progress: Callable[[int, int, float], None] | None = None) -> TestResult:
    """Write ``total_bytes`` (default: all the free space less ``margin``, at most the
    filesystem's largest file (cardbench.plan.sustained_size), or the whole device) sequentially
    in ``chunk``-byte O_DIRECT writes and analyse the rate curve. ``target``: a
    :class:`cardbench.target.Target`.

    ``max_seconds`` stops early (the result says so). ``progress(written, total, bytes_per_s)``
    is called after every slice.
    """
    if not isinstance(chunk, int) or chunk < 4096 or chunk % 4096:
        raise UsageError(f"the chunk must be a multiple of 4 KiB, got {chunk!r}")
    path = target.path
    kind = target.kind
    if total_bytes is not None and (not isinstance(total_bytes, int) or total_bytes < chunk):
        raise UsageError(f"total_bytes must be at least one chunk ({chunk} B), got {total_bytes!r}")
    warnings: list[str] = []
    with sigterm_raises():
        if kind == "directory":
            total, warnings = sustained_size(target, total_bytes, margin=margin, chunk=chunk)
            dest = target.scratch_file("sustained")
            start = 0
            create = True
        else:
            check_write_allowed(kind, path, allow_write)
            size = target.size()
            if offset < 0 or offset % 4096 or offset >= size:
                raise UsageError(f"offset must be a multiple of 4 KiB inside the device, got {offset!r}")
            avail = size - offset
            total = avail if total_bytes is None else min(total_bytes, avail)
            total -= total % chunk
            if total < chunk:
                raise TargetError(f"{path}: too small for a sustained write")
            dest = path
            start = offset
            create = False
        if slice_bytes is None:
            slice_bytes = max(chunk, (total // DEFAULT_SLICES) // chunk * chunk)
        elif slice_bytes < chunk or slice_bytes % chunk:
            raise UsageError(f"slice_bytes must be a multiple of the chunk ({chunk} B)")
        try:
            result = _write(dest, start, total, chunk, slice_bytes, create=create, engine=engine,
                            queue_depth=queue_depth, max_seconds=max_seconds, direct=direct, tag=tag,
                            progress=progress, warnings=warnings)
        finally:
            if create:
                try:
                    os.unlink(dest)
                except FileNotFoundError:
                    pass
    ana = analyze_curve(result.extra["curve"], min_ratio=min_ratio)
    result.extra.update(ana)
    if ana.get("note"):
        result.warnings.append(ana["note"])
    result.method.update({"target_kind": "file" if kind == "directory" else kind, "offset": start if not create else None})
    return result


def _write(target: str, start: int, total: int, chunk: int, slice_bytes: int, *, create: bool, engine: str,
           queue_depth: int, max_seconds: float | None, direct: bool, tag: int | None, progress,
           warnings: list[str]) -> TestResult:
    eng = get_engine(engine, queue_depth)
    tag = int.from_bytes(os.urandom(8), "little") if tag is None else tag
    pat = Pattern(tag)
    nbuf = max(1, queue_depth)
    bufs = [aligned_buffer(chunk) for _ in range(nbuf)]
    curve: list[list[float]] = []
    lat = array("d")
    written = 0
    issued = 0
    stopped = "done"
    t_start = t_end = 0.0
    try:
        eng.open(target, write=True, direct=direct, create=create)
        if not eng.direct:
            warnings.append("O_DIRECT was refused: the rates include the page cache")
        perf = time.perf_counter
        free_bufs = list(range(nbuf))
        slice_start_t = t_start = perf()
        slice_start_b = 0
        deadline = None if max_seconds is None else t_start + max_seconds
        stop = False
        while True:
            while not stop and free_bufs and issued < total:
                i = free_bufs.pop()
                n = min(chunk, total - issued)
                pat.fill(memoryview(bufs[i])[:n], start + issued)
                eng.submit(IoOp("write", start + issued, bufs[i], n, tag=i))
                issued += n
            if not eng.pending():
                break
            try:
                comps = eng.reap(1)
            except IoFault as e:
                if create and e.full:
                    stopped = "the filesystem filled up"
                    warnings.append(f"stopped after {written} B: the filesystem filled up")
                    stop = True
                    continue
                raise
            for c in comps:
                lat.append(c.completed - c.submitted)
                free_bufs.append(c.op.tag)
                if c.result <= 0:
                    stop = True
                    stopped = "short write"
                    continue
                written += c.result
                if c.result < c.op.length:
                    stop = True
                    stopped = "short write"
                if written - slice_start_b >= slice_bytes:
                    dt = c.completed - slice_start_t
                    rate = (written - slice_start_b) / dt if dt > 0 else float("inf")
                    curve.append([written, rate])
                    slice_start_b, slice_start_t = written, c.completed
                    if progress:
                        progress(written, total, rate)
            if deadline is not None and not stop and perf() >= deadline:
                stop = True
                stopped = f"stopped at the time limit ({max_seconds:g} s)"
        t_end = perf()
        if written > slice_start_b:
            dt = t_end - slice_start_t
            curve.append([written, (written - slice_start_b) / dt if dt > 0 else float("inf")])
        try:
            eng.sync()
        except IoFault as e:
            warnings.append(f"fsync failed: {e.message}")
        t_synced = perf()
    finally:
        try:
            eng.close()
        finally:
            for b in bufs:
                b.close()
    if stopped != "done" and not stopped.startswith("the filesystem"):
        warnings.append(f"{stopped} after {written} of {total} B")
    method: dict[str, Any] = {
        "engine": engine,
        "backend": eng.backend,
        "queue_depth": queue_depth,
        "chunk": chunk,
        "slice_bytes": slice_bytes,
        "total_bytes": total,
        "direct": direct and eng.direct,
        "sync_end": True,
        "max_seconds": max_seconds,
        "pattern": "sequential",
        "op": "write",
    }
    run = Run(bytes=written, seconds=t_synced - t_start, ops=len(lat), latency_s=percentiles(lat) if len(lat) else None,
              offset=start, extra={"stopped": stopped, "fsync_seconds": t_synced - t_end})
    return TestResult(name="sustained_write", method=method, runs=[run], warnings=warnings,
                      complete=stopped == "done", extra={"curve": curve, "slice_bytes": slice_bytes})


def analyze_curve(curve: list[list[float]] | list[tuple[float, float]], *, min_ratio: float = MIN_CACHE_RATIO) -> dict:
    """Find the fast write cache in a rate curve ``[[bytes_written_at_slice_end, bytes_per_s], ...]``.

    Returns ``cache_end_bytes`` (None when there is no clear cache, or it did not run out),
    ``fast_bytes_per_s`` (None without a cache), ``slow_bytes_per_s`` (the sustained rate) and a
    ``note`` when something could not be found.
    """
    pts = [(float(b), float(r)) for b, r in curve if r > 0 and r != float("inf")]
    out: dict[str, Any] = {"cache_end_bytes": None, "fast_bytes_per_s": None, "slow_bytes_per_s": None}
    if not pts:
        out["note"] = "no rate samples"
        return out
    ends = np.array([p[0] for p in pts])
    rates = np.array([p[1] for p in pts])
    starts = np.concatenate([[0.0], ends[:-1]])
    lengths = ends - starts
    times = lengths / rates
    n = len(rates)
    if n < 3:
        out["slow_bytes_per_s"] = float(np.median(rates))
        out["note"] = "too few slices to look for a write cache"
        return out
    # 1. best two-level step (least squares on the rates)
    cs = np.cumsum(rates)
    cs2 = np.cumsum(rates * rates)
    best_k, best_cost = 1, float("inf")
    for k in range(1, n):
        left_n, right_n = k, n - k
        ls, ls2 = cs[k - 1], cs2[k - 1]
        rs, rs2 = cs[-1] - ls, cs2[-1] - ls2
        cost = (ls2 - ls * ls / left_n) + (rs2 - rs * rs / right_n)
        if cost < best_cost:
            best_k, best_cost = k, cost
    f0 = float(np.median(rates[:best_k]))
    s0 = float(np.median(rates[best_k:]))
    if f0 < s0 * min_ratio:
        out["slow_bytes_per_s"] = float(np.median(rates))
        out["note"] = "no write cache found: the rate stays level (within the noise) over the whole run"
        return out
    # 2. the first slice after which the rate stays below the midpoint
    mid = (f0 + s0) / 2
    above = np.nonzero(rates >= mid)[0]
    j = int(above[-1])
    if j >= n - 1:
        out["fast_bytes_per_s"] = float(np.median(rates[rates >= mid]))
        out["slow_bytes_per_s"] = None
        out["note"] = "the fast phase lasted to the end: the write cache is larger than what was written"
        return out
    fast_part = rates[:j] if j >= 2 else rates[: j + 1]
    fast = float(np.median(fast_part))
    slow_part = rates[j + 2:] if n - (j + 2) >= 1 else rates[j + 1:]
    slow = float(np.median(slow_part))
    # 3. refine inside slices j and j+1: x bytes at the fast rate, the rest slow
    t = float(times[j] + times[j + 1])
    span = float(lengths[j] + lengths[j + 1])
    if fast > slow:
        x = (t - span / slow) / (1.0 / fast - 1.0 / slow)
        x = min(max(x, 0.0), span)
    else:  # pragma: no cover - excluded by the ratio test above
        x = float(lengths[j])
    out["cache_end_bytes"] = int(round(float(starts[j]) + x))
    out["fast_bytes_per_s"] = fast
    out["slow_bytes_per_s"] = slow
    if len(slow_part) < 3:
        out["note"] = "few slices after the cache ran out: the slow rate is rough"
    return out

