"""Named I/O patterns: ``{seq|rand}_{read|write}_{block}_q{depth}t{threads}`` (CrystalDiskMark style).

``run_pattern(path, "rand_read_4k_q32t1", engine="queued")`` measures one pattern: one warm-up
run kept apart, then ``runs`` timed runs, each a :class:`~cardbench.result.Run` with bytes,
seconds, operations (IOPS) and per-operation latency percentiles (p50, p90, p99, p99.9, max).

Each run is time-based and size-capped: it stops after ``duration`` seconds or after ``size``
bytes, whichever comes first, so a slow card finishes in bounded time and a fast one does not
run past the test area. Operations still in flight at the deadline are waited for and counted.

The test area (:class:`TestArea`, :func:`open_area`):

* a directory (a mounted filesystem): a file of ``size`` bytes is created there and filled with
  pattern data first (untimed, and bounded in time: on a slow card the area is what was written
  in ``max_fill_seconds``); it is removed afterwards, also on Ctrl-C and SIGTERM;
* a block device or an image file: its whole range (or the first ``size`` bytes), nothing
  filled; writes only with ``allow_write=True`` (the safety rules decide, not this module).

Random offsets are aligned to the block size, drawn uniformly (with repetition) over the area.
Sequential runs start at the area's start and stop at its end. Writes end with an fsync inside
the timed part (fio: ``end_fsync=1``), so a figure means "on the card", not "in a cache".

Engines: ``sync`` (QD1 only), ``queued`` (io_uring or threads, any depth up to 256) and ``fio``
(the same job through fio, see :mod:`cardbench.engine.fio`).
"""

from __future__ import annotations

import errno
import math
import os
import re
import signal
import stat
import threading
import time
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from cardbench.engine.base import AlignedBuffers, aligned_buffer, closed_loop, os_error
from cardbench.errors import DeviceFault, Interrupted, SafetyRefusal, TargetError, UsageError
from cardbench.patterns import Pattern
from cardbench.result import Run, TestResult
from cardbench.stats import percentiles

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

ENGINES = ("sync", "queued", "fio")
#: Default test area on a filesystem (KDiskMark and CrystalDiskMark use 1 GiB too).
DEFAULT_AREA = 1 * GiB
#: Areas are whole MiB so every block size up to 1 MiB divides them.
AREA_ALIGN = 1 * MiB
#: Filling the area of a slow card stops after this long; the area is what was written.
DEFAULT_MAX_FILL_SECONDS = 60.0
MAX_THREADS = 64
MAX_DEPTH = 256

_NAME_RE = re.compile(r"^(seq|rand)_(read|write)_([0-9]+)([km]?)_q([0-9]+)t([0-9]+)$")


# --- names ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PatternSpec:
    """What a pattern name says."""

    name: str
    sequential: bool
    op: str              # "read" | "write"
    block_size: int      # bytes
    queue_depth: int
    threads: int

    @property
    def fio_rw(self) -> str:
        return ("" if self.sequential else "rand") + self.op

    @property
    def is_write(self) -> bool:
        return self.op == "write"


def parse_pattern(name: str) -> PatternSpec:
    """Parse ``{seq|rand}_{read|write}_{block}_q{depth}t{threads}``.

    Block sizes: a number of bytes, or with ``k`` (KiB) or ``m`` (MiB): ``4k``, ``128k``, ``1m``,
    ``512``; a multiple of 512 bytes, at most 64 MiB. Depth 1..256, threads 1..64.
    """
    if not isinstance(name, str):
        raise UsageError(f"a test name is a string like rand_read_4k_q32t1, got {name!r}")
    m = _NAME_RE.match(name.strip().lower())
    if not m:
        raise UsageError(
            f"bad test name {name!r}: expected {{seq|rand}}_{{read|write}}_{{block}}_q{{depth}}t{{threads}}, "
            "e.g. rand_read_4k_q32t1 or seq_write_1m_q8t1")
    kind, op, num, unit, depth, threads = m.groups()
    bs = int(num) * {"": 1, "k": KiB, "m": MiB}[unit]
    if bs < 512 or bs % 512 or bs > 64 * MiB:
        raise UsageError(f"bad test name {name!r}: the block size must be a multiple of 512 B up to 64 MiB")
    q, t = int(depth), int(threads)
    if not 1 <= q <= MAX_DEPTH:
        raise UsageError(f"bad test name {name!r}: queue depth must be 1..{MAX_DEPTH}")
    if not 1 <= t <= MAX_THREADS:
        raise UsageError(f"bad test name {name!r}: threads must be 1..{MAX_THREADS}")
    return PatternSpec(name=m.group(0), sequential=kind == "seq", op=op, block_size=bs, queue_depth=q, threads=t)


def pattern_name(sequential: bool, op: str, block_size: int, queue_depth: int, threads: int = 1) -> str:
    """The name of a pattern (inverse of :func:`parse_pattern`)."""
    if block_size % MiB == 0:
        b = f"{block_size // MiB}m"
    elif block_size % KiB == 0:
        b = f"{block_size // KiB}k"
    else:
        b = str(block_size)
    return f"{'seq' if sequential else 'rand'}_{op}_{b}_q{queue_depth}t{threads}"


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


def target_kind(path: str) -> str:
    """"directory", "device" or "image" (a regular file), or TargetError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TargetError(f"{path}: no such file or directory") from None
    except OSError as e:
        raise os_error(e, path) from None
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISBLK(st.st_mode):
        return "device"
    if stat.S_ISREG(st.st_mode):
        return "image"
    raise TargetError(f"{path}: not a directory, block device or image file")


def device_size(path: str) -> int:
    """Size in bytes of a block device or file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise os_error(e, path) from None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def free_bytes(directory: str) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def check_write_allowed(area_or_kind: TestArea | str, path: str, allow_write: bool) -> None:
    kind = area_or_kind.kind if isinstance(area_or_kind, TestArea) else area_or_kind
    if kind in ("device", "image") and not allow_write:
        raise SafetyRefusal(f"{path}: writing to a {'block device' if kind == 'device' else 'image file'} "
                            "needs allow_write=True (granted by the safety rules)")


def open_area(path: str, size: int | None = None, *, fill: bool = True, write: bool = False,
              allow_write: bool = False, offset: int = 0, max_fill_seconds: float | None = DEFAULT_MAX_FILL_SECONDS,
              tag: int | None = None, progress: Callable[[int, int], None] | None = None) -> TestArea:
    """Prepare the test area on ``path`` (see the module docstring). Close it when done.

    ``size``: bytes wanted (default: 1 GiB, at most a quarter of the free space, on a filesystem;
    the whole range on a device or image). ``write``: the tests will write (a device or image
    then needs ``allow_write``). ``progress(done, total)`` is called while filling.
    """
    kind = target_kind(path)
    if size is not None and (not isinstance(size, int) or size <= 0):
        raise UsageError(f"the test area size must be a positive number of bytes, got {size!r}")
    if kind == "directory":
        free = free_bytes(path)
        want = size if size is not None else min(DEFAULT_AREA, free // 4)
        want = min(want, max(0, free - max(64 * MiB, free // 50)))
        want -= want % AREA_ALIGN
        if want < AREA_ALIGN:
            raise TargetError(f"{path}: too little free space for a test area ({free} B free)")
        return _make_file_area(path, want, fill=fill, max_fill_seconds=max_fill_seconds, tag=tag,
                               progress=progress)
    if write:
        check_write_allowed(kind, path, allow_write)
    total = device_size(path)
    if offset < 0 or offset % AREA_ALIGN:
        raise UsageError(f"the area offset must be a multiple of {AREA_ALIGN} B")
    avail = total - offset
    want = avail if size is None else min(size, avail)
    want -= want % AREA_ALIGN
    if want < AREA_ALIGN:
        raise TargetError(f"{path}: too small for a test area ({total} B)")
    return TestArea(path=path, offset=offset, size=want, kind=kind)


def _make_file_area(directory: str, size: int, *, fill: bool, max_fill_seconds: float | None, tag: int | None,
                    progress) -> TestArea:
    from cardbench.engine.base import open_fd
    name = f".cardbench-area-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    fpath = os.path.join(directory, name)
    fd, direct = open_fd(fpath, write=True, direct=True, create=True)
    area = TestArea(path=fpath, offset=0, size=size, kind="file", created=True)
    try:
        if not direct:
            area.warnings.append("the filesystem refused O_DIRECT: the area was written through the page cache")
        if not fill:
            os.ftruncate(fd, size)
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
                    w = os.pwritev(fd, [mv[:n]], done)
                except OSError as e:
                    if e.errno in (errno.ENOSPC, errno.EDQUOT):
                        stopped = "the filesystem filled up"
                        break
                    raise os_error(e, fpath) from None
                done += w
                if progress:
                    progress(done, size)
                if max_fill_seconds is not None and time.perf_counter() - t0 > max_fill_seconds and done < size:
                    stopped = f"filling took longer than {max_fill_seconds:g} s"
                    break
            os.fsync(fd)
        finally:
            mv.release()
            buf.close()
        area.fill_seconds = time.perf_counter() - t0
        done -= done % AREA_ALIGN
        if done < size:
            if done < AREA_ALIGN:
                raise TargetError(f"{directory}: could not write a test area ({stopped})")
            os.ftruncate(fd, done)
            area.warnings.append(f"test area reduced to {done} B of the {size} B asked: {stopped}")
            area.size = done
        area.filled_bytes = done
        return area
    except BaseException:
        os.close(fd)
        fd = -1
        area.close()
        raise
    finally:
        if fd >= 0:
            os.close(fd)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises Interrupted (so ``finally`` blocks clean up), main thread only,
    and only if nobody else handles SIGTERM."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(signum, frame):
        raise Interrupted("stopped by SIGTERM; cleanup has run")

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# --- engines -------------------------------------------------------------------------------

def make_engine(engine: str, queue_depth: int, backend: str = "auto"):
    """A submit/reap engine (``sync`` or ``queued``)."""
    if engine == "sync":
        if queue_depth != 1:
            raise UsageError(f"the sync engine does one operation at a time; queue depth {queue_depth} "
                             "needs engine queued or fio")
        from cardbench.engine.sync import SyncEngine
        return SyncEngine()
    if engine == "queued":
        from cardbench.engine.queued import QueuedEngine
        return QueuedEngine(queue_depth, backend=backend)
    raise UsageError(f"unknown engine {engine!r} (choose {', '.join(ENGINES)})")


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


def _offsets(spec: PatternSpec, area: TestArea, seed: int) -> Iterator[int]:
    bs = spec.block_size
    nblocks = area.size // bs
    base = area.offset
    if spec.sequential:
        i = 0
        while True:
            yield base + i * bs
            i += 1
            if i == nblocks:
                i = 0
    rng = np.random.Generator(np.random.PCG64(seed))
    while True:
        chunk = (rng.integers(0, nblocks, size=65536, dtype=np.int64) * bs + base).tolist()
        yield from chunk


def _one_loop(spec: PatternSpec, area: TestArea, engine: str, *, max_ops: int, duration: float, direct: bool,
              seed: int, tag: int, sync_end: bool, backend: str, barrier: threading.Barrier | None,
              out: _Loop) -> None:
    """One thread's share of a run: keep ``queue_depth`` operations in flight until the deadline
    or ``max_ops``; then wait for those in flight (and fsync after writes)."""
    bs = spec.block_size
    qd = spec.queue_depth
    kind = spec.op
    eng = make_engine(engine, qd, backend)
    bufs: AlignedBuffers | None = None
    try:
        eng.open(area.path, write=spec.is_write, direct=direct)
        out.direct = getattr(eng, "direct", direct)
        out.backend = getattr(eng, "backend", None)
        bufs = AlignedBuffers(min(qd, max_ops), bs)
        if spec.is_write:
            pat = Pattern(tag)
            for i, b in enumerate(bufs):
                pat.fill(b, i * bs)
        offs = _offsets(spec, area, seed)
        if barrier is not None:
            barrier.wait()
        loop = closed_loop(eng, kind, bufs, bs, offs.__next__, max_ops=max_ops, duration=duration,
                           latencies=out.lat)
        if spec.is_write and sync_end:
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
            if bufs is not None:
                bufs.close()


def run_once(spec: PatternSpec, area: TestArea, engine: str = "queued", *, duration: float = 3.0,
             size: int | None = None, direct: bool = True, seed: int | None = None, sync_end: bool = True,
             backend: str = "auto") -> Run:
    """One timed run of ``spec`` on ``area`` with ``engine``; the Run has ops and latency_s."""
    bs = spec.block_size
    if area.size < bs:
        raise UsageError(f"the test area ({area.size} B) is smaller than one block ({bs} B)")
    cap = area.size if size is None else size
    if engine == "fio":
        from cardbench.engine.fio import run_fio
        run = run_fio(area.path, spec.fio_rw, bs, spec.queue_depth, spec.threads, size=cap, runtime=duration,
                      area=area.size - area.size % bs, offset=area.offset, direct=direct,
                      end_fsync=spec.is_write and sync_end)
        run.extra["stopped"] = "duration" if run.bytes < cap * spec.threads else "size"
        return run
    max_ops = max(1, cap // bs)
    seed = int.from_bytes(os.urandom(8), "little") if seed is None else seed
    loops = [_Loop() for _ in range(spec.threads)]
    kwargs = dict(max_ops=max_ops, duration=duration, direct=direct, sync_end=sync_end, backend=backend)
    if spec.threads == 1:
        _one_loop(spec, area, engine, seed=seed, tag=seed, barrier=None, out=loops[0], **kwargs)
    else:
        barrier = threading.Barrier(spec.threads)
        threads = [threading.Thread(target=_one_loop, name=f"cardbench-{spec.name}-{i}",
                                    args=(spec, area, engine),
                                    kwargs=dict(seed=seed + i, tag=seed + i, barrier=barrier, out=loops[i], **kwargs))
                   for i in range(spec.threads)]
        for t in threads:
            t.start()
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
        raise DeviceFault(f"{area.path}: a worker thread failed to start")
    t0 = min(lp.t0 for lp in loops)
    t1 = max(lp.t1 for lp in loops)
    lat: Any = loops[0].lat
    for lp in loops[1:]:
        lat.extend(lp.lat)
    extra: dict[str, Any] = {"stopped": sorted({lp.stopped for lp in loops})[0] if len(loops) == 1
                             else ",".join(sorted({lp.stopped for lp in loops}))}
    if not all(lp.direct for lp in loops):
        extra["direct"] = False
    if loops[0].backend:
        extra["backend"] = loops[0].backend
    return Run(bytes=sum(lp.bytes for lp in loops), seconds=t1 - t0, ops=sum(lp.ops for lp in loops),
               latency_s=percentiles(lat) if len(lat) else None, extra=extra)


def run_pattern(path: str | TestArea, name: str, engine: str = "queued", runs: int = 3, duration: float = 3.0,
                size: int | None = None, *, warmup: int = 1, allow_write: bool = False, interval: float = 0.0,
                direct: bool = True, sync_end: bool = True, seed: int | None = None, backend: str = "auto",
                max_fill_seconds: float | None = DEFAULT_MAX_FILL_SECONDS,
                progress: Callable[[str, int, Run], None] | None = None) -> TestResult:
    """Measure the pattern ``name`` on ``path`` (directory, block device, image file or a prepared
    :class:`TestArea`). ``size``: the test area and the most bytes a run moves; ``duration``: the
    most seconds a run takes. ``warmup`` runs are kept apart from the ``runs`` measured ones.
    ``progress(name, i, run)`` after each run (i < 0 for warm-up runs).
    """
    spec = parse_pattern(name)
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (choose {', '.join(ENGINES)})")
    if engine == "sync" and spec.queue_depth != 1:
        raise UsageError(f"{spec.name}: the sync engine does one operation at a time; "
                         f"use engine queued or fio for queue depth {spec.queue_depth}")
    if not isinstance(runs, int) or runs < 1:
        raise UsageError(f"runs must be at least 1, got {runs!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"warm-up runs must be 0 or more, got {warmup!r}")
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise UsageError(f"duration must be a positive number of seconds, got {duration!r}")
    with sigterm_raises():
        own = not isinstance(path, TestArea)
        area = open_area(path, size, fill=True, write=spec.is_write, allow_write=allow_write,
                         max_fill_seconds=max_fill_seconds) if own else path
        try:
            if spec.is_write:
                check_write_allowed(area, area.path, allow_write)
            return _measure(spec, area, engine, runs=runs, warmup=warmup, duration=duration, size=size,
                            interval=interval, direct=direct, sync_end=sync_end, seed=seed, backend=backend,
                            progress=progress)
        finally:
            if own:
                area.close()


def _measure(spec: PatternSpec, area: TestArea, engine: str, *, runs: int, warmup: int, duration: float,
             size: int | None, interval: float, direct: bool, sync_end: bool, seed: int | None, backend: str,
             progress) -> TestResult:
    result = TestResult(name=spec.name, method={})
    result.warnings.extend(area.warnings)
    base_seed = int.from_bytes(os.urandom(8), "little") >> 1 if seed is None else seed
    cap = area.size if size is None else min(size, area.size)
    done: list[Run] = []
    for i in range(warmup + runs):
        if i and interval > 0:
            time.sleep(interval)
        run = run_once(spec, area, engine, duration=duration, size=cap, direct=direct,
                       seed=base_seed + i * 1009, sync_end=sync_end, backend=backend)
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
        "size_bytes": cap,
        "runs": runs,
        "warmup_runs": warmup,
        "interval": interval,
        "sync_end": spec.is_write and sync_end,
        "stop": "at duration or size, whichever first",
        **area.describe(),
    }
    if engine == "queued":
        method["backend"] = first.extra.get("backend")
    if engine == "fio":
        method["fio_version"] = first.extra.get("fio_version")
        method["fio_command"] = first.extra.get("fio_command")
    if not method["direct"]:
        result.warnings.append("O_DIRECT was refused: the figures may include the page cache")
    if all(r.extra.get("stopped") == "size" for r in result.runs) and any(
            r.seconds < 0.5 * duration for r in result.runs):
        result.warnings.append(f"runs stopped at the size cap ({cap} B) well before {duration:g} s; "
                               "a larger area gives steadier figures")
    result.method = method
    return result
