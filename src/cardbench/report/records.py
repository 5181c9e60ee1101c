"""The records of one kind (:mod:`cardbench.kinds`) as `cardbench results` lists them below the
runs: a table of when, card, reader and the kind's one-line answer (its ``summary``). A kind whose
records have a table of their own (the verify verdicts, :func:`cardbench.report.verify.render_verify`)
names it in :data:`TABLES`."""

from __future__ import annotations

from typing import Callable

from cardbench.kinds import Kind
from cardbench.report.drawer import md_table
from cardbench.report.terminal import Col, fit_table, to_text
from cardbench.report.verify import render_verify

HEADERS = ["When", "Card", "Reader", "Answer"]

#: kinds shown by a table of their own (more columns than one line of words)
TABLES: dict[str, Callable[..., str]] = {"verify": render_verify}


def _who(v: object) -> str:
    if not isinstance(v, dict):
        return "-"
    return " ".join(str(v[k]) for k in ("brand", "name", "label") if v.get(k)) or str(v.get("identity") or "-")


def record_cells(kind: Kind, doc: dict) -> list[str]:
    links = kind.cards(doc)
    cards = ", ".join(dict.fromkeys(_who(c) for c, _ in links if c)) or "-"
    readers = ", ".join(dict.fromkeys(_who(r) for _, r in links if r)) or "-"
    return [str(kind.created(doc) or "-")[:16].replace("T", " "), cards, readers, kind.summary(doc)]


def render_records(kind: Kind, docs: list[dict], fmt: str = "table", *, width: int = 150) -> str:
    """The records of ``kind``; empty string when there are none."""
    if not docs:
        return ""
    own = TABLES.get(kind.name)
    if own is not None:
        return own(docs, fmt, width=width)
    rows = [record_cells(kind, d) for d in docs]
    if fmt == "md":
        return f"\n{kind.title}s ({len(rows)}):\n\n" + md_table(HEADERS, rows) + "\n"
    table = fit_table([Col("When", drop=2), Col("Card"), Col("Reader", drop=1), Col("Answer", squeeze=True)], rows,
                      width, title=f"{kind.title}s ({len(rows)})")
    return to_text([table], width)
