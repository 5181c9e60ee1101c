"""The reader probe, ``cardbench.probe/1``: cards read at once behind one reader, the measured
figures and the finding (:mod:`cardbench.evidence` makes and reads it). Stored in ``probes`` (its
reader as a column, the card in each device in ``record_cards``)."""

from __future__ import annotations

from typing import Any

from cardbench.kinds.registry import Kind, Link, Table, register
from cardbench.kinds.shapes import as_text, card_words, common_problem, fields_problem, is_number, obj, seq
from cardbench.units import fmt_rate

SCHEMA = "cardbench.probe/1"

FIELDS = (("session_id", "text"), ("finding", "object"))
MEASURED = (("together_bytes_per_s", "number"), ("together_seconds", "number"))
DEVICE = (("device", "text"), ("alone_bytes_per_s", "number"), ("together_bytes_per_s", "number"),
          ("sample_bytes", "number"))


def problem(d: dict) -> str | None:
    found = common_problem(d)
    if found:
        return found
    m = d.get("measured")
    if not isinstance(m, dict) or not isinstance(m.get("devices"), list) or \
            not all(isinstance(x, dict) for x in m["devices"]):
        return "'measured' must be an object with a 'devices' list"
    for k in ("alone_sum_bytes_per_s", "alone_max_bytes_per_s"):
        if not isinstance(m.get(k), (int, float)) or isinstance(m.get(k), bool):
            return f"'measured.{k}' must be a number"
    found = fields_problem(d, FIELDS) or fields_problem(m, MEASURED, "measured.")
    for i, x in enumerate(m["devices"]):
        found = found or fields_problem(x, DEVICE, f"measured.devices[{i}].")
    return found


def _devices(d: dict) -> list:
    return seq(obj(d, "measured"), "devices")


def cards(d: dict) -> list[Link]:
    """The card in each device (in order), each read through the probe's reader."""
    reader = d.get("reader") if isinstance(d.get("reader"), dict) else None
    return [(x.get("card") if isinstance(x.get("card"), dict) else None, reader) if isinstance(x, dict)
            else (None, None) for x in _devices(d)]


def summary(d: dict) -> str:
    """"2 cards read at once: 20.500 MB/s together, 39.000 MB/s alone; caps reads (likely)"."""
    m = obj(d, "measured")
    devices = _devices(d)
    names = ", ".join(card_words(x.get("card")) for x in devices if isinstance(x, dict))
    line = f"{len(devices)} card{'s' if len(devices) != 1 else ''} read at once ({names})"
    if is_number(m.get("together_bytes_per_s")):
        line += f": {fmt_rate(m['together_bytes_per_s'])} together"
        if is_number(m.get("alone_sum_bytes_per_s")):
            line += f", {fmt_rate(m['alone_sum_bytes_per_s'])} alone"
    f = obj(d, "finding")
    if f.get("direction") or f.get("confidence"):
        line += f"; {f.get('direction') or '?'} ({f.get('confidence') or '?'})"
    return line


def _confidence(d: dict) -> Any:
    return as_text(obj(d, "finding").get("confidence"))


PROBE = register(Kind(
    name="probe", schema=SCHEMA, section="probes", noun="probe", title="reader probe",
    problem=problem, cards=cards, summary=summary,
    table=Table("probes", "probe_id", "created_epoch", columns=(("confidence", _confidence),), reader_column=True),
    listed=False))              # shown by `cardbench readers`
