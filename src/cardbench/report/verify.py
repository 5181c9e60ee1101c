"""Verify verdicts (``cardbench.verify/1`` documents) as a table or Markdown, for `cardbench results`."""

from __future__ import annotations

import io

from cardbench.report.drawer import md_table
from cardbench.units import fmt_size

HEADERS = ["Card", "Reader", "Mode", "Verdict", "Announced", "Usable", "Kind", "Bad ranges", "When", "Notes"]


def verify_cells(doc: dict) -> list[str]:
    card = doc.get("card") or {}
    reader = doc.get("reader") or {}
    name = " ".join(str(x) for x in (card.get("brand"), card.get("name") or card.get("model")) if x) \
        or card.get("identity") or str(doc.get("device") or doc.get("target") or "?")
    bad = doc.get("bad_ranges") or []
    notes = []
    if not doc.get("complete", True):
        notes.append("INCOMPLETE: " + str(doc.get("error") or "stopped early"))
    return [name, str(reader.get("name") or reader.get("identity") or "-"), str(doc.get("mode") or "-"),
            str(doc.get("verdict") or "-").upper(), fmt_size(doc.get("announced_bytes")),
            fmt_size(doc.get("usable_bytes")), str(doc.get("kind") or "-"), str(len(bad)) if bad else "-",
            str(doc.get("finished_at") or doc.get("started_at") or "-")[:16], "; ".join(notes)]


def render_verify(docs: list[dict], fmt: str = "table", *, width: int = 150) -> str:
    """The verify table; empty string when there is nothing to show."""
    if not docs:
        return ""
    rows = [verify_cells(d) for d in docs]
    if fmt == "md":
        return "\n" + md_table(HEADERS, rows, right={4, 5, 7}) + "\n"
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"verify verdicts ({len(rows)})", title_justify="left")
    for i, h in enumerate(HEADERS):
        table.add_column(h, justify="right" if i in (4, 5, 7) else "left", overflow="fold")
    for r in rows:
        table.add_row(*r)
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False,
                      highlight=False)
    console.print(table)
    console.print("Sizes: MB = 10^6 B. Usable: what the card really holds from its start (partition it to that).")
    return console.export_text(styles=False)
