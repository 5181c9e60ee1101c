"""Reader evidence kept as records: cards read at once (probes) and drawer sessions.

A **probe** (``cardbench.probe/1``) is what :func:`cardbench.workloads.shared.read_together`
measured and :func:`cardbench.verdicts.readers.judge_shared` found, with the reader and, where
known, the card in each device:

    {"schema": "cardbench.probe/1", "id", "created_at", "reader": <reader> | null,
     "session_id": <session id> | null, "measured": {"devices": [{"device", "card": <card> | null,
     "sample_bytes", "alone_bytes_per_s", "together_bytes_per_s"}], "alone_sum_bytes_per_s",
     "alone_max_bytes_per_s", "together_bytes_per_s", "together_seconds", "method"},
     "finding": {"kind": "probe", "direction", "ceiling_bytes_per_s", "confidence",
                 "cards_at_ceiling", "evidence"}}

The finding is what was said then; :func:`probe_findings` judges the measured figures again
(today's rule), so a stored probe takes part in every later ``cardbench readers``.

A **session** (``cardbench.session/1``) is one ``cardbench drawer`` sitting: which cards, in what
order, what became of each, the probes made, and the reader verdict said at its end:

    {"schema": "cardbench.session/1", "id", "started_at", "finished_at",
     "cards": [{"position", "device", "card", "reader", "result_id", "verify_id", "mode",
                "complete", "error"}],
     "probes": [<probe id>, ...], "reader_verdict": [{"identity", "name", "ceiling_bytes_per_s",
     "direction", "confidence", "kind", "evidence", "rests_on"}]}

Both are saved through :func:`cardbench.record.record` (store, else outbox) like results.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Iterable

from cardbench.kinds import PROBE_SCHEMA, SESSION_SCHEMA
from cardbench.result import Card, Reader, now_iso
from cardbench.verdicts.readers import judge_shared

FINDING_KEYS = ("kind", "direction", "ceiling_bytes_per_s", "confidence", "cards_at_ceiling", "evidence")
VERDICT_KEYS = ("identity", "name", "cards", "ceiling_bytes_per_s", "direction", "cards_at_ceiling", "confidence", "kind",
                "evidence", "rests_on")


def probe_document(finding: dict[str, Any], *, reader: Reader | None = None,
                   cards: dict[str, Card | None] | None = None, session_id: str | None = None,
                   created_at: str | None = None) -> dict[str, Any]:
    """A ``cardbench.probe/1`` document of a :func:`judge_shared` finding; ``cards`` maps a device
    path to the card in it (where known)."""
    measured = copy.deepcopy(finding.get("measured") or {})
    for row in measured.get("devices") or []:
        card = (cards or {}).get(row.get("device"))
        row["card"] = card.to_dict() if card is not None else None
    return {"schema": PROBE_SCHEMA, "id": uuid.uuid4().hex, "created_at": created_at or now_iso(),
            "reader": reader.to_dict() if reader is not None else None, "session_id": session_id,
            "measured": measured, "finding": {k: finding.get(k) for k in FINDING_KEYS}}


def probe_reader_identity(doc: dict[str, Any]) -> str | None:
    reader = doc.get("reader")
    return Reader.from_dict(reader).identity() if isinstance(reader, dict) else None


def probe_findings(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored probes as :func:`cardbench.verdicts.readers.reader_ceilings` takes them: each judged
    again from its measured figures, with its reader, id and time."""
    out = []
    for doc in docs:
        measured = doc.get("measured")
        if not isinstance(measured, dict) or not measured.get("devices"):
            continue
        named = copy.deepcopy(measured)       # the evidence names the cards, not only /dev/sdX of that day
        for row in named["devices"]:
            card = row.get("card")
            if isinstance(card, dict):
                who = " ".join(str(x) for x in (card.get("brand"), card.get("name"), card.get("label")) if x)
                row["device"] = f"{who or card.get('identity')} ({row.get('device')})"
        finding = judge_shared(named)
        finding["measured"] = measured
        reader = doc.get("reader") if isinstance(doc.get("reader"), dict) else None
        finding["reader_identity"] = probe_reader_identity(doc)
        finding["reader"] = (reader or {}).get("name") or finding["reader_identity"]
        finding["probe_id"], finding["created_at"] = doc.get("id"), doc.get("created_at")
        finding["session_id"] = doc.get("session_id")
        when = str(doc.get("created_at") or "")[:16].replace("T", " ")
        finding["evidence"] = f"stored probe of {when}: {finding['evidence']}" if when else finding["evidence"]
        out.append(finding)
    return out


def session_document(outcomes: list, probes: list[dict[str, Any]], verdict: list[dict[str, Any]], *,
                     started_at: str, session_id: str | None = None,
                     finished_at: str | None = None) -> dict[str, Any]:
    """A ``cardbench.session/1`` document of a drawer session's outcomes (in order), the ids of
    its probe documents and its reader verdict (:func:`reader_ceilings` entries)."""
    cards = []
    for pos, o in enumerate(outcomes):
        r = o.result
        cards.append({"position": pos, "device": o.device, "card": r.card.to_dict() if r is not None else None,
                      "reader": r.reader.to_dict() if r is not None else None,
                      "result_id": r.id if r is not None else None,
                      "verify_id": (o.verify or {}).get("id") if o.verify is not None else None,
                      "mode": o.mode, "complete": bool(o.complete), "error": o.error})
    return {"schema": SESSION_SCHEMA, "id": session_id or uuid.uuid4().hex, "started_at": started_at,
            "finished_at": finished_at or now_iso(), "cards": cards,
            "probes": [p.get("id") for p in probes if p.get("id")],
            "reader_verdict": [{k: v.get(k) for k in VERDICT_KEYS} for v in verdict]}
