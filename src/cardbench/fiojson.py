"""fio's JSON output, read in one place: by the fio engine (a run it started) and by the importer.

fio's JSON changed units between versions (fio's stat.c, ``show_ddir_status_json``):

=============  =====================================  =====================================
key            fio 2.x (up to 2.21)                   fio 3.x (from 2.99)
=============  =====================================  =====================================
io_bytes       KiB (``io_bytes >> 10``)               bytes (``io_kbytes`` holds KiB)
bw             KiB/s                                  KiB/s (``bw_bytes``: B/s, from 3.2)
runtime        ms                                     ms
clat/lat/slat  ``clat``, ``lat``, ``slat`` in µs      ``clat_ns``, ``lat_ns``, ``slat_ns`` in ns
percentiles    under clat: ``"99.000000": µs``        under clat_ns (lat_ns with lat_percentiles)
json+ bins     clat ``bins`` by histogram index       clat_ns ``bins`` by latency in ns
=============  =====================================  =====================================

The layout is recognised by its keys, not by the version string (fio 2.99 writes 3.x keys):
``io_kbytes`` or any ``*_ns`` latency means 3.x; ``clat``/``lat``/``slat`` without them
means 2.x. Unused percentile slots (``"0.00": 0``) are dropped. A direction side with
``unified_rw_reporting`` is called ``mixed``. :func:`fio_sides` gives every job's sides in
bytes, seconds and bytes per second; :func:`fio_run` adds them up into one
:class:`cardbench.result.Run`, as the fio engine needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cardbench.errors import DeviceFault
from cardbench.result import Run
from cardbench.units import KiB, UnitError, parse_count, parse_number

SIDES = ("read", "write", "trim", "mixed")


class FioJsonError(ValueError):
    """A key that is missing or of the wrong type; ``str()`` names it (``jobs[0].read.runtime``)."""


@dataclass
class FioSide:
    """One direction of one job, in bytes, seconds and bytes/s, with what fio printed."""

    job_index: int
    jobname: str
    side: str                       # read | write | trim | mixed
    io_bytes: int
    runtime_s: float
    ops: int | None
    bw_kib_s: float | None          # fio's "bw", KiB/s in every version
    bw_bytes: float | None          # fio's "bw_bytes" (3.2 and later)
    iops: float | None
    clat_s: dict[str, float] | None  # percentiles, mean, max of completion latency, seconds
    lat_s: dict[str, float] | None   # the same for total latency
    slat_mean_s: float | None
    options: dict[str, Any]          # global options overlaid with the job's options
    path: str                        # where in the document: jobs[0].read

    @property
    def bytes_per_s(self) -> float | None:
        return self.io_bytes / self.runtime_s if self.runtime_s > 0 else None


@dataclass
class FioDoc:
    version: str | None             # "fio-3.33" as fio printed it
    layout: int                     # 2 or 3: the key layout (see the module docstring)
    layout_basis: str               # which keys decided it
    sides: list[FioSide] = field(default_factory=list)
    jobs: list[dict] = field(default_factory=list)
    global_options: dict = field(default_factory=dict)
    timestamp: float | None = None


def load_fio_json(doc: str | bytes | dict) -> dict:
    """The JSON document of fio's output; fio may print notes ("fio: ...") before or after it."""
    if isinstance(doc, dict):
        return doc
    if isinstance(doc, bytes):
        doc = doc.decode("utf-8", "replace")
    start = doc.find("{")
    if start < 0:
        raise ValueError("no JSON document in fio output")
    obj, _end = json.JSONDecoder().raw_decode(doc[start:])
    return obj


def layout_of(doc: dict) -> tuple[int, str]:
    """(2 or 3, the keys that show it) for fio's JSON document."""
    for job in doc.get("jobs") or []:
        for side in SIDES:
            s = job.get(side) if isinstance(job, dict) else None
            if not isinstance(s, dict):
                continue
            new = [k for k in ("io_kbytes", "clat_ns", "lat_ns", "slat_ns", "bw_bytes") if k in s]
            if new:
                return 3, f"'{new[0]}' key"
            old = [k for k in ("clat", "lat", "slat") if k in s]
            if old:
                return 2, f"'{old[0]}' key and no 'io_kbytes'"
    version = str(doc.get("fio version") or "")
    if version.startswith("fio-2.") and not version.startswith("fio-2.99"):
        return 2, f"version {version}"
    return 3, f"version {version or 'unknown'}"


def _num(obj: dict, key: str, where: str) -> float:
    """``obj[key]`` as a number; FioJsonError naming the key when it is missing or not a number."""
    if key not in obj:
        raise FioJsonError(f"{where}: no '{key}'")
    try:
        return parse_number(obj[key], f"{where}.{key}", negative=True)
    except UnitError as e:
        raise FioJsonError(str(e)) from None


def _opt_num(obj: dict, key: str, where: str) -> float | None:
    """``obj[key]`` as a number, or None when fio left the key out."""
    return _num(obj, key, where) if key in obj else None


def _count(n: int, where: str) -> int:
    """A count of bytes or I/Os within a store's 64-bit integers (units.parse_count)."""
    try:
        return parse_count(n, where, expected="a count within 64 bits")
    except UnitError as e:
        raise FioJsonError(str(e)) from None


def _latency(obj: Any, scale: float, where: str) -> dict[str, float] | None:
    """Percentiles ("p50", "p99.9"), "mean" and "max" in seconds; ``scale`` s per printed unit."""
    if not isinstance(obj, dict):
        return None
    out: dict[str, float] = {}
    pct = obj.get("percentile") or {}
    if not isinstance(pct, dict):
        raise FioJsonError(f"{where}.percentile: not an object")
    for key in pct:
        try:
            p = parse_number(key, f"{where}.percentile")
        except UnitError:
            continue
        if p <= 0:           # unused slots: "0.00": 0
            continue
        out["p" + f"{p:g}"] = _num(pct, key, f"{where}.percentile") * scale
    for key in ("mean", "max"):
        v = _opt_num(obj, key, where)
        if v is not None and (v > 0 or out):
            out[key] = v * scale
    return out or None


def fio_sides(doc: dict) -> FioDoc:
    """Every job's read/write/trim/mixed side of a fio JSON document, in bytes and seconds.

    Sides that moved nothing are left out. Raises FioJsonError naming the key that cannot be read.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise FioJsonError("no 'jobs' list")
    layout, basis = layout_of(doc)
    kib_io = layout == 2
    lat_scale = 1e-6 if layout == 2 else 1e-9
    suffix = "" if layout == 2 else "_ns"
    glob = doc.get("global options") or {}
    if not isinstance(glob, dict):
        raise FioJsonError("'global options' is not an object")
    out = FioDoc(version=doc.get("fio version"), layout=layout, layout_basis=basis, jobs=doc["jobs"],
                 global_options=glob, timestamp=doc.get("timestamp") if isinstance(doc.get("timestamp"),
                                                                                   (int, float)) else None)
    for n, job in enumerate(doc["jobs"]):
        where = f"jobs[{n}]"
        if not isinstance(job, dict):
            raise FioJsonError(f"{where}: not an object")
        opts = dict(glob)
        jopts = job.get("job options") or {}
        if not isinstance(jopts, dict):
            raise FioJsonError(f"{where}.job options: not an object")
        opts.update(jopts)
        jobname = str(job.get("jobname") or opts.get("name") or f"job{n + 1}")
        for side in SIDES:
            s = job.get(side)
            if s is None:
                continue
            w = f"{where}.{side}"
            if not isinstance(s, dict):
                raise FioJsonError(f"{w}: not an object")
            io = _num(s, "io_bytes", w)
            runtime_ms = _num(s, "runtime", w)
            if io < 0 or runtime_ms < 0:
                raise FioJsonError(f"{w}: negative io_bytes or runtime")
            if io == 0:
                continue
            ops = _opt_num(s, "total_ios", w)
            out.sides.append(FioSide(
                job_index=n, jobname=jobname, side=side,
                io_bytes=_count(int(io) * (KiB if kib_io else 1), f"{w}.io_bytes"), runtime_s=runtime_ms / 1000.0,
                ops=_count(int(ops), f"{w}.total_ios") if ops is not None else None,
                bw_kib_s=_opt_num(s, "bw", w), bw_bytes=_opt_num(s, "bw_bytes", w),
                iops=_opt_num(s, "iops", w),
                clat_s=_latency(s.get("clat" + suffix), lat_scale, f"{w}.clat{suffix}"),
                lat_s=_latency(s.get("lat" + suffix), lat_scale, f"{w}.lat{suffix}"),
                slat_mean_s=(_latency(s.get("slat" + suffix), lat_scale, f"{w}.slat{suffix}") or {}).get("mean"),
                options=opts, path=w))
    return out


def _pick(lat: dict[str, float] | None, percentiles) -> dict[str, float] | None:
    if not lat:
        return None
    if percentiles is None:
        return dict(lat)
    keys = [f"p{p:g}" for p in percentiles] + ["max"]
    picked = {k: lat[k] for k in keys if k in lat}
    return picked or None


def fio_run(doc: str | bytes | dict, rw: str | None = None, *, percentiles=None) -> Run:
    """One Run from fio's JSON: all jobs of one side added up (the fio engine's reading).

    ``rw`` picks the side ("read"/"randread" -> read, "write"/"randwrite" -> write); by default
    the side that moved more bytes. Latency percentiles (only ``percentiles`` when given, plus
    max) come from clat of the job that moved the most; ``extra["lat_s"]`` holds total latency.
    A job that reports an error raises DeviceFault.
    """
    d = load_fio_json(doc)
    if not isinstance(d, dict) or not d.get("jobs"):
        raise ValueError("fio JSON has no jobs")
    for j in d["jobs"]:
        if isinstance(j, dict) and j.get("error"):
            raise DeviceFault(f"fio job {j.get('jobname')!r} failed with error {j['error']}")
    parsed = fio_sides(d)
    if rw is not None:
        side = "write" if "write" in rw else "read"
    else:
        moved = {s: sum(p.io_bytes for p in parsed.sides if p.side == s) for s in ("read", "write")}
        side = "write" if moved["write"] > moved["read"] else "read"
    parts = [p for p in parsed.sides if p.side == side]
    if not parts:
        return Run(bytes=0, seconds=0.0, ops=0, extra={"fio_version": parsed.version})
    runtime_s = max(p.runtime_s for p in parts)
    main = max(parts, key=lambda p: p.io_bytes)
    extra: dict[str, Any] = {
        "lat_s": _pick(main.lat_s, percentiles) if main.lat_s and any(k.startswith("p") for k in main.lat_s)
        else None,
        "fio_bw_bytes": sum(p.bw_bytes if p.bw_bytes is not None else (p.bw_kib_s or 0) * KiB for p in parts),
        "fio_iops": sum(p.iops or 0 for p in parts),
        "fio_runtime_ms": runtime_s * 1000.0,
        "latency_source": "fio clat (histogram)",
        "clat_mean_s": (main.clat_s or {}).get("mean"),
    }
    jobs = [j for j in d["jobs"] if isinstance(j, dict)]
    usr = sum(_opt_num(j, "usr_cpu", f"jobs[{i}]") or 0.0 for i, j in enumerate(jobs))
    sys_ = sum(_opt_num(j, "sys_cpu", f"jobs[{i}]") or 0.0 for i, j in enumerate(jobs))
    extra["cpu_s"] = (usr + sys_) / 100.0 * runtime_s   # fio's own CPU time (user + system)
    if main.slat_mean_s is not None:
        extra["slat_mean_s"] = main.slat_mean_s
    if parsed.version:
        extra["fio_version"] = parsed.version
    jopts = jobs[0].get("job options") or {}
    if jopts:
        extra["fio_job_options"] = jopts
    lat = main.clat_s if main.clat_s and any(k.startswith("p") for k in main.clat_s) else None
    return Run(bytes=sum(p.io_bytes for p in parts), seconds=runtime_s,
               ops=sum(p.ops or 0 for p in parts), latency_s=_pick(lat, percentiles), extra=extra)
