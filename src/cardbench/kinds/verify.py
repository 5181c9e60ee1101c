"""The verify document, ``cardbench.verify/1``: a fake-capacity verdict (``cardbench verify``,
or f3/H2testw logs imported); the fields are described in :mod:`cardbench.verify.doc`. Stored in
``verify_results`` (its card and reader as columns), listed below the runs of ``cardbench results``."""

from __future__ import annotations

from typing import Any

from cardbench.kinds.registry import Kind, Table, register
from cardbench.kinds.shapes import as_text, common_problem, fields_problem, one_card
from cardbench.units import fmt_size

SCHEMA = "cardbench.verify/1"

#: the fields that reports and the store read, and their types (null is allowed)
FIELDS = (("verdict", "text"), ("kind", "text"), ("mode", "text"), ("fix_command", "text"), ("fix", "object"),
          ("error", "text"), ("announced_bytes", "number"), ("usable_bytes", "number"), ("method", "object"),
          ("timings", "object"), ("bad_ranges", "ranges"), ("complete", "flag"))


def problem(d: dict) -> str | None:
    return common_problem(d) or fields_problem(d, FIELDS)


def created(d: dict) -> Any:
    return d.get("finished_at") or d.get("started_at") or d.get("created_at")


def summary(doc: dict) -> str:
    """One line for a verify document: verdict, kind, usable of announced, the fix."""
    verdict = str(doc.get("verdict") or "?").upper()
    kind = f" ({doc['kind']})" if doc.get("kind") and doc.get("verdict") == "counterfeit" else ""
    usable = doc.get("usable_bytes")
    line = f"verify: {verdict}{kind}"
    if usable is not None:
        line += f", usable {fmt_size(usable)} ({usable:,} B)"
        if doc.get("announced_bytes"):
            line += f" of {fmt_size(doc['announced_bytes'])} announced"
    if doc.get("fix_command"):
        line += f"; fix: {doc['fix_command']}"
    return line


VERIFY = register(Kind(
    name="verify", schema=SCHEMA, section="verify", noun="verify document", title="verify result",
    problem=problem, cards=one_card, summary=summary, created=created,
    table=Table("verify_results", "verify_id", "created_epoch", columns=(("verdict", lambda d: as_text(d.get("verdict"))),),
                card_column=True, reader_column=True)))
