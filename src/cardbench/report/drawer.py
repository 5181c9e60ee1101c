"""The drawer table: one row per result, like the classic hand-made card survey.

    card brand | capacity | label | write times (s) | average write (s) | write rate | write X |
    read rate | read X | notes

Figures: the write figure is test ``seq_write`` (else ``raw_write``), the read figure ``cold_read``
(else ``raw_read``). Rates are the *median of the per-run rates* (bytes / seconds of each run,
cardbench.stats), not size / average time as a hand-made table computes them; the two differ by
well under the rounding of a printed figure unless one run is an outlier (then the median is the
honest one). X is the card makers' X, 1X = 150,000 B/s. Rates are in MB/s (10^6 B/s) unless
``rate_unit="MiB/s"`` (2^20 B/s); every header names its unit.

A run with neither (an imported fio random read, say) lists the tests it has in the notes: name,
median MB/s and median IOPS. A card without a name is named after its source: an imported fio
run by its job name(s) and file ("fio randread on /mnt/card/f.bin").

Notes (markers): ``N warnings`` (the result's and its write/read tests' warnings), ``limited by
reader`` (the write or read figure sits at the ceiling of the path it crossed: the card may be
faster), ``INCOMPLETE`` (the run did not finish; its figures are partial).

Formats: ``table`` (rich, for a terminal), ``md`` (a GitHub Markdown table for a forum post),
``csv`` (a header row with units in the column names: ``write_MB_per_s``), ``json``
(``{"schema": "cardbench.results/1", "results": [result.to_dict(), ...]}``, which
``cardbench import`` reads back identically).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field

from cardbench.errors import UsageError
from cardbench.report.terminal import Col, fit_table, to_text
from cardbench.result import Result, TestResult
from cardbench.stats import summarize
from cardbench.units import RATE_UNITS, X_BYTES_PER_S, fmt_size, rate_in, x_rating

RESULTS_SCHEMA = "cardbench.results/1"
FORMATS = ("table", "md", "csv", "json")
WRITE_TESTS = ("seq_write", "raw_write")
READ_TESTS = ("cold_read", "raw_read")
LIMITED_MARK = "limited by reader"
INCOMPLETE_MARK = "INCOMPLETE"


def check_rate_unit(rate_unit: str) -> str:
    if rate_unit not in RATE_UNITS:
        raise UsageError(f"unknown rate unit {rate_unit!r} (use one of {', '.join(RATE_UNITS)})")
    return rate_unit


def unit_slug(rate_unit: str) -> str:
    """"MB/s" -> "MB_per_s" (for CSV column names)."""
    return rate_unit.replace("/s", "_per_s")


def pick_test(result: Result, names: tuple[str, ...]) -> TestResult | None:
    """The first named test with a timed run; else the first named test present (to show it empty)."""
    present = [result.test(n) for n in names if result.test(n) is not None]
    for t in present:
        if t.rates():
            return t
    return present[0] if present else None


def sig(value: float | None, digits: int = 4) -> str:
    """A figure with ``digits`` significant digits but never an exponent and at most 3 decimals."""
    if value is None or not math.isfinite(value):
        return "n/a" if value is None else str(value)
    if value == 0:
        return "0"
    decimals = max(0, min(3, digits - 1 - int(math.floor(math.log10(abs(value))))))
    return f"{value:.{decimals}f}"


@dataclass
class DrawerRow:
    """The figures of one result as the drawer table shows them (all in bytes, seconds, bytes/s)."""

    result: Result
    write_test: TestResult | None
    read_test: TestResult | None
    write_times_s: list[float] = field(default_factory=list)
    write_file_bytes: int | None = None     # bytes per write run, when all runs wrote the same amount
    write_avg_s: float | None = None
    write_bytes_per_s: float | None = None  # median of per-run rates
    read_bytes_per_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    limited_by: list[str] = field(default_factory=list)
    #: (test name, median bytes/s, median IOPS) of the tests shown when there is no write or read figure
    other_tests: list[tuple[str, float | None, float | None]] = field(default_factory=list)

    @property
    def card_text(self) -> str:
        return card_title(self.result)

    @property
    def capacity_text(self) -> str:
        return fmt_size(self.result.card.capacity_bytes) if self.result.card.capacity_bytes else "?"

    @property
    def label_text(self) -> str:
        return self.result.card.label or "-"

    @property
    def complete(self) -> bool:
        return bool(self.result.complete) and all(t.complete for t in (self.write_test, self.read_test) if t)

    def notes(self, rate_unit: str = "MB/s") -> list[str]:
        out = [other_test_text(*t, rate_unit=rate_unit) for t in self.other_tests]
        if self.warnings:
            out.append(f"{len(self.warnings)} warning" + ("s" if len(self.warnings) != 1 else ""))
        if self.limited_by:
            out.append(LIMITED_MARK)
        if not self.complete:
            out.append(INCOMPLETE_MARK)
        return out


def source_name(result: Result) -> str | None:
    """A name for a run whose card has none, from where it came: an imported fio run's job
    name(s) and file (or directory), a measured run its path ("card at /media/card"); None when
    the source says nothing."""
    target = result.target if isinstance(result.target, dict) else {}
    jobs = list(dict.fromkeys(str(t.method["jobname"]) for t in result.tests if t.method.get("jobname")))
    where = target.get("filename") or target.get("directory")
    if result.source == "import-fio" or (result.tool or {}).get("importer") == "fio" or jobs:
        name = "fio " + ", ".join(jobs) if jobs else "fio"
        return f"{name} on {where}" if where else name
    if target.get("kind") in ("device", "directory") and (target.get("device") or target.get("path")):
        return f"card at {target.get('path') or target.get('device')}"
    return None


def card_title(result: Result) -> str:
    """The card as a person names it: brand and name, else model or serial, else its source."""
    c = result.card
    text = " ".join(p for p in (c.brand, c.name) if p)
    return text or c.model or c.serial or source_name(result) or "(unnamed card)"


#: IOPS say something about requests up to this size (4 KiB random I/O); of 1 MiB or larger
#: sequential chunks they are only the rate again
IOPS_BLOCK_MAX = 64 * 1024


def median_iops(t: TestResult) -> float | None:
    """The median IOPS of a test of small requests (random I/O, or blocks up to 64 KiB), else None."""
    block = t.method.get("block_size")
    small = t.name.startswith("rand_") or (isinstance(block, (int, float)) and block <= IOPS_BLOCK_MAX)
    iops = t.iops_values() if small else []
    return summarize(iops).median if iops else None


def other_test_text(name: str, rate: float | None, iops: float | None, rate_unit: str = "MB/s") -> str:
    """"rand_read_4k_q1t1: 12.3 MB/s, 3,010 IOPS"."""
    figures = [f"{sig(rate_in(rate, rate_unit))} {rate_unit}" if rate is not None else None,
               f"{iops:,.0f} IOPS" if iops is not None else None]
    return f"{name}: " + (", ".join(f for f in figures if f) or "no figure")


def drawer_row(result: Result) -> DrawerRow:
    w = pick_test(result, WRITE_TESTS)
    r = pick_test(result, READ_TESTS)
    row = DrawerRow(result=result, write_test=w, read_test=r)
    if w is not None:
        timed = [run for run in w.runs if run.seconds > 0]
        row.write_times_s = [run.seconds for run in timed]
        sizes = {run.bytes for run in timed}
        row.write_file_bytes = sizes.pop() if len(sizes) == 1 else None
        row.write_avg_s = sum(row.write_times_s) / len(row.write_times_s) if row.write_times_s else None
        row.write_bytes_per_s = w.median_bytes_per_s
    if r is not None:
        row.read_bytes_per_s = r.median_bytes_per_s
    row.warnings = list(result.warnings) + [x for t in (w, r) if t for x in t.warnings]
    row.limited_by = [t.limited_by for t in (w, r) if t and t.limited_by]
    if w is None and r is None:
        for t in result.tests:
            row.other_tests.append((t.name, t.median_bytes_per_s, median_iops(t)))
            row.warnings += t.warnings
    return row


def _rate(v: float | None, unit: str) -> str:
    return sig(rate_in(v, unit)) if v is not None else "n/a"


def _x(v: float | None) -> str:
    return f"{x_rating(v):.1f}" if v is not None else "n/a"


def _times(row: DrawerRow) -> str:
    return " ".join(f"{t:.2f}" for t in row.write_times_s) if row.write_times_s else "n/a"


def headers(rate_unit: str) -> list[str]:
    return ["Card", "Capacity", "Label", "Write file", "Write runs (s)", "Avg write (s)", f"Write ({rate_unit})",
            "Write (X)", f"Read ({rate_unit})", "Read (X)", "Notes"]


def cells(row: DrawerRow, rate_unit: str) -> list[str]:
    return [row.card_text, row.capacity_text, row.label_text,
            fmt_size(row.write_file_bytes) if row.write_file_bytes else "n/a", _times(row),
            f"{row.write_avg_s:.2f}" if row.write_avg_s is not None else "n/a",
            _rate(row.write_bytes_per_s, rate_unit), _x(row.write_bytes_per_s),
            _rate(row.read_bytes_per_s, rate_unit), _x(row.read_bytes_per_s), "; ".join(row.notes(rate_unit))]


def legend(rate_unit: str) -> str:
    per = {"MB/s": "MB/s = 10^6 B/s", "MiB/s": "MiB/s = 2^20 B/s", "kB/s": "kB/s = 10^3 B/s",
           "KiB/s": "KiB/s = 2^10 B/s", "GB/s": "GB/s = 10^9 B/s"}[rate_unit]
    return (f"Rates: median of per-run rates, {per}; 1X = {X_BYTES_PER_S:,} B/s. Write = seq_write (or "
            f"raw_write), read = cold_read (or raw_read). Notes: warnings counted; '{LIMITED_MARK}' = the figure "
            f"sits at the ceiling of the path it crossed; '{INCOMPLETE_MARK}' = the run did not finish.")


def render(results: list[Result], fmt: str = "table", rate_unit: str = "MB/s", *, width: int = 150) -> str:
    """The drawer table of ``results`` as text in ``fmt`` (table | md | csv | json)."""
    check_rate_unit(rate_unit)
    if fmt == "json":
        return results_json(results)
    rows = [drawer_row(r) for r in results]
    if fmt == "table":
        return _table(rows, rate_unit, width)
    if fmt == "md":
        return _markdown(rows, rate_unit)
    if fmt == "csv":
        return _csv(rows, rate_unit)
    raise UsageError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")


def results_json(results: list[Result]) -> str:
    return json.dumps({"schema": RESULTS_SCHEMA, "results": [r.to_dict() for r in results]}, indent=2,
                      ensure_ascii=False) + "\n"


#: the drawer table's columns at a narrow terminal: which go first (1), and which never go
_DROP = {"Write file": 1, "Capacity": 2, "Avg write (s)": 3, "Write runs (s)": 4, "Label": 5}


def table_columns(rate_unit: str):
    return [Col(h, right=3 <= i <= 9, drop=_DROP.get(h), squeeze=h == "Notes") for i, h in enumerate(headers(rate_unit))]


def fit_drawer(rows: list[DrawerRow], rate_unit: str, width: int, title: str | None = None):
    """The drawer table of ``rows`` as a rich Table that fits ``width`` (see terminal.fit_table),
    and a line naming the columns left out (None when none were)."""
    table = fit_table(table_columns(rate_unit), [cells(r, rate_unit) for r in rows], width, title=title,
                      styles=[None if r.complete else "dim" for r in rows])
    left_out = (f"Left out at {width} columns: {', '.join(table.dropped)} (a wider terminal, or a pipe, "
                "shows them)." if table.dropped else None)
    return table, left_out


def _table(rows: list[DrawerRow], rate_unit: str, width: int) -> str:
    title = f"cardbench results ({len(rows)} run{'s' if len(rows) != 1 else ''})"
    table, left_out = fit_drawer(rows, rate_unit, width, title)
    return to_text([table, legend(rate_unit)] + ([left_out] if left_out else []), width)


def md_escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def md_table(head: list[str], body: list[list[str]], right: set[int] = frozenset()) -> str:
    lines = ["| " + " | ".join(md_escape(h) for h in head) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def _markdown(rows: list[DrawerRow], rate_unit: str) -> str:
    body = [cells(r, rate_unit) for r in rows]
    return md_table(headers(rate_unit), body, right=set(range(3, 10))) + "\n\n" + legend(rate_unit) + "\n"


def csv_header(rate_unit: str) -> list[str]:
    u = unit_slug(rate_unit)
    return ["result_id", "started_at", "source", "card_brand", "card_name", "card_capacity_bytes", "card_label",
            "card_identity", "reader", "write_test", "write_file_bytes", "write_times_s", "write_avg_s",
            f"write_{u}", "write_X", "read_test", f"read_{u}", "read_X", "warnings", "limited_by_reader", "complete", "other_tests"]


def _num(v: float | None, fmt: str = ".6g") -> str:
    return "" if v is None else format(v, fmt)


def _csv(rows: list[DrawerRow], rate_unit: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header(rate_unit))
    for row in rows:
        r = row.result
        w.writerow([r.id, r.started_at, r.source, r.card.brand or "", r.card.name or "", r.card.capacity_bytes or "",
                    r.card.label or "", r.card.identity(), r.reader.name or r.reader.identity(),
                    row.write_test.name if row.write_test else "", row.write_file_bytes or "",
                    ";".join(repr(t) for t in row.write_times_s), _num(row.write_avg_s),
                    _num(rate_in(row.write_bytes_per_s, rate_unit) if row.write_bytes_per_s is not None else None),
                    _num(x_rating(row.write_bytes_per_s) if row.write_bytes_per_s is not None else None),
                    row.read_test.name if row.read_test else "",
                    _num(rate_in(row.read_bytes_per_s, rate_unit) if row.read_bytes_per_s is not None else None),
                    _num(x_rating(row.read_bytes_per_s) if row.read_bytes_per_s is not None else None),
                    len(row.warnings), "yes" if row.limited_by else "no", "yes" if row.complete else "no",
                    "; ".join(other_test_text(*t, rate_unit=rate_unit) for t in row.other_tests)])
    return buf.getvalue()
