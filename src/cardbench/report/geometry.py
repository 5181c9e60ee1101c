"""The geometry document in words: the answer first, then the advice, then how it was measured."""

from __future__ import annotations

from cardbench.geometry.doc import size_text


def render_geometry(doc: dict) -> str:
    """Plain text for the terminal (``cardbench geometry DEVICE``)."""
    lines = [f"{doc.get('device')}: {doc.get('message')}", ""]
    units, confs = doc.get("open_units") or {}, doc.get("open_units_confidence") or {}
    rows = [
        ("allocation unit", size_text(doc.get("allocation_unit_bytes")), doc.get("allocation_unit_confidence")),
        ("page", size_text(doc.get("page_bytes")), doc.get("page_confidence")),
        ("declared AU", size_text(doc.get("declared_au_bytes")),
         (doc.get("declared_au_source") or "none (not on a native SD slot)")),
        ("open AUs, linear", "-" if units.get("linear") is None else str(units["linear"]), confs.get("linear")),
        ("open AUs, random", "-" if units.get("random") is None else str(units["random"]), confs.get("random")),
        ("FAT-tuned AUs", "-" if doc.get("fat_units") is None else str(doc["fat_units"]),
         doc.get("fat_units_confidence")),
    ]
    if doc.get("write") is None:
        rows[3:5] = [("open AUs", "-", "not tested (--write finds them)")]
        rows[-1] = ("FAT-tuned AUs", "-", "not tested (--write)")
    width = max(len(r[0]) for r in rows)
    for name, value, conf in rows:
        lines.append(f"  {name:<{width}}  {value:>8}  {conf or ''}")
    advice = doc.get("advice") or {}
    if advice.get("lines"):
        lines += ["", "Advice:"] + [f"  - {line}" for line in advice["lines"]]
    if doc.get("notes"):
        lines += ["", "Notes:"] + [f"  - {n}" for n in doc["notes"]]
    method = doc.get("method") or {}
    if method:
        lines += ["", f"Measured in {doc.get('seconds')} s: {method.get('read_bytes')} B reads, minimum of "
                      f"{method.get('repeats')} tries each, at {method.get('au_boundaries')} AU and "
                      f"{method.get('page_boundaries')} page boundaries ({method.get('io')})."]
    return "\n".join(lines) + "\n"
