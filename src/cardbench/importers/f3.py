"""f3write / f3read / f3probe output and H2testw logs, as ``cardbench.verify/1`` documents.

**f3** (github.com/AltraMayor/f3, f3read.c, f3write.c, f3probe.c, libutils.c; checked 6.0 to
10.0): sizes and speeds are printed by ``adjust_unit``, which divides by 1024: f3's "KB", "MB",
"GB" and "MB/s" are KiB, MiB, GiB and MiB/s. Sector counts (512 B) are exact and are used.

* f3read: ``Validating file 1.h2w ...   65280/        0/      0/      0`` per file (ok /
  corrupted / changed / overwritten sectors), then ``Data OK: 31.88 MB (65280 sectors)``,
  ``Data LOST: ...``, its three parts, and ``Average reading speed: 131.14 MB/s`` (10.0:
  ``Average sequential read speed: ...``). Verdict: the one rule (:mod:`cardbench.verify.verdict`,
  as for cardbench's own full verify): nothing lost and everything read -> genuine; overwritten
  sectors (from another position) -> counterfeit, ``wraparound``; corrupted sectors only at the
  end of the data (each file's placed at its end) -> counterfeit, ``dropped``; else damaged.
  Usable: the bytes that read back right (their position on the card is unknown, as in
  cardbench's own full verify of a directory).
* f3write (alone or before f3read in the same file): ``Free space:`` and ``Average writing
  speed:``; on its own it has no verdict and is refused.
* f3probe: ``Good news: The device `/dev/sdb' is the real thing`` / ``Bad news: ... is
  damaged`` / ``... is a counterfeit of type limbo|wraparound|chain``, the ``f3fix
  --last-sec=N /dev/sdb`` it printed, and ``*Usable* size: 7.86 GB (16477879 blocks)``,
  ``Announced size:``, ``Physical block size: 512.00 Byte (2^9 Bytes)``. Usable bytes =
  blocks x block size. f3's type is kept (``f3_type``) and its sentence (``tool_verdict``); the
  verdict is the one rule's on what it found: wraparound and chain are a wraparound, limbo
  loses the writes past the usable size (``dropped``), "damaged" is damage.

**H2testw** (1.3, 1.4, English): ``Test finished without errors.`` or ``The media is likely to
be defective.`` (kept as ``tool_verdict``) with ``7.8 GByte OK (16383999 sectors)``, ``... DATA
LOST (... sectors)``, ``Details:0 KByte overwritten (0 sectors)``, ``... slightly changed``,
``... corrupted``, ``... aliased memory``; the one rule judges them: aliased or overwritten
sectors -> counterfeit, ``wraparound``; corrupted sectors lying from ``First error at offset:``
to the end of the data -> counterfeit, ``dropped``; else damaged. ``Warning: Only 15000 of 15103 MByte
tested.`` gives the tested size; ``Writing speed: 12.3 MByte/s`` (H2testw's MByte is 2^20 B).

Every printed size is checked against its own sector count and every total against its parts;
a figure that disagrees is flagged.
"""

from __future__ import annotations

import re

from cardbench.importers.base import ImportReport, bad_input, imported_verify
from cardbench.importers.checks import Flag, Printed, check_figure
from cardbench.result import Card
from cardbench.units import parse_count, parse_number
from cardbench.verify.verdict import file_losses, judge, judge_fill

SECTOR = 512
_F3_UNITS = {"byte": 1, "bytes": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}
_H2_UNITS = {"byte": 1, "kbyte": 1 << 10, "mbyte": 1 << 20, "gbyte": 1 << 30, "tbyte": 1 << 40}
_NUM = r"([0-9]+(?:[.,][0-9]+)?)"

_VALIDATE = re.compile(r"^Validating file (\S+) \.\.\.\s*(?:[\s\b]*)(\d+)/\s*(\d+)/\s*(\d+)/\s*(\d+)(.*)$")
_CREATE = re.compile(r"^Creating file (\S+) \.\.\.\s*(.*)$")
_TOTAL = re.compile(rf"^\s*(Data OK|Data LOST|Corrupted|Slightly changed|Overwritten):\s*{_NUM}\s*(\w+)\s*"
                    r"\((\d+) (?:sectors?|blocks?)\)")
_SPEED = re.compile(rf"^Average (?:sequential )?(reading|writing|read|write) speed:\s*{_NUM}\s*(\w+)/s")
_FREE = re.compile(rf"^Free space:\s*{_NUM}\s*(\w+)")
_VERSION = re.compile(r"^F3 (read|write|probe) (\S+)", re.M)

_PROBE_VERDICT = re.compile(r"^(Good|Bad) news: The device [`'](\S+?)' is (the real thing|damaged|a counterfeit of "
                            r"type (\w+))", re.M)
_PROBE_SIZE = re.compile(rf"^\s*(\*Usable\* size|Announced size|Physical block size|Module):\s*{_NUM}\s*(\w+)\s*"
                         r"\((?:(\d+) blocks|2\^(\d+) Bytes?)\)", re.M)
_FIX = re.compile(r"^(f3fix --last-sec=(\d+) (\S+))\s*$", re.M)


def is_f3probe(text: str) -> bool:
    return bool(re.search(r"^F3 probe ", text, re.M) or _PROBE_VERDICT.search(text))


def is_f3(text: str) -> bool:
    return bool(re.search(r"^F3 (read|write) ", text, re.M) or
                re.search(r"SECTORS\s+ok/corrupted/changed/overwritten", text) or
                re.search(r"^(Validating|Creating) file \d+\.h2w \.\.\.", text, re.M))


def is_h2testw(text: str) -> bool:
    return "H2testw" in text[-2000:] or "H2testw" in text[:2000]


def _num(text: str, where: str) -> float:
    return parse_number(text, where)


def _bytes(text: str, unit_bytes: int, where: str) -> int:
    """A printed size in whole bytes: ``text`` units of ``unit_bytes``, finite and within 64 bits."""
    return parse_count(int(parse_number(_num(text, where) * unit_bytes, where, expected="a size")), where,
                       expected="a size")


def _clean(text: str) -> list[str]:
    # progress output, when captured from a terminal, overwrites itself with backspaces
    return [re.sub(r".\x08", "", ln).replace("\x08", "").rstrip("\r") for ln in text.splitlines()]


def _line_of(text: str, m: re.Match) -> str:
    """The whole line (stripped) in which ``m`` matched: a tool's own verdict sentence."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else len(text)].strip()


def _size_flag(flags: list[Flag], line: int, row: str, figure: str, printed: str, unit: str, count: int,
               unit_bytes: dict, block: int = SECTOR) -> None:
    u = unit_bytes.get(unit.lower())
    p = Printed.parse(printed)
    if u is None or p is None:
        return
    exact = count * block / u
    check_figure(flags, line, row, figure, p, exact, exact, exact, f"{count:,} x {block} B in {unit}")


def _f3_verdict(files: list[dict], ok: int, lost: int, parts: dict[str, int],
                read_all: bool) -> tuple[str | None, str | None]:
    """The one rule (verify/verdict.py) on f3read's counts: "corrupted" sectors are lost (each
    file's placed at its end), "overwritten" ones came from another position, "slightly changed"
    ones and unread data are damage."""
    changed, overwritten = parts.get("Slightly changed", 0), parts.get("Overwritten", 0)
    corrupted = parts.get("Corrupted", max(0, lost - changed - overwritten))
    damaged = bool(changed) or not read_all
    if files:
        sizes = [(sum(f["counts"].values()) * SECTOR, f["counts"]["corrupted"] * SECTOR) for f in files]
        return judge_fill(written=sum(size for size, _ in sizes), lost=file_losses(sizes),
                          wrapped=overwritten > 0, damaged=damaged)
    # totals without the per-file lines: where the losses lie is not known
    return judge_fill(written=(ok + lost) * SECTOR, unplaced=corrupted * SECTOR, wrapped=overwritten > 0,
                      damaged=damaged)


def import_f3(text: str, *, path: str, digest: str, card: Card | None = None,
              reader: str | None = None) -> ImportReport:
    lines = _clean(text)
    report = ImportReport(path=path, format="f3")
    versions = dict((k, v) for k, v in _VERSION.findall(text))
    files: list[dict] = []
    totals: dict[str, tuple[int, int, str, str]] = {}
    speeds: dict[str, float] = {}
    free: list[int] = []
    read_all = True
    flags: list[Flag] = []
    header_seen = False
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if re.search(r"SECTORS\s+ok/corrupted/changed/overwritten", s):
            header_seen = True
            continue
        if s.startswith("Validating file"):
            m = _VALIDATE.match(s)
            if m is None:
                raise bad_input(path, f"line {n}", "'Validating file' without its four sector counts "
                                                   "(ok/corrupted/changed/overwritten)")
            name, ok, bad, chg, ovw, rest = m.groups()
            counts = {k: parse_count(v, f"line {n}, {k} sectors")
                      for k, v in (("ok", ok), ("corrupted", bad), ("changed", chg), ("overwritten", ovw))}
            err = None
            if "NOT fully read" in rest:
                read_all = False
                err = rest.strip(" -")
            idx = re.match(r"(\d+)", name)
            files.append({"name": name, "index": parse_count(idx.group(1), f"line {n}, file number") if idx
                          else len(files) + 1, "counts": counts,
                          "ok_bytes": counts["ok"] * SECTOR, "error": err, "raw": s})
            continue
        m = _TOTAL.match(s)
        if m:
            what, value, unit, count = m.groups()
            sectors = parse_count(count, f"line {n}, {what} sectors")
            totals[what] = (n, sectors, value, unit)
            _size_flag(flags, n, "f3read totals", what, value, unit, sectors, _F3_UNITS)
            continue
        m = _SPEED.match(s)
        if m:
            kind, value, unit = m.groups()
            u = _F3_UNITS.get(unit.lower())
            if u is None:
                raise bad_input(path, f"line {n}", f"unknown unit {unit!r}/s")
            speeds["read" if kind.startswith("read") else "write"] = _num(value, f"line {n}, {kind} speed") * u
            continue
        m = _FREE.match(s)
        if m and m.group(2).lower() in _F3_UNITS:
            free.append(_bytes(m.group(1), _F3_UNITS[m.group(2).lower()], f"line {n}, free space"))
            continue
        if "Not all data was read due to I/O error" in s:
            read_all = False
    if not header_seen and not files:
        if free or "write" in versions:
            raise _f3write_alone(path)
        raise bad_input(path, "f3read output", "no 'SECTORS ok/corrupted/changed/overwritten' table")
    for key in ("Data OK", "Data LOST"):
        if key not in totals:
            last = len([ln for ln in lines if ln.strip()])
            raise bad_input(path, f"after line {last}", f"no '{key}:' line: the f3read output is truncated")
    ok = totals["Data OK"][1]
    lost = totals["Data LOST"][1]
    parts: dict[str, int] = {k: totals[k][1] for k in ("Corrupted", "Slightly changed", "Overwritten") if k in totals}
    if len(parts) == 3 and sum(parts.values()) != lost:
        check_figure(flags, totals["Data LOST"][0], "f3read totals", "Data LOST sectors", Printed(str(lost), lost, 0),
                     sum(parts.values()), sum(parts.values()), sum(parts.values()), "corrupted + changed + overwritten")
    if files:
        fsum = {k: sum(f["counts"][k] for f in files) for k in ("ok", "corrupted", "changed", "overwritten")}
        if fsum["ok"] != ok:
            check_figure(flags, totals["Data OK"][0], "f3read totals", "Data OK sectors", Printed(str(ok), ok, 0),
                         fsum["ok"], fsum["ok"], fsum["ok"], "the sum of the files' ok sectors")
    overwritten = parts.get("Overwritten", 0)
    verdict, kind = _f3_verdict(files, ok, lost, parts, read_all)
    report.flags += flags
    report.convention = ("f3 " + "/".join(f"f3{k} {v}" for k, v in sorted(versions.items())) +
                         ": sizes and speeds in binary units (f3's adjust_unit divides by 1024: MB = MiB, "
                         "MB/s = MiB/s); sector counts of 512 B used for every size") if versions else \
        ("f3 (version not printed): sizes and speeds in binary units (MB = MiB); sector counts of 512 B used")
    doc = imported_verify(path=path, fmt="f3", digest=digest, key="f3", mode="full", tool="f3read",
                          tool_version=versions.get("read"), verdict=verdict, announced=(ok + lost) * SECTOR,
                          usable=ok * SECTOR, kind=kind, card=card, reader=reader, raw=text,
                          basis="bytes that read back right (their position on the card unknown)",
                          algorithm="f3write fills the free space with 1 GiB files, f3read checks every sector",
                          sectors={"ok": ok, "corrupted": parts.get("Corrupted", 0),
                                   "changed": parts.get("Slightly changed", 0), "overwritten": overwritten},
                          ok_bytes=ok * SECTOR, lost_bytes=lost * SECTOR, files=files,
                          announced_basis="the bytes f3write wrote and f3read checked (the free space), not "
                                          "the card's size",
                          timings={"write_bytes_per_s": speeds.get("write"), "read_bytes_per_s": speeds.get("read")},
                          flags=[str(f) for f in flags])
    if free:
        doc["free_space_bytes"] = free[0]
    if not read_all:
        doc["notes"] = ["f3read could not read all data (I/O errors)"]
    report.verify_docs.append(doc)
    return report


def _f3write_alone(path: str):
    return bad_input(path, "f3write output", "f3write alone has no verdict: import f3write's and f3read's "
                                             "output together (one file, f3read after f3write)")


def import_f3probe(text: str, *, path: str, digest: str, card: Card | None = None,
                   reader: str | None = None) -> ImportReport:
    m = _PROBE_VERDICT.search(text)
    if m is None:
        raise bad_input(path, "f3probe output", "no 'Good news: ...' / 'Bad news: ...' verdict line (truncated?)")
    _good, device, what, ftype = m.groups()
    sizes: dict[str, tuple[str, str, int | None, int | None, int]] = {}
    for sm in _PROBE_SIZE.finditer(text):
        name, value, unit, blocks, order = sm.groups()
        line = text[:sm.start()].count("\n") + 1
        w = f"line {line}, {name}"
        sizes[name] = (value, unit, parse_count(blocks, f"{w} blocks") if blocks else None,
                       parse_count(order, f"{w} 2^N") if order else None, line)
    for need in ("*Usable* size", "Announced size", "Physical block size"):
        if need not in sizes:
            raise bad_input(path, "f3probe output", f"no '{need}:' line in 'Device geometry' (truncated?)")
    order = sizes["Physical block size"][3]
    if order is not None and order > 30:
        raise bad_input(path, f"line {sizes['Physical block size'][4]}", f"a physical block of 2^{order} B is "
                                                                         "beyond any device (expected 2^9 to 2^30)")
    block = 1 << order if order is not None else SECTOR
    usable_blocks, announced_blocks = sizes["*Usable* size"][2], sizes["Announced size"][2]
    if usable_blocks is None or announced_blocks is None:
        raise bad_input(path, "f3probe output", "usable or announced size without its block count")
    usable = parse_count(usable_blocks * block, "*Usable* size", expected="a size in bytes")
    announced = parse_count(announced_blocks * block, "Announced size", expected="a size in bytes")
    flags: list[Flag] = []
    for name, blocks in (("*Usable* size", usable_blocks), ("Announced size", announced_blocks)):
        value, unit, _b, _o, line = sizes[name]
        _size_flag(flags, line, "f3probe", name, value, unit, blocks, _F3_UNITS, block)
    # the one rule on what f3probe found: a fake type is a boundary at its usable size (wraparound
    # and chain: data came back from another position; limbo: writes past it are lost); its
    # "damaged" is bad blocks without a boundary. Its own sentence is kept as tool_verdict.
    verdict, kind = judge(whole=announced, wrapped=ftype in ("wraparound", "chain"),
                          lost_bytes=max(0, announced - usable) if ftype else 0, lost_kind="dropped",
                          lost_is_tail=True, damaged=what == "damaged")
    fix = _FIX.search(text)
    fix_cmd = fix.group(1) if fix else None
    if fix:
        last = parse_count(fix.group(2), "f3fix --last-sec")
        line = text[:fix.start()].count("\n") + 1
        check_figure(flags, line, "f3probe", "f3fix --last-sec", Printed(str(last), last, 0), usable // SECTOR - 1,
                     usable // SECTOR - 1, usable // SECTOR - 1, "usable bytes / 512 - 1")
    if verdict == "counterfeit" and not fix_cmd:
        raise bad_input(path, "f3probe output", "a counterfeit verdict without the f3fix line that follows it "
                                                "(truncated?)")
    vm = _VERSION.search(text)
    report = ImportReport(path=path, format="f3probe", flags=flags)
    report.convention = (f"f3probe {vm.group(2) if vm else '(version not printed)'}: sizes from block counts x the "
                         f"physical block size ({block} B); f3's GB/MB are binary (GiB/MiB)")
    doc = imported_verify(path=path, fmt="f3probe", digest=digest, key="f3probe", mode="quick", tool="f3probe",
                          tool_version=vm.group(2) if vm else None, verdict=verdict, announced=announced,
                          usable=usable, kind=kind, card=card, reader=reader, device=device, fix_command=fix_cmd,
                          raw=text, basis="f3probe's *Usable* size (blocks x block size)",
                          algorithm="f3probe: writes and reads back sampled blocks to find the real capacity",
                          f3_type=ftype, block_size=block, flags=[str(f) for f in flags],
                          tool_verdict=m.group(0))
    if verdict != "genuine":
        doc["bad_ranges"] = [[usable, announced]] if usable < announced else []
    report.verify_docs.append(doc)
    return report


_H2_LINE = re.compile(rf"^\s*(?:Details:\s*)?{_NUM}\s*(\w+)\s+(OK|DATA LOST|overwritten|slightly changed|corrupted|"
                      r"aliased memory)\s*\((?:< 8 bit/sector, )?(\d+) sectors?\)", re.I)


def import_h2testw(text: str, *, path: str, digest: str, card: Card | None = None,
                   reader: str | None = None) -> ImportReport:
    lines = _clean(text)
    flags: list[Flag] = []
    counts: dict[str, int] = {}
    speeds: dict[str, float] = {}
    tested = None
    first_error = None
    ok_text = None
    for n, s in enumerate((ln.strip() for ln in lines), 1):
        m = _H2_LINE.match(s)
        if m:
            value, unit, what, sectors = m.groups()
            counts[what.lower()] = parse_count(sectors, f"line {n}, {what} sectors")
            _size_flag(flags, n, "H2testw", what, value, unit, counts[what.lower()], _H2_UNITS)
            if what.lower() == "ok":
                ok_text = s
            continue
        m = re.match(rf"^Warning: Only {_NUM} of {_NUM} MByte tested", s, re.I)
        if m:
            tested = _bytes(m.group(1), 1 << 20, f"line {n}, MByte tested")
            continue
        m = re.match(rf"^(Writing|Reading) speed:\s*{_NUM}\s*(\w+)/s", s, re.I)
        if m:
            u = _H2_UNITS.get(m.group(3).lower())
            if u:
                speeds["write" if m.group(1).lower() == "writing" else "read"] = \
                    _num(m.group(2), f"line {n}, {m.group(1)} speed") * u
            continue
        m = re.match(r"^First error at offset:\s*0x([0-9a-fA-F]+)", s)
        if m:
            first_error = parse_count(int(m.group(1), 16), f"line {n}, first error offset")
    clean = re.search(r"Test finished without errors|Test ohne Fehler beendet", text)
    defective = re.search(r"media is likely to be defective|Medium ist wahrscheinlich defekt", text)
    said = clean or defective           # H2testw's own verdict sentence
    if said is None:
        raise bad_input(path, "H2testw log", "neither 'Test finished without errors.' nor 'The media is likely to "
                                             "be defective.' (truncated, or a language cardbench does not read)")
    if defective and ("ok" not in counts or "data lost" not in counts):
        raise bad_input(path, "H2testw log", "'defective' without its 'GByte OK (N sectors)' and 'DATA LOST' lines "
                                             "(truncated?)")
    kind = None
    if clean:
        verdict, kind = judge_fill(written=tested or 0)
        usable = tested
        basis = "the MByte H2testw tested (its free space), all read back right"
        announced = tested
    else:
        ok, lost = counts["ok"], counts["data lost"]
        usable = ok * SECTOR
        announced = (ok + lost) * SECTOR
        basis = "bytes that read back right (H2testw's 'OK' sectors)"
        parts = sum(counts.get(k, 0) for k in ("overwritten", "slightly changed", "corrupted", "aliased memory"))
        if all(k in counts for k in ("overwritten", "slightly changed", "corrupted")) and parts != lost:
            check_figure(flags, 0, "H2testw", "DATA LOST sectors", Printed(str(lost), lost, 0), parts, parts, parts,
                         "overwritten + slightly changed + corrupted + aliased")
        # the one rule on H2testw's counts: "corrupted" sectors are lost, from the first error on;
        # "overwritten" and "aliased memory" came from another position; "slightly changed" is damage
        corrupted = counts.get("corrupted", max(0, lost - parts)) * SECTOR
        lost_at = [[first_error, first_error + corrupted]] if first_error is not None else []
        verdict, kind = judge_fill(written=announced, lost=lost_at,
                                   unplaced=corrupted if first_error is None else 0,
                                   wrapped=counts.get("aliased memory", 0) + counts.get("overwritten", 0) > 0,
                                   damaged=counts.get("slightly changed", 0) > 0)
    found = re.findall(r"H2testw v(?:ersion )?(\d+\.\d+)", text)
    vm = re.match(r"(.*)", found[-1]) if found else None
    report = ImportReport(path=path, format="h2testw", flags=flags)
    report.convention = (f"H2testw {vm.group(1) if vm else '(version not printed)'}: MByte/GByte are binary "
                         "(2^20, 2^30 B), speeds MByte/s = MiB/s; sizes from sector counts (512 B)")
    doc = imported_verify(path=path, fmt="h2testw", digest=digest, key="h2testw", mode="full", tool="H2testw",
                          tool_version=vm.group(1) if vm else None, verdict=verdict, announced=announced,
                          usable=usable, kind=kind, card=card, reader=reader, raw=text, basis=basis,
                          algorithm="H2testw fills the free space with 1 GiB .h2w files and checks every sector",
                          sectors=counts or None, first_error_offset=first_error,
                          timings={"write_bytes_per_s": speeds.get("write"), "read_bytes_per_s": speeds.get("read")},
                          flags=[str(f) for f in flags], ok_line=ok_text,
                          tool_verdict=_line_of(text, said))
    report.verify_docs.append(doc)
    return report
