"""Record kinds by name and by schema: each kind module registers itself here; nothing here
imports a kind (see :mod:`cardbench.kinds` for how to add one).

A kind (:class:`Kind`) says, once, everything the rest of cardbench asks of it: its schema, where
it is stored (:class:`Table`), its list in an export, what its documents must look like, which
cards and readers it names, when it was made, and the one line that shows it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable

from cardbench.errors import UsageError

#: (card, reader) as in a result's ``card`` / ``reader`` (dicts), either None: one card a record names
Link = tuple[dict | None, dict | None]


@dataclass(frozen=True)
class Table:
    """Where the records of a kind are stored: one row per record in table ``name``, its own id
    in ``id_column``, its time (:attr:`Kind.created`) as text in ``..._at`` and in epoch seconds
    (ordering, ``--since``/``--until``) in ``time_column`` (``..._epoch``); ``columns``: more
    columns, each (name, function of the document). Every such table also has ``schema``,
    ``document`` (the JSON text, read back as saved) and ``saved_at``.

    ``card_column`` / ``reader_column``: the row has a ``card_id`` / ``reader_id`` column, filled
    from the document's ``card`` / ``reader``, and the ``--card`` / ``--reader`` filters use it;
    otherwise they use the cards and readers the kind names (:attr:`Kind.cards`), kept in
    ``record_cards``. ``kind_column``: the table holds rows of many kinds (the shared ``records``
    table, :data:`RECORDS`), told apart by its ``kind`` column. ``native``: the store's own run
    tables (runs, tests, samples, claims), written by the store itself (results only)."""

    name: str
    id_column: str
    time_column: str = "created_epoch"
    columns: tuple[tuple[str, Callable[[dict], Any]], ...] = ()
    card_column: bool = False
    reader_column: bool = False
    kind_column: bool = False
    native: bool = False


def _created_at(doc: dict) -> str | None:
    v = doc.get("created_at")
    return v if isinstance(v, str) else None


#: The table every kind declared after the first four is stored in (schema migration 5): id,
#: kind, record_id, created_at, created_epoch, summary, schema, document, saved_at; its cards and
#: readers in record_cards. A new kind needs no migration.
RECORDS = Table("records", "record_id", "created_epoch", kind_column=True)


@dataclass(frozen=True)
class Kind:
    """One kind of record.

    * ``name``: short, lower case, stable: outbox files, ``record_stations``, ``record_cards``,
      ``/api/v1/records/{name}`` (``"verify"``);
    * ``schema``: the ``schema`` field of its documents (``"cardbench.verify/1"``);
    * ``section``: its list in a ``cardbench.export/2`` document (``"verify"``);
    * ``noun``: what one is called in counts and refusals (``"verify document"``); ``title``: in
      the outbox's and sync's lines (``"verify result"``); plurals add an ``s``;
    * ``table``: how it is stored (:class:`Table`; :data:`RECORDS` unless it has its own table);
    * ``problem(doc)``: the shape check of a document read from outside (import, a station
      server's upload): None when every field the store and the reports read has its type, else
      one line naming the field and what it must be (:mod:`cardbench.kinds.shapes` has the pieces);
    * ``cards(doc)``: the (card, reader) of every card it names, in order (export's ``cards``,
      ``record_cards``, the ``--card``/``--reader`` filters);
    * ``created(doc)``: when it was made (ISO 8601 text), its ``time_column``;
    * ``summary(doc)``: its answer in words, one line (``cardbench results``, the server's pages);
    * ``listed``: ``cardbench results`` lists it below the runs (one line each);
    * ``shared``: ``--share`` and ``cardbench share`` send it to a station server;
    * ``load`` / ``dump`` / ``item_type``: the library's value of a stored document and back
      (documents are dicts; a run result is a :class:`cardbench.result.Result`).
    """

    name: str
    schema: str
    section: str
    noun: str
    title: str
    problem: Callable[[dict], str | None]
    cards: Callable[[dict], list[Link]]
    summary: Callable[[dict], str]
    created: Callable[[dict], str | None] = _created_at
    table: Table = RECORDS
    listed: bool = True
    shared: bool = True
    load: Callable[[dict], Any] = dict
    dump: Callable[[Any], dict] = dict
    item_type: type = dict

    def nouns(self, n: int) -> str:
        return f"{n} {self.noun}{'s' if n != 1 else ''}"

    def titles(self, n: int) -> str:
        return f"{n} {self.title}{'s' if n != 1 else ''}"

    @property
    def family(self) -> str:
        """The schema without its version (``"cardbench.verify/"``): a newer version is told apart."""
        return self.schema.rsplit("/", 1)[0] + "/"


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add a kind (a second registration under the same name replaces the first). A ValueError
    (a programming error) when its name, schema or export section is another kind's."""
    for other in _KINDS.values():
        if other.name == kind.name:
            continue
        for what in ("schema", "section"):
            if getattr(other, what) == getattr(kind, what):
                raise ValueError(f"record kind {kind.name!r}: {what} {getattr(kind, what)!r} is kind "
                                 f"{other.name!r}'s")
    if not (kind.name and kind.name.isidentifier() and kind.name.islower()):
        raise ValueError(f"record kind name {kind.name!r}: lower case letters, digits and _")
    if kind.section in ("schema", "cards"):
        raise ValueError(f"record kind {kind.name!r}: export section {kind.section!r} is taken by the export itself")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (for tests that declare one of their own)."""
    _KINDS.pop(name, None)


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in registration order (the run result first)."""
    return tuple(_KINDS.values())


def kind_names() -> tuple[str, ...]:
    return tuple(_KINDS)


def kind_named(name: str) -> Kind:
    """The kind ``name``, or a UsageError naming the choices."""
    try:
        return _KINDS[name]
    except KeyError:
        raise UsageError(f"unknown record kind {name!r} (choose {', '.join(_KINDS)})") from None


def kind_for_schema(schema: Any) -> Kind | None:
    """The kind whose documents carry ``schema``, or None."""
    for k in _KINDS.values():
        if k.schema == schema:
            return k
    return None


def kind_of(item: Any) -> Kind:
    """The kind of a value to store: a Result, or a document whose ``schema`` is a kind's.
    UsageError (a programming error in a caller, or a document from outside) otherwise."""
    for k in _KINDS.values():
        if k.item_type is not dict and isinstance(item, k.item_type):
            return k
    if isinstance(item, dict):
        found = kind_for_schema(item.get("schema"))
        if found is not None and found.item_type is dict:
            return found
    got = item.get("schema") if isinstance(item, dict) else type(item).__name__
    names = [k.schema for k in _KINDS.values() if k.item_type is dict]
    raise UsageError(f"only a Result or a {', '.join(names)} document can be stored, not {got!r}")


def document_of(item: Any) -> dict:
    """The JSON document of an item (a document keeps its dict, given an ``id`` when it has none)."""
    k = kind_of(item)
    if k.item_type is dict:
        item.setdefault("id", uuid.uuid4().hex)     # as the store would give it; kept so both agree
        return item
    return k.dump(item)


def describe(counts: dict[str, int], *, titles: bool = True) -> str:
    """{"result": 2, "verify": 1} -> "2 results and 1 verify result" (kinds in registration order)."""
    parts = [(k.titles if titles else k.nouns)(counts[k.name]) for k in _KINDS.values() if counts.get(k.name)]
    return " and ".join(parts) or "nothing"


def count_items(items: list) -> dict[str, int]:
    """How many of each kind: {"result": 2, "verify": 1}."""
    c: dict[str, int] = {}
    for it in items:
        n = kind_of(it).name
        c[n] = c.get(n, 0) + 1
    return c
