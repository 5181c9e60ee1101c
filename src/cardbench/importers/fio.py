"""fio's JSON output (``fio --output-format=json``), one Result per file, one test per job and direction.

Test names follow cardbench's: ``{seq|rand}_{read|write}_{block}_q{iodepth}t{numjobs}``, e.g.
``seq_read_1m_q1t1``, ``rand_write_4k_q32t1``; a mixed job (rw/readwrite/randrw) gives one test
per direction with ``_mixed`` appended. Each test holds one run: the direction's ``io_bytes``
moved in ``runtime`` ms, with ``total_ios`` operations and the completion-latency percentiles
(``clat_ns``) in seconds; fio's own ``bw_bytes`` is kept in the method for reference.

Job options are read from the job, then from ``global options``, else fio's defaults (bs 4k,
iodepth 1, numjobs 1). Sizes in fio options use fio's default ``kb_base=1024`` (4k = 4096 B,
1m = 1,048,576 B) unless ``kb_base=1000`` is set.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from cardbench import __version__
from cardbench.errors import UsageError
from cardbench.importers.base import ImportReport, import_id, imported_at
from cardbench.result import Card, Reader, Result, Run, TestResult

_FIO_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_RW = {"read": ("seq", ["read"]), "write": ("seq", ["write"]), "randread": ("rand", ["read"]),
       "randwrite": ("rand", ["write"]), "rw": ("seq", ["read", "write"]), "readwrite": ("seq", ["read", "write"]),
       "randrw": ("rand", ["read", "write"])}


def fio_size(text: Any, kb_base: int = 1024) -> int | None:
    """A fio size option ("4k", "1M", "128KiB", "4096") in bytes; None if unreadable."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return int(text)
    m = _FIO_SIZE_RE.match(str(text))
    if not m:
        return None
    number, prefix, suffix = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
    base = 1024 if (suffix.startswith("i") or kb_base == 1024) else 1000
    return int(number * base ** _POW[prefix])


def block_label(bs: int) -> str:
    """4096 -> "4k", 1048576 -> "1m", 131072 -> "128k", 512 -> "512b" (binary, as fio means them)."""
    if bs >= 1 << 20 and bs % (1 << 20) == 0:
        return f"{bs >> 20}m"
    if bs >= 1024 and bs % 1024 == 0:
        return f"{bs >> 10}k"
    return f"{bs}b"


def _latency(stats: dict) -> dict[str, float] | None:
    clat = stats.get("clat_ns") or stats.get("lat_ns") or {}
    pct = clat.get("percentile") or {}
    out: dict[str, float] = {}
    for key, value in pct.items():
        try:
            p = float(key)
        except ValueError:
            continue
        out["p" + f"{p:g}"] = float(value) / 1e9
    if clat.get("max") is not None:
        out["max"] = float(clat["max"]) / 1e9
    if clat.get("mean") is not None:
        out["mean"] = float(clat["mean"]) / 1e9
    return out or None


def import_fio(doc: dict, *, path: str, digest: str, card: Card | None = None,
               reader: str | None = None) -> ImportReport:
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise UsageError(f"{path}: not fio JSON output (no 'jobs' list); run fio with --output-format=json")
    report = ImportReport(path=path, format="fio")
    glob = doc.get("global options") or {}
    version = doc.get("fio version")
    tests: list[TestResult] = []
    used: set[str] = set()
    for n, job in enumerate(doc["jobs"], start=1):
        opts = dict(glob)
        opts.update(job.get("job options") or {})
        jobname = job.get("jobname") or opts.get("name") or f"job{n}"
        rw = str(opts.get("rw") or opts.get("readwrite") or "read").split(":")[0].strip().lower()
        if rw not in _RW:
            report.notes.append(f"job {jobname!r}: rw={rw} is not a read or write workload; skipped")
            continue
        kind, directions = _RW[rw]
        kb_base = int(opts.get("kb_base") or 1024)
        bs_opt = str(opts.get("bs") or opts.get("blocksize") or "4k")
        bs_parts = [fio_size(p, kb_base) for p in bs_opt.split(",")]
        iodepth = int(float(opts.get("iodepth") or 1))
        numjobs = int(float(opts.get("numjobs") or 1))
        for d in directions:
            stats = job.get(d) or {}
            io_bytes = int(stats.get("io_bytes") or 0)
            runtime_ms = float(stats.get("runtime") or 0)
            if io_bytes <= 0 or runtime_ms <= 0:
                if len(directions) == 1:
                    report.notes.append(f"job {jobname!r}: no {d} data (io_bytes {io_bytes}, runtime {runtime_ms} ms)")
                continue
            bs = bs_parts[0 if d == "read" or len(bs_parts) == 1 else 1] or 4096
            name = f"{kind}_{d}_{block_label(bs)}_q{iodepth}t{numjobs}" + ("_mixed" if len(directions) > 1 else "")
            base, k = name, 2
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            method = {"engine": "fio", "fio_version": version, "jobname": jobname, "rw": rw, "block_size": bs,
                      "iodepth": iodepth, "numjobs": numjobs, "ioengine": opts.get("ioengine"),
                      "direct": opts.get("direct"), "size": opts.get("size"), "bw_bytes": stats.get("bw_bytes"),
                      "runtime_ms": runtime_ms}
            method = {k2: v for k2, v in method.items() if v is not None}
            ops = stats.get("total_ios")
            t = TestResult(name, method, runs=[Run(io_bytes, runtime_ms / 1000.0,
                                                   ops=int(ops) if ops is not None else None,
                                                   latency_s=_latency(stats))])
            if job.get("error"):
                t.complete = False
                t.warnings.append(f"fio reported error {job['error']} for job {jobname!r}")
            tests.append(t)
    if not tests:
        raise UsageError(f"{path}: no read or write job with data in this fio output")
    started = imported_at()
    if isinstance(doc.get("timestamp"), (int, float)):
        started = _dt.datetime.fromtimestamp(doc["timestamp"], _dt.timezone.utc).isoformat(timespec="seconds")
    target = {"kind": "fio", "path": path, "imported_at": imported_at()}
    for key in ("filename", "directory"):
        if glob.get(key) or (doc["jobs"][0].get("job options") or {}).get(key):
            target[key] = glob.get(key) or doc["jobs"][0]["job options"][key]
    result = Result(target=target, card=card or Card(), reader=Reader(name=reader), tests=tests,
                    id=import_id(digest, "fio", "all"), started_at=started, host={},
                    tool={"name": "cardbench", "version": __version__, "importer": "fio", "fio_version": version},
                    source="import-fio")
    report.results.append(result)
    return report
