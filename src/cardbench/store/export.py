"""Every kind of record the store holds, out as one JSON document and back in.

``cardbench results --json``, ``cardbench report --json`` and ``cardbench export`` print
:func:`collect`'s document, ``cardbench import`` reads it back with :func:`read_export` and stores
it with :func:`import_records` (one transaction: all or nothing):

    {"schema": "cardbench.export/2",
     "cards":    [{"identity", "name", "brand", "capacity_bytes", "label", "serial", "model"}],
     "results":  [<cardbench.result/1>, ...],      runs, oldest first
     "verify":   [<cardbench.verify/1>, ...],      own and imported fake-capacity verdicts
     "probes":   [<cardbench.probe/1>, ...],       cards read at once (cardbench.evidence)
     "sessions": [<cardbench.session/1>, ...],     drawer sessions
     ...}                                          one list per kind registered later (cardbench.kinds)

Each list is a kind's (:attr:`cardbench.kinds.Kind.section`), and each document in it is checked
by its kind's shape check before anything is stored. ``cards`` lists every card a record names
(by identity); a document naming a card that is not there is refused. Version 1 of the export, ``cardbench.results/1``
(``{"schema", "results"}``), one ``cardbench.result/1`` document or a list of them are still read,
and so is one document of another kind alone (as ``verify --json`` prints it).
The filters ``card``, ``reader``, ``since`` and ``until`` apply to every kind; ``test`` and
``complete`` to runs only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cardbench import kinds
from cardbench.errors import UsageError
from cardbench.kinds import RESULT_SCHEMA
from cardbench.result import Card, Result
from cardbench.store.core import open_store
from cardbench.units import UnitError, check_json_numbers, finite_or_null

EXPORT_SCHEMA = "cardbench.export/2"
#: the first export's schema, still read
EXPORT_V1_SCHEMA = "cardbench.results/1"
_CARD_KEYS = ("identity", "name", "brand", "capacity_bytes", "label", "serial", "model")


def _documents() -> tuple[kinds.Kind, ...]:
    """The kinds whose records are documents (every kind but the run result), in registration order."""
    return tuple(k for k in kinds.kinds() if not k.table.native)


def collect(store, *, card: str | None = None, reader: str | None = None, since: Any = None, until: Any = None,
            test: str | None = None, complete: bool | None = None, sort: str | None = "started") -> dict[str, Any]:
    """The ``cardbench.export/2`` document of what ``store`` holds that matches the filters: one
    list per kind (:mod:`cardbench.kinds`), in registration order."""
    results = store.results(card=card, reader=reader, since=since, until=until, test=test, complete=complete,
                            order_by=sort)
    kw = {"card": card, "reader": reader, "since": since, "until": until}
    docs = {k.section: store.records(k.name, **kw) for k in _documents()}
    named = dict.fromkeys(r.card.identity() for r in results)
    for k in _documents():
        for doc in docs[k.section]:
            named.update(dict.fromkeys(cards_named(doc)))
    rows = {c["identity"]: c for c in store.cards()}
    cards = [{k: rows[i].get(k) for k in _CARD_KEYS} if i in rows else {"identity": i} for i in named]
    return {"schema": EXPORT_SCHEMA, "cards": cards, kinds.RESULT.section: [r.to_dict() for r in results], **docs}


def to_json(doc: dict[str, Any]) -> str:
    """The export as JSON text, never a bare NaN or Infinity (not JSON): a record stored before
    they were refused has them as null."""
    try:
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(finite_or_null(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def counts(doc: dict[str, Any]) -> str:
    """"2 results, 1 verify document, 1 probe and 1 session" (the lists of ``doc``, an export or
    :meth:`Contents.sections`, that hold anything)."""
    parts = [k.nouns(len(doc.get(k.section) or [])) for k in kinds.kinds() if doc.get(k.section)]
    if not parts:
        return "0 results"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def cards_named(doc: dict[str, Any]) -> list[str]:
    """The identities of the cards a document names (by its kind's ``cards``)."""
    k = kinds.kind_for_schema(doc.get("schema"))
    links = k.cards(doc) if k is not None else []
    return [_identity(c) for c, _ in links if isinstance(c, dict)]


def _identity(card: dict) -> str:
    return str(card.get("identity") or Card.from_dict(card).identity())


@dataclass
class Contents:
    """What an export holds, read and checked: the records of each kind (by kind name), in the
    order read; ``results``, ``verify``, ``probes``, ``sessions`` are the four first kinds' lists."""

    by_kind: dict[str, list] = field(default_factory=dict)
    schema: str = EXPORT_SCHEMA

    def of(self, kind: str) -> list:
        return self.by_kind.setdefault(kind, [])

    @property
    def results(self) -> list[Result]:
        return self.of("result")

    @property
    def verify(self) -> list[dict]:
        return self.of("verify")

    @property
    def probes(self) -> list[dict]:
        return self.of("probe")

    @property
    def sessions(self) -> list[dict]:
        return self.of("session")

    def items(self) -> list:
        """Every record, the kinds in registration order."""
        return [it for k in kinds.kinds() for it in self.by_kind.get(k.name, [])]

    def sections(self) -> dict[str, list]:
        """The records by export section (``{"results": [...], "verify": [...], ...}``), for :func:`counts`."""
        return {k.section: self.by_kind.get(k.name, []) for k in kinds.kinds()}

    def ids(self) -> list[tuple[kinds.Kind, str]]:
        """(kind, id) of every record, in :meth:`records`' order, without writing a document out."""
        return [(k, str(it["id"] if k.item_type is dict else it.id)) for k in kinds.kinds()
                for it in self.by_kind.get(k.name, [])]

    def records(self) -> list[tuple[kinds.Kind, str, dict]]:
        """(kind, id, document) of every record."""
        out = []
        for k in kinds.kinds():
            for it in self.by_kind.get(k.name, []):
                d = it if k.item_type is dict else k.dump(it)
                out.append((k, str(d["id"]), d))
        return out


def read_export(doc: Any, *, path: str, result_problem=None) -> Contents:
    """Check and read an export (any version) or result document(s), or one document of any
    other kind; UsageError naming the one thing that is wrong (a newer schema, a list that is not
    one, a document of the wrong shape, a document whose card the export does not hold, one id
    given two contents). ``result_problem``: the shape check of a result (the result kind's)."""
    result_kind = kinds.RESULT
    result_problem = result_problem or result_kind.problem
    try:
        check_json_numbers(doc)         # NaN, Infinity, a count beyond 64 bits: by key path
    except UnitError as e:
        raise UsageError(f"{path}: {e}; nothing imported") from None
    out = Contents()
    docs: Any
    single = kinds.kind_for_schema(doc.get("schema")) if isinstance(doc, dict) else None
    if isinstance(doc, list):
        docs, out.schema = doc, RESULT_SCHEMA
    elif not isinstance(doc, dict):
        raise UsageError(f"{path}: not a cardbench export")
    elif doc.get("schema") in (EXPORT_SCHEMA, EXPORT_V1_SCHEMA):
        out.schema = doc["schema"]
        docs = doc.get("results")
        if not isinstance(docs, list):
            raise UsageError(f"{path}: {out.schema} document without a 'results' list; nothing imported")
    elif single is result_kind:
        docs, out.schema = [doc], RESULT_SCHEMA
    elif single is not None:
        # one document as `verify --json` (or a probe, a session, ...) printed it
        problem = None if isinstance(doc.get("id"), str) and doc["id"] else "has no id"
        problem = problem or single.problem(doc)
        if problem:
            raise UsageError(f"{path}: {single.noun} {problem}; nothing imported")
        out.schema = single.schema
        out.of(single.name).append(doc)
        return out
    else:
        schema = str(doc.get("schema"))
        newer = schema.startswith(("cardbench.export/", "cardbench.results/", *(k.family for k in kinds.kinds())))
        raise UsageError(f"{path}: {'written by a newer cardbench' if newer else 'unknown cardbench schema'} "
                         f"({schema!r}); this cardbench reads {EXPORT_SCHEMA}, {EXPORT_V1_SCHEMA} and "
                         f"{RESULT_SCHEMA}{': upgrade cardbench' if newer else ''}; nothing imported")
    for i, d in enumerate(docs):
        try:
            problem = result_problem(d)
            if problem:
                raise ValueError(problem)
            out.results.append(result_kind.load(d))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
            raise UsageError(f"{path}: result #{i + 1} cannot be read: {e}; nothing imported") from None
    if out.schema != EXPORT_SCHEMA:
        _check_ids(path, out)
        return out
    cards = doc.get("cards", [])
    if not isinstance(cards, list) or not all(isinstance(c, dict) and c.get("identity") for c in cards):
        raise UsageError(f"{path}: 'cards' must be a list of cards with an identity; nothing imported")
    known = {str(c["identity"]) for c in cards} | {r.card.identity() for r in out.results}
    for k in _documents():
        key, schema, what = k.section, k.schema, k.noun
        section = doc.get(key, [])
        if not isinstance(section, list):
            raise UsageError(f"{path}: '{key}' must be a list of {schema} documents; nothing imported")
        for n, d in enumerate(section, 1):
            if not isinstance(d, dict) or d.get("schema") != schema:
                got = d.get("schema") if isinstance(d, dict) else type(d).__name__
                raise UsageError(f"{path}: {what} #{n} is not a {schema} document (schema {got!r}); nothing imported")
            if not isinstance(d.get("id"), str) or not d["id"]:
                raise UsageError(f"{path}: {what} #{n} has no id; nothing imported")
            problem = k.problem(d)
            if problem:
                raise UsageError(f"{path}: {what} {d['id']}: {problem}; nothing imported")
            missing = [c for c in cards_named(d) if c not in known]
            if missing:
                raise UsageError(f"{path}: {what} {d['id']} names card {missing[0]}, which the export's cards do "
                                 "not hold (a truncated or hand-edited export?); nothing imported")
            out.of(k.name).append(d)
    _check_ids(path, out)
    return out


def _check_ids(path: str, contents: Contents) -> None:
    """No id given twice with different contents (a record's document is written out only when
    its id comes again: most uploads give each id once)."""
    seen: dict[tuple[str, str], Any] = {}
    for k in kinds.kinds():
        for it in contents.by_kind.get(k.name, []):
            rid = str(it["id"] if k.item_type is dict else it.id)
            key = (k.name, rid)
            if key in seen:
                a, b = (seen[key], it) if k.item_type is dict else (k.dump(seen[key]), k.dump(it))
                if a != b:
                    raise UsageError(f"{path}: two {k.noun}s with id {rid} and different content; nothing imported")
            seen[key] = it


def conflicts(store, contents: Contents) -> list[str]:
    """Records of ``contents`` whose id the store holds with other content (one line each)."""
    out = []
    for k, rid, d in contents.records():
        stored = store.stored_document(k.name, rid)
        if stored is not None and stored != d:
            out.append(f"{k.noun} {rid} is stored already with different content")
    return out


def import_records(contents: Contents, db, *, path: str) -> str:
    """Store an export's records in ``db`` in one transaction (same ids: importing it again
    changes nothing); UsageError, nothing stored, when an id is stored with other content.
    Returns the store's location."""
    with open_store(db) as store:
        clash = conflicts(store, contents)
        if clash:
            more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
            raise UsageError(f"{path}: {clash[0]}{more}: two exports with the same ids and different content; "
                             "nothing imported")
        # oldest first, as they were measured: a card's row (its name, brand, label) is the one its
        # latest result gave it, in the store the export came from and in this one
        results = sorted(contents.results, key=lambda r: r.started_at or "")
        try:
            store.save_all([*results, *(it for it in contents.items() if not isinstance(it, Result))])
        except UsageError as e:     # what a record derives JSON cannot hold (seconds 1e-320: an infinite rate)
            raise UsageError(f"{path}: {e.message}; nothing imported") from None
        return store.location
