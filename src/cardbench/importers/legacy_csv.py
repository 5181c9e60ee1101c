"""Legacy CSV surveys: one card per row, columns recognised by name (case, spaces, brackets and
punctuation do not matter; ``,`` ``;`` or tab separated).

Accepted headers (after lower-casing and turning every run of non-letters/digits into ``_``):

=================  ==========================================================================
role               headers
=================  ==========================================================================
brand              brand, make, manufacturer, vendor, card_brand
name               name, model, product, card, card_name
capacity           capacity, card_capacity, card_capacity_bytes, capacity_bytes, card_size
label              label, rated, rated_speed, rating, speed_rating, speed_class, class, card_label
reader             reader, card_reader
date               date, started_at, tested, when (ISO 8601: becomes the result's start time)
file size          file, file_size, file_bytes, write_file, write_file_bytes, size_bytes (``42MB`` or bytes)
write times        write1, write_1, w1, t1, time1, run1, write_time_1, "write 1 (s)", ... (seconds)
                   or one column write_times / write_times_s / write_runs_s ("41.2;41.5 41.6")
average            avg, average, mean, avg_write, average_write_time, write_avg_s, "avg write (s)"
write rate         write, write_rate, write_speed, "write (MB/s)", write_mb_s, write_MB_per_s, write_MiB_per_s
write X            write_x, wx, "write (X)", write_rating
read times         read1, read_1, r1, read_time_1 (seconds for the same file)
read rate          read, read_rate, read_speed, "read (MB/s)", read_mb_s, read_MB_per_s, read_MiB_per_s
read X             read_x, rx, "read (X)"
=================  ==========================================================================

Rates are MB/s (10^6 B/s) unless the header says MiB, kB, KiB or GB. Columns cardbench's own CSV
export writes for reference (result_id, card_identity, warnings, complete, ...) are ignored; any
other unknown column is ignored and named in the report. A row with neither write nor read data
is skipped and reported.

The file size is, per row, the file-size column, else ``--file-size``, else a ``# file size:``
comment line, else 42 MB. When the file is cardbench's own CSV export (it has ``result_id`` and
``card_identity``), its write rate is checked as the median of per-run rates, which is how
cardbench computes it; otherwise as file size / average time, as a hand-made table does.
"""

from __future__ import annotations

import csv
import io
import re

from cardbench.errors import UsageError
from cardbench.importers.base import (
    ImportReport,
    Skipped,
    SurveyRow,
    bad_input,
    none_if_blank,
    resolve_file_size,
)
from cardbench.importers.checks import RULE, Printed
from cardbench.importers.classic import file_size_directive
from cardbench.store.query import epoch_of_iso
from cardbench.units import UnitError, parse_count, parse_size

_RATE_UNIT = r"(?:_(?:mb|mib|kb|kib|gb)(?:_per)?_s|_mbs|_mb)?"
ROLES: list[tuple[str, str]] = [
    ("brand", r"(?:card_)?(?:brand|make|manufacturer|vendor)"),
    ("name", r"(?:card_)?(?:name|model|product)|card"),
    ("capacity", r"(?:card_)?capacity(?:_bytes)?|card_size"),
    ("label", r"(?:card_)?(?:label|rated|rated_speed|rating|speed_rating|speed_class|class)"),
    ("reader", r"(?:card_)?reader"),
    ("date", r"date|started_at|tested|when"),
    ("file_size", r"(?:write_)?file(?:_size)?(?:_bytes)?|size_bytes"),
    ("write_times", r"write_(?:times?|runs)(?:_s)?|times(?:_s)?"),
    ("write_time", r"(?:write|w|write_time|time|t|run|write_run)_?(\d+)(?:_s)?"),
    ("write_avg", r"(?:write_)?(?:avg|average|mean)(?:_write)?(?:_time)?(?:_s)?"),
    ("write_x", r"(?:write|w)_?x|write_rating"),
    ("write_rate", r"(?:write|w)(?:_rate|_speed)?" + _RATE_UNIT),
    ("read_time", r"(?:read|r|read_time)_?(\d+)(?:_s)?"),
    ("read_x", r"(?:read|r)_?x|read_rating"),
    ("read_rate", r"(?:read|r)(?:_rate|_speed)?" + _RATE_UNIT),
    ("ignore", r"result_id|id|source|card_identity|write_test|read_test|warnings|limited_by_reader|complete"
               r"|notes?|comments?|host"),
]
_ROLE_RES = [(role, re.compile(f"^(?:{rx})$")) for role, rx in ROLES]


def normalize(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")


def classify(header: str) -> tuple[str | None, int | None, str]:
    """(role, run number for per-run columns, rate unit) of a column header; role None if unknown."""
    norm = normalize(header)
    unit = "MB/s"
    parts = norm.split("_")
    for token, u in (("mib", "MiB/s"), ("kib", "KiB/s"), ("kb", "kB/s"), ("gb", "GB/s")):
        if token in parts:
            unit = u
    for role, rx in _ROLE_RES:
        m = rx.match(norm)
        if m:
            number = parse_count(m.group(1), f"column {header!r}") if m.groups() and m.group(1) else None
            return role, number, unit
    return None, None, unit


def sniff_dialect(text: str) -> csv.Dialect | type[csv.Dialect]:
    sample = "\n".join(line for line in text.splitlines()[:20] if not line.lstrip().startswith("#"))
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t")
    except csv.Error:
        return csv.excel


def _times(text: str) -> list[Printed] | None:
    out = []
    for tok in re.split(r"[;\s|/]+", text.strip()):
        if not tok:
            continue
        p = Printed.parse(tok.removesuffix("s"))
        if p is None or p.value <= 0:
            return None
        out.append(p)
    return out


def import_csv(text: str, *, path: str, digest: str, file_size: int | str | None = None,
               reader: str | None = None) -> ImportReport:
    default_bytes, default_source = resolve_file_size(file_size, file_size_directive(text))
    report = ImportReport(path=path, format="csv", file_size_bytes=default_bytes, file_size_source=default_source)
    lines = text.splitlines()
    numbered = [(i, line) for i, line in enumerate(lines, start=1) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        return report
    reader_csv = csv.reader(io.StringIO("\n".join(line for _, line in numbered)), sniff_dialect(text))
    # (line number, text, fields) of each record: a quoted field may hold line breaks, so a record
    # can span lines, and the reader's own count of lines read says where the next one starts
    rows: list[tuple[int, str, list[str]]] = []
    start = 0
    try:
        for values in reader_csv:
            rows.append((numbered[start][0], "\n".join(line for _, line in numbered[start:reader_csv.line_num]),
                         values))
            start = reader_csv.line_num
    except csv.Error as e:
        # a field beyond the csv module's limit (128 KiB): most often a stray quote that made the
        # rest of the file one field
        raise bad_input(path, f"line {numbered[start][0]}", f"not CSV cardbench can read ({e}; an unclosed "
                                                            "quote?)") from None
    header = rows[0][2]
    roles = [classify(h) for h in header]
    unknown = [h for h, (role, _, _) in zip(header, roles, strict=True) if role is None]
    if unknown:
        report.notes.append("ignored columns: " + ", ".join(unknown))
    present = {role for role, _, _ in roles}
    if not present & {"write_time", "write_times", "write_rate", "read_rate", "read_time"}:
        named = ", ".join(" ".join(h.split()) for h in header)        # a quoted name may hold a line break
        raise UsageError(f"{path}: no write or read columns found in the CSV header ({named}); "
                         "see `cardbench import --help` for the accepted headers")
    own_export = {"result_id", "card_identity"} <= {normalize(h) for h in header}
    units = {role: unit for role, _, unit in roles if role in ("write_rate", "read_rate")}
    rate_unit = units.get("write_rate") or units.get("read_rate") or "MB/s"
    if len(set(units.values())) > 1:
        report.notes.append(f"write and read rates are in different units; both read as {rate_unit}")
    for line_no, raw, values in rows[1:]:
        fields: dict[str, str] = {}
        write_times: list[tuple[int, str]] = []
        read_times: list[tuple[int, str]] = []
        # a row may hold fewer fields than the header (empty trailing columns left off): those are
        # blank; fields beyond the header's have no column to go to
        for (role, number, _), value in zip(roles, values, strict=False):
            if role is None or role == "ignore":
                continue
            if role == "write_time":
                write_times.append((number or 0, value))
            elif role == "read_time":
                read_times.append((number or 0, value))
            else:
                fields[role] = value
        row = _row(line_no, raw, fields, sorted(write_times), sorted(read_times), default_bytes, default_source,
                   rate_unit, "median_rate" if own_export else "mean_time")
        if isinstance(row, Skipped):
            report.skipped.append(row)
            continue
        flags, notes = row.audit()
        report.flags += flags
        report.audit_notes += notes
        report.audit_rule = RULE
        report.results.append(row.to_result(path=path, fmt="csv", digest=digest, reader=reader, flags=flags))
    return report


def _row(line_no, raw, fields, write_times, read_times, default_bytes, default_source, rate_unit,
         rate_from) -> SurveyRow | Skipped:
    def fig(key: str) -> Printed | None:
        v = none_if_blank(fields.get(key))
        if v is None:
            return None
        p = Printed.parse(re.sub(r"(?i)\s*(mb/s|mib/s|x|s)$", "", v))
        return p

    for key in ("write_avg", "write_rate", "write_x", "read_rate", "read_x"):
        v = none_if_blank(fields.get(key))
        if v is not None and fig(key) is None:
            return Skipped(line_no, raw, f"{key.replace('_', ' ')} {v!r} is not a number")
    times: list[Printed] = []
    if none_if_blank(fields.get("write_times")):
        parsed = _times(fields["write_times"])
        if parsed is None:
            return Skipped(line_no, raw, f"write times {fields['write_times']!r} are not positive numbers")
        times += parsed
    for _, v in write_times:
        if none_if_blank(v) is None:
            continue
        p = Printed.parse(v.strip().removesuffix("s"))
        if p is None or p.value <= 0:
            return Skipped(line_no, raw, f"write time {v!r} is not a positive number of seconds")
        times.append(p)
    rtimes: list[Printed] = []
    for _, v in read_times:
        if none_if_blank(v) is None:
            continue
        p = Printed.parse(v.strip().removesuffix("s"))
        if p is None or p.value <= 0:
            return Skipped(line_no, raw, f"read time {v!r} is not a positive number of seconds")
        rtimes.append(p)
    file_bytes, source = default_bytes, default_source
    fs = none_if_blank(fields.get("file_size"))
    if fs:
        try:
            file_bytes, source = parse_size(fs), "column"
        except UnitError:
            return Skipped(line_no, raw, f"file size {fs!r} is not a size")
    row = SurveyRow(line=line_no, brand=none_if_blank(fields.get("brand")),
                    capacity_text=none_if_blank(fields.get("capacity")), label=none_if_blank(fields.get("label")),
                    times=times, file_bytes=file_bytes, file_size_source=source, avg=fig("write_avg"),
                    write_rate=fig("write_rate"), write_x=fig("write_x"), read_rate=fig("read_rate"),
                    read_x=fig("read_x"), read_times=rtimes, name=none_if_blank(fields.get("name")),
                    reader=none_if_blank(fields.get("reader")), rate_unit=rate_unit, rate_from=rate_from, raw=raw)
    date = none_if_blank(fields.get("date"))
    if date and epoch_of_iso(date) is not None:
        row.date = date
    if not (row.times or row.write_rate or row.read_rate or row.read_times):
        return Skipped(line_no, raw, "no write or read figures")
    return row
