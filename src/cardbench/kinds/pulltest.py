"""The pull test document, ``cardbench.pulltest/1``: does a card keep what it acknowledged
(``cardbench pulltest``; built by :mod:`cardbench.pulltest.doc`, where the fields are described).
Stored in the shared ``records`` table, listed below the runs of ``cardbench results``."""

from __future__ import annotations

from cardbench.kinds.registry import Kind, register
from cardbench.kinds.shapes import common_problem, fields_problem, one_card

SCHEMA = "cardbench.pulltest/1"
#: the counts of a pull (and their sums at the top level)
COUNTS = ("acknowledged", "intact", "lost", "torn", "in_flight", "in_flight_torn", "old_damaged")
#: the fields that reports and the store read, and their types (null is allowed)
FIELDS = (("verdict", "text"), ("answer", "text"), ("card_uuid", "text"), ("device", "text"), ("error", "text"),
          ("complete", "flag"), ("kernel", "object"), ("method", "object"), *((k, "number") for k in COUNTS))


def problem(d: dict) -> str | None:
    if not isinstance(d.get("pulls"), list):
        return "'pulls' must be a list"
    return common_problem(d) or fields_problem(d, FIELDS)


def summary(doc: dict) -> str:
    """One line: the verdict and the answer in words."""
    return f"pulltest: {str(doc.get('verdict') or '?').upper()}: {doc.get('answer') or ''}".rstrip(": ")


PULLTEST = register(Kind(
    name="pulltest", schema=SCHEMA, section="pulltest", noun="pull test", title="pull test result",
    problem=problem, cards=one_card, summary=summary))
