"""KDiskMark and CrystalDiskMark text exports ("Save" / "Copy" as text), one Result per file.

**KDiskMark** (github.com/JonMagon/KDiskMark, mainwindow.cpp ``getTextBenchmarkResult`` and
benchmark.cpp): its header says "MB/s = 1,000,000 bytes/s", but the figure is fio's ``bw``
(KiB/s) divided by 1000 (``bw / 1000.0 // to mb``) from 1.5.1 on, so the true rate is the printed
figure x 1.024 x 10^6 B/s; in 1.4.x and 1.5.0 it was ``bw / 1024.0`` (MiB/s, x 1.048576 x 10^6).
1.6 and later print their version in the header ("KDiskMark (3.1.4): ..."); without one (1.4, 1.5)
the figures' own IOPS x block size decide between the two, and the report says which. Lines::

    [Read]
    Sequential   1 MiB (Q=  8, T= 1):   523.456 MB/s [    499.2 IOPS] <  15980.12 us>
    Random   4 KiB (Q= 32, T= 1):    40.123 MB/s [   9796.0 IOPS] <   3265.43 us>
    [Mix] Read 70%/Write 30%

Block sizes are KiB/MiB (binary) as printed. A test printed as 0.000 MB/s did not run or failed:
it is not stored (and said so). IOPS x block size must agree with the corrected rate, within
the rounding of both and fio's whole-KiB/s bandwidth; a row that does not is flagged.

**CrystalDiskMark** (github.com/hiyohiyo/CrystalDiskMark, DiskMarkDlg.cpp ``SaveText`` /
``GetResultString``): MB/s are 10^6 B/s as the header says, and IOPS are computed from them
(MB/s x 10^6 / block size), so the two are checked against each other. Names and block sizes
by version:

=======  ==========================================  ==========================================
version  lines                                       block size
=======  ==========================================  ==========================================
5.x      ``Sequential Read (Q= 32,T= 1) :``           128 KiB (DiskSpd ``-b128k``)
         ``Sequential Read (T= 1) :``                 1 MiB, queue depth 1
         ``Random Read 4KiB (Q= 32,T= 1) :``          4 KiB
6.x      ``Sequential Read (Q= 32,T= 1) :``           128 KiB
         ``Random Read 4KiB (Q=  8,T= 8) :``          4 KiB
7.x      ``Sequential 1MiB (Q=  8, T= 1):``           as printed (1 MiB)
         ``Random 4KiB (Q= 32, T=16):``               as printed, under [Read] / [Write] / [Mix]
8.x-9.x  ``SEQ    1MiB (Q=  8, T= 1):``               as printed
         ``RND    4KiB (Q= 32, T= 1):``               as printed
=======  ==========================================  ==========================================

Neither tool prints bytes or seconds per test, only a rate: each test holds one run of the
measuring time printed in the footer (KDiskMark "Measure: 5 sec", CrystalDiskMark "Time:
Measure 5 sec"; 5 s, CrystalDiskMark's fixed DiskSpd ``-d5``, when not printed) at the true rate.
"""

from __future__ import annotations

import re

from cardbench.importers.base import ImportReport, bad_input, imported_result
from cardbench.importers.checks import Flag, Printed, check_figure
from cardbench.plan import pattern_name
from cardbench.result import Card, Run, TestResult
from cardbench.units import KiB, MiB, parse_count, parse_number

_NUM = r"([0-9]+(?:[.,][0-9]+)?)"
_KDM_LINE = re.compile(rf"^\s*(Sequential|Random)\s+(\d+)\s*(KiB|MiB)\s*\(Q=\s*(\d+),\s*T=\s*(\d+)\)\s*:\s*{_NUM}\s*MB/s"
                       rf"\s*\[\s*{_NUM}\s*IOPS\]\s*<\s*{_NUM}\s*us>\s*$")
_KDM_VERSION = re.compile(r"KDiskMark\s*(?:\(([^)]*)\))?\s*:\s*https?://github\.com/JonMagon/KDiskMark", re.I)
_CDM_VERSION = re.compile(r"CrystalDiskMark\s+(\d+(?:\.\d+)*[a-z]?)", re.I)
# 7.x .. 9.x
_CDM_NEW = re.compile(rf"^\s*(Sequential|Random|SEQ|RND)\s*(\d+)\s*(KiB|MiB)\s*\(Q=\s*(\d+),\s*T=\s*(\d+)\)\s*:\s*{_NUM}"
                      rf"\s*MB/s\s*\[\s*{_NUM}\s*IOPS\]\s*<\s*{_NUM}\s*us>\s*$")
# 5.x, 6.x
_CDM_OLD = re.compile(rf"^\s*(Sequential|Random)\s+(Read|Write)(?:\s+(\d+)\s*(KiB|KB|MiB))?\s*\((?:Q=\s*(\d+)\s*,\s*)?"
                      rf"T=\s*(\d+)\)\s*:\s*{_NUM}\s*MB/s(?:\s*\[\s*{_NUM}\s*IOPS\])?\s*$")
_SECTION = re.compile(r"^\s*\[(Read|Write|Mix)\](?:\s*Read\s*(\d+)%)?", re.I)
_MEASURE = re.compile(r"Measure:?\s*(\d+)\s*(sec|min)", re.I)
_DATE = re.compile(r"^\s*Date\s*:\s*(\d{4})[-/](\d{2})[-/](\d{2})\s+(\d{1,2}):(\d{2}):(\d{2})")
_RESULT_START = re.compile(r"^\s*(Sequential|Random|SEQ|RND)\b")


def is_kdiskmark(text: str) -> bool:
    return bool(_KDM_VERSION.search(text[:2000]))


def is_crystaldiskmark(text: str) -> bool:
    head = text[:3000]
    return "CrystalDiskMark" in head or "Crystal Dew World" in head


def _f(text: str, where: str) -> Printed:
    return Printed.read(text, where)


def _block_size(n: int, size: str, unit: str | None) -> int:
    """The block size (bytes) result line ``n`` prints (units.parse_count)."""
    return parse_count(size, f"line {n}, block size") * (MiB if unit == "MiB" else KiB)


def _depth_threads(n: int, q: str | None, t: str) -> tuple[int, int]:
    """Queue depth and threads of result line ``n`` (units.parse_count)."""
    return parse_count(q or 1, f"line {n}, Q="), parse_count(t, f"line {n}, T=")


def _measure_seconds(text: str) -> tuple[float, str]:
    m = _MEASURE.search(text)
    if m:
        seconds = parse_number(m.group(1), "measuring time")
        return seconds * (60 if m.group(2).lower() == "min" else 1), "the measuring time printed"
    return 5.0, "5 s (not printed: CrystalDiskMark's fixed DiskSpd -d5)"


def _date(text: str) -> str | None:
    for line in text.splitlines():
        m = _DATE.match(line)
        if m:
            y, mo, d, h, mi, s = m.groups()
            return f"{y}-{mo}-{d}T{parse_count(h, 'Date, hour'):02d}:{mi}:{s}"
    return None


def _target(text: str) -> tuple[str | None, str | None]:
    """(card name, target path) from KDiskMark's ``Target: /media/card (/dev/sdb1, 29.72 GiB) [Model]``:
    the model in brackets names the card when given, else the path."""
    for line in text.splitlines():
        m = re.match(r"^\s*Target\s*:\s*(\S+)(?:\s*\(([^)]*)\))?(?:\s*\[(.*)\])?\s*$", line)
        if m:
            return (m.group(3) or m.group(1)), m.group(1)
    return None, None


class _Row:
    def __init__(self, line_no: int, raw: str, seq: bool, op: str, bs: int, q: int, t: int, rate: Printed,
                 iops: Printed | None, lat_us: Printed | None, mix: int | None = None) -> None:
        self.line_no, self.raw, self.seq, self.op, self.bs, self.q, self.t = line_no, raw, seq, op, bs, q, t
        self.rate, self.iops, self.lat_us, self.mix = rate, iops, lat_us, mix

    @property
    def name(self) -> str:
        base = pattern_name(self.seq, "readwrite" if self.op == "mix" else self.op, self.bs, self.q, self.t)
        return base + (f"_mix{self.mix}" if self.op == "mix" and self.mix is not None else "")


def _build(rows: list[_Row], *, factor: float, seconds: float, seconds_basis: str, report: ImportReport,
           fmt: str, tool: str, version: str | None, iops_slack_bytes, check_iops: bool) -> list[TestResult]:
    tests: list[TestResult] = []
    used: set[str] = set()
    for r in rows:
        if r.rate.value == 0:
            report.notes.append(f"line {r.line_no}: {r.name} printed 0.000 MB/s: not run or failed in {tool}; "
                                "not stored")
            continue
        rate = r.rate.value * factor
        name = r.name
        k = 2
        while name in used:
            name, k = f"{r.name}_{k}", k + 1
        used.add(name)
        ops = round(r.iops.value * seconds) if r.iops is not None else None
        run = Run(int(round(rate * seconds)), seconds, ops=ops,
                  latency_s={"mean": r.lat_us.value * 1e-6} if r.lat_us is not None and r.lat_us.value > 0 else None)
        method = {"engine": tool, "tool_version": version, "block_size": r.bs, "queue_depth": r.q, "threads": r.t,
                  "printed_rate": f"{r.rate.text} MB/s", "unit_factor": factor,
                  "timing": f"derived: the printed rate over {seconds_basis}", "import_line": r.line_no}
        if r.mix is not None:
            method["read_percent"] = r.mix
        t = TestResult(name, {k2: v for k2, v in method.items() if v is not None}, runs=[run],
                       extra={"raw": r.raw})
        if check_iops and r.iops is not None and r.op != "mix":
            flags: list[Flag] = []
            central = r.iops.value * r.bs
            slack = r.iops.half_unit * r.bs + iops_slack_bytes(r)
            check_figure(flags, r.line_no, name, "MB/s", r.rate, central / factor, (central - slack) / factor,
                         (central + slack) / factor, f"{r.iops.text} IOPS x {r.bs:,} B" +
                         (f" / {factor:,.0f}" if factor != 1e6 else " / 10^6"))
            report.flags += flags
            t.warnings += [f"{tool}'s own figures disagree: {f}" for f in flags]
        tests.append(t)
    return tests


def _result_lines(text: str):
    """(line number, line, section, read percent of a [Mix]) of each line that starts like a result."""
    section, mix = None, None
    for n, line in enumerate(text.splitlines(), 1):
        s = _SECTION.match(line)
        if s:
            section = s.group(1).lower()
            mix = parse_count(s.group(2), f"line {n}, mix read percent") if s.group(2) else None
        elif _RESULT_START.match(line):
            yield n, line, section, mix


def _check_complete(path: str, text: str, rows: list[_Row], footer: str, footer_name: str) -> None:
    if not rows:
        raise bad_input(path, "no result line", "expected lines like 'SEQ 1MiB (Q= 8, T= 1): ... MB/s' (truncated?)")
    if not re.search(footer, text, re.M):
        last = max(r.line_no for r in rows)
        raise bad_input(path, f"after line {last}", f"no {footer_name} footer after it: the export is truncated")


def import_kdiskmark(text: str, *, path: str, digest: str, card: Card | None = None,
                     reader: str | None = None) -> ImportReport:
    m = _KDM_VERSION.search(text)
    version = (m.group(1) or "").strip() if m else ""
    rows: list[_Row] = []
    for n, line, section, mix in _result_lines(text):
        lm = _KDM_LINE.match(line)
        if lm is None or section is None:
            raise bad_input(path, f"line {n}", "not a KDiskMark result line ('Sequential 1 MiB (Q= 8, T= 1): "
                                               "... MB/s [ ... IOPS] < ... us>') under [Read], [Write] or [Mix]")
        kind, size, unit, q, t, rate, iops, lat = lm.groups()
        bs, (qd, th) = _block_size(n, size, unit), _depth_threads(n, q, t)
        rows.append(_Row(n, line.strip(), kind == "Sequential", "mix" if section == "mix" else section,
                         bs, qd, th, _f(rate, f"line {n}, MB/s"), _f(iops, f"line {n}, IOPS"), _f(lat, f"line {n}, us"),
                         mix))
    _check_complete(path, text, rows, r"^\s*Profile\s*:", "'Profile:'")
    report = ImportReport(path=path, format="kdiskmark")
    factor, why = _kdm_factor(version, rows)
    report.convention = why
    seconds, basis = _measure_seconds(text)
    if not _MEASURE.search(text):
        seconds, basis = 5.0, "5 s (KDiskMark's default measuring time; not printed before 2.x)"
    tests = _build(rows, factor=factor, seconds=seconds, seconds_basis=basis, report=report, fmt="kdiskmark",
                   tool="KDiskMark", version=version or None, check_iops=True,
                   iops_slack_bytes=lambda r: r.t * KiB + 0.0005 * factor + 1e-4 * r.iops.value * r.bs)
    if tests:
        name, where = _target(text)
        report.results.append(imported_result(path=path, fmt="kdiskmark", digest=digest, key="all", tests=tests,
                                              card=card or Card(name=name), reader=reader, started=_date(text),
                                              target={"target": where} if where else None,
                                              tool={"tool_version": version or None},
                                              warnings=["KDiskMark figures corrected: stored at "
                                                        f"{factor / 1e6:g} x the printed MB/s"]))
    return report


def _kdm_factor(version: str, rows: list[_Row]) -> tuple[float, str]:
    kib1000 = 1000.0 * KiB            # 1.5.1 on: printed = fio KiB/s / 1000
    kib1024 = 1024.0 * KiB            # 1.4.x, 1.5.0: printed = fio KiB/s / 1024 (MiB/s)
    vm = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if vm:
        v = tuple(parse_count(x or 0, "version") for x in vm.groups())
        if v >= (1, 5, 1):
            return kib1000, (f"KDiskMark {version}: its MB/s is fio's KiB/s / 1000 (benchmark.cpp), so the true "
                             "rate is 1.024 x the printed figure (x 1,024,000 B/s)")
        return kib1024, (f"KDiskMark {version}: its MB/s is fio's KiB/s / 1024, i.e. MiB/s (x 1,048,576 B/s)")
    ratios = sorted(r.iops.value * r.bs / r.rate.value for r in rows
                    if r.rate.value > 0 and r.iops is not None and r.iops.value >= 100 and r.op != "mix")
    if ratios:
        mid = ratios[len(ratios) // 2]
        if abs(mid - kib1024) < abs(mid - kib1000):
            return kib1024, (f"KDiskMark without a version in its header (1.4 to 1.5.0): IOPS x block size / MB/s "
                             f"= {mid:,.0f} B, so its MB/s is fio's KiB/s / 1024 = MiB/s (x 1,048,576 B/s)")
        return kib1000, (f"KDiskMark without a version in its header (1.5.x): IOPS x block size / MB/s = "
                         f"{mid:,.0f} B, so its MB/s is fio's KiB/s / 1000: true rate 1.024 x printed")
    return kib1000, ("KDiskMark without a version and without IOPS to tell: taken as 1.5.1's convention, MB/s = "
                     "fio's KiB/s / 1000: true rate 1.024 x printed")


def import_crystaldiskmark(text: str, *, path: str, digest: str, card: Card | None = None,
                           reader: str | None = None) -> ImportReport:
    m = _CDM_VERSION.search(text)
    version = m.group(1) if m else None
    rows: list[_Row] = []
    for n, line, section, mix in _result_lines(text):
        if re.match(r"^\s*(SEQ|RND)\d", line):        # a "SEQ1M Q8T1" caption, not a result
            continue
        nm = _CDM_NEW.match(line)
        if nm:
            if section is None:
                raise bad_input(path, f"line {n}", "a result line before any [Read] / [Write] / [Mix] section")
            kind, size, unit, q, t, rate, iops, lat = nm.groups()
            bs, (qd, th) = _block_size(n, size, unit), _depth_threads(n, q, t)
            rows.append(_Row(n, line.strip(), kind in ("Sequential", "SEQ"), "mix" if section == "mix" else section,
                             bs, qd, th, _f(rate, f"line {n}, MB/s"), _f(iops, f"line {n}, IOPS"),
                             _f(lat, f"line {n}, us"), mix))
            continue
        om = _CDM_OLD.match(line)
        if om is None:
            raise bad_input(path, f"line {n}", "not a CrystalDiskMark result line (5.x-6.x 'Sequential Read "
                                               "(Q= 32,T= 1) : ... MB/s', 7.x-9.x 'SEQ 1MiB (Q= 8, T= 1): ...')")
        kind, op, size, unit, q, t, rate, iops = om.groups()
        qd, th = _depth_threads(n, q, t)
        # 5.x/6.x print no block size for Seq: Q32T1 is 128 KiB; 5.x's Seq (T= 1) is 1 MiB at QD1
        bs = _block_size(n, size, unit) if size else 128 * KiB if q else MiB
        rows.append(_Row(n, line.strip(), kind == "Sequential", op.lower(), bs, qd, th, _f(rate, f"line {n}, MB/s"),
                         _f(iops, f"line {n}, IOPS") if iops else None, None))
    _check_complete(path, text, rows, r"^\s*(Profile|Test)\s*:", "'Profile:' (7.x on) or 'Test :' (5.x, 6.x)")
    report = ImportReport(path=path, format="crystaldiskmark")
    report.convention = (f"CrystalDiskMark {version or '(version not printed)'}: MB/s = 10^6 B/s as its header "
                         "says (IOPS are MB/s x 10^6 / block size); stored as printed")
    seconds, basis = _measure_seconds(text)
    tests = _build(rows, factor=1e6, seconds=seconds, seconds_basis=basis, report=report, fmt="crystaldiskmark",
                   tool="CrystalDiskMark", version=version, check_iops=True,
                   iops_slack_bytes=lambda r: 0.0005e6 + 1e-6 * r.iops.value * r.bs)
    if tests:
        report.results.append(imported_result(path=path, fmt="crystaldiskmark", digest=digest, key="all",
                                              tests=tests, card=card, reader=reader, started=_date(text),
                                              tool={"tool_version": version}))
    return report
