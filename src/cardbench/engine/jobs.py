"""The workload-level runner: one timed job on any engine, ``run_job(engine, Job) -> Run``.

A :class:`Job` says what fio's job file would say (operation, sequential or random, block
size, queue depth, threads, the area addressed, the most bytes and seconds). An engine that
moves single operations runs it here, as a closed loop per thread
(:func:`cardbench.engine.base.closed_loop`); an engine that runs whole jobs (fio) registers its
own ``run_job``. Workloads only ever call :func:`run_job`, so none of them needs to know which
kind of engine it was given.

Each run stops after ``duration`` seconds or ``size`` bytes per thread, whichever comes first;
a ``time_based`` job (fio's ``time_based``) runs for its duration whatever its size, sequential
offsets wrapping to the area's start at its end. Operations in flight at the deadline are waited
for and counted. Writes end with an fsync inside the timed part when ``sync_end`` (fio: end_fsync=1).
Random offsets are block-aligned, drawn uniformly (with repetition) over the area.
Every write carries data unique to it (:class:`cardbench.patterns.FreshWrites`, made just before
it goes out): a rewrite of the same position, a wrapped time-based run, another thread, another
run, none repeats a sector, so a card that compresses or deduplicates cannot serve a repeated
buffer faster than fresh data (fio's ``--refill_buffers``).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any, Iterator

import numpy as np

from cardbench.engine.base import closed_loop
from cardbench.engine.buffers import AlignedBuffers
from cardbench.engine.registry import engine_info, get_engine
from cardbench.errors import DeviceFault, UsageError
from cardbench.patterns import FreshWrites, Pattern
from cardbench.result import Run
from cardbench.signals import start_thread
from cardbench.stats import percentiles

#: the operation count of a time-based run: no run reaches it before its deadline
TIME_BASED_OPS = 1 << 62
#: what a write job's data is (the ``data`` of its run's ``extra`` and of the test's method)
DATA = ("unique per write: each 512 B sector carries the run's tag, its position and the write's "
        "sequence number, and a body of PCG64 data chosen by both (incompressible, no two writes alike)")


@dataclass
class Job:
    """One timed run: ``op`` ("read" | "write") of ``block_size`` bytes, ``queue_depth`` in
    flight per thread, on ``[offset, offset + area)`` of ``path``."""

    path: str
    op: str
    block_size: int
    area: int
    offset: int = 0
    sequential: bool = True
    queue_depth: int = 1
    threads: int = 1
    size: int | None = None          # most bytes per thread (default: the area)
    duration: float = 3600.0         # most seconds
    time_based: bool = False         # run for the duration, wrapping the area (size ignored)
    direct: bool = True
    sync_end: bool = True            # writes: fsync inside the timed part
    create: bool = False             # the file may be created (fio: allow_file_create)
    seed: int | None = None
    backend: str = "auto"            # an engine's backend choice (queued: auto, io_uring, threads, direct)

    @property
    def is_write(self) -> bool:
        return self.op == "write"

    @property
    def fio_rw(self) -> str:
        return ("" if self.sequential else "rand") + self.op


def run_job(engine: str, job: Job) -> Run:
    """Run ``job`` once on ``engine`` (a registered name). The Run has ops and latency_s; its
    ``extra`` says why it stopped ("size", "duration", "end of target") and how it ran
    (``backend``, ``direct`` False when O_DIRECT was refused, fio's command and version)."""
    if job.op not in ("read", "write"):
        raise UsageError(f"unknown operation {job.op!r}")
    if job.area < job.block_size:
        raise UsageError(f"the test area ({job.area} B) is smaller than one block ({job.block_size} B)")
    info = engine_info(engine)
    if info.run_job is not None:
        return info.run_job(job)
    return _loop_job(engine, job)


@dataclass
class _Loop:
    bytes: int = 0
    ops: int = 0
    t0: float = 0.0
    t1: float = 0.0
    lat: array = field(default_factory=lambda: array("d"))
    stopped: str = "size"
    direct: bool = True
    backend: str | None = None
    error: BaseException | None = None


def _offsets(job: Job, seed: int) -> Iterator[int]:
    """The job's offsets, endless; drawn 64 Ki at a time and handed out by C-level iterators
    (``chain``: no generator frame to resume per operation in the closed loop)."""
    bs = job.block_size
    nblocks = job.area // bs
    base = job.offset
    if job.sequential:
        return chain.from_iterable(repeat(range(base, base + nblocks * bs, bs)))
    rng = np.random.Generator(np.random.PCG64(seed))

    def chunks() -> Iterator[list[int]]:
        while True:
            yield (rng.integers(0, nblocks, size=65536, dtype=np.int64) * bs + base).tolist()
    return chain.from_iterable(chunks())


def _one_loop(engine: str, job: Job, *, max_ops: int, seed: int, tag: int, barrier: threading.Barrier | None,
              out: _Loop) -> None:
    """One thread's share of a run: keep ``queue_depth`` operations in flight until the deadline
    or ``max_ops``; then wait for those in flight (and fsync after writes)."""
    bs = job.block_size
    qd = job.queue_depth
    eng = get_engine(engine, qd, backend=job.backend)
    bufs: AlignedBuffers | None = None
    fresh: FreshWrites | None = None
    try:
        eng.open(job.path, write=job.is_write, direct=job.direct)
        out.direct = eng.direct
        out.backend = eng.backend
        bufs = AlignedBuffers(min(qd, max_ops), bs)
        if job.is_write:
            # each write's data made just before it goes out: unique to that write (see DATA)
            fresh = FreshWrites(Pattern(tag), bufs, bs)
        offs = _offsets(job, seed)
        if barrier is not None:
            barrier.wait()
        loop = closed_loop(eng, job.op, bufs, bs, offs.__next__, max_ops=max_ops, duration=job.duration,
                           latencies=out.lat, fill=None if fresh is None else fresh.fill)
        if job.is_write and job.sync_end:
            eng.sync()       # inside the timed part (fio: end_fsync=1)
        out.t1 = time.perf_counter()
        out.t0, out.bytes, out.ops, out.stopped = loop.t0, loop.bytes, loop.ops, loop.stopped
    except BaseException as e:   # handed to the caller's thread
        out.error = e
        if barrier is not None:
            barrier.abort()
    finally:
        try:
            eng.close()
        finally:
            if fresh is not None:
                fresh.close()     # its views of the buffers first
            if bufs is not None:
                bufs.close()


def _loop_job(engine: str, job: Job) -> Run:
    bs = job.block_size
    cap = job.area if job.size is None else job.size
    max_ops = TIME_BASED_OPS if job.time_based else max(1, cap // bs)
    seed = int.from_bytes(os.urandom(8), "little") if job.seed is None else job.seed
    loops = [_Loop() for _ in range(job.threads)]
    if job.threads == 1:
        _one_loop(engine, job, max_ops=max_ops, seed=seed, tag=seed, barrier=None, out=loops[0])
    else:
        barrier = threading.Barrier(job.threads)
        threads = [threading.Thread(target=_one_loop, name=f"cardbench-job-{i}", args=(engine, job),
                                    kwargs=dict(max_ops=max_ops, seed=seed + i, tag=seed + i, barrier=barrier,
                                                out=loops[i]))
                   for i in range(job.threads)]
        for t in threads:
            start_thread(t)
        try:
            for t in threads:
                t.join()
        except BaseException:
            # Ctrl-C / SIGTERM while waiting: the workers stop by themselves at the deadline;
            # wait for them so nothing still writes when the caller cleans up
            for t in threads:
                t.join()
            raise
    errors = [lp.error for lp in loops if lp.error is not None and not isinstance(lp.error, threading.BrokenBarrierError)]
    if errors:
        raise errors[0]
    if any(lp.error for lp in loops):
        raise DeviceFault(f"{job.path}: a worker thread failed to start")
    t0 = min(lp.t0 for lp in loops)
    t1 = max(lp.t1 for lp in loops)
    lat: Any = loops[0].lat
    for lp in loops[1:]:
        lat.extend(lp.lat)
    extra: dict[str, Any] = {"stopped": ",".join(sorted({lp.stopped for lp in loops}))}
    if job.is_write:
        extra["data"] = DATA
    if not all(lp.direct for lp in loops):
        extra["direct"] = False
    if loops[0].backend:
        extra["backend"] = loops[0].backend
    return Run(bytes=sum(lp.bytes for lp in loops), seconds=t1 - t0, ops=sum(lp.ops for lp in loops),
               latency_s=percentiles(lat) if len(lat) else None, extra=extra)
