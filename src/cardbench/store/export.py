"""Every kind of record the store holds, out as one JSON document and back in.

``cardbench results --json``, ``cardbench report --json`` and ``cardbench export`` print
:func:`collect`'s document, ``cardbench import`` reads it back with :func:`read_export` and stores
it with :func:`import_records` (one transaction: all or nothing):

    {"schema": "cardbench.export/2",
     "cards":    [{"identity", "name", "brand", "capacity_bytes", "label", "serial", "model"}],
     "results":  [<cardbench.result/1>, ...],      runs, oldest first
     "verify":   [<cardbench.verify/1>, ...],      own and imported fake-capacity verdicts
     "probes":   [<cardbench.probe/1>, ...],       cards read at once (cardbench.evidence)
     "sessions": [<cardbench.session/1>, ...]}     drawer sessions

``cards`` lists every card a record names (by identity); a verify document, probe or session
naming a card that is not there is refused. Version 1 of the export, ``cardbench.results/1``
(``{"schema", "results"}``), one ``cardbench.result/1`` document or a list of them are still read,
and so is one verify, probe or session document alone (as ``verify --json`` prints it).
The filters ``card``, ``reader``, ``since`` and ``until`` apply to every kind; ``test`` and
``complete`` to runs only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cardbench.errors import UsageError
from cardbench.result import SCHEMA as RESULT_SCHEMA
from cardbench.result import Card, Result, beyond_store
from cardbench.store.core import PROBE_SCHEMA, SESSION_SCHEMA, VERIFY_SCHEMA
from cardbench.units import UnitError, check_json_numbers

EXPORT_SCHEMA = "cardbench.export/2"
#: the first export's schema, still read
EXPORT_V1_SCHEMA = "cardbench.results/1"
#: the document lists of an export, the schema of their documents and what they are called in messages
SECTIONS = (("verify", VERIFY_SCHEMA, "verify document"), ("probes", PROBE_SCHEMA, "probe"),
            ("sessions", SESSION_SCHEMA, "session"))
_CARD_KEYS = ("identity", "name", "brand", "capacity_bytes", "label", "serial", "model")


def collect(store, *, card: str | None = None, reader: str | None = None, since: Any = None, until: Any = None,
            test: str | None = None, complete: bool | None = None, sort: str | None = "started") -> dict[str, Any]:
    """The ``cardbench.export/2`` document of what ``store`` holds that matches the filters."""
    results = store.results(card=card, reader=reader, since=since, until=until, test=test, complete=complete,
                            order_by=sort)
    kw = {"card": card, "reader": reader, "since": since, "until": until}
    verify, probes, sessions = store.verify_results(**kw), store.probes(**kw), store.sessions(**kw)
    named = dict.fromkeys(r.card.identity() for r in results)
    for doc in [*verify, *probes, *sessions]:
        named.update(dict.fromkeys(cards_named(doc)))
    rows = {c["identity"]: c for c in store.cards()}
    cards = [{k: rows[i].get(k) for k in _CARD_KEYS} if i in rows else {"identity": i} for i in named]
    return {"schema": EXPORT_SCHEMA, "cards": cards, "results": [r.to_dict() for r in results], "verify": verify,
            "probes": probes, "sessions": sessions}


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def counts(doc: dict[str, Any]) -> str:
    """"2 results, 1 verify document, 1 probe and 1 session" (the lists that hold anything)."""
    parts = []
    for key, one in (("results", "result"), ("verify", "verify document"), ("probes", "probe"),
                     ("sessions", "session")):
        n = len(doc.get(key) or [])
        if n:
            parts.append(f"{n} {one}{'s' if n != 1 else ''}")
    if not parts:
        return "0 results"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def cards_named(doc: dict[str, Any]) -> list[str]:
    """The identities of the cards a verify, probe or session document names."""
    schema = doc.get("schema")
    if schema == VERIFY_SCHEMA:
        found = [doc.get("card")]
    elif schema == PROBE_SCHEMA:
        measured = doc.get("measured") if isinstance(doc.get("measured"), dict) else {}
        devices = measured.get("devices") if isinstance(measured.get("devices"), list) else []
        found = [d.get("card") for d in devices if isinstance(d, dict)]
    else:
        cards = doc.get("cards") if isinstance(doc.get("cards"), list) else []
        found = [c.get("card") for c in cards if isinstance(c, dict)]
    return [_identity(c) for c in found if isinstance(c, dict)]


def _identity(card: dict) -> str:
    return str(card.get("identity") or Card.from_dict(card).identity())


@dataclass
class Contents:
    """What an export holds, read and checked."""

    results: list[Result] = field(default_factory=list)
    verify: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    sessions: list[dict] = field(default_factory=list)
    schema: str = EXPORT_SCHEMA

    def items(self) -> list:
        return [*self.results, *self.verify, *self.probes, *self.sessions]


def read_export(doc: Any, *, path: str, result_problem=None) -> Contents:
    """Check and read an export (any version) or result document(s); UsageError naming the one
    thing that is wrong (a newer schema, a list that is not one, a document of the wrong shape, a
    verify document whose card the export does not hold, one id given two contents)."""
    from cardbench.importers import _shape_problem
    result_problem = result_problem or _shape_problem
    try:
        check_json_numbers(doc)         # NaN, Infinity, a count beyond 64 bits: by key path
    except UnitError as e:
        raise UsageError(f"{path}: {e}; nothing imported") from None
    out = Contents()
    if isinstance(doc, list):
        docs, out.schema = doc, RESULT_SCHEMA
    elif not isinstance(doc, dict):
        raise UsageError(f"{path}: not a cardbench export")
    elif doc.get("schema") in (EXPORT_SCHEMA, EXPORT_V1_SCHEMA):
        out.schema = doc["schema"]
        docs = doc.get("results")
        if not isinstance(docs, list):
            raise UsageError(f"{path}: {out.schema} document without a 'results' list; nothing imported")
    elif doc.get("schema") == RESULT_SCHEMA:
        docs, out.schema = [doc], RESULT_SCHEMA
    elif doc.get("schema") in tuple(schema for _, schema, _ in SECTIONS):   # a tuple: a schema may be a list
        # one document as `verify --json` (or a probe, a session) printed it
        key, schema, what = next(x for x in SECTIONS if x[1] == doc["schema"])
        problem = None if isinstance(doc.get("id"), str) and doc["id"] else "has no id"
        problem = problem or _doc_problem(doc, schema)
        if problem:
            raise UsageError(f"{path}: {what} {problem}; nothing imported")
        out.schema = schema
        getattr(out, key).append(doc)
        return out
    else:
        schema = str(doc.get("schema"))
        newer = schema.startswith(("cardbench.export/", "cardbench.results/", "cardbench.result/"))
        raise UsageError(f"{path}: {'written by a newer cardbench' if newer else 'unknown cardbench schema'} "
                         f"({schema!r}); this cardbench reads {EXPORT_SCHEMA}, {EXPORT_V1_SCHEMA} and "
                         f"{RESULT_SCHEMA}{': upgrade cardbench' if newer else ''}; nothing imported")
    for i, d in enumerate(docs):
        try:
            problem = result_problem(d)
            if problem:
                raise ValueError(problem)
            result = Result.from_dict(d)
            problem = beyond_store(result)
            if problem:
                raise ValueError(problem)
            out.results.append(result)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"{path}: result #{i + 1} cannot be read: {e}; nothing imported") from None
    if out.schema != EXPORT_SCHEMA:
        _check_ids(path, [("result", r.id, r.to_dict()) for r in out.results])
        return out
    cards = doc.get("cards", [])
    if not isinstance(cards, list) or not all(isinstance(c, dict) and c.get("identity") for c in cards):
        raise UsageError(f"{path}: 'cards' must be a list of cards with an identity; nothing imported")
    known = {str(c["identity"]) for c in cards} | {r.card.identity() for r in out.results}
    for key, schema, what in SECTIONS:
        section = doc.get(key, [])
        if not isinstance(section, list):
            raise UsageError(f"{path}: '{key}' must be a list of {schema} documents; nothing imported")
        for n, d in enumerate(section, 1):
            if not isinstance(d, dict) or d.get("schema") != schema:
                got = d.get("schema") if isinstance(d, dict) else type(d).__name__
                raise UsageError(f"{path}: {what} #{n} is not a {schema} document (schema {got!r}); nothing imported")
            if not isinstance(d.get("id"), str) or not d["id"]:
                raise UsageError(f"{path}: {what} #{n} has no id; nothing imported")
            problem = _doc_problem(d, schema)
            if problem:
                raise UsageError(f"{path}: {what} {d['id']}: {problem}; nothing imported")
            missing = [c for c in cards_named(d) if c not in known]
            if missing:
                raise UsageError(f"{path}: {what} {d['id']} names card {missing[0]}, which the export's cards do "
                                 "not hold (a truncated or hand-edited export?); nothing imported")
            getattr(out, key).append(d)
    _check_ids(path, [("result", r.id, r.to_dict()) for r in out.results] +
               [(what, d["id"], d) for key, _, what in SECTIONS for d in getattr(out, key)])
    return out


def _entity_problem(value: Any, what: str, numeric: tuple[str, ...]) -> str | None:
    """A card or reader (as in a result) whose fields have the types the store relies on."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"'{what}' must be an object"
    for f, x in value.items():
        if f == "ata" and x is not None and not isinstance(x, dict):
            return f"'{what}.ata' must be an object"
        if f in ("identity", "ata") or x is None:
            continue
        ok = (isinstance(x, (int, float)) and not isinstance(x, bool)) if f in numeric else isinstance(x, str)
        if not ok:
            return f"'{what}.{f}' must be {'a number' if f in numeric else 'text'}"
    return None


#: the fields of each document kind that reports and the store read, and their types (null is allowed)
_FIELDS = {
    VERIFY_SCHEMA: (("verdict", "text"), ("kind", "text"), ("mode", "text"), ("fix_command", "text"), ("fix", "object"),
                    ("error", "text"), ("announced_bytes", "number"), ("usable_bytes", "number"),
                    ("method", "object"), ("timings", "object"), ("bad_ranges", "ranges"), ("complete", "flag")),
    PROBE_SCHEMA: (("session_id", "text"), ("finding", "object")),
}


def _typed(x: Any, kind: str, what: str) -> str | None:
    """None when ``x`` is null or of ``kind``; else the one line saying what it must be."""
    import math
    if x is None:
        return None
    number = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    ok = {"text": isinstance(x, str), "number": number, "object": isinstance(x, dict),
          "flag": isinstance(x, bool),
          "ranges": isinstance(x, list) and all(isinstance(r, list) and len(r) == 2 and
                                                all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                    for v in r) for r in x)}[kind]
    if ok:
        return None
    said = {"text": "text", "number": "a number", "object": "an object", "flag": "true or false",
            "ranges": "a list of [start, end] byte pairs"}[kind]
    return f"'{what}' must be {said}"


def _doc_problem(d: dict, schema: str) -> str | None:
    entities = [(d.get("card"), "card"), (d.get("reader"), "reader")]
    m = d.get("measured") if isinstance(d.get("measured"), dict) else {}
    devices = m.get("devices") if isinstance(m.get("devices"), list) else []
    cards = d.get("cards") if isinstance(d.get("cards"), list) else []
    entities += [(x.get("card"), f"measured.devices[{i}].card") for i, x in enumerate(devices) if isinstance(x, dict)]
    entities += [(c.get(k), f"cards[{i}].{k}") for i, c in enumerate(cards) if isinstance(c, dict)
                 for k in ("card", "reader")]
    for value, what in entities:
        problem = _entity_problem(value, what, ("capacity_bytes", "link_speed_mbit"))
        if problem:
            return problem
    for k in ("created_at", "started_at", "finished_at"):
        if d.get(k) is not None and not isinstance(d[k], str):
            return f"'{k}' must be text"
    if schema == PROBE_SCHEMA:
        m = d.get("measured")
        if not isinstance(m, dict) or not isinstance(m.get("devices"), list) or \
                not all(isinstance(x, dict) for x in m["devices"]):
            return "'measured' must be an object with a 'devices' list"
        for k in ("alone_sum_bytes_per_s", "alone_max_bytes_per_s"):
            if not isinstance(m.get(k), (int, float)) or isinstance(m.get(k), bool):
                return f"'measured.{k}' must be a number"
    if schema == SESSION_SCHEMA:
        if not isinstance(d.get("cards"), list) or not all(isinstance(c, dict) for c in d["cards"]):
            return "'cards' must be a list of objects"
        if not isinstance(d.get("probes", []), list) or not isinstance(d.get("reader_verdict", []), list):
            return "'probes' and 'reader_verdict' must be lists"
    for k, kind in _FIELDS.get(schema, ()):
        problem = _typed(d.get(k), kind, k)
        if problem:
            return problem
    if schema == PROBE_SCHEMA:
        for k in ("together_bytes_per_s", "together_seconds"):
            problem = _typed(d["measured"].get(k), "number", f"measured.{k}")
            if problem:
                return problem
        for i, x in enumerate(d["measured"]["devices"]):
            for k, kind in (("device", "text"), ("alone_bytes_per_s", "number"), ("together_bytes_per_s", "number"),
                            ("sample_bytes", "number")):
                problem = _typed(x.get(k), kind, f"measured.devices[{i}].{k}")
                if problem:
                    return problem
    if schema == SESSION_SCHEMA:
        for i, v in enumerate(d.get("reader_verdict") or []):
            if not isinstance(v, dict):
                return f"'reader_verdict[{i}]' must be an object"
            for k, kind in (("ceiling_bytes_per_s", "number"), ("cards", "number"), ("cards_at_ceiling", "number"),
                            ("name", "text"), ("identity", "text"), ("direction", "text"), ("confidence", "text"),
                            ("kind", "text"), ("evidence", "text")):
                problem = _typed(v.get(k), kind, f"reader_verdict[{i}].{k}")
                if problem:
                    return problem
        for i, c in enumerate(d.get("cards") or []):
            for k, kind in (("device", "text"), ("result_id", "text"), ("verify_id", "text"), ("mode", "text"),
                            ("error", "text")):
                problem = _typed(c.get(k), kind, f"cards[{i}].{k}")
                if problem:
                    return problem
    return None


def _check_ids(path: str, records: list[tuple[str, str, dict]]) -> None:
    seen: dict[tuple[str, str], dict] = {}
    for what, rid, d in records:
        key = (what, rid)
        if key in seen and seen[key] != d:
            raise UsageError(f"{path}: two {what}s with id {rid} and different content; nothing imported")
        seen[key] = d


_KIND = {"result": "result", "verify document": "verify", "probe": "probe", "session": "session"}


def conflicts(store, contents: Contents) -> list[str]:
    """Records of ``contents`` whose id the store holds with other content (one line each)."""
    out = []
    for what, rid, d in ([("result", r.id, r.to_dict()) for r in contents.results] +
                         [(what, x["id"], x) for key, _, what in SECTIONS for x in getattr(contents, key)]):
        stored = store.stored_document(_KIND[what], rid)
        if stored is not None and stored != d:
            out.append(f"{what} {rid} is stored already with different content")
    return out


def import_records(contents: Contents, db, *, path: str) -> str:
    """Store an export's records in ``db`` in one transaction (same ids: importing it again
    changes nothing); UsageError, nothing stored, when an id is stored with other content.
    Returns the store's location."""
    from cardbench.store.core import open_store
    with open_store(db) as store:
        clash = conflicts(store, contents)
        if clash:
            more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
            raise UsageError(f"{path}: {clash[0]}{more}: two exports with the same ids and different content; "
                             "nothing imported")
        # oldest first, as they were measured: a card's row (its name, brand, label) is the one its
        # latest result gave it, in the store the export came from and in this one
        results = sorted(contents.results, key=lambda r: r.started_at or "")
        store.save_all([*results, *contents.verify, *contents.probes, *contents.sessions])
        return store.location
