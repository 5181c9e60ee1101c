"""hdparm -t / -T and dd's closing lines, as results.

**hdparm** (checked 9.x; 9.65 here): ``Timing buffered disk reads:  40 MB in  3.01 seconds =
13.29 MB/sec``, ``Timing O_DIRECT disk reads: ...`` (``--direct``) and ``Timing cached reads:
...``, under a ``/dev/sdb:`` line. hdparm counts in MiB (its MB is 2^20 B), so "MB/sec" is
MiB/s; a rate below 1 MiB/s is printed in "kB/sec" (KiB/s). The bytes (whole MiB) and the
seconds (printed to 0.01 s) are the raw data; the rate is checked against them. Tests:
``raw_read`` for disk reads (sequential reads from the device's start; O_DIRECT ones are
``raw_read_direct``), ``cached_read`` for -T, which measures memory and the page cache, not the
card, and is stored with a warning saying so. One Result per device.

**dd** (GNU coreutils): the closing line after ``records out``, in each wording coreutils used::

    8388608 bytes (8.4 MB, 8.0 MiB) copied, 0.0054 s, 1.6 GB/s      8.24 and later
    8388608 bytes (8.4 MB) copied, 0.0054 s, 1.6 GB/s               8.x before 8.24
    8388608 bytes (8.4 MB) copied, 0.0054 seconds, 1.6 GB/s         6.x, 7.x
    100 bytes copied, 0.000195547 s, 511 kB/s                       under 1 kB: no parentheses
    8388608 bytes transferred in 0.005 secs (1561234 bytes/sec)     BSD / macOS dd
    8388608 bytes (8.0MB) copied, 0.005400 seconds, 1.4GB/s         busybox (third status line)

and with decimal commas (other locales). The rate is in decimal units (kB = 10^3, MB = 10^6),
except busybox's, which are 1024-based (libbb make_human_readable_str: KB = KiB, MB = MiB, one
decimal) and known from coreutils' by the missing space before the unit (Debian's busybox is
built without that line: it prints only the records);
the byte count is exact and the MB (decimal) and MiB (binary) in parentheses are checked
against it, as is the rate against bytes / seconds. A ``dd if=... of=... bs=...`` command
line above a closing line names its test: ``seq_write_{bs}_q1t1`` when it writes a file or
device, ``seq_read_{bs}_q1t1`` when it reads one to /dev/null (bs default 512 B); without
one the test is ``dd_copy``.
"""

from __future__ import annotations

import re

from cardbench.importers.base import ImportReport, bad_input, imported_result
from cardbench.importers.checks import Flag, Printed, check_figure
from cardbench.importers.fio import fio_size
from cardbench.plan import pattern_name
from cardbench.result import Card, Run, TestResult
from cardbench.units import KiB, MiB, parse_count, parse_number

_NUM = r"([0-9]+(?:[.,][0-9]+)?)"
_HDPARM = re.compile(rf"^\s*Timing (cached|buffered disk|O_DIRECT cached|O_DIRECT disk) reads:\s*(\d+) MB in\s*{_NUM}"
                     rf" seconds\s*=\s*{_NUM}\s*([kM])B/sec", re.I)
_DEVICE = re.compile(r"^\s*(/\S+):\s*$")
_DD_GNU = re.compile(rf"^(\d+) bytes?(?: \(([^)]*)\))? copied, {_NUM} s(?:econds)?, {_NUM}( ?)([kKMGT]?B)/s\s*$")
_DD_BSD = re.compile(rf"^(\d+) bytes transferred in {_NUM} secs \((\d+) bytes/sec\)\s*$")
_DD_CMD = re.compile(r"^(?:[$#>]\s*)?(?:sudo\s+)?(?:busybox\s+)?dd\s+(.*)$")
_DEC = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_BIN = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
#: busybox dd (FEATURE_DD_THIRD_STATUS_LINE): make_human_readable_str, 1024-based, "KB" = KiB
_BUSYBOX = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def is_hdparm(text: str) -> bool:
    return bool(re.search(r"^\s*Timing (cached|buffered disk|O_DIRECT \w+) reads:", text, re.M))


def is_dd(text: str) -> bool:
    return bool(re.search(r"^\d+\+\d+ records out|^\d+ bytes?\b.*(copied|transferred)", text, re.M))


def _p(text: str, where: str) -> Printed:
    return Printed.read(text, where)


def import_hdparm(text: str, *, path: str, digest: str, card: Card | None = None,
                  reader: str | None = None) -> ImportReport:
    report = ImportReport(path=path, format="hdparm")
    report.convention = ("hdparm: its MB is 2^20 B (MiB) and MB/sec is MiB/s (kB/sec: KiB/s); rate = its MB/sec "
                         "where it agrees with whole MiB read / seconds printed (those are rounded to 0.01 s)")
    devices: dict[str, list[TestResult]] = {}
    device = "device"
    for n, line in enumerate(text.splitlines(), 1):
        d = _DEVICE.match(line)
        if d:
            device = d.group(1)
            continue
        if "Timing" in line and "reads:" in line:
            m = _HDPARM.match(line)
            if m is None:
                raise bad_input(path, f"line {n}", "an hdparm 'Timing ... reads:' line without 'N MB in S seconds "
                                                   "= R MB/sec'")
            what, mib, secs, rate, unit = m.groups()
            w = f"line {n}, {what}"
            nbytes, sp, rp = parse_count(mib, f"{w} MB") * MiB, _p(secs, f"{w} seconds"), _p(rate, f"{w} {unit}B/sec")
            ubytes = MiB if unit.upper() == "M" else KiB
            if sp.value <= 0 and rp.value <= 0:
                raise bad_input(path, f"line {n}", "zero seconds and a zero rate")
            cached = "cached" in what.lower()
            direct = what.lower().startswith("o_direct")
            name = ("cached_read" if cached else "raw_read") + ("_direct" if direct else "")
            flags: list[Flag] = []
            fastest = nbytes / sp.hi / ubytes
            if sp.value > 0:
                central = nbytes / sp.value / ubytes
                check_figure(flags, n, f"{device} {what}", f"{unit}B/sec", rp, central, fastest,
                             nbytes / max(sp.lo, 1e-9) / ubytes, f"{nbytes // MiB} MiB / {sp.text} s")
            else:
                # "0.00 seconds" is any time under 0.005 s (hdparm on a cached loop device prints it with
                # a rate of thousands of MB/sec): the rate is only bounded below by that
                check_figure(flags, n, f"{device} {what}", f"{unit}B/sec", rp, fastest, fastest,
                             max(rp.hi, fastest), f"{nbytes // MiB} MiB / under {sp.hi:g} s")
            report.flags += flags
            # the seconds are printed to 0.01 s (a fast read of "32 MB in 0.03 seconds" is up to 17% off);
            # hdparm's own rate comes from the unrounded time, so where it agrees with the printed
            # seconds it gives the time, and the rounded seconds only where it does not
            seconds = nbytes / (rp.value * ubytes) if rp.value > 0 and (not flags or sp.value <= 0) else sp.value
            t = TestResult(name, {"engine": "hdparm", "io": "O_DIRECT" if direct else "buffered",
                                  "what": f"hdparm {'-T' if cached else '-t'}" + (" --direct" if direct else ""),
                                  "printed_rate": f"{rate} {unit}B/sec", "import_line": n},
                           runs=[Run(nbytes, seconds)], extra={"raw": line.strip()},
                           warnings=[f"hdparm's own figures disagree: {f}" for f in flags])
            if sp.value <= 0:
                t.warnings.append(f"hdparm printed {sp.text} seconds (under {sp.hi:g} s): the time comes from "
                                  "its rate alone, and a read this short says little")
            if cached:
                t.warnings.append("hdparm -T times the page cache (memory), not the card: not the card's speed")
            tests = devices.setdefault(device, [])
            same = [x for x in tests if x.name == name]
            if same:
                same[0].runs += t.runs
                same[0].extra["raw"] += "\n" + t.extra["raw"]
                same[0].warnings += t.warnings
            else:
                tests.append(t)
    if not devices:
        raise bad_input(path, "hdparm output", "no 'Timing ... reads:' line")
    for dev, tests in devices.items():
        report.results.append(imported_result(path=path, fmt="hdparm", digest=digest, key=dev, tests=tests,
                                              card=card or Card(name=dev), reader=reader,
                                              target={"device": dev}))
    return report


def _dd_name(cmd: str | None) -> tuple[str, int | None]:
    if not cmd:
        return "dd_copy", None
    args = dict(a.split("=", 1) for a in cmd.split() if "=" in a)
    bs = fio_size(args.get("bs") or args.get("obs") or args.get("ibs") or "512", kb_base=1024)
    if bs is None:
        bs = 512
    of, inp = args.get("of"), args.get("if")
    if of and of != "/dev/null":
        return pattern_name(True, "write", bs, 1, 1), bs
    if inp and inp not in ("/dev/zero", "/dev/urandom", "/dev/random"):
        return pattern_name(True, "read", bs, 1, 1), bs
    return "dd_copy", bs


def import_dd(text: str, *, path: str, digest: str, card: Card | None = None,
              reader: str | None = None) -> ImportReport:
    report = ImportReport(path=path, format="dd")
    report.convention = ("dd: the byte count is exact; its rate is decimal (kB = 10^3 B, MB = 10^6 B/s); the "
                         "parenthesised MB is decimal and MiB binary; rate = bytes / seconds")
    tests: dict[str, TestResult] = {}
    cmd = None
    seen_busybox = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip().split("\r")[-1].strip()     # status=progress rewrites its line with \r
        c = _DD_CMD.match(line)
        if c:
            cmd = c.group(1)
            continue
        g, b = _DD_GNU.match(line), _DD_BSD.match(line)
        flags: list[Flag] = []
        if g:
            nbytes, paren, secs, rate, space, unit = g.groups()
            nbytes = parse_count(nbytes, f"line {n}, bytes")
            sp, rp = _p(secs, f"line {n}, seconds"), _p(rate, f"line {n}, rate")
            # coreutils puts a space before its (decimal) unit; busybox prints "124.9MB/s", binary,
            # its one decimal rounded from the last remainder only (lower ones truncated)
            busybox = not space
            units = _BUSYBOX if busybox else _DEC
            if busybox:
                seen_busybox = True
                rp = Printed(rp.text, rp.value, rp.half_unit + 0.001)
            ub = units.get(unit)
            if ub is None:
                raise bad_input(path, f"line {n}", f"unknown rate unit {unit}/s")
            for part in (paren or "").split(","):
                pm = re.match(rf"^\s*{_NUM}\s*([kKMGT]i?B)\s*$", part)
                if pm:
                    u = _BIN.get(pm.group(2)) or units.get(pm.group(2))
                    if u:
                        exact = nbytes / u
                        check_figure(flags, n, "dd", f"size in {pm.group(2)}", _p(pm.group(1), f"line {n}, size"), exact, exact, exact,
                                     f"{nbytes:,} B in {pm.group(2)}")
            printed_rate = f"{rate} {unit}/s"
        elif b:
            nbytes, secs, rate = b.groups()
            nbytes, sp, ub = parse_count(nbytes, f"line {n}, bytes"), _p(secs, f"line {n}, secs"), 1
            rp = Printed(rate, parse_number(rate, f"line {n}, bytes/sec"), 0.5)
            unit = "bytes"
            printed_rate = f"{rate} bytes/sec"
        else:
            if re.match(r"^\d+ bytes?\b.*(copied|transferred)", line):
                raise bad_input(path, f"line {n}", "a dd closing line cardbench cannot read (expected 'N bytes "
                                                   "(.. MB, .. MiB) copied, S s, R MB/s')")
            continue
        if sp.value <= 0:
            raise bad_input(path, f"line {n}", "zero seconds")
        central = nbytes / sp.value / ub
        # coreutils prints the rate with 2 or 3 significant digits, rounded; that is the printed unit
        check_figure(flags, n, "dd", f"rate ({unit}/s)", rp, central, nbytes / sp.hi / ub, nbytes / sp.lo / ub,
                     f"{nbytes:,} B / {sp.text} s")
        report.flags += flags
        name, bs = _dd_name(cmd)
        t = tests.get(name)
        if t is None:
            t = tests[name] = TestResult(name, {"engine": "dd", "command": f"dd {cmd}" if cmd else None,
                                                "block_size": bs, "printed_rate": printed_rate,
                                                "import_line": n}, extra={"raw": ""})
            t.method = {k: v for k, v in t.method.items() if v is not None}
        t.runs.append(Run(nbytes, sp.value))
        t.extra["raw"] = (t.extra["raw"] + "\n" + line).strip()
        t.warnings += [f"dd's own figures disagree: {f}" for f in flags]
        cmd = None if name != "dd_copy" else cmd
    if not tests:
        raise bad_input(path, "dd output", "no closing line ('N bytes (...) copied, S s, R MB/s')")
    if seen_busybox:
        report.convention = ("dd: the byte count is exact; busybox's rate and size ('124.9MB/s', no space) are "
                             "1024-based (KB = KiB, MB = MiB), coreutils' (a space before the unit) decimal; "
                             "rate = bytes / seconds")
    if "dd_copy" in tests:
        report.notes.append("no 'dd if=... of=...' line before a closing line: stored as dd_copy (direction "
                            "unknown); put the command above it to name the test")
    report.results.append(imported_result(path=path, fmt="dd", digest=digest, key="all", tests=list(tests.values()),
                                          card=card, reader=reader))
    return report
