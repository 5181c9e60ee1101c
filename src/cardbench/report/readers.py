"""Readers and the ceilings their cards suggest (``cardbench readers``): each reader in words
first, then the table, then the evidence.

    from cardbench.verdicts.readers import reader_ceilings
    from cardbench.report.readers import render_readers
    print(render_readers(reader_ceilings(store.results()), "table", width=80))

``rows`` are the entries :func:`cardbench.verdicts.readers.reader_ceilings` returns (bytes/s
figures); ``json`` prints them exactly as they are (a list).
"""

from __future__ import annotations

import json
from typing import Any

from cardbench.errors import UsageError
from cardbench.report.drawer import md_table
from cardbench.report.terminal import Col, fit_table, nothing_yet, plain, to_text
from cardbench.units import MB
from cardbench.verdicts.readers import EVIDENCE_KINDS

FORMATS = ("table", "md", "json")
LEGEND = ("MB/s = 10^6 bytes per second. Evidence: the same card faster through another reader (direct); "
          "cards read at once that do not add up (direct, `cardbench readers --probe`); several different "
          "cards at one rate (inferred); the link's own limit (an upper bound). \"possible\" means some "
          "evidence speaks against it.")
NO_READER = nothing_yet("No card measured through a reader",
                        "`cardbench run DIRECTORY`, with the card in a reader, measures one and stores its result "
                        "(a USB stick is its own card, with no reader).")
_HEADERS = ("Reader", "Cards", "Ceiling", "Direction", "At ceiling", "Confidence")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value / MB:.3g} MB/s"


def reader_title(name: Any) -> str:
    """A reader as a person names it: its name, else "USB reader 05e3:0727" for a USB identity,
    "(unnamed reader)" for one known by nothing (identity keys stay in the JSON)."""
    text = str(name or "")
    if text.startswith("usb:"):
        parts = text.split(":")
        return f"USB reader {parts[1]}:{parts[2]}" if len(parts) >= 3 else text
    if text.startswith("name:"):
        rest = text[len("name:"):]
        return "(unnamed reader)" if rest in ("", "unknown") else rest
    return text or "(unnamed reader)"


def _kind(kind: Any) -> str:
    return str(EVIDENCE_KINDS.get(kind, kind))


def reader_sentence(row: dict[str, Any]) -> str:
    """"USB2 reader: caps reads at 33.1 MB/s (likely, inferred from several cards; 4 of 5 cards reach it)."."""
    name = reader_title(row.get("name"))
    cards = int(row.get("cards") or 0)
    if row.get("ceiling_bytes_per_s") is None:
        return f"{name}: no ceiling named ({cards} card{'s' if cards != 1 else ''} measured through it)."
    at = f"; {row['cards_at_ceiling']} of {cards} cards reach it" if row.get("cards_at_ceiling") is not None else ""
    how = f"{row.get('confidence')}, {_kind(row.get('kind'))}" if row.get("kind") else str(row.get("confidence"))
    word = f"; it rests on {' and '.join(row['rests_on'])}" if row.get("rests_on") else ""
    return f"{name}: caps {row.get('direction') or 'read'}s at {_rate(row['ceiling_bytes_per_s'])} ({how}{at}){word}."


def evidence_lines(row: dict[str, Any]) -> list[str]:
    """A reader's evidence, piece by piece (or its one evidence sentence)."""
    name = reader_title(row.get("name"))
    pieces = row.get("pieces") or []
    if not pieces:
        return [f"{name}: {plain(row['evidence'])}"] if row.get("evidence") else []
    out = [f"{name}, the evidence:"]
    for piece in pieces:
        direction = "" if piece.get("direction") == "both" else f" {piece.get('direction')}"
        out.append(f"  - {_kind(piece.get('kind'))}{direction} ({piece.get('confidence')}): "
                   f"{plain(piece.get('evidence'))}")
    return out


def render_probe(finding: dict[str, Any], fmt: str = "table", *, width: int = 150) -> str:
    """`readers --probe`: the answer first (does the path the cards share carry their sum?), then
    the figures; ``json`` is the finding as it is."""
    if fmt == "json":
        return json.dumps(finding, indent=2, sort_keys=True) + "\n"
    m = finding["measured"]
    if finding["ceiling_bytes_per_s"] is not None:
        lines = [f"The path these cards share caps reads at {_rate(finding['ceiling_bytes_per_s'])} "
                 f"({finding['confidence']})."]
    else:
        lines = [f"No shared ceiling: the path carried {_rate(m['together_bytes_per_s'])} together."]
    lines += [f"  {r['device']}: alone {_rate(r['alone_bytes_per_s'])}, together {_rate(r['together_bytes_per_s'])}"
              for r in m["devices"]]
    lines += [plain(finding["evidence"]), "Read-only: O_DIRECT reads of 1 MiB at 4 positions per card, alone and "
              "then all at once; MB/s = 10^6 bytes per second."]
    return to_text(lines, width)


def _cells(row: dict[str, Any]) -> list[str]:
    named = row["ceiling_bytes_per_s"] is not None
    return [reader_title(row["name"]), str(row["cards"]), _rate(row["ceiling_bytes_per_s"]),
            row["direction"] if named else "-", f"{row['cards_at_ceiling']} of {row['cards']}" if named else "-",
            str(row["confidence"])]


def session_lines(sessions: list[dict[str, Any]] | None) -> list[str]:
    """Stored drawer sessions (``cardbench.session/1``), one line each: when, which cards in what
    order, and the reader verdict said at its end (to read beside today's)."""
    out = []
    for s in sessions or []:
        cards = s.get("cards") or []
        names = []
        for c in cards:
            card = c.get("card") or {}
            names.append(" ".join(str(x) for x in (card.get("brand"), card.get("name"), card.get("label")) if x)
                         or str(c.get("device") or "?"))
        when = str(s.get("started_at") or "")[:16].replace("T", " ")
        verdict = "; ".join(reader_sentence(v).rstrip(".")
                            for v in s.get("reader_verdict") or []) or "no reader verdict"
        probes = len(s.get("probes") or [])
        out.append(f"Drawer session {when}: {len(cards)} card{'s' if len(cards) != 1 else ''} "
                   f"({', '.join(names)}){f', {probes} probe' + ('s' if probes != 1 else '') if probes else ''}; "
                   f"its verdict then: {verdict}.")
    return out


def render_readers(rows: list[dict[str, Any]], fmt: str = "table", *, width: int = 150,
                   sessions: list[dict[str, Any]] | None = None) -> str:
    """The readers as ``table`` (sentences, table, evidence, stored drawer sessions, legend), ``md``
    or ``json`` (the rows only: sessions are in `cardbench results --json`)."""
    if fmt == "json":
        return json.dumps(rows, indent=2, sort_keys=True) + "\n"
    if not rows:
        # also after a session of sticks only: a stick is its own card, with no reader to judge
        return NO_READER + "\n"
    sentences = [reader_sentence(r) for r in rows]
    evidence = [line for r in rows for line in evidence_lines(r)] + session_lines(sessions)
    if fmt == "md":
        return ("\n".join(f"- {s}" for s in sentences) + "\n\n" + md_table(list(_HEADERS), [_cells(r) for r in rows],
                                                                        right={1, 2}) + "\n\n"
                + "\n".join(f"- {e}" for e in evidence) + "\n\n" + LEGEND + "\n")
    if fmt != "table":
        raise UsageError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    table = fit_table([Col(h, right=i in (1, 2, 4), wrap=i not in (2, 4), drop={3: 1, 1: 2}.get(i))
                       for i, h in enumerate(_HEADERS)],
                      [_cells(r) for r in rows], width, title="Readers and the ceilings their cards suggest")
    return to_text(sentences + ["", table, ""] + evidence + [LEGEND], width)
