"""The fio engine: the same workload run by fio, read back from its JSON into a :class:`Run`.

fio does not fit the submit/reap shape (it runs a whole job), so this is a workload runner:
``run_fio(path, rw, bs, iodepth, numjobs, size, runtime) -> Run``. It registers as the engine
``fio`` with a ``run_job`` (:mod:`cardbench.engine.jobs`), so a workload given ``engine="fio"``
runs the same job through fio as through its own engines, and the figures can be compared side
by side (bench/engine_vs_fio.py, bench/run_vs_fio.py).

What is asked of fio, and why:

* ``--direct=1``: O_DIRECT, no page cache (fio's default is buffered, fio#329).
* ``--ioengine=io_uring`` where the kernel allows it, else ``libaio``.
* ``--size`` is the test area (from ``--offset``), ``--io_size`` the most bytes one run moves,
  ``--runtime`` the most seconds: without ``time_based`` the run stops at whichever comes
  first, like cardbench's own runs (stop at duration or at size).
* ``--norandommap --randrepeat=0``: random offsets drawn independently (with repetition),
  as cardbench's engines draw them; ``--allow_file_create=0`` never creates a file, except for a job that writes a fresh one
  (``create``: then ``--fallocate=none``, so fio writes it as cardbench does, unallocated).
* ``mem`` (optional): fio's ``--mem``, where its buffers live. fio's default (malloc) gives
  buffers of scattered small pages; cardbench's engines put large buffers on huge pages
  (:class:`cardbench.engine.base.AlignedBuffers`), which can make large requests several
  times faster on some devices. ``mem="shmhuge"`` (needs ``vm.nr_hugepages``) gives fio the
  same, for a like-for-like comparison.
* ``buffers`` (optional, writes): ``"refill"`` is fio's ``--refill_buffers`` (fresh random data
  for every write, as cardbench's own engines write: :class:`cardbench.patterns.FreshWrites`),
  ``"reuse"`` is ``--scramble_buffers=0`` (one buffer's data written over and over, which a card
  that compresses or deduplicates serves faster). fio's default scrambles a few bytes of each
  buffer per write. A workload's write job through fio asks for ``"refill"``.
* ``--percentile_list=50:90:99:99.9``: the completion-latency percentiles cardbench reports.
  fio's percentiles come from its latency histogram (bins about 1.6% wide). fio's completion
  latency (clat) starts after the submitting system call returned; cardbench's own engines time
  from before that call, like fio's total latency (``--lat_percentiles=1``, kept in
  ``extra["lat_s"]``). At card latencies (hundreds of microseconds and up) the two agree.

The Run: ``bytes`` = io_bytes, ``seconds`` = fio's runtime (ms resolution), ``ops`` =
total_ios, ``latency_s`` = clat_ns percentiles and max in seconds; ``extra`` holds the total
latency percentiles (``lat_s``), fio's version, the exact command and its own bandwidth and IOPS.
"""

from __future__ import annotations

import shutil
import subprocess

from cardbench.engine.registry import Capabilities, EngineInfo, register
from cardbench.engine.uring_abi import io_uring_available
from cardbench.errors import DeviceFault, EnvironmentMissing, UsageError
from cardbench.fiojson import fio_run
from cardbench.result import Run

RW_MODES = ("read", "write", "randread", "randwrite")
PERCENTILES = (50, 90, 99, 99.9)
#: what fio writes: None (fio's default), "refill" (--refill_buffers), "reuse" (--scramble_buffers=0)
BUFFERS = (None, "refill", "reuse")
#: the ``data`` of a write job run by fio
REFILL_DATA = "unique per write: fio's random data, made afresh for each write (--refill_buffers)"

_version_cache: dict[str, str] = {}


def fio_path(fio: str = "fio") -> str:
    """The fio executable, or EnvironmentMissing with the install hint."""
    found = shutil.which(fio)
    if not found:
        raise EnvironmentMissing("fio is not installed (apt install fio); it is needed for --engine fio")
    return found


def fio_version(fio: str = "fio") -> str:
    exe = fio_path(fio)
    if exe not in _version_cache:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        _version_cache[exe] = out.stdout.strip() or out.stderr.strip()
    return _version_cache[exe]


def default_ioengine() -> str:
    """io_uring where this process can set up a ring (same check as the queued engine), else libaio."""
    ok, _ = io_uring_available()
    return "io_uring" if ok else "libaio"


def fio_command(path: str, rw: str, bs: int, iodepth: int = 1, numjobs: int = 1, size: int | None = None,
                runtime: float | None = None, *, area: int | None = None, offset: int = 0,
                time_based: bool = False, ioengine: str | None = None, direct: bool = True,
                end_fsync: bool = False, fio: str = "fio", name: str = "cardbench",
                mem: str | None = None, create: bool = False, buffers: str | None = None) -> list[str]:
    """The fio command line for one run (see the module docstring for what each option is for)."""
    if buffers not in BUFFERS:
        raise UsageError(f"fio buffers must be one of {', '.join(b for b in BUFFERS if b)}, got {buffers!r}")
    if rw not in RW_MODES:
        raise UsageError(f"fio rw must be one of {', '.join(RW_MODES)}, got {rw!r}")
    for what, v in (("block size", bs), ("iodepth", iodepth), ("numjobs", numjobs)):
        if not isinstance(v, int) or v < 1:
            raise UsageError(f"fio {what} must be a positive whole number, got {v!r}")
    if area is None:
        area = size
    if area is None:
        raise UsageError("fio needs a test area (size) to address")
    if area < bs or area % bs:
        raise UsageError(f"the fio test area ({area} B) must be a positive multiple of the block size ({bs} B)")
    if offset % bs:
        raise UsageError(f"the fio offset ({offset} B) must be a multiple of the block size ({bs} B)")
    if time_based and not runtime:
        raise UsageError("a time-based fio run needs a runtime")
    cmd = [fio_path(fio), f"--name={name}", f"--filename={path}", "--output-format=json",
           f"--ioengine={ioengine or default_ioengine()}", f"--direct={1 if direct else 0}",
           f"--rw={rw}", f"--bs={bs}", f"--iodepth={iodepth}", f"--numjobs={numjobs}", "--group_reporting",
           f"--offset={offset}", f"--size={area}",
           "--norandommap", "--randrepeat=0",
           # a fresh file is created and written like cardbench writes one (no preallocation)
           *(["--fallocate=none"] if create else ["--allow_file_create=0"]),
           "--lat_percentiles=1", "--percentile_list=" + ":".join(f"{p:g}" for p in PERCENTILES)]
    if size is not None and size != area:
        if size < bs:
            raise UsageError(f"the fio io size ({size} B) is smaller than one block ({bs} B)")
        cmd.append(f"--io_size={size}")
    if runtime:
        # fio takes whole milliseconds with a unit suffix
        cmd.append(f"--runtime={max(1, round(runtime * 1000))}ms")
    if time_based:
        cmd.append("--time_based")
    if end_fsync:
        cmd.append("--end_fsync=1")
    if mem:
        cmd.append(f"--mem={mem}")
    if buffers == "refill":
        cmd.append("--refill_buffers")
    elif buffers == "reuse":
        cmd.append("--scramble_buffers=0")
    return cmd


def run_fio(path: str, rw: str, bs: int, iodepth: int = 1, numjobs: int = 1, size: int | None = None,
            runtime: float | None = None, *, area: int | None = None, offset: int = 0,
            time_based: bool = False, ioengine: str | None = None, direct: bool = True,
            end_fsync: bool = False, fio: str = "fio", timeout: float | None = None,
            mem: str | None = None, create: bool = False, buffers: str | None = None) -> Run:
    """Run one fio job on ``path`` and return it as a :class:`Run`.

    ``rw``: read | write | randread | randwrite. ``bs`` bytes per operation, ``iodepth`` operations
    in flight per job, ``numjobs`` jobs (threads in cardbench's names). ``size``: the most bytes
    the run moves (per job); ``area``: the bytes it addresses from ``offset`` (default ``size``).
    ``runtime``: the most seconds (``time_based`` keeps going until then, wrapping the area).
    """
    cmd = fio_command(path, rw, bs, iodepth, numjobs, size, runtime, area=area, offset=offset,
                      time_based=time_based, ioengine=ioengine, direct=direct, end_fsync=end_fsync,
                      fio=fio, mem=mem, create=create, buffers=buffers)
    if timeout is None:
        timeout = (runtime or 600) * 3 + 60
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DeviceFault(f"{path}: fio did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise DeviceFault(f"{path}: fio failed: {_first_error(proc.stderr or proc.stdout)}")
    run = parse_fio_json(proc.stdout, rw)
    run.extra["fio_command"] = " ".join(cmd[1:])
    try:
        run.extra["fio_version"] = fio_version(fio)
    except Exception:  # pragma: no cover - version is informative only
        pass
    return run


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() or ln.startswith("fio:"):
            return ln
    return lines[0] if lines else "no output"


def parse_fio_json(doc: str | bytes | dict, rw: str | None = None) -> Run:
    """Turn fio's ``--output-format=json`` into a Run (all jobs of the document added up).

    ``rw`` picks the side ("read"/"randread" -> read, "write"/"randwrite" -> write); by default
    the side that moved bytes. The one reader of fio JSON is :func:`cardbench.fiojson.fio_run`.
    """
    return fio_run(doc, rw, percentiles=PERCENTILES)


def run_fio_job(job) -> Run:
    """A :class:`cardbench.engine.jobs.Job` through fio (what ``run_job(\"fio\", job)`` does)."""
    area = job.area - job.area % job.block_size
    cap = area if job.time_based or job.size is None else job.size
    run = run_fio(job.path, job.fio_rw, job.block_size, job.queue_depth, job.threads, size=cap,
                  runtime=job.duration, area=area, offset=job.offset, time_based=job.time_based,
                  direct=job.direct, end_fsync=job.is_write and job.sync_end, create=job.create,
                  buffers="refill" if job.is_write else None)
    if job.is_write:
        run.extra["data"] = REFILL_DATA
    run.extra["stopped"] = "duration" if job.time_based or run.bytes < cap * job.threads else "size"
    return run


register(EngineInfo("fio", "the same job run by fio (needs fio installed), read back from its JSON",
                    Capabilities(max_queue_depth=65536, operations=False), run_job=run_fio_job))
