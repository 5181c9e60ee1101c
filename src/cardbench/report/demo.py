"""The demo drawer (``cardbench demo``) as a person reads it: how close the measured figures came
to the ones the emulated cards were set to (the answer), then the table, set beside measured.

    from cardbench.demo import run_demo
    from cardbench.report.demo import render_demo
    print(render_demo(run_demo(cards=DRAWER[:2]), width=80))
"""

from __future__ import annotations

from typing import Any, Sequence

from cardbench.demo import FAST_READER_NAME
from cardbench.report.drawer import md_table, results_json
from cardbench.report.terminal import Col, fit_table, plain, to_text
from cardbench.result import Result
from cardbench.units import MB, fmt_x
from cardbench.verdicts.readers import EVIDENCE_KINDS

FORMATS = ("table", "md", "json")
HEADERS = ("Card", "Label", "Write set", "Write measured", "Write ratio", "Write X", "Read set", "Read measured",
           "Read ratio", "Read X", "Survey scale (W / R)")
#: narrow terminals lose the survey-scale column first, then the ratios, then the X
_DROP = {10: 1, 4: 2, 8: 3, 5: 4, 9: 5}


def _figures(c: Any, result: Result) -> tuple[float, float, float, float]:
    w = result.test("seq_write").median_bytes_per_s
    r = result.test("cold_read").median_bytes_per_s
    emulated = result.target.get("emulated") or {}
    ws = emulated.get("write_bytes_per_s") or c.write_mb_s * MB
    rs = emulated.get("read_bytes_per_s") or c.read_mb_s * MB
    return w, r, ws, rs


def card_line(c: Any, result: Result) -> str:
    """One card as it finishes: "Lexar 48M: write 3.039 MB/s (set 3.039), read 10.80 MB/s (set 10.80)"."""
    w, r, ws, rs = _figures(c, result)
    return (f"{card_name(c, result)}: write {w / MB:.3f} MB/s (set {ws / MB:.3f}), "
            f"read {r / MB:.3f} MB/s (set {rs / MB:.3f})")


def card_name(c: Any, result: Result) -> str:
    """"Lexar 48M", and "(other reader)" for the card the demo reads through a second reader."""
    name = f"{c.brand} {c.capacity_bytes // MB}M"
    return name + " (other reader)" if result.reader.name == FAST_READER_NAME else name


def demo_rows(pairs: Sequence[tuple[Any, Result]], factor: float) -> list[list[str]]:
    rows = []
    for c, result in pairs:
        w, r, ws, rs = _figures(c, result)
        rows.append([card_name(c, result), c.label or "", f"{ws / MB:.3f}", f"{w / MB:.3f}",
                     f"{w / ws:.3f}", fmt_x(w), f"{rs / MB:.3f}", f"{r / MB:.3f}", f"{r / rs:.3f}", fmt_x(r),
                     f"{w / MB / factor:.3f} / {r / MB / factor:.2f}"])
    return rows


def demo_summary(pairs: Sequence[tuple[Any, Result]]) -> str:
    """The answer: how far the furthest measured figure was from the one set."""
    if not pairs:
        return "No card was tested."
    worst, where = 0.0, ""
    for c, result in pairs:
        w, r, ws, rs = _figures(c, result)
        for got, want, what in ((w, ws, "write"), (r, rs, "read")):
            off = abs(got / want - 1)
            if off >= worst:
                worst, where = off, f"{c.brand} {c.capacity_bytes // MB}M {what}"
    return (f"{len(pairs)} card{'s' if len(pairs) != 1 else ''} measured: every figure within "
            f"{100 * worst:.1f}% of the rate its emulated card was set to (furthest: {where}).")


def reader_answer_lines(answer: dict, factor: float, set_ceiling_mb_s: float) -> list[str]:
    """The survey's open question, answered: the reader's ceiling, the cards it hides, the evidence
    (``answer`` is :func:`cardbench.demo.reader_answer`)."""
    entry = answer["entry"]
    ceiling = answer["ceiling_bytes_per_s"]
    if not ceiling or entry is None:
        return ["The reader's upper limit: not found from these cards (see `cardbench readers`)."]
    lines = [f"The reader's upper limit: it caps {entry['direction']}s at {ceiling / MB:.2f} MB/s "
             f"({ceiling / MB / factor:.2f} MB/s at survey scale; the emulated reader was set to "
             f"{set_ceiling_mb_s:.2f}), {entry['confidence']}."]
    if answer["hidden"]:
        names = ", ".join(f"{c.brand} {c.capacity_bytes // MB}M (set {s / MB:.2f}, measured "
                          f"{(m or 0) / MB:.2f} MB/s)" for c, s, m in answer["hidden"])
        lines.append(f"It hides {len(answer['hidden'])} card(s) that read faster than it: {names}.")
    else:
        lines.append("It hides no card of this drawer: none reads faster than it.")
    lines.append("The evidence, strongest first:")
    for piece in sorted(entry["pieces"], key=lambda p: {"likely": 0, "possible": 1}.get(p["confidence"], 2)):
        if piece["kind"] == "cluster" and piece["confidence"] == "none":
            continue
        lines.append(f"  - {EVIDENCE_KINDS.get(piece['kind'], piece['kind'])} ({piece['confidence']}): "
                     f"{plain(piece['evidence'])}")
    return lines


def render_demo(pairs: Sequence[tuple[Any, Result]], fmt: str = "table", *, factor: float = 3,
                width: int = 150, answer: list[str] | None = None) -> str:
    """The summary sentence and the table, set vs measured (``table`` or ``md``), then the
    ``answer`` lines (the reader's ceiling); ``json`` is the cardbench.results/1 document of the
    demo's results."""
    if fmt == "json":
        return results_json([r for _, r in pairs])
    rows = demo_rows(pairs, factor)
    title = "The drawer: set vs measured, MB/s (10^6 B/s); X = MB/s / 0.15"
    survey = f"Survey scale: measured / {factor:g}, the figures the 2006 survey printed."
    if fmt == "md":
        return demo_summary(pairs) + "\n\n" + md_table(list(HEADERS), rows, right=set(range(2, 11))) + "\n\n" + \
            survey + "\n" + "".join(f"\n{x}" for x in answer or []) + ("\n" if answer else "")
    table = fit_table([Col(h, right=i >= 2, drop=_DROP.get(i)) for i, h in enumerate(HEADERS)], rows, width,
                      title=title)
    parts: list[object] = [demo_summary(pairs), "", table]
    if "Survey scale (W / R)" not in table.dropped:
        parts.append(survey)
    if table.dropped:
        parts.append(f"Left out at {width} columns: {', '.join(table.dropped)}.")
    if answer:
        parts += [""] + list(answer)
    return to_text(parts, width)
