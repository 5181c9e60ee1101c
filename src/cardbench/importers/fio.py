"""fio's results: JSON (``--output-format=json`` and ``json+``, fio 2.x and 3.x) and terse
(``--minimal``, terse versions 3 and 4), one Result per file, one test per job and direction.

The JSON is read by :mod:`cardbench.fiojson` (shared with the fio engine), which knows the
units of each version: 2.x ``io_bytes`` in KiB and latencies (``clat``) in µs, 3.x ``io_bytes``
in bytes and ``clat_ns`` in ns; ``bw`` is KiB/s in all. Terse lines (fio's HOWTO, "Terse
output"; stat.c ``show_ddir_status_terse``) give per direction: total I/O in KiB, bandwidth in
KiB/s, IOPS (whole), runtime in ms, then submission, completion (with 20 percentile fields
``99.000000%=usec``) and total latency in µs, and bandwidth statistics; after both
directions CPU, the I/O-depth distribution, latency buckets and disk use. Version 4 puts a trim
direction after write; version 5 changes the field count and is refused.

Test names follow cardbench's: ``{seq|rand}_{read|write}_{block}_q{iodepth}t{numjobs}``, e.g.
``seq_read_1m_q1t1``, ``rand_write_4k_q32t1``; a mixed job (rw/readwrite/randrw) gives one test
per direction with ``_mixed`` appended (``..._readwrite_..._mixed`` with unified_rw_reporting).
Job options are read from the job, then ``global options``, else fio's defaults (bs 4k, iodepth
1, numjobs 1). Sizes in fio options use fio's default ``kb_base=1024`` (4k = 4096 B) unless
``kb_base=1000``. A job whose output lacks its options (terse, or fio 2.x before job options
were printed) is named from what it moved: its block size is io bytes / operations, its depth
the I/O-depth bucket that most I/O went through, and sequential or random from the job name;
``io_`` stands first when the job name does not say which (``io_write_4k_q32t1``).

Each test holds one run: the direction's io bytes moved in fio's runtime (ms), its operations
and completion-latency percentiles in seconds. Every figure fio printed beside them is checked
against them: ``bw`` (KiB/s) and ``bw_bytes`` against io bytes / runtime, ``iops`` against
operations / runtime, and iops x block size against the rate; a disagreement is flagged.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from typing import Any

from cardbench.errors import UsageError
from cardbench.fiojson import FioJsonError, FioSide, fio_sides
from cardbench.importers.base import ImportReport, bad_input, imported_result
from cardbench.importers.checks import Flag, Printed, check_figure
from cardbench.plan import pattern_name
from cardbench.result import Card, Run, TestResult
from cardbench.units import KiB, UnitError, parse_count, parse_number

_FIO_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_RW = {"read": ("seq", ["read"]), "write": ("seq", ["write"]), "randread": ("rand", ["read"]),
       "randwrite": ("rand", ["write"]), "rw": ("seq", ["read", "write"]), "readwrite": ("seq", ["read", "write"]),
       "randrw": ("rand", ["read", "write"]), "trim": ("seq", ["trim"]), "randtrim": ("rand", ["trim"])}
TERSE_RE = re.compile(r"^\s*([2-5]);(fio-[^;]*;)?[^;\n]*;\d+;\d+;\d+;")


def fio_size(text: Any, kb_base: int = 1024, where: str = "size") -> int | None:
    """A fio size option ("4k", "1M", "128KiB", "4096") in bytes; None if unreadable; UnitError
    (units.parse_number) for a number that is none (NaN, beyond 64 bits)."""
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(parse_number(text, where, expected="a size in bytes"))
    m = _FIO_SIZE_RE.match(str(text))
    if not m:
        return None
    number, prefix, suffix = parse_number(m.group(1), where), m.group(2).lower(), m.group(3).lower()
    base = 1024 if (suffix.startswith("i") or kb_base == 1024) else 1000
    return parse_count(int(number * base ** _POW[prefix]), where, expected="a size in bytes")


def _pow2_block(io_bytes: int, ops: float | None, estimated: bool = False) -> int | None:
    """The block size a job moved: io bytes / operations when that is (within 1%) a multiple of
    512 B, else the nearest power of two when within 10% (terse IOPS are whole numbers). With
    ``estimated`` operations (whole IOPS x runtime: fio 2.1 prints no operation count), only the
    nearest power of two."""
    if not ops or ops <= 0:
        return None
    bs = io_bytes / ops
    guess = max(512, int(round(bs / 512.0)) * 512)
    if not estimated and abs(bs - guess) <= 0.01 * guess:
        return guess
    p2 = 1 << max(9, round(math.log2(bs))) if bs > 0 else 512
    return p2 if abs(bs - p2) <= 0.10 * p2 else None


def _depth_from_levels(levels: Any) -> int | None:
    """fio's iodepth_level ({"1": 0.0, ..., "32": 99.9, ">=64": 0.0}): the bucket most I/O went through."""
    if not isinstance(levels, dict) or not levels:
        return None
    best = max(levels.items(), key=lambda kv: parse_number(str(kv[1]).rstrip("%") or 0, f"iodepth_level {kv[0]}",
                                                           expected="a percentage"))
    try:
        return parse_count(str(best[0]).lstrip(">="), "iodepth_level")
    except UnitError:
        return None                 # a bucket of another name: the depth is not known


class _Namer:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, name: str) -> str:
        base, k = name, 2
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


def _check_side(flags: list[Flag], row: str, where: str, rate: float, *, bw_kib: float | None,
                bw_bytes: float | None, iops: float | None, ops_rate: float | None, bs: int | None,
                iops_whole: bool = False, io_kib_rounded: float = 0.0) -> None:
    """fio's printed bw / bw_bytes / iops against io bytes / runtime (fio truncates bw to whole KiB/s)."""
    slack = io_kib_rounded
    if bw_kib is not None:
        check_figure(flags, 0, row, "bw (KiB/s)", Printed(f"{bw_kib:g}", bw_kib, 0.0), rate / KiB,
                     rate / KiB - 1.0 - slack / KiB, rate / KiB + slack / KiB, "io bytes / runtime", where)
    if bw_bytes is not None:
        check_figure(flags, 0, row, "bw_bytes (B/s)", Printed(f"{bw_bytes:g}", bw_bytes, 0.0), rate,
                     rate - 1.0 - slack, rate + 1.0 + slack, "io bytes / runtime", where)
    if iops is not None and ops_rate is not None:
        tol = 1.0 if iops_whole else max(0.005, 1e-6 * ops_rate)
        check_figure(flags, 0, row, "iops", Printed(f"{iops:g}", iops, 0.0), ops_rate, ops_rate - tol,
                     ops_rate + tol, "operations / runtime", where)
    if iops and bs:
        central = iops * bs
        check_figure(flags, 0, row, "rate (B/s)", Printed(f"{rate:.0f}", rate, 0.0), central,
                     central * 0.99 - (bs if iops_whole else 0), central * 1.01 + (bs if iops_whole else 0),
                     f"iops {iops:g} x block {bs} B", where)


def _side_test(p: FioSide, report: ImportReport, namer: _Namer, version: str | None, layout: int,
               levels: Any, raw: str, iops_whole: bool = False) -> TestResult | None:
    opts = p.options
    if p.io_bytes > 0 and p.runtime_s <= 0:
        # a run of no time has no rate, and an export holding it could not be read back
        raise UnitError(f"{p.path} runtime: expected more than 0 ms for {p.io_bytes:,} bytes moved, "
                        f"got {p.runtime_s * 1000:g}")
    rw = str(opts.get("rw") or opts.get("readwrite") or "").split(":")[0].strip().lower()
    kb_base = parse_count(opts.get("kb_base") or 1024, f"{p.path} kb_base")
    bs_opt = opts.get("bs") or opts.get("blocksize")
    bs_parts = [fio_size(x, kb_base, f"{p.path} bs") for x in str(bs_opt).split(",")] if bs_opt else []
    fixed_bs = bool(bs_parts) and not any(k in opts for k in ("bsrange", "bssplit", "blocksize_range"))
    idx = {"read": 0, "write": 1, "trim": 2}.get(p.side, 0)
    bs = (bs_parts[min(idx, len(bs_parts) - 1)] if bs_parts else None) or None
    if p.side == "trim":
        report.notes.append(f"job {p.jobname!r}: trim is not a card read or write figure; not stored")
        return None
    if rw and rw not in _RW:
        report.notes.append(f"job {p.jobname!r}: rw={rw} is not a read or write workload; skipped")
        return None
    guessed = []
    if bs is None and bs_parts:
        bs = 4096
    elif bs is None:
        # fio 2.1's JSON prints no operation count, terse only whole IOPS: IOPS x runtime
        # stands in for it, and is only good enough for the nearest power of two
        est = iops_whole or (not p.ops and bool(p.iops) and p.runtime_s > 0)
        ops = p.ops if p.ops and not est else (p.iops * p.runtime_s if p.iops else p.ops)
        found = _pow2_block(p.io_bytes, ops, estimated=est)
        if found is None:
            bs = 4096
            guessed.append("block size 4 KiB (fio's default)")
        else:
            bs = found
            guessed.append(f"block size {bs} B (io bytes / " + ("(IOPS x runtime))" if est else "operations)"))
    depth_opt = opts.get("iodepth")
    depth = parse_count(depth_opt, f"{p.path} iodepth", expected="a queue depth") if depth_opt is not None \
        else (_depth_from_levels(levels) if not rw else None)
    if depth is None:
        depth = 1
    elif depth_opt is None:
        guessed.append(f"queue depth {depth} (the I/O-depth bucket most I/O went through)")
    numjobs = parse_count(opts.get("numjobs") or 1, f"{p.path} numjobs", expected="a number of jobs")
    if rw:
        kind, directions = _RW[rw]
        prefix = kind
    else:
        low = p.jobname.lower()
        prefix = "rand" if "rand" in low else "seq" if "seq" in low else "io"
        directions = [p.side]
        guessed.append("the pattern from the job name" if prefix != "io" else
                       "no pattern: neither the options nor the job name say sequential or random")
    op = "readwrite" if p.side == "mixed" else p.side
    if prefix == "io":
        name = f"io_{pattern_name(True, op, bs, depth, numjobs)[4:]}"
    else:
        name = pattern_name(prefix == "seq", op, bs, depth, numjobs)
    if len(directions) > 1 or p.side == "mixed":
        name += "_mixed"
    name = namer(name)
    rate = p.bytes_per_s or 0.0
    method = {"engine": "fio", "fio_version": version, "jobname": p.jobname, "rw": rw or None, "block_size": bs,
              "iodepth": depth, "numjobs": numjobs, "ioengine": opts.get("ioengine"), "direct": opts.get("direct"),
              "size": opts.get("size"), "filename": opts.get("filename") or opts.get("directory"),
              "bw_bytes": p.bw_bytes, "bw_kib_s": p.bw_kib_s, "iops": p.iops,
              "runtime_ms": p.runtime_s * 1000.0, "fio_layout": f"{layout}.x", "where": p.path}
    if guessed:
        method["inferred"] = guessed
        report.notes.append(f"job {p.jobname!r} {p.side}: no job options in the output; inferred "
                            + ", ".join(guessed) + f" -> {name}")
    method = {k: v for k, v in method.items() if v is not None}
    run = Run(p.io_bytes, p.runtime_s, ops=p.ops, latency_s=p.clat_s)
    if p.lat_s:
        run.extra["lat_s"] = p.lat_s
    t = TestResult(name, method, runs=[run], extra={"raw": raw})
    flags: list[Flag] = []
    _check_side(flags, f"{p.jobname} {p.side}", p.path, rate, bw_kib=p.bw_kib_s, bw_bytes=p.bw_bytes, iops=p.iops,
                ops_rate=(p.ops / p.runtime_s) if p.ops is not None and p.runtime_s > 0 else None,
                bs=bs if (fixed_bs or not bs_parts) and p.side != "mixed" else None, iops_whole=iops_whole,
                io_kib_rounded=(KiB / p.runtime_s if layout == 2 and p.runtime_s > 0 else 0.0))
    report.flags += flags
    t.warnings += [f"fio's own figure disagrees with its raw data: {f}" for f in flags]
    return t


def _card(card: Card | None, target: str | None) -> Card:
    if card is not None:
        return card
    return Card(name=target) if target else Card()


def import_fio(doc: dict, *, path: str, digest: str, card: Card | None = None,
               reader: str | None = None) -> ImportReport:
    """fio JSON output (2.x or 3.x, json or json+) as one Result."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise UsageError(f"{path}: not fio JSON output (no 'jobs' list); run fio with --output-format=json")
    try:
        parsed = fio_sides(doc)
    except FioJsonError as e:
        raise bad_input(path, "fio JSON", str(e)) from None
    report = ImportReport(path=path, format="fio")
    units = ("io_bytes in KiB, latencies (clat) in µs" if parsed.layout == 2
             else "io_bytes in bytes, latencies (clat_ns) in ns")
    report.convention = (f"fio {parsed.layout}.x JSON ({parsed.version or 'version not printed'}; "
                         f"{parsed.layout_basis}): {units}; bw in KiB/s; rate = io bytes / runtime")
    namer = _Namer()
    tests: list[TestResult] = []
    for p in parsed.sides:
        job = parsed.jobs[p.job_index]
        raw = json.dumps({"jobname": job.get("jobname"), p.side: job.get(p.side)}, sort_keys=True)
        t = _side_test(p, report, namer, parsed.version, parsed.layout, job.get("iodepth_level"), raw)
        if t is None:
            continue
        if job.get("error"):
            t.complete = False
            t.warnings.append(f"fio reported error {job['error']} for job {p.jobname!r}")
        tests.append(t)
    if not tests:
        raise UsageError(f"{path}: no read or write job with data in this fio output")
    started = None
    if parsed.timestamp is not None:
        try:
            started = _dt.datetime.fromtimestamp(parsed.timestamp, _dt.timezone.utc).isoformat(timespec="seconds")
        except (OverflowError, OSError, ValueError):
            raise bad_input(path, "timestamp", f"expected seconds since 1970, got {parsed.timestamp!r}") from None
    target: dict[str, Any] = {"kind": "fio"}
    first_opts = parsed.sides[0].options if parsed.sides else {}
    for key in ("filename", "directory"):
        if first_opts.get(key):
            if not isinstance(first_opts[key], str):
                raise bad_input(path, f"{parsed.sides[0].path} options.{key}", "expected text (a path)")
            target[key] = first_opts[key]
    where = target.get("filename") or target.get("directory")
    result = imported_result(path=path, fmt="fio", digest=digest, key="all", tests=tests, card=_card(card, where),
                             reader=reader, started=started, target=target,
                             tool={"fio_version": parsed.version})
    report.results.append(result)
    return report


# --- terse (--minimal) -----------------------------------------------------------------------

_SIDE_FIELDS = 41          # per direction in terse v3/v4 (HOWTO "Terse output")


def _terse_side(f: list[str], start: int, where: str) -> dict:
    def num(i: int, what: str) -> float:
        cell = f[start + i] if start + i < len(f) else ""
        return parse_number(cell.rstrip("%"), f"{where}, field {start + i + 1} ({what})")
    pct: dict[str, float] = {}
    for k in range(20):
        cell = f[start + 12 + k] if start + 12 + k < len(f) else ""
        field = f"{where}, field {start + 13 + k} (completion latency percentile)"
        if "=" not in cell:
            raise UnitError(f"{field}: expected PERCENT%=VALUE, got {cell[:20]!r}")
        p, v = cell.split("=", 1)
        pf, vf = parse_number(p.rstrip("%"), field), parse_number(v, field)
        if pf > 0:
            pct[f"p{pf:g}"] = vf * 1e-6
    clat = dict(pct)
    if num(9, "clat max") > 0:
        clat["max"] = num(9, "clat max") * 1e-6
        clat["mean"] = num(10, "clat mean") * 1e-6
    lat = {"max": num(33, "lat max") * 1e-6, "mean": num(34, "lat mean") * 1e-6} if num(33, "lat max") > 0 else None
    return {"kib": num(0, "total I/O KiB"), "bw": num(1, "bandwidth KiB/s"), "iops": num(2, "IOPS"),
            "runtime_ms": num(3, "runtime ms"), "clat": clat or None, "lat": lat}


def import_terse(text: str, *, path: str, digest: str, card: Card | None = None,
                 reader: str | None = None) -> ImportReport:
    """fio --minimal output: one job (or group) per line."""
    report = ImportReport(path=path, format="fio-terse")
    namer = _Namer()
    tests: list[TestResult] = []
    versions = set()
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not TERSE_RE.match(line):
            if ";" in line and line.split(";", 1)[0].strip().isdigit():
                raise bad_input(path, f"line {line_no}", "not a fio terse line (terse version;fio version;"
                                                          "jobname;groupid;error;...)")
            report.notes.append(f"line {line_no}: not a terse line, skipped: {line[:60]}")
            continue
        f = line.rstrip("\n").split(";")
        ver = parse_count(f[0], f"line {line_no}, field 1 (terse version)")
        if ver not in (3, 4):
            raise bad_input(path, f"line {line_no}", f"fio terse version {ver}: cardbench reads versions 3 and 4 "
                                                     "(fio --minimal --terse-version=3)")
        fio_version, jobname = f[1], f[2]
        versions.add(fio_version)
        need = 5 + 2 * _SIDE_FIELDS + (_SIDE_FIELDS if ver == 4 else 0) + 5 + 7
        if len(f) < need:
            raise bad_input(path, f"line {line_no}", f"{len(f)} fields, a terse v{ver} line has at least {need} "
                                                     "(truncated?)")
        if parse_count(f[4], f"line {line_no}, field 5 (error)", negative=True):
            report.notes.append(f"line {line_no}: job {jobname!r} reported error {f[4]}")
        sides = {"read": _terse_side(f, 5, f"line {line_no}: read"),
                 "write": _terse_side(f, 5 + _SIDE_FIELDS, f"line {line_no}: write")}
        cpu = 5 + _SIDE_FIELDS * (3 if ver == 4 else 2)
        levels = {k: f[cpu + 5 + i] for i, k in enumerate(("1", "2", "4", "8", "16", "32", ">=64"))}
        for i, v in enumerate(levels.values()):
            parse_number(v.rstrip("%"), f"line {line_no}, field {cpu + 6 + i} (I/O depth distribution)",
                         expected="a percentage")
        for side, s in sides.items():
            if s["kib"] <= 0 or s["runtime_ms"] <= 0:
                continue
            io = int(s["kib"]) * KiB
            secs = s["runtime_ms"] / 1000.0
            ops = int(round(s["iops"] * secs)) if s["iops"] else None
            p = FioSide(job_index=line_no, jobname=jobname, side=side, io_bytes=io, runtime_s=secs, ops=ops,
                        bw_kib_s=s["bw"], bw_bytes=None, iops=s["iops"], clat_s=s["clat"], lat_s=s["lat"],
                        slat_mean_s=None, options={}, path=f"line {line_no} {side}")
            t = _side_test(p, report, namer, fio_version, 2, levels, line, iops_whole=True)
            if t is None:
                continue
            t.method["ops_from"] = "whole IOPS x runtime (terse prints no operation count)"
            tests.append(t)
    if not tests:
        raise UsageError(f"{path}: no fio terse line with read or write data")
    report.convention = (f"fio terse v3/v4 ({', '.join(sorted(versions)) or 'version not printed'}; "
                         "fields per fio's HOWTO): total I/O in KiB, bandwidth KiB/s, runtime ms, latencies µs; "
                         "rate = KiB x 1024 / runtime")
    report.results.append(imported_result(path=path, fmt="fio-terse", digest=digest, key="all", tests=tests,
                                          card=card, reader=reader, tool={"fio_version": sorted(versions)}))
    return report
