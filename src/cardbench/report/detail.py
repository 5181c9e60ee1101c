"""One run in detail (shown after ``cardbench run`` and by ``cardbench results --id``).

Per test: every timed run (bytes, seconds, rate, X; warm-up runs shown apart and not counted),
then median, mean, min, max, sample standard deviation and the 95% confidence interval of the
mean rate (Student's t; none with one run), the X of the median, median IOPS when counted,
warnings and whether the figure is limited by the path it crossed. Formats: table (rich), md,
csv (one row per run), json (``result.to_dict()``).
"""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from rich.table import Table

from cardbench.errors import UsageError
from cardbench.report.drawer import FORMATS, check_rate_unit, md_table, sig, unit_slug
from cardbench.result import Result, TestResult
from cardbench.stats import summarize
from cardbench.units import fmt_size, rate_in, x_rating

METHOD_KEYS = ("engine", "block_size", "queue_depth", "iodepth", "numjobs", "cache", "sync", "file_bytes",
               "filesystem", "direct", "rw")


def _r(v: float | None, unit: str) -> str:
    return "n/a" if v is None else f"{sig(rate_in(v, unit))} {unit}"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{x_rating(v):.1f}X"


def header_lines(result: Result) -> list[str]:
    c, rd = result.card, result.reader
    card = " ".join(p for p in (c.brand, c.name, fmt_size(c.capacity_bytes) if c.capacity_bytes else None,
                                f"label {c.label}" if c.label else None) if p) or "(unnamed card)"
    reader = rd.name or rd.identity()
    if rd.link_speed_mbit:
        reader += f", link {rd.link_speed_mbit:g} Mbit/s"
    lines = [f"Run {result.id} ({result.source})", f"Card: {card}  [{c.identity()}]", f"Reader: {reader}"]
    if result.target:
        lines.append("Target: " + ", ".join(f"{k}={v}" for k, v in result.target.items() if not isinstance(v, dict)))
    lines.append(f"Started: {result.started_at}   Finished: {result.finished_at or 'n/a'}")
    if not result.complete:
        lines.append(f"INCOMPLETE: {result.error or 'the run did not finish'}")
    for w in result.warnings:
        lines.append(f"Warning: {w}")
    return lines


def summary_pairs(t: TestResult, unit: str) -> list[tuple[str, str]]:
    rates = t.rates()
    pairs: list[tuple[str, str]] = []
    if rates:
        s = summarize(rates)
        pairs += [("runs", str(s.n)), ("median", _r(s.median, unit)), ("mean", _r(s.mean, unit)),
                  ("min", _r(s.min, unit)), ("max", _r(s.max, unit)),
                  ("stdev", _r(s.stdev, unit) if s.stdev is not None else "n/a (1 run)"),
                  ("95% CI of mean", f"{sig(rate_in(s.ci95[0], unit))} .. {_r(s.ci95[1], unit)}" if s.ci95
                   else "n/a (1 run)"),
                  ("X (median)", _x(s.median))]
        if s.cv is not None:
            pairs.append(("spread (CV)", f"{s.cv * 100:.1f}%"))
        if s.outliers:
            pairs.append(("outlier runs", ", ".join(str(i + 1) for i in s.outliers)))
    else:
        pairs.append(("runs", "0 (no timed run)"))
    iops = t.iops_values()
    if iops:
        pairs.append(("median IOPS", f"{summarize(iops).median:,.0f}"))
    method = ", ".join(f"{k}={t.method[k]}" for k in METHOD_KEYS if k in t.method)
    if method:
        pairs.append(("method", method))
    if t.limited_by:
        pairs.append(("limited by", t.limited_by))
    if not t.complete:
        pairs.append(("complete", "NO"))
    for w in t.warnings:
        pairs.append(("warning", w))
    return pairs


def claim_notes(result: Result) -> list[str]:
    """The notes the claims carry, each once (every label verdict carries the same "indicative,
    not compliance" note: printed after the claims, not on every line)."""
    notes = dict.fromkeys(str(c["note"]) for c in result.claims if c.get("note"))
    return [f"Label verdicts are {n}." if n.startswith("indicative") else n for n in notes]


def run_rows(t: TestResult, unit: str) -> list[list[str]]:
    rows = []
    for kind, runs in (("warm-up", t.warmup), ("", t.runs)):
        for i, run in enumerate(runs, start=1):
            rate = run.bytes_per_s if run.seconds > 0 else None
            rows.append([f"{kind} {i}".strip(), f"{run.bytes:,} ({fmt_size(run.bytes)})", f"{run.seconds:.4f}",
                         "n/a" if rate is None else sig(rate_in(rate, unit)), _x(rate), fmt_size(run.offset) if run.offset is not None else ""])
    return rows


def run_head(unit: str) -> list[str]:
    return ["run", "bytes (B)", "seconds (s)", f"rate ({unit})", "X (1X = 150,000 B/s)", "offset"]


def render_result(result: Result, fmt: str = "table", rate_unit: str = "MB/s", *, width: int = 120) -> str:
    check_rate_unit(rate_unit)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _csv(result, rate_unit)
    if fmt == "md":
        return _md(result, rate_unit)
    if fmt == "table":
        return _table(result, rate_unit, width)
    raise UsageError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")


def _md(result: Result, unit: str) -> str:
    out = ["### cardbench run", ""] + [f"- {line}" for line in header_lines(result)]
    for t in result.tests:
        out += ["", f"#### {t.name}", "", md_table(run_head(unit), run_rows(t, unit), right={1, 2, 3, 4, 5}), "",
                md_table(["figure", "value"], [list(p) for p in summary_pairs(t, unit)])]
    for c in result.claims:
        out.append(f"- claim {c.get('claim') or c.get('label') or '?'}: {c.get('verdict', '?')}"
                   + (f" ({c['reason']})" if c.get("reason") else ""))
    out += [f"- {note}" for note in claim_notes(result)]
    return "\n".join(out) + "\n"


def _csv(result: Result, unit: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    u = unit_slug(unit)
    w.writerow(["result_id", "test", "kind", "index", "bytes", "seconds", f"rate_{u}", "X", "offset_bytes", "ops"])
    for t in result.tests:
        for kind, runs in (("warmup", t.warmup), ("run", t.runs)):
            for i, run in enumerate(runs):
                rate = run.bytes_per_s if run.seconds > 0 else None
                w.writerow([result.id, t.name, kind, i, run.bytes, repr(run.seconds),
                            "" if rate is None else f"{rate_in(rate, unit):.6g}",
                            "" if rate is None else f"{x_rating(rate):.4g}",
                            "" if run.offset is None else run.offset, "" if run.ops is None else run.ops])
    return buf.getvalue()


def _table(result: Result, unit: str, width: int) -> str:

    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False,
                      highlight=False)
    for line in header_lines(result):
        console.print(line, markup=False)
    for t in result.tests:
        runs = Table(title=f"{t.name}", title_justify="left")
        for i, h in enumerate(run_head(unit)):
            runs.add_column(h, justify="right" if i else "left")
        for row in run_rows(t, unit):
            runs.add_row(*row)
        console.print(runs)
        summary = Table(show_header=False, box=None, padding=(0, 2))
        summary.add_column("figure")
        summary.add_column("value", overflow="fold")
        for k, v in summary_pairs(t, unit):
            summary.add_row(k, v)
        console.print(summary)
    for c in result.claims:
        console.print(f"claim {c.get('claim') or c.get('label') or '?'}: {c.get('verdict', '?')}"
                      + (f" ({c['reason']})" if c.get("reason") else ""), markup=False)
    for note in claim_notes(result):
        console.print(note, markup=False)
    console.print(f"Units: seconds; rates in {unit}; 1X = 150,000 B/s; the 95% CI is of the mean rate.", markup=False)
    return console.export_text(styles=False)
