"""fio's default, human output (``--output-format=normal``, what fio prints when told nothing),
fio 2.x and 3.x: one Result per file, one test per job and direction, as the JSON importer names
them (:mod:`cardbench.importers.fio`).

What each version prints (stat.c ``show_ddir_status`` at fio-2.2.10, fio-2.18, fio-3.33):

* the job lines before the run, ``NAME: (g=0): rw=randread, bs=..., ioengine=..., iodepth=N``,
  give each job's pattern, block sizes (read, write, trim) and queue depth;
* per job, ``NAME: (groupid=0, jobs=N): err= 0: ...``, then one line per direction:

  - 2.16 and earlier: ``read : io=123868KB, bw=61903KB/s, iops=15475, runt=  2001msec``. Its K, M and G are
    1024-based unless the job set ``kb_base=1000``, and the line does not say which: "KB" is KiB
    in the default;
  - 2.17 and later: ``read: IOPS=12.2k, BW=47.7MiB/s (50.0MB/s)(95.4MiB/2001msec)``: KiB/MiB are 1024-based,
    kB/MB 1000-based, IOPS' k is 1000;

* ``issued ...: total=r=R/w=W/d=T`` (2.x) or ``issued rwt(s): total=R,W,T[,S]`` (2.18 and
  later): the exact count of I/Os of each direction.

The printed io= and bw= are rounded (six characters in 2.x, whose decimal digit is not a true
decimal; four significant figures in 3.x), so the rate is taken from the exact figures when they
agree with the printed ones: the issued I/Os x the job's fixed block size, over the exact runtime
in ms. Which base 2.x's "KB" had is decided the same way: the base under which the printed io=
matches issued x block size (1024, fio's default, when both or neither do, and said). Every
printed figure is checked against these: io= against issued x block size, bw= and BW= against io
/ runtime, IOPS against issued / runtime; a disagreement is flagged.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field

from cardbench.errors import UsageError
from cardbench.fiojson import FioSide
from cardbench.importers.base import ImportReport, bad_input, imported_result
from cardbench.importers.checks import Flag, Printed, check_figure
from cardbench.importers.fio import _Namer, _side_test
from cardbench.result import Card, TestResult
from cardbench.units import parse_count, parse_number

_JOB_LINE_RE = re.compile(r"^\s*(?P<name>\S.*?): \(g=(?P<g>\d+)\): rw=(?P<rw>[^,]+), bs=(?P<bs>.*?), "
                          r"ioengine=(?P<engine>[^,]+), iodepth=(?P<depth>\d+)")
_SECTION_RE = re.compile(r"^\s*(?P<name>\S.*?): \(groupid=(?P<g>\d+), jobs=(?P<jobs>\d+)\): err=\s*(?P<err>-?\d+)")
_V2_SIDE_RE = re.compile(r"^\s+(?P<side>read|write|trim|mixed)\s*: io=(?P<io>[0-9.]+)(?P<io_u>[KMGTPE]?)B, "
                         r"bw=(?P<bw>[0-9.]+)(?P<bw_u>[KMGTPE]?)B/s, iops=(?P<iops>[0-9.]+)(?P<iops_u>[KMGTPE]?), "
                         r"runt=\s*(?P<ms>\d+)msec")
_V3_SIDE_RE = re.compile(r"^\s+(?P<side>read|write|trim|mixed)\s*: IOPS=(?P<iops>[0-9.]+)(?P<iops_u>[kMGTPE]?), "
                         r"BW=(?P<bw>[0-9.]+)(?P<bw_u>[kKMGTPE]?i?)B/s \((?P<alt>[0-9.]+)(?P<alt_u>[kKMGTPE]?i?)B/s\)"
                         r"\((?P<io>[0-9.]+)(?P<io_u>[kKMGTPE]?i?)B/(?P<ms>\d+)msec\)")
_ISSUED_RE = re.compile(r"^\s+issued\s*(?:rwts?)?\s*:\s*total=(?P<total>[^ ]+?),?(?:\s|$)")
_LAT_RE = re.compile(r"^\s+(?P<kind>clat|lat|slat)\s*\((?P<unit>nsec|usec|msec)\)\s*:\s*min=\s*(?P<min>[0-9.]+[kKM]?),"
                     r"\s*max=\s*(?P<max>[0-9.]+[kKM]?),\s*avg=\s*(?P<avg>[0-9.]+)")
_PCT_HEAD_RE = re.compile(r"^\s+clat percentiles \((?P<unit>nsec|usec|msec)\)")
_PCT_RE = re.compile(r"(?P<p>\d+(?:\.\d+)?)th=\[\s*(?P<v>[0-9.]+)(?P<u>[kKM]?)\]")
_VERSION_RE = re.compile(r"^fio-(\d+)\.(\d+)\S*\s*$")
_LAT_UNIT = {"nsec": 1e-9, "usec": 1e-6, "msec": 1e-3}
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6}
_POW = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def is_fio_normal(text: str) -> bool:
    """fio's human output: a job section line and a direction line of either version (also
    pasted with an indent, as in a Markdown code block)."""
    lines = textwrap.dedent(text).splitlines()
    return any(_SECTION_RE.match(ln) for ln in lines) and any(
        _V2_SIDE_RE.match(ln) or _V3_SIDE_RE.match(ln) for ln in lines)


_SIZE_RE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<p>[kKMGTPE]?)(?P<i>i?)(?P<b>B?)$")


def _bs_texts(text: str) -> tuple[list[tuple[str, str]], bool]:
    """The job line's block sizes (read, write, trim) as (min, max) texts, and whether each is one
    fixed size. 2.1/2.2 ``1M-1M/1M-1M/1M-1M``; 2.18 ``1024KiB-1024KiB,1024KiB-1024KiB,...``; 3.x
    ``(R) 1024KiB-1024KiB, (W) ..., (T) ...``."""
    t = re.sub(r"\([RWT]\)\s*", "", text)
    parts = [p.strip() for p in re.split(r"[/,]", t) if p.strip()]
    out = []
    for p in parts[:3]:
        lo, _, hi = p.partition("-")
        out.append((lo.strip(), (hi or lo).strip()))
    return out, all(lo == hi for lo, hi in out) and bool(out)


def _size(text: str, where: str = "block size") -> int | None:
    """A block size as the job line prints it: KiB/MiB 1024-based, kB/MB 1000-based (2.17 and
    later); a bare K/M is 1024-based whatever the kb_base (2.16 and earlier print sizes with
    init.c fio_uint_to_kmg, which only ever divides by 1024, and only when it divides exactly)."""
    m = _SIZE_RE.match(text)
    if not m:
        return None
    if m.group("i"):
        mult = 1024
    elif m.group("b") and m.group("p"):
        mult = 1000
    else:
        mult = 1024
    return int(round(parse_number(m.group("n"), where) * mult ** _POW[m.group("p")]))


def _issued(total: str, where: str) -> list[int]:
    """``r=0/w=995/d=0`` (2.x) or ``0,11342,0[,0]`` (2.18 and later): read, write, trim counts."""
    what = "issued I/O counts"
    if "=" in total:
        return [parse_count(kv.partition("=")[2], f"{where}, {what}") for kv in total.split("/")][:3]
    return [parse_count(x, f"{where}, {what}") for x in total.split(",") if x][:3]


def _num(text: str, suffix: str, where: str) -> float:
    return parse_number(text, where) * _SI[suffix]


@dataclass
class _Side:
    line: int
    side: str
    io: Printed
    io_mult: float               # bytes per printed unit of io (2.x: 1024-based until _decide_base says)
    io_pow: int                  # the power of the prefix (2.x: the base is decided later)
    bw: Printed
    bw_pow: int
    bw_mult: float
    iops: Printed
    ms: int
    raw: str
    alt: Printed | None = None
    alt_mult: float | None = None
    clat: dict[str, float] = field(default_factory=dict)     # seconds: mean, max, p50, ...
    lat: dict[str, float] = field(default_factory=dict)


@dataclass
class _Job:
    name: str
    line: int
    jobs: int
    err: int
    sides: list[_Side] = field(default_factory=list)
    issued: list[int] | None = None
    raw: list[str] = field(default_factory=list)


def _printed(text: str, version: tuple[int, int] | None, where: str) -> Printed:
    """A figure as fio's num2str printed it, with the interval it stands for.

    Before fio 2.20 (and when the output names no version) the digits after the point are not a
    true decimal (the remainder cut down by tens, "complete with carry rounding error"): the
    figure stands for its whole part up to one unit more. From 2.20 on they are the last
    remainder rounded (lower ones truncated): one unit of the last digit either way; before 3.26
    a remainder that rounds up to 1 printed as .00 without carrying into the whole part."""
    p = Printed.read(text, where)
    if version is None or version < (2, 20) or "." not in text:
        whole = float(int(p.value))
        return Printed(p.text, whole + 0.25, 0.75) if "." in text else Printed(p.text, p.value, 1.0)
    digit = 2 * p.half_unit
    if version < (3, 26) and set(text.split(".", 1)[1]) <= {"0"}:
        return Printed(p.text, p.value + 0.5, 0.5 + digit)
    return Printed(p.text, p.value, digit)


def _scaled(p: Printed, suffix: str, scale: float) -> Printed:
    return Printed(p.text + suffix, p.value * scale, p.half_unit * scale)


def _mult(unit: str) -> float:
    """3.x's unit prefix: KiB/MiB 1024-based, kB/MB 1000-based."""
    prefix = unit.rstrip("i")
    return float((1024 if unit.endswith("i") else 1000) ** _POW[prefix])


def _two_layouts(path: str, n: int, this: str, before: str) -> UsageError:
    # two runs pasted into one log: 2.x's K/M/G base is decided over the whole file, and one
    # Result holds one fio version
    return bad_input(path, f"line {n}", f"a fio {this} read/write line after fio {before} ones: the output of two "
                                        "fio versions in one file; import each run's output alone")


def _parse(text: str, path: str) -> tuple[str | None, int, dict[str, dict], list[_Job]]:
    version, vt, layout = None, None, 0
    options: dict[str, dict] = {}
    jobs: list[_Job] = []
    job: _Job | None = None
    pct_unit: float | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _VERSION_RE.match(line.strip())
        if m and version is None and not line.startswith(" "):
            version, vt = line.strip(), (parse_count(m.group(1), f"line {n}, version"),
                                         parse_count(m.group(2), f"line {n}, version"))
            continue
        m = _JOB_LINE_RE.match(line)
        if m:
            sizes, fixed = _bs_texts(m.group("bs"))
            options.setdefault(m.group("name"), {"rw": m.group("rw").strip(), "iodepth": m.group("depth"),
                                                  "ioengine": m.group("engine").strip(),
                                                  "_bs": [lo for lo, _ in sizes], "_fixed": fixed})
            continue
        m = _SECTION_RE.match(line)
        if m:
            job = _Job(m.group("name"), n, parse_count(m.group("jobs"), f"line {n}, jobs"),
                       parse_count(m.group("err"), f"line {n}, err", negative=True), raw=[line])
            jobs.append(job)
            pct_unit = None
            continue
        if job is None:
            continue
        if line.startswith(("Run status group", "Disk stats")):
            job = None
            continue
        if not line.strip():
            continue
        job.raw.append(line)
        m = _V2_SIDE_RE.match(line)
        if m:
            if layout == 3:
                raise _two_layouts(path, n, "2.x", "3.x")
            layout = 2
            w = f"line {n}, {m.group('side')}"
            io_pow, bw_pow = _POW[m.group("io_u")], _POW[m.group("bw_u")]
            job.sides.append(_Side(n, m.group("side"), _printed(m.group("io"), vt, f"{w} io"), float(1024 ** io_pow),
                                   io_pow, _printed(m.group("bw"), vt, f"{w} bw"), bw_pow,
                                   float(1024 ** bw_pow), _scaled(_printed(m.group("iops"), vt, f"{w} iops"), m.group("iops_u"),
                                                 _SI[m.group("iops_u").lower()]),
                                   parse_count(m.group("ms"), f"{w} runt"), line.strip()))
            continue
        m = _V3_SIDE_RE.match(line)
        if m:
            if layout == 2:
                raise _two_layouts(path, n, "3.x", "2.x")
            layout = 3
            w = f"line {n}, {m.group('side')}"
            scale = 1000.0 ** _POW[m.group("iops_u")]
            job.sides.append(_Side(n, m.group("side"), _printed(m.group("io"), vt, f"{w} io"), _mult(m.group("io_u")),
                                   0, _printed(m.group("bw"), vt, f"{w} BW"), 0, _mult(m.group("bw_u")),
                                   _scaled(_printed(m.group("iops"), vt, f"{w} IOPS"), m.group("iops_u"), scale),
                                   parse_count(m.group("ms"), f"{w} runtime (msec)"), line.strip(),
                                   alt=_printed(m.group("alt"), vt, f"{w} BW"), alt_mult=_mult(m.group("alt_u"))))
            continue
        m = _ISSUED_RE.match(line)
        if m:
            job.issued = _issued(m.group("total"), f"line {n}")
            continue
        m = _LAT_RE.match(line)
        if m and m.group("kind") in ("clat", "lat") and job.sides:
            unit = _LAT_UNIT[m.group("unit")]
            target = job.sides[-1].clat if m.group("kind") == "clat" else job.sides[-1].lat
            mx, w = m.group("max"), f"line {n}, {m.group('kind')}"
            target["max"] = _num(mx.rstrip("kKM"), mx[-1] if mx[-1] in "kKM" else "", f"{w} max") * unit
            target["mean"] = parse_number(m.group("avg"), f"{w} avg") * unit
            continue
        m = _PCT_HEAD_RE.match(line)
        if m:
            pct_unit = _LAT_UNIT[m.group("unit")]
            continue
        if pct_unit is not None and line.lstrip().startswith("|") and job.sides:
            for pm in _PCT_RE.finditer(line):
                w = f"line {n}, clat percentile {pm.group('p')}th"
                job.sides[-1].clat[f"p{parse_number(pm.group('p'), w):g}"] = \
                    _num(pm.group("v"), pm.group("u"), w) * pct_unit
            continue
        pct_unit = None
    return version, layout, options, jobs


def _decide_base(jobs: list[_Job], options: dict[str, dict]) -> tuple[int, str]:
    """2.x's K/M/G: the base under which printed io= matches issued x block size."""
    votes = {1024: 0, 1000: 0}
    for job in jobs:
        opts = options.get(job.name, {})
        for s in job.sides:
            for base in votes:
                exact = _exact_io(job, s, opts)
                if exact is None:
                    continue
                m = float(base ** s.io_pow)
                if s.io.lo * m - m <= exact <= s.io.hi * m + m:
                    votes[base] += 1
    if votes[1000] > votes[1024]:
        return 1000, ("its K/M/G are 1000-based here (kb_base=1000): the printed io= matches issued I/Os x "
                      "block size in decimal units, not in binary ones")
    if votes[1024]:
        return 1024, ("its \"KB\"/\"MB\" are KiB/MiB (fio's default kb_base=1024): the printed io= matches "
                      "issued I/Os x block size in binary units")
    return 1024, "its \"KB\"/\"MB\" taken as KiB/MiB, fio's default kb_base=1024 (no exact I/O count to confirm it)"


def _block_sizes(opts: dict) -> list[int]:
    sizes = [_size(t) for t in opts.get("_bs") or []]
    return [x for x in sizes if x] if all(sizes) else []


def _exact_io(job: _Job, s: _Side, opts: dict) -> int | None:
    """issued I/Os x the job's fixed block size, or None."""
    sizes = _block_sizes(opts)
    if not job.issued or not opts.get("_fixed") or not sizes:
        return None
    idx = {"read": 0, "write": 1, "trim": 2}
    if s.side == "mixed":
        if len(set(sizes[:2])) != 1 or len(job.issued) < 2:
            return None
        return (job.issued[0] + job.issued[1]) * sizes[0]
    i = idx[s.side]
    if i >= len(job.issued):
        return None
    return job.issued[i] * sizes[min(i, len(sizes) - 1)]


def _ops(job: _Job, s: _Side) -> int | None:
    if not job.issued:
        return None
    if s.side == "mixed":
        return job.issued[0] + job.issued[1] if len(job.issued) >= 2 else None
    i = {"read": 0, "write": 1, "trim": 2}[s.side]
    return job.issued[i] if i < len(job.issued) else None


def import_fio_normal(text: str, *, path: str, digest: str, card: Card | None = None, reader: str | None = None) -> ImportReport:
    """fio's human output (fio 2.x or 3.x) as one Result."""
    version, layout, options, jobs = _parse(textwrap.dedent(text), path)
    if not jobs or not any(j.sides for j in jobs):
        raise UsageError(f"{path}: no job with a read or write line in this fio output")
    report = ImportReport(path=path, format="fio-normal")
    base, why = (1024, "")
    if layout == 2:
        base, why = _decide_base(jobs, options)
        for job in jobs:
            for s in job.sides:
                s.io_mult = float(base ** s.io_pow)
                s.bw_mult = float(base ** s.bw_pow)
    namer = _Namer()
    tests: list[TestResult] = []
    approximate = []
    clones = Counter(j.name for j in jobs if j.jobs == 1)
    for idx, job in enumerate(jobs):
        opts = dict(options.get(job.name, {}))
        fixed = opts.pop("_fixed", False)
        exact_opts = {**opts, "_fixed": fixed}
        sizes = _block_sizes(opts)
        opts.pop("_bs", None)
        if sizes and fixed:
            opts["bs"] = ",".join(str(x) for x in sizes)
        if not fixed:
            opts["bsrange"] = "as printed"          # not one block size: no IOPS x block check
        if job.jobs > 1:
            opts["numjobs"] = job.jobs
        elif clones[job.name] > 1:
            opts["numjobs"] = clones[job.name]      # numjobs without group_reporting: a section each
        for s in job.sides:
            where = f"line {s.line}"
            row = f"{job.name} {s.side}"
            printed_io = s.io.value * s.io_mult
            exact = _exact_io(job, s, exact_opts)
            flags: list[Flag] = []
            if exact is not None:
                check_figure(flags, s.line, row, "io", s.io, exact / s.io_mult, exact / s.io_mult,
                             exact / s.io_mult, f"issued I/Os x block size ({exact:,} B)")
            io_bytes = exact if exact is not None and not flags else int(round(printed_io))
            if exact is None or flags:
                approximate.append(f"{row} (line {s.line})")
            secs = s.ms / 1000.0
            rate = io_bytes / secs if secs > 0 else 0.0
            # fio's bw is whole bytes/s of io / runtime (1000 * io_bytes / runt), printed rounded;
            # from the printed io= the rate is only known to that figure's rounding
            lo, hi = (rate, rate) if io_bytes == exact or secs <= 0 else \
                (s.io.lo * s.io_mult / secs, s.io.hi * s.io_mult / secs)
            if secs > 0:
                check_figure(flags, s.line, row, "bw", s.bw, rate / s.bw_mult, lo / s.bw_mult, hi / s.bw_mult,
                             "io bytes / runtime")
                if s.alt is not None and s.alt_mult:
                    check_figure(flags, s.line, row, "bw (alternate units)", s.alt, rate / s.alt_mult,
                                 lo / s.alt_mult, hi / s.alt_mult, "io bytes / runtime")
            ops = _ops(job, s)
            if ops is not None and secs > 0:
                check_figure(flags, s.line, row, "iops", s.iops, ops / secs, ops / secs - 1, ops / secs + 1,
                             "issued I/Os / runtime")
            report.flags += flags
            p = FioSide(job_index=idx, jobname=job.name, side=s.side, io_bytes=io_bytes, runtime_s=secs, ops=ops,
                        bw_kib_s=None, bw_bytes=None, iops=None, clat_s=dict(s.clat) or None,
                        lat_s=dict(s.lat) or None, slat_mean_s=None, options=opts, path=where)
            t = _side_test(p, report, namer, version, layout, None, s.raw)
            if t is None:
                continue
            t.method["fio_output"] = "normal"
            t.method["io_from"] = ("issued I/Os x block size" if exact is not None and io_bytes == exact
                                   else "the printed io= (rounded)")
            t.warnings += [f"fio's own figure disagrees with its raw data: {f}" for f in flags]
            if job.err:
                t.complete = False
                t.warnings.append(f"fio reported error {job.err} for job {job.name!r}")
            t.extra["raw"] = "\n".join(job.raw)
            tests.append(t)
    if not tests:
        raise UsageError(f"{path}: no read or write job with data in this fio output")
    ver = version or "version not printed"
    if layout == 2:
        report.convention = (f"fio normal output of 2.16 or earlier ({ver}; 'io=... bw=... runt=' lines): {why}; "
                             "rate = issued I/Os x block size / runtime")
    else:
        report.convention = (f"fio normal output of 2.17 or later ({ver}; 'IOPS=... BW=...' lines): KiB/MiB "
                             "1024-based, kB/MB 1000-based, as printed; rate = issued I/Os x block size / runtime")
    if approximate:
        report.notes.append("rate from the printed, rounded io= (no exact I/O count or one block size): "
                            + ", ".join(approximate))
    report.results.append(imported_result(path=path, fmt="fio-normal", digest=digest, key="all", tests=tests,
                                          card=card, reader=reader, tool={"fio_version": version}))
    return report
