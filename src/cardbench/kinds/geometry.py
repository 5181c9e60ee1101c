"""The geometry document, ``cardbench.geometry/1``: a card's AU, page, open AUs and FAT-tuned AUs
and the advice (``cardbench geometry``; the fields are described in :mod:`cardbench.geometry.doc`).
Stored in the shared ``records`` table, listed below the runs of ``cardbench results``."""

from __future__ import annotations

from typing import Any

from cardbench.kinds.registry import Kind, register
from cardbench.kinds.shapes import common_problem, fields_problem, obj, one_card

SCHEMA = "cardbench.geometry/1"
CONFIDENCES = ("high", "low", "none")

#: the fields scripts, the store and the reports read, and their types (null is allowed)
FIELDS = (("allocation_unit_bytes", "number"), ("page_bytes", "number"), ("fat_units", "number"),
          ("declared_au_bytes", "number"), ("size_bytes", "number"), ("device", "text"), ("message", "text"),
          ("open_units", "object"), ("open_units_confidence", "object"), ("advice", "object"),
          ("method", "object"), ("error", "text"), ("complete", "flag"))
#: each found value and its sibling confidence
VALUES = (("allocation_unit_bytes", "allocation_unit_confidence"), ("page_bytes", "page_confidence"),
          ("fat_units", "fat_units_confidence"), ("declared_au_bytes", "declared_au_confidence"))


def problem(d: dict) -> str | None:
    """None, or one line: a field of the wrong type, or a value whose confidence disagrees with it
    ("none" exactly when the value is null)."""
    found = common_problem(d) or fields_problem(d, FIELDS)
    if found:
        return found
    pairs = [(d.get(v), d.get(c), v, c) for v, c in VALUES]
    units, confs = obj(d, "open_units"), obj(d, "open_units_confidence")
    pairs += [(units.get(o), confs.get(o), f"open_units.{o}", f"open_units_confidence.{o}") for o in ("linear", "random")]
    for value, conf, vname, cname in pairs:
        if conf not in CONFIDENCES:
            return f"'{cname}' must be one of {', '.join(CONFIDENCES)}"
        if (value is None) != (conf == "none"):
            return f"'{cname}' must be \"none\" exactly when '{vname}' is null"
    return None


def _size(n: Any) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "?"
    for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            return f"{n / unit:g} {name}"
    return f"{n:g} B"


def summary(d: dict) -> str:
    """"geometry: AU 4 MiB (high), page 16 KiB (high), 2 AUs open" or "geometry: no boundary found"."""
    au = d.get("allocation_unit_bytes")
    if au is None:
        line = "geometry: no boundary found"
    else:
        line = f"geometry: AU {_size(au)} ({d.get('allocation_unit_confidence')})"
        if d.get("page_bytes") is not None:
            line += f", page {_size(d['page_bytes'])} ({d.get('page_confidence')})"
    linear = obj(d, "open_units").get("linear")
    if linear is not None:
        line += f", {linear} AU{'s' if linear != 1 else ''} open"
    if d.get("declared_au_bytes") is not None:
        line += f"; declares {_size(d['declared_au_bytes'])}"
    return line


def created(d: dict) -> Any:
    return d.get("finished_at") or d.get("started_at") or d.get("created_at")


GEOMETRY = register(Kind(name="geometry", schema=SCHEMA, section="geometry", noun="geometry document",
                         title="geometry result", problem=problem, cards=one_card, summary=summary, created=created))
