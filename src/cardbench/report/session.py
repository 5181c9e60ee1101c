"""What the drawer session says about each card as it finishes, in words, answer first."""

from __future__ import annotations

from cardbench.report.drawer import drawer_row
from cardbench.units import fmt_rate, fmt_size, fmt_x


def card_name(outcome) -> str:
    r = outcome.result
    if r is None:
        return outcome.device
    row = drawer_row(r)
    label = f" {row.label_text}" if r.card.label else ""
    return f"{row.card_text} {row.capacity_text}{label}"


def card_lines(outcome, number: int, rate_unit: str = "MB/s") -> list[str]:
    """The card's row in words (write and read rate with X, the verify verdict, what is missing),
    then that it can be swapped. Lines stay under 80 columns for plain figures."""
    lines = []
    r = outcome.result
    head = f"card {number} ({outcome.device}): {card_name(outcome)}"
    if outcome.verify is not None and outcome.verify.get("verdict") == "counterfeit":
        head += " -- COUNTERFEIT"
    lines.append(head)
    if r is not None:
        row = drawer_row(r)
        figures = []
        if row.write_bytes_per_s is not None:
            figures.append(f"write {fmt_rate(row.write_bytes_per_s, rate_unit)} ({fmt_x(row.write_bytes_per_s)})")
        if row.read_bytes_per_s is not None:
            figures.append(f"read {fmt_rate(row.read_bytes_per_s, rate_unit)} ({fmt_x(row.read_bytes_per_s)})")
        where = "on its mount " + outcome.mountpoint if outcome.mode == "directory" else "raw device, read-only"
        lines.append(f"  {', '.join(figures) or 'no figure'} [{where}]")
        if row.notes():
            lines.append(f"  notes: {'; '.join(row.notes())}")
    v = outcome.verify
    if v is not None:
        verdict = str(v.get("verdict") or "unknown")
        text = f"  verify: {verdict}"
        if verdict == "counterfeit":
            text += (f": holds {fmt_size(v.get('usable_bytes'))} of the {fmt_size(v.get('announced_bytes'))} it "
                     f"announces ({v.get('kind') or 'fake capacity'})")
        elif verdict == "genuine":
            text += f": all {fmt_size(v.get('announced_bytes'))} sampled hold their data (blocks restored)"
        lines.append(text)
    for s in outcome.skipped:
        lines.append(f"  not run: {s}")
    if outcome.error:
        state = "stored as incomplete" if outcome.saved else "NOT stored"
        lines.append(f"  FAILED mid-test ({state}): {outcome.error}")
    elif not outcome.saved:
        lines.append("  not stored")
    lines.append("  done: you can swap the card now.")
    return lines
