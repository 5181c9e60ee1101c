"""The classic hand-made survey table: whitespace-separated columns, one card per line.

    Lexar   48M 4X 41.2 41.5 41.6 average 41.43 1.013 6.8 3.6 24
    SanDisk 64M -  47.6 47.8 47.6 average 47.67 0.881 5.9 1.9 12.7

Columns: brand (one or more words), capacity (``48M``, ``64MB``, ``1G``, ``2GB``: decimal, as
printed on cards), rated speed (one word, ``-`` for none: ``4X``, ``133x``, ``C10``), one or more
write times in seconds, the word ``average`` (or ``avg``/``mean``), then the average write time
(s), write rate (MB/s), write X, read rate (MB/s) and read X. The read pair may be missing or
``-``. Figures may carry their unit (``1.013MB/s``, ``6.8X``, ``41.2s``) and a decimal comma.

The write times are seconds to write one file whose size the table does not print: give it with
``--file-size`` (``42MB`` = 42,000,000 B, ``42MiB`` = 44,040,192 B), or in the file as a comment
line ``# file size: 42MB``; the default is 42 MB (42,000,000 B). Lines starting with ``#`` are
comments; a line without the ``average`` word (a header, a note) is skipped and reported.

The layout the 2006 survey printed is read too: its figures carry unit and label words, which
say what each figure is and are dropped before reading (3 or 4 write times; ``-`` for no label)::

    Brand Capacity Speed Write times (seconds) Avg. write time Write rate Write X speed Read rate Read X speed
    Acme 32M 2X 20.100 20.300 20.200 average 20.20 2.079 MB/s write 13.86X write 5.1 MB/s read 34X

A header line (a line without a figure) is skipped and reported as a header.

Every row is recomputed from its raw times and the file size, and each printed figure that
disagrees beyond rounding is flagged (cardbench.importers.checks).
"""

from __future__ import annotations

import re

from cardbench.importers.base import (
    ImportReport,
    Skipped,
    SurveyRow,
    none_if_blank,
    resolve_file_size,
)
from cardbench.importers.checks import RULE, Printed

AVERAGE_WORDS = {"average", "avg", "avg.", "mean"}
_CAPACITY_RE = re.compile(r"^\d+(?:[.,]\d+)?\s*(?:[kKmMgGtT](?:i?[bB])?|[bB])$")
_DIRECTIVE_RE = re.compile(r"^#\s*file[\s_-]*size\s*[:=]\s*(.+?)\s*$", re.IGNORECASE)
_UNIT_SUFFIX_RE = re.compile(r"(?i)(mb/s|mbps|mb|x|s|sec)$")
#: words of the 2006 layout between the figures: "2.079 MB/s write 13.86X write 5.1 MB/s read 34X"
_LABEL_WORDS = {"mb/s", "mbps", "x", "s", "sec", "write", "read", "written"}


def _figure(token: str | None) -> Printed | None:
    if token is None:
        return None
    t = token.strip()
    if t in ("-", "?", "n/a", ""):
        return None
    bare = _UNIT_SUFFIX_RE.sub("", t)
    return Printed.parse(bare)


def has_average_column(text: str) -> bool:
    return any(tok.lower() in AVERAGE_WORDS for line in text.splitlines()
               if not line.lstrip().startswith("#") for tok in line.split())


def file_size_directive(text: str) -> str | None:
    for line in text.splitlines():
        m = _DIRECTIVE_RE.match(line.strip())
        if m:
            return m.group(1)
    return None


def parse_line(line_no: int, line: str, file_bytes: int, size_source: str) -> SurveyRow | Skipped:
    tokens = line.split()
    if not re.search(r"\d", line):
        return Skipped(line_no, line.strip(), "a header line")
    idx = next((i for i, t in enumerate(tokens) if t.lower() in AVERAGE_WORDS), None)
    if idx is None:
        return Skipped(line_no, line.strip(), "no 'average' column: a header or a note?")
    left, right = tokens[:idx], [t for t in tokens[idx + 1:] if t.lower() not in _LABEL_WORDS]
    cap_idx = next((i for i, t in enumerate(left) if i >= 1 and _CAPACITY_RE.match(t)), None)
    if cap_idx is None:
        return Skipped(line_no, line.strip(), "no capacity (like 48M or 2GB) after the brand")
    if len(left) < cap_idx + 3:
        return Skipped(line_no, line.strip(), "expected a rated speed (or '-') and at least one write time "
                                              "after the capacity")
    brand = " ".join(left[:cap_idx])
    capacity = left[cap_idx]
    rated = none_if_blank(left[cap_idx + 1])
    times = []
    for tok in left[cap_idx + 2:]:
        p = _figure(tok)
        if p is None or p.value <= 0:
            return Skipped(line_no, line.strip(), f"write time {tok!r} is not a positive number of seconds")
        times.append(p)
    if len(right) < 3 or len(right) > 5:
        return Skipped(line_no, line.strip(), f"expected 3 to 5 figures after 'average' (average s, write MB/s, "
                                              f"write X[, read MB/s, read X]), found {len(right)}")
    printed = [_figure(t) for t in right]
    for tok, fig in zip(right, printed, strict=True):
        if fig is None and tok.strip() not in ("-", "?", "n/a"):
            return Skipped(line_no, line.strip(), f"{tok!r} is not a number")
    avg, wrate, wx, rrate, rx = printed + [None] * (5 - len(right))     # no read figures: None
    return SurveyRow(line=line_no, brand=brand, capacity_text=capacity, label=rated, times=times,
                     file_bytes=file_bytes, file_size_source=size_source, avg=avg, write_rate=wrate, write_x=wx,
                     read_rate=rrate, read_x=rx, raw=line.rstrip("\n"))


def import_table(text: str, *, path: str, digest: str, file_size: int | str | None = None,
                 reader: str | None = None) -> ImportReport:
    file_bytes, source = resolve_file_size(file_size, file_size_directive(text))
    report = ImportReport(path=path, format="table", file_size_bytes=file_bytes, file_size_source=source)
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        row = parse_line(line_no, line, file_bytes, source)
        if isinstance(row, Skipped):
            report.skipped.append(row)
            continue
        flags, notes = row.audit()
        report.flags += flags
        report.audit_notes += notes
        report.audit_rule = RULE
        report.results.append(row.to_result(path=path, fmt="table", digest=digest, reader=reader, flags=flags))
    return report
