"""The answer a person came for, at the end of ``cardbench run`` (and at the top of
``cardbench results --id``): the card's row in the classic survey table's shape, then one
plain-words line per verdict.

    from cardbench.report.answer import render_answer, verdict_lines
    print(render_answer(result, width=80))
    # Lexar 48.0 MB, label 4X ... (the drawer row)
    # 4X on the label: holds — reads 3.62 MB/s, 4X needs 0.600 MB/s
    # Reader or bus: not known ...
    # Data: every sector read back as written (4.0 MB in 2 runs)

The lines hold no identity key and no source tag (``[S1]``): those are in the JSON, in
``--verbose`` (:func:`cardbench.report.detail.render_result`) and in docs/methods.md.
"""

from __future__ import annotations

from typing import Any

from cardbench.errors import UsageError
from cardbench.report.detail import render_result
from cardbench.report.drawer import (
    cells,
    check_rate_unit,
    drawer_row,
    fit_drawer,
    headers,
    md_table,
    median_iops,
    other_test_text,
    sig,
)
from cardbench.report.terminal import plain, to_text
from cardbench.result import Result
from cardbench.units import X_BYTES_PER_S, fmt_size, rate_in
from cardbench.verdicts.ceiling import AT_CEILING, ceilings_for

#: the words for a claim's verdict
VERDICT_WORDS = {"meets": "holds", "fails": "does not hold", "inconclusive": "cannot tell"}
_VERBS = {"read": "reads", "write": "writes", "sustained write": "writes (sustained)",
          "random read": "reads 4 KiB at random", "random write": "writes 4 KiB at random", "interface": "reads"}
_ORIGINS = {"label": "on the label", "register": "declared by the card"}


def _figure(value: Any, unit: str, rate_unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "IOPS":
        return f"{float(value):,.0f} IOPS"
    return f"{sig(rate_in(float(value), rate_unit))} {rate_unit}"


def claim_line(row: dict[str, Any], rate_unit: str = "MB/s") -> str:
    """One judged claim row (``result.claims[i]``) as a sentence.

    "4X on the label: holds — reads 3.62 MB/s, 4X needs 0.600 MB/s"; a check beside the main
    one (X as a write speed) says so; "cannot tell" carries the reason.
    """
    name = row.get("name") or row.get("claim") or "?"
    verdict = str(row.get("verdict") or "inconclusive")
    words = VERDICT_WORDS.get(verdict, verdict)
    unit = row.get("unit") or "B/s"
    direction = str(row.get("direction") or "read")
    where = _ORIGINS.get(str(row.get("origin") or "label"), "on the label")
    head = f"{name} {where}" if row.get("primary", True) else f"{name} {where}, read as a {direction} speed"
    if row.get("measured") is None or verdict == "inconclusive":
        reason = plain(row.get("reason") or "")
        reason = reason.split("): ", 1)[-1] if reason.startswith("flag only (") else reason
        return f"{head}: {words}" + (f" — {reason}" if reason else "")
    verb = _VERBS.get(direction, "measures")
    line = (f"{head}: {words} — {verb} {_figure(row['measured'], unit, rate_unit)}, "
            f"{name} needs {_figure(row.get('required'), unit, rate_unit)}")
    if row.get("marginal"):
        line += " (a marginal pass: between N x 10^6 and N x 2^20 B/s)"
    return line


def reader_line(result: Result, rate_unit: str = "MB/s") -> str:
    """Whether the reader or bus is the limit, in one sentence."""
    limited = [t for t in result.tests if t.limited_by]
    if limited:
        t = limited[0]
        names = ", ".join(x.name for x in limited)
        return f"Reader or bus: {names} {plain(t.limited_by)}."
    try:
        ceilings = ceilings_for(result)
    except Exception:   # noqa: BLE001 - an odd stored record must not stop the answer
        ceilings = {}
    ceiling = ceilings.get("read") or ceilings.get("write")
    if ceiling is None:
        return ("Reader or bus: ceiling not known (no USB link speed or SD bus mode seen); "
                "`cardbench readers` learns it from several cards.")
    top = max((t.median_bytes_per_s for t in result.tests if t.median_bytes_per_s), default=None)
    if top is None:
        return f"Reader or bus: {plain(ceiling.describe())}."
    return (f"Reader or bus: not the limit — {plain(ceiling.describe())}; the fastest figure here, "
            f"{_figure(top, 'B/s', rate_unit)}, is below it.")


def integrity_line(result: Result) -> str | None:
    """What the read-back check found, or None when no test checked the data."""
    checked = [t for t in result.tests if t.method.get("verified")]
    if not checked:
        kind = result.target.get("kind") if isinstance(result.target, dict) else None
        return ("Data: not checked by this read-only test; `cardbench verify` tells whether the card holds "
                "what it announces." if kind == "device" else None)
    bad: dict[str, int] = {}
    total = 0
    runs = 0
    for t in checked:
        for run in list(t.warmup) + list(t.runs):
            total += run.bytes
            runs += 1
            for k, v in ((run.extra or {}).get("check") or {}).items():
                if k not in ("ok", "first_bad") and isinstance(v, int) and v:
                    bad[k] = bad.get(k, 0) + v
    if not bad:
        return f"Data: every sector read back as written ({fmt_size(total)} checked in {runs} reads)."
    what = ", ".join(f"{v:,} {k}" for k, v in bad.items())
    return (f"Data: sectors read back wrong ({what}): the card loses or mixes up data; "
            "`cardbench verify` tells whether it is fake or failing.")


def other_lines(result: Result, rate_unit: str = "MB/s") -> list[str]:
    """A line per test the row does not show (random IOPS, matrix, sustained...)."""
    row = drawer_row(result)
    shown = {t.name for t in (row.write_test, row.read_test) if t is not None}
    if not shown:
        return []     # the row's notes list every test already
    return [other_test_text(t.name, t.median_bytes_per_s, median_iops(t), rate_unit)
            for t in result.tests if t.name not in shown]


def _warning_lines(result: Result) -> list[str]:
    seen: dict[str, None] = {}
    for w in list(result.warnings) + [w for t in result.tests for w in t.warnings]:
        if AT_CEILING in w:
            continue          # said by the reader line
        seen.setdefault(f"Warning: {plain(w)}", None)
    return list(seen)


def verdict_lines(result: Result, rate_unit: str = "MB/s") -> list[str]:
    """The answer in words, one line each: incomplete, each label claim, the reader or bus,
    warnings (cache, plausibility), data integrity, and the one note label verdicts carry."""
    check_rate_unit(rate_unit)
    lines: list[str] = []
    if not result.complete:
        lines.append(f"INCOMPLETE: {plain(result.error or 'the run did not finish')}; the figures are partial.")
    for row in sorted(result.claims, key=lambda c: not c.get("primary", True)):
        lines.append(claim_line(row, rate_unit))
    if not result.claims and not result.card.label:
        lines.append("Label: none given (--label 4X, C10 U3 ... judges what the card promises).")
    lines.append(reader_line(result, rate_unit))
    lines += _warning_lines(result)
    check = result.target.get("identity_check") if isinstance(result.target, dict) else None
    if isinstance(check, dict) and check.get("status") == "unknown":
        lines.append(plain(str(check.get("text"))) + ".")      # said, not a warning (verdicts.identity)
    integrity = integrity_line(result)
    if integrity:
        lines.append(integrity)
    if result.claims:
        lines.append(INDICATIVE)
    return lines


#: the short form of the note every label verdict carries (its full text: JSON and --verbose)
INDICATIVE = ("Label verdicts are indicative, not compliance: a USB reader cannot reproduce the SD bus "
              "test conditions.")


def units_line(rate_unit: str = "MB/s") -> str:
    per = "10^6" if rate_unit == "MB/s" else "2^20" if rate_unit == "MiB/s" else None
    unit = f"{rate_unit} = {per} B/s" if per else rate_unit
    return f"{unit}; 1X = {X_BYTES_PER_S:,} B/s; rates are the median of the timed runs."


def answer_title(result: Result) -> str:
    t = result.target if isinstance(result.target, dict) else {}
    where = t.get("path") or t.get("device")
    fs = t.get("filesystem")
    return "This card" + (f", tested at {where}" if where else "") + (f" ({fs})" if fs else "")


def render_answer(result: Result, fmt: str = "table", rate_unit: str = "MB/s", *, width: int = 80) -> str:
    """The card's row and the verdict lines, as ``table`` (terminal text fitting ``width``) or ``md``."""
    check_rate_unit(rate_unit)
    row = drawer_row(result)
    others = other_lines(result, rate_unit)
    lines = verdict_lines(result, rate_unit)
    if fmt == "md":
        out = [f"**{answer_title(result)}**", "", md_table(headers(rate_unit), [cells(row, rate_unit)],
                                                          right=set(range(3, 10))), "", units_line(rate_unit), ""]
        out += [f"- {x}" for x in others + lines]
        return "\n".join(out) + "\n"
    if fmt != "table":
        raise UsageError(f"unknown format {fmt!r} for the answer (use table or md)")
    table, left_out = fit_drawer([row], rate_unit, width, answer_title(result))
    parts: list[object] = [table, units_line(rate_unit)] + ([left_out] if left_out else [])
    if others:
        parts += ["Also measured:"] + [f"  {x}" for x in others]
    parts += [""] + lines
    return to_text(parts, width)



def render_run(result: Result, fmt: str = "table", rate_unit: str = "MB/s", *, width: int = 80,
               verbose: bool = False) -> str:
    """What ``cardbench run`` prints: ``table`` and ``md`` end with the answer (the row and the
    verdict lines), after every run and its statistics when ``verbose``; ``csv`` is one row per
    timed run, ``json`` the cardbench.result/1 document."""
    if fmt in ("json", "csv"):
        return render_result(result, fmt, rate_unit, width=width)
    answer = render_answer(result, fmt, rate_unit, width=width)
    if not verbose:
        return answer
    return render_result(result, fmt, rate_unit, width=width) + "\n" + answer
