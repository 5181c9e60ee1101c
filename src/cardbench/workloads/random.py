"""Named I/O patterns: ``{seq|rand}_{read|write}_{block}_q{depth}t{threads}`` (CrystalDiskMark style).

``run_pattern(target, "rand_read_4k_q32t1", engine="queued")`` measures one pattern: one warm-up
run kept apart, then ``runs`` timed runs, each a :class:`~cardbench.result.Run` with bytes,
seconds, operations (IOPS) and per-operation latency percentiles (p50, p90, p99, p99.9, max).

Each run of :func:`run_pattern` is time-based (fio's ``time_based``): it lasts ``duration``
seconds, a sequential run wrapping to the area's start at its end, so a fast card is timed as
long as a slow one (``time_based=False``: it also stops after the area's bytes, whichever comes
first). Operations still in flight at the deadline are waited for and counted.

The test area (:class:`TestArea`, :func:`open_area`):

* a directory (a mounted filesystem): a file of ``size`` bytes is created there and filled with
  pattern data first (untimed, and bounded in time: on a slow card the area is what was written
  in ``max_fill_seconds``); it is removed afterwards, also on Ctrl-C and SIGTERM;
* a block device or an image file: its whole range (or the first ``size`` bytes), nothing
  filled; writes only with ``allow_write=True`` (the safety rules decide, not this module).

Random offsets are aligned to the block size, drawn uniformly (with repetition) over the area.
Sequential runs start at the area's start and wrap to it at its end. Writes end with an fsync inside
the timed part (fio: ``end_fsync=1``), so a figure means "on the card", not "in a cache".

Engines: any registered one (:mod:`cardbench.engine.registry`; ``sync`` QD1 only, ``queued``
io_uring or threads up to depth 256, ``fio`` the same job through fio), run through
:func:`cardbench.engine.jobs.run_job`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.errors import IoFault
from cardbench.engine.jobs import Job, run_job
from cardbench.engine.registry import check_depth
from cardbench.errors import SafetyRefusal, TargetError, UsageError
from cardbench.patterns import Pattern
from cardbench.plan import PatternSpec, parse_pattern
from cardbench.result import Run, TestResult
from cardbench.signals import sigterm_raises
from cardbench.target import AREA_ALIGN, Target

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

#: what an engine puts into a run's ``extra`` that belongs in the test's method
RUN_METHOD_KEYS = ("backend", "data", "fio_version", "fio_command")
#: Default test area on a filesystem (KDiskMark and CrystalDiskMark use 1 GiB too).
DEFAULT_AREA = 1 * GiB
#: Filling the area of a slow card stops after this long; the area is what was written.
DEFAULT_MAX_FILL_SECONDS = 60.0
# --- the test area -------------------------------------------------------------------------

@dataclass
class TestArea:
    """The bytes a test addresses: ``[offset, offset + size)`` of ``path``."""

    path: str
    offset: int
    size: int
    kind: str                     # "file" (created by us), "device", "image"
    created: bool = False
    filled_bytes: int = 0
    fill_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    __test__ = False

    @property
    def writable(self) -> bool:
        return self.kind == "file"

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"target_kind": self.kind, "area_bytes": self.size, "area_offset": self.offset}
        if self.kind == "file":
            d["area_filled_bytes"] = self.filled_bytes
            d["area_fill_seconds"] = round(self.fill_seconds, 3)
        return d

    def close(self) -> None:
        """Remove the file we created (idempotent)."""
        if self.created:
            self.created = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "TestArea":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_write_allowed(kind: str, path: str, allow_write: bool) -> None:
    """Refuse (SafetyRefusal) a write to a block device or image file (``kind``) that the safety
    rules did not grant (``allow_write``); a directory's own test files are always allowed."""
    if kind in ("device", "image") and not allow_write:
        raise SafetyRefusal(f"{path}: writing to a {'block device' if kind == 'device' else 'image file'} "
                            "needs allow_write=True (granted by the safety rules)")


def open_area(target: Target, size: int | None = None, *, fill: bool = True, write: bool = False,
              allow_write: bool = False, offset: int = 0, max_fill_seconds: float | None = DEFAULT_MAX_FILL_SECONDS,
              tag: int | None = None, progress: Callable[[int, int], None] | None = None,
              margin: int | None = None) -> TestArea:
    """Prepare the test area on ``target`` (a :class:`cardbench.target.Target`; see the module docstring). Close it when done.

    ``size``: bytes wanted (default: 1 GiB, at most a quarter of the free space and the
    filesystem's largest file, on a filesystem; the whole range on a device or image). ``write``: the tests will write (a device or image
    then needs ``allow_write``). ``progress(done, total)`` is called while filling.
    """
    path = target.path
    if size is not None and (not isinstance(size, int) or size <= 0):
        raise UsageError(f"the test area size must be a positive number of bytes, got {size!r}")
    if target.is_directory:
        _, want = target.area(size, default=DEFAULT_AREA, share=0.25, margin=margin)
        return _make_file_area(target, want, fill=fill, max_fill_seconds=max_fill_seconds, tag=tag,
                               progress=progress)
    if write:
        check_write_allowed(target.kind, path, allow_write)
    if offset < 0 or offset % AREA_ALIGN:
        raise UsageError(f"the area offset must be a multiple of {AREA_ALIGN} B")
    offset, want = target.area(size, offset=offset)
    return TestArea(path=path, offset=offset, size=want, kind=target.kind)


def _make_file_area(target: Target, size: int, *, fill: bool, max_fill_seconds: float | None, tag: int | None,
                    progress) -> TestArea:
    fpath = target.scratch_file("area")
    f = target.open_data(fpath, write=True, create=True)
    area = TestArea(path=fpath, offset=0, size=size, kind="file", created=True)
    try:
        if not f.direct:
            area.warnings.append("the filesystem refused O_DIRECT: the area was written through the page cache")
        if not fill:
            os.ftruncate(f.fd, size)
            return area
        pat = Pattern(tag if tag is not None else int.from_bytes(os.urandom(8), "little"))
        chunk = 4 * MiB if size >= 64 * MiB else AREA_ALIGN
        buf = aligned_buffer(chunk)
        mv = memoryview(buf)
        t0 = time.perf_counter()
        done = 0
        stopped = None
        try:
            while done < size:
                n = min(chunk, size - done)
                pat.fill(mv[:n], done)
                try:
                    w = f.write_at(mv[:n], done)
                except IoFault as e:
                    if e.full:
                        stopped = "the filesystem filled up"
                        break
                    raise
                done += w
                if progress:
                    progress(done, size)
                if max_fill_seconds is not None and time.perf_counter() - t0 > max_fill_seconds and done < size:
                    stopped = f"filling took longer than {max_fill_seconds:g} s"
                    break
            f.sync()
        finally:
            release(mv, buf)
        area.fill_seconds = time.perf_counter() - t0
        done -= done % AREA_ALIGN
        if done < size:
            if done < AREA_ALIGN:
                raise TargetError(f"{target.path}: could not write a test area ({stopped})")
            os.ftruncate(f.fd, done)
            area.warnings.append(f"test area reduced to {done} B of the {size} B asked: {stopped}")
            area.size = done
        area.filled_bytes = done
        return area
    except BaseException:
        f.close()
        area.close()
        raise
    finally:
        f.close()


# --- one run -------------------------------------------------------------------------------

def job_for(spec: PatternSpec, area: TestArea, *, duration: float, size: int | None, direct: bool,
            seed: int | None, sync_end: bool, backend: str, time_based: bool = False) -> Job:
    """The engine job of one run of ``spec`` on ``area``."""
    return Job(path=area.path, op=spec.op, block_size=spec.block_size, area=area.size - area.size % spec.block_size,
               offset=area.offset, sequential=spec.sequential, queue_depth=spec.queue_depth, threads=spec.threads,
               size=area.size if size is None else size, duration=duration, direct=direct, sync_end=sync_end,
               seed=seed, backend=backend, time_based=time_based)


def run_once(spec: PatternSpec, area: TestArea, engine: str = "queued", *, duration: float = 3.0,
             size: int | None = None, direct: bool = True, seed: int | None = None, sync_end: bool = True,
             backend: str = "auto", time_based: bool = False) -> Run:
    """One timed run of ``spec`` on ``area`` with ``engine``; the Run has ops and latency_s.
    ``time_based``: it lasts ``duration`` whatever ``size`` says, wrapping the area."""
    if area.size < spec.block_size:
        raise UsageError(f"the test area ({area.size} B) is smaller than one block ({spec.block_size} B)")
    return run_job(engine, job_for(spec, area, duration=duration, size=size, direct=direct, seed=seed,
                                   sync_end=sync_end, backend=backend, time_based=time_based))


def run_pattern(target: Target, name: str, engine: str = "queued", runs: int = 3, duration: float = 3.0,
                size: int | None = None, *, warmup: int = 1, allow_write: bool = False, interval: float = 0.0,
                direct: bool = True, sync_end: bool = True, seed: int | None = None, backend: str = "auto",
                max_fill_seconds: float | None = DEFAULT_MAX_FILL_SECONDS, time_based: bool = True,
                progress: Callable[[str, int, Run], None] | None = None) -> TestResult:
    """Measure the pattern ``name`` on ``target`` (a directory, block device or image file): its
    own test area is prepared (:func:`open_area`), measured (:func:`measure_pattern`) and closed.
    ``size``: the test area and the most bytes a run moves; ``duration``: the most seconds a run
    takes. ``warmup`` runs are kept apart from the ``runs`` measured ones. ``progress(name, i,
    run)`` after each run (i < 0 for warm-up runs).
    """
    spec = _checked(name, engine, runs, warmup, duration)
    with sigterm_raises():
        area = open_area(target, size, fill=True, write=spec.is_write, allow_write=allow_write,
                         max_fill_seconds=max_fill_seconds)
        try:
            return measure_pattern(area, name, engine, runs, duration, size, warmup=warmup,
                                   allow_write=allow_write, interval=interval, direct=direct, sync_end=sync_end,
                                   seed=seed, backend=backend, time_based=time_based, progress=progress)
        finally:
            area.close()


def measure_pattern(area: TestArea, name: str, engine: str = "queued", runs: int = 3, duration: float = 3.0,
                    size: int | None = None, *, warmup: int = 1, allow_write: bool = False, interval: float = 0.0,
                    direct: bool = True, sync_end: bool = True, seed: int | None = None, backend: str = "auto",
                    time_based: bool = True, progress: Callable[[str, int, Run], None] | None = None) -> TestResult:
    """Measure the pattern ``name`` in a prepared test area (:func:`open_area`; the caller closes
    it), as :func:`run_pattern` does: the matrix and a run's pattern tests share one area."""
    spec = _checked(name, engine, runs, warmup, duration)
    with sigterm_raises():
        if spec.is_write:
            check_write_allowed(area.kind, area.path, allow_write)
        return _measure(spec, area, engine, runs=runs, warmup=warmup, duration=duration, size=size,
                        interval=interval, direct=direct, sync_end=sync_end, seed=seed, backend=backend,
                        time_based=time_based, progress=progress)


def _checked(name: str, engine: str, runs: int, warmup: int, duration: float) -> PatternSpec:
    """The pattern ``name`` parsed, after the engine, runs, warm-up runs and duration are checked."""
    spec = parse_pattern(name)
    check_depth(engine, spec.queue_depth, spec.name)
    if not isinstance(runs, int) or runs < 1:
        raise UsageError(f"runs must be at least 1, got {runs!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"warm-up runs must be 0 or more, got {warmup!r}")
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise UsageError(f"duration must be a positive number of seconds, got {duration!r}")
    return spec


def _measure(spec: PatternSpec, area: TestArea, engine: str, *, runs: int, warmup: int, duration: float,
             size: int | None, interval: float, direct: bool, sync_end: bool, seed: int | None, backend: str,
             time_based: bool, progress) -> TestResult:
    result = TestResult(name=spec.name, method={})
    result.warnings.extend(area.warnings)
    base_seed = int.from_bytes(os.urandom(8), "little") >> 1 if seed is None else seed
    cap = area.size if size is None else min(size, area.size)
    done: list[Run] = []
    for i in range(warmup + runs):
        if i and interval > 0:
            time.sleep(interval)
        run = run_once(spec, area, engine, duration=duration, size=cap, direct=direct,
                       seed=base_seed + i * 1009, sync_end=sync_end, backend=backend, time_based=time_based)
        if i < warmup:
            result.warmup.append(run)
        else:
            result.runs.append(run)
        done.append(run)
        if progress:
            progress(spec.name, i - warmup, run)
    first = done[0]
    method: dict[str, Any] = {
        "engine": engine,
        "pattern": "sequential" if spec.sequential else "random",
        "op": spec.op,
        "block_size": spec.block_size,
        "queue_depth": spec.queue_depth,
        "threads": spec.threads,
        "direct": direct and first.extra.get("direct", True),
        "duration": duration,
        "size_bytes": None if time_based else cap,
        "runs": runs,
        "warmup_runs": warmup,
        "interval": interval,
        "sync_end": spec.is_write and sync_end,
        "stop": ("at duration (time-based: sequential offsets wrap within the area)" if time_based
                 else "at duration or size, whichever first"),
        **area.describe(),
    }
    for key in RUN_METHOD_KEYS:     # how the engine ran it (queued: backend; fio: version, command)
        if key in first.extra:
            method[key] = first.extra.get(key)
    if not method["direct"]:
        result.warnings.append("O_DIRECT was refused: the figures may include the page cache")
    if all(r.extra.get("stopped") == "size" for r in result.runs) and any(
            r.seconds < 0.5 * duration for r in result.runs):
        result.warnings.append(f"runs stopped at the size cap ({cap} B) well before {duration:g} s; "
                               "a larger area gives steadier figures")
    result.method = method
    return result
