"""What the drawer session says, in words: each card as it finishes, answer first
(:func:`card_lines`), and every event of the session (:func:`event_lines`)."""

from __future__ import annotations

from typing import Any, Callable

from cardbench.drawer import (
    CardDone,
    Gone,
    Ignored,
    Inserted,
    Present,
    Probed,
    ProbeFailed,
    Probing,
    Removed,
    SaveFailed,
    Testing,
    Verifying,
    Watching,
)
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


def _watching(e: Watching) -> list[str]:
    lines = [f"Watching {e.what} for cards ({e.method}); insert a card, Ctrl-C ends the session."]
    if not e.root:
        lines.append("Not root: a card that is not mounted cannot be read raw nor verified (both need root); "
                     "mounted cards you can write to are tested.")
    return lines


def _present(e: Present) -> list[str]:
    if e.tested:
        return [f"Already in: {', '.join(e.devices)}; testing them first."]
    return [f"Already in: {', '.join(e.devices)}; not tested (the session tests cards as they go in): take them "
            "out and in again, or start with --present to test them first."]


def _testing(e: Testing) -> list[str]:
    c = e.card
    who = " ".join(x for x in (c.brand, c.name) if x) or c.model or "unnamed card"
    return [f"Testing card {e.number} in {e.device}: {who}" + (" (recalled from the store)" if e.recalled else "")]


_WORDS: dict[type, Callable[[Any], list[str]]] = {
    Watching: _watching,
    Present: _present,
    Inserted: lambda e: [f"{e.device}: a card went in" + (f" ({e.queued} waiting)" if e.queued > 1 else "")],
    Removed: lambda e: [f"{e.device}: card out"],
    Gone: lambda e: [f"{e.device}: went before it could be tested"],
    Ignored: lambda e: [f"{e.device}: ignored: {e.why}"],
    Testing: _testing,
    Verifying: lambda e: [f"  verifying {e.device} is genuine (quick probe, ~{e.budget_s:.0f} s; every block it "
                          "writes is put back)"],
    CardDone: lambda e: [f"{e.count} card(s) done; waiting for the next card (Ctrl-C ends)."],
    SaveFailed: lambda e: [f"{e.what}: {e.error}"],
    Probing: lambda e: [f"Two cards behind one reader ({', '.join(e.devices)}): reading them at once"],
    Probed: lambda e: [f"  {e.finding['evidence']}"],
    ProbeFailed: lambda e: [f"  reading them at once failed: {e.error}"],
}


def event_lines(event) -> list[str]:
    """What the session says of one of its events (a :data:`cardbench.drawer.DrawerEvent`), as
    status lines. A :class:`~cardbench.drawer.CardDone` gets the line after the card's own
    (:func:`card_lines`, which the caller prints where the results go)."""
    return _WORDS[type(event)](event)
