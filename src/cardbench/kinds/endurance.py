"""The endurance document, ``cardbench.endurance/1``: how long a card lasts (``cardbench endure``;
built by :mod:`cardbench.endure`, the fields are described in docs/formats.md and docs/endurance.md).

Rounds of "write the whole card, read it all back"; each round's write and read rate and the bad
sectors it found, by class (:data:`CLASSES`); the milestones (the first error, then 0.1%, 1%, 10%,
25%, 50% bad); the total written; how the run ended (:data:`ENDINGS`). Stored in the shared
``records`` table, listed below the runs of ``cardbench results``.

The names scripts read are declared here, below the ``endure`` package that makes the documents
(which re-exports them), so the store, the reports and the server check and show them without it.
"""

from __future__ import annotations

from typing import Any

from cardbench.kinds.registry import Kind, register
from cardbench.kinds.shapes import card_words, common_problem, fields_problem, is_number, obj, one_card, seq
from cardbench.units import UnitError, check_json_numbers, fmt_size

SCHEMA = "cardbench.endurance/1"
#: the classes of a bad sector, in the order they are shown
CLASSES = ("erased", "stale", "misplaced", "foreign", "corrupt", "unreadable")
#: what each class means, in a few words (the reports' legends)
CLASS_WORDS = {"erased": "unwritten or erased (all 00 or FF)", "stale": "an earlier round's data (lost writes)",
               "misplaced": "another sector's address (wrong addressing, or a wraparound fake)",
               "foreign": "another card's data (the reader or host mixed cards)",
               "corrupt": "the checksum fails", "unreadable": "an I/O error"}
#: how a run ends
ENDINGS = ("rounds", "hours", "bad_limit", "read_only", "dead", "counterfeit", "interrupted")
#: the bad fractions that are milestones, besides the first error
MILESTONES = (0.001, 0.01, 0.10, 0.25, 0.50)
VERDICTS = ("no error", "worn", "read-only", "dead", "counterfeit", "interrupted")

#: the top-level fields scripts, the store and the reports read, and their types (null is allowed)
FIELDS = (("device", "text"), ("capacity_bytes", "number"), ("sector_bytes", "number"), ("card_uuid", "text"),
          ("options", "object"), ("rated", "object"), ("first_error_round", "number"),
          ("bytes_written", "number"), ("full_writes", "number"), ("read_slowdown", "number"),
          ("complete", "flag"), ("error", "text"), ("answer", "text"), ("verdict", "text"), ("method", "object"))
ROUND_FIELDS = (("round", "number"), ("write_bytes_per_s", "number"), ("read_bytes_per_s", "number"),
                ("write_seconds", "number"), ("read_seconds", "number"), ("bytes_written", "number"),
                ("bad_total", "number"), ("bad_fraction", "number"), ("ended_at", "text"),
                ("slices_redone", "number"))
MILESTONE_FIELDS = (("what", "text"), ("bad_fraction", "number"), ("round", "number"), ("bytes_written", "number"))
RATED_FIELDS = (("tbw", "number"), ("video_hours", "number"), ("video_mbps", "number"), ("rated_bytes", "number"),
                ("used_fraction", "number"))
#: numbers that are never negative, wherever they are (read_slowdown may be: reads got faster)
_NOT_NEGATIVE = {k for k, kind in (*FIELDS, *ROUND_FIELDS, *MILESTONE_FIELDS, *RATED_FIELDS) if kind == "number"}
_NOT_NEGATIVE.discard("read_slowdown")
#: fractions: between 0 and 1
_FRACTIONS = ("bad_fraction",)


def _range_problem(d: dict, fields: tuple[tuple[str, str], ...], prefix: str) -> str | None:
    for k, kind in fields:
        v = d.get(k)
        if kind != "number" or v is None:
            continue
        if k in _NOT_NEGATIVE and v < 0:
            return f"'{prefix}{k}' must not be negative"
        if k in _FRACTIONS and v > 1:
            return f"'{prefix}{k}' must be a fraction between 0 and 1"
    return None


def _part_problem(d: Any, fields: tuple[tuple[str, str], ...], prefix: str) -> str | None:
    if not isinstance(d, dict):
        return f"'{prefix.rstrip('.')}' must be an object"
    return fields_problem(d, fields, prefix) or _range_problem(d, fields, prefix)


def _round_problem(r: Any, where: str) -> str | None:
    found = _part_problem(r, ROUND_FIELDS, where + ".")
    if found:
        return found
    if not is_number(r.get("round")) or r["round"] < 1 or r["round"] != int(r["round"]):
        return f"'{where}.round' must be a whole number from 1"
    bad = r.get("bad_sectors")
    if not isinstance(bad, dict):
        return f"'{where}.bad_sectors' must be an object of the classes {', '.join(CLASSES)}"
    for c in CLASSES:
        v = bad.get(c)
        if v is None:
            continue
        if not is_number(v) or v < 0:
            return f"'{where}.bad_sectors.{c}' must be a count (a number, not negative)"
    return None


def problem(d: dict) -> str | None:
    """None, or one line naming the first field that is not as the contract says: the common
    fields, the top-level fields' types and ranges, every round (its six classes), every milestone,
    the rating, ``ended`` one of :data:`ENDINGS` or null, every number finite and within 64 bits."""
    try:
        check_json_numbers(d)
    except UnitError as e:
        return str(e)
    found = common_problem(d) or fields_problem(d, FIELDS) or _range_problem(d, FIELDS, "")
    if found:
        return found
    if d.get("ended") is not None and d.get("ended") not in ENDINGS:
        return f"'ended' must be one of {', '.join(ENDINGS)} (or null while the run goes on)"
    if not isinstance(d.get("rounds"), list):
        return "'rounds' must be a list"
    for i, r in enumerate(d["rounds"]):
        found = _round_problem(r, f"rounds[{i}]")
        if found:
            return found
    milestones = d.get("milestones")
    if milestones is not None and not isinstance(milestones, list):
        return "'milestones' must be a list"
    for i, m in enumerate(milestones or []):
        found = _part_problem(m, MILESTONE_FIELDS, f"milestones[{i}].")
        if found:
            return found
    if d.get("rated") is not None:
        found = _part_problem(d["rated"], RATED_FIELDS, "rated.")
        if found:
            return found
    return None


def _count(n: Any) -> str:
    return f"{n:,.0f}" if is_number(n) else "?"


def _size(n: Any) -> str:
    return fmt_size(n) if is_number(n) and n >= 0 else "?"


def card_name(d: dict) -> str:
    """The card in a few words, with its capacity (``SanDisk Extreme 32.0 GB``)."""
    card = obj(d, "card")
    cap = card.get("capacity_bytes") if is_number(card.get("capacity_bytes")) else d.get("capacity_bytes")
    words = " ".join(str(card[k]) for k in ("brand", "name") if card.get(k))
    words = " ".join(w for w in (words, _size(cap) if is_number(cap) else "", str(card.get("label") or "")) if w)
    return words or card_words(card if card else None) if not d.get("device") else words or str(d["device"])


def summary(d: dict) -> str:
    """One line: the answer in words as the run wrote it, else one made from its figures."""
    answer = d.get("answer") if isinstance(d.get("answer"), str) else None
    rounds = seq(d, "rounds")
    if not answer:
        first = d.get("first_error_round")
        answer = (f"{card_name(d)}: {_count(len(rounds))} round{'s' if len(rounds) != 1 else ''}, "
                  f"{_size(d.get('bytes_written'))} written, "
                  + (f"first error in round {_count(first)}" if is_number(first) else "no error"))
    ended = d.get("ended")
    tail = f" (ended: {ended.replace('_', ' ')})" if isinstance(ended, str) and ended not in ("rounds", "hours") \
        else "" if ended else " (running)"
    return f"endurance: {answer}{tail}"


def created(d: dict) -> Any:
    return d.get("created_at") or d.get("finished_at") or d.get("started_at")


def bad_by_class(r: dict) -> dict[str, float]:
    """A round's bad sectors by class, every class present (0 where missing or not a number)."""
    bad = obj(r, "bad_sectors")
    return {c: (bad[c] if is_number(bad.get(c)) else 0) for c in CLASSES}


ENDURANCE = register(Kind(
    name="endurance", schema=SCHEMA, section="endurance", noun="endurance run", title="endurance run",
    problem=problem, cards=one_card, summary=summary, created=created))
